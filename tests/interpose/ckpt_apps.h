/* What the three unmodified checkpointing programs of the interposer tests share (ckpt_stdio.c,
 * ckpt_posix.c, ckpt_mpiio.c): a 1-D heat equation on a ring of MPI ranks, its options, and the result
 * line. None of this knows about cairn; each program writes and reads its checkpoint files itself.
 *
 *   PROGRAM [--cells N] [--steps S] [--every K] [--dir D] [--sleep-ms M] [--pause-ms P]
 *
 * Every K steps each rank writes its cells to a file of its own under D (default "ckpt"), named
 * "step<s>.rank<r>.<kind>"; at start the ranks agree on the newest step every rank can read back and
 * continue from it. At the end rank 0 prints "result <16 hex digits>", a hash of every cell of every
 * rank, the same whether or not the run restarted. --pause-ms: a program that writes a checkpoint in
 * parts (ckpt_posix) waits this long between them, as a slow file system or a busy node makes it.
 */
#ifndef CKPT_APPS_H
#define CKPT_APPS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

struct app {
  int rank, ranks;
  long cells, steps, every, sleep_ms, pause_ms;
  const char *dir;
  double *u, *v; /* cells 1..cells, with a halo cell at each end */
};

static void app_die(const struct app *a, const char *what) {
  fprintf(stderr, "rank %d: %s\n", a->rank, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void app_init(struct app *a, int argc, char **argv) {
  MPI_Comm_rank(MPI_COMM_WORLD, &a->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &a->ranks);
  a->cells = 4096;
  a->steps = 60;
  a->every = 10;
  a->dir = "ckpt";
  a->sleep_ms = 0;
  a->pause_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--cells") == 0) a->cells = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--steps") == 0) a->steps = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--every") == 0) a->every = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--dir") == 0) a->dir = argv[i + 1];
    else if (strcmp(argv[i], "--sleep-ms") == 0) a->sleep_ms = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--pause-ms") == 0) a->pause_ms = atol(argv[i + 1]);
    else app_die(a, "usage: PROGRAM [--cells N] [--steps S] [--every K] [--dir D] [--sleep-ms M] [--pause-ms P]");
  }
  a->u = malloc((size_t)(a->cells + 2) * sizeof(double));
  a->v = malloc((size_t)(a->cells + 2) * sizeof(double));
  if (!a->u || !a->v) app_die(a, "out of memory");
  for (long i = 0; i < a->cells; i++) a->u[i + 1] = (double)((a->rank * a->cells + i) % 97) / 97.0;
}

static void app_sleep(long ms) {
  if (ms <= 0) return;
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void app_step(struct app *a) {
  int left = (a->rank + a->ranks - 1) % a->ranks, right = (a->rank + 1) % a->ranks;
  double *u = a->u;
  MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[a->cells + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(&u[a->cells], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  for (long i = 1; i <= a->cells; i++) a->v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
  a->u = a->v;
  a->v = u;
  app_sleep(a->sleep_ms); /* a step of a real code takes a while */
}

static void app_path(const struct app *a, long step, const char *kind, char *out, size_t len) {
  snprintf(out, len, "%s/step%ld.rank%d.%s", a->dir, step, a->rank, kind);
}

/* This rank's newest step whose checkpoint file of `kind` is there (access()), 0 for none. */
static long app_newest_by_access(const struct app *a, const char *kind) {
  char path[512];
  for (long s = (a->steps - 1) / a->every * a->every; s >= a->every; s -= a->every) {
    app_path(a, s, kind, path, sizeof path);
    if (access(path, F_OK) == 0) return s;
  }
  return 0;
}

/* Runs from `step` to the end: every `every` steps (not at the last) write(a, step), then drop(a, old) of
 * the checkpoint before the previous one, as a code that keeps two checkpoints does. */
static void app_run(struct app *a, long step, int (*write)(struct app *, long), int (*drop)(struct app *, long)) {
  while (step < a->steps) {
    app_step(a);
    step++;
    if (step % a->every || step == a->steps) continue;
    if (!write(a, step)) app_die(a, "writing a checkpoint failed");
    if (step > 2 * a->every && !drop(a, step - 2 * a->every)) app_die(a, "removing an old checkpoint failed");
  }
}

/* The newest step every rank has (each rank passes its own newest, 0 for none). */
static long app_agree(long mine) {
  long all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

static void app_result(const struct app *a) {
  double *all = a->rank == 0 ? malloc((size_t)(a->cells * a->ranks) * sizeof(double)) : NULL;
  MPI_Gather(a->u + 1, (int)a->cells, MPI_DOUBLE, all, (int)a->cells, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (a->rank == 0) {
    uint64_t h = UINT64_C(1469598103934665603);
    const unsigned char *b = (const unsigned char *)all;
    for (size_t i = 0; i < (size_t)(a->cells * a->ranks) * sizeof(double); i++) h = (h ^ b[i]) * UINT64_C(1099511628211);
    printf("result %016llx\n", (unsigned long long)h);
    free(all);
  }
}

#endif
