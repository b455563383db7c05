/* scr_heat: a 1-D heat equation on a ring of MPI ranks, checkpointed through SCR's API the way SCR's
 * examples and users' codes do it. Nothing in here knows about cairn: it is built against scr.h and
 * linked with -lscr.
 *
 *   scr_heat [--cells N] [--steps S] [--output-every K]
 *
 * Every step each rank updates its N cells from its neighbours' edge cells (MPI_Sendrecv). When
 * SCR_Need_checkpoint says so (SCR_CHECKPOINT_INTERVAL, a halt, ...) it writes "timestep.<s>/rank_<r>.ckpt"
 * with open/write/fsync/close inside SCR_Start_output(name, SCR_FLAG_CHECKPOINT)/SCR_Complete_output; every
 * K steps it writes a small output dataset "output/step_<s>/rank_<r>.txt" (SCR_FLAG_OUTPUT); the last step is
 * a checkpoint that is also output ("final/rank_<r>.ckpt"). SCR_Should_exit ends the run early. At start it
 * restarts from the newest checkpoint SCR offers. At the end rank 0 prints "result <16 hex digits>", a hash
 * of every cell of every rank, identical for a run that restarted and one that did not.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "scr.h"

static int rank, ranks;
static long cells = 4096, steps = 60, output_every = 20;

static void die(const char *what) {
  fprintf(stderr, "scr_heat: rank %d: %s\n", rank, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return 0;
    p += w;
    n -= (size_t)w;
  }
  return 1;
}

static int read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    p += r;
    n -= (size_t)r;
  }
  return 1;
}

/* One checkpoint file: the step, the cell count, the cells. */
static int write_checkpoint(const char *path, long step, const double *u) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, S_IRUSR | S_IWUSR);
  if (fd < 0) return 0;
  int valid = write_all(fd, &step, sizeof step) && write_all(fd, &cells, sizeof cells) &&
              write_all(fd, u, (size_t)cells * sizeof *u);
  if (fsync(fd) < 0) valid = 0;
  if (close(fd) < 0) valid = 0;
  return valid;
}

static void checkpoint(const char *name, int flags, const char *dir, long step, const double *u) {
  char path[256], file[SCR_MAX_FILENAME];
  if (SCR_Start_output(name, flags) != SCR_SUCCESS) die("SCR_Start_output failed");
  snprintf(path, sizeof path, "%s/rank_%d.ckpt", dir, rank);
  int valid = 0;
  if (SCR_Route_file(path, file) == SCR_SUCCESS) valid = write_checkpoint(file, step, u);
  if (SCR_Complete_output(valid) != SCR_SUCCESS) die("SCR_Complete_output: the checkpoint was not kept");
}

static void output(long step, const double *u) {
  char name[64], path[256], file[SCR_MAX_FILENAME];
  snprintf(name, sizeof name, "output.%ld", step);
  if (SCR_Start_output(name, SCR_FLAG_OUTPUT) != SCR_SUCCESS) die("SCR_Start_output(output) failed");
  snprintf(path, sizeof path, "output/step_%ld/rank_%d.txt", step, rank);
  int valid = 0;
  if (SCR_Route_file(path, file) == SCR_SUCCESS) {
    double lo = u[0], hi = u[0], sum = 0;
    for (long i = 0; i < cells; i++) {
      if (u[i] < lo) lo = u[i];
      if (u[i] > hi) hi = u[i];
      sum += u[i];
    }
    FILE *f = fopen(file, "w");
    if (f) {
      valid = fprintf(f, "step %ld rank %d min %.17g max %.17g sum %.17g\n", step, rank, lo, hi, sum) > 0;
      if (fclose(f) != 0) valid = 0;
    }
  }
  if (SCR_Complete_output(valid) != SCR_SUCCESS) die("SCR_Complete_output(output) failed");
}

/* The newest checkpoint SCR can give; returns the step to continue from (0: none). */
static long restart(double *u) {
  int have = 0;
  char name[SCR_MAX_FILENAME];
  if (SCR_Have_restart(&have, name) != SCR_SUCCESS) die("SCR_Have_restart failed");
  while (have) {
    long step = 0, n = 0;
    if (SCR_Start_restart(name) != SCR_SUCCESS) die("SCR_Start_restart failed");
    char path[SCR_MAX_FILENAME], file[SCR_MAX_FILENAME];
    /* The checkpoint's directory is its name (timestep.<s> or final). */
    snprintf(path, sizeof path, "%s/rank_%d.ckpt", name, rank);
    int valid = 0;
    if (SCR_Route_file(path, file) == SCR_SUCCESS) {
      int fd = open(file, O_RDONLY);
      if (fd >= 0) {
        valid = read_all(fd, &step, sizeof step) && read_all(fd, &n, sizeof n) && n == cells &&
                read_all(fd, u, (size_t)cells * sizeof *u);
        close(fd);
      }
    }
    if (SCR_Complete_restart(valid) == SCR_SUCCESS) {
      if (rank == 0) printf("scr_heat: restarted from %s at step %ld\n", name, step);
      return step;
    }
    if (SCR_Have_restart(&have, name) != SCR_SUCCESS) die("SCR_Have_restart failed");
  }
  return 0;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(1099511628211);
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--cells") == 0) cells = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--steps") == 0) steps = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--output-every") == 0) output_every = atol(argv[i + 1]);
    else die("usage: scr_heat [--cells N] [--steps S] [--output-every K]");
  }
  if (SCR_Init() != SCR_SUCCESS) die("SCR_Init failed");
  if (rank == 0) printf("scr_heat: %s, %d ranks, %ld cells each\n", SCR_Get_version(), ranks, cells);

  double *u = malloc((size_t)(cells + 2) * sizeof *u), *v = malloc((size_t)(cells + 2) * sizeof *v);
  if (!u || !v) die("out of memory");
  for (long i = 0; i < cells; i++) u[i + 1] = (double)((rank * cells + i) % 97) / 97.0;
  long step = restart(u + 1);

  int left = (rank + ranks - 1) % ranks, right = (rank + 1) % ranks;
  while (step < steps) {
    MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[cells + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[cells], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (long i = 1; i <= cells; i++) v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
    double *t = u;
    u = v, v = t;
    step++;
    if (step == steps) break;
    if (output_every > 0 && step % output_every == 0) output(step, u + 1);
    int flag = 0;
    if (SCR_Need_checkpoint(&flag) != SCR_SUCCESS) die("SCR_Need_checkpoint failed");
    if (flag) {
      char name[64], dir[64];
      snprintf(name, sizeof name, "timestep.%ld", step);
      snprintf(dir, sizeof dir, "timestep.%ld", step);
      checkpoint(name, SCR_FLAG_CHECKPOINT, dir, step, u + 1);
    }
    if (SCR_Should_exit(&flag) != SCR_SUCCESS) die("SCR_Should_exit failed");
    if (flag) {
      if (rank == 0) printf("scr_heat: exiting at step %ld (SCR_Should_exit)\n", step);
      break;
    }
  }
  if (step == steps) {
    checkpoint("final", SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT, "final", step, u + 1);
    double *all = rank == 0 ? malloc((size_t)(cells * ranks) * sizeof *all) : NULL;
    MPI_Gather(u + 1, (int)cells, MPI_DOUBLE, all, (int)cells, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("result %016llx\n", (unsigned long long)fnv1a(UINT64_C(1469598103934665603), all,
                                                          (size_t)(cells * ranks) * sizeof *all));
      free(all);
    }
  }
  if (SCR_Finalize() != SCR_SUCCESS) die("SCR_Finalize failed");
  free(u);
  free(v);
  MPI_Finalize();
  return 0;
}
