/* heat2d: a 2-D Jacobi heat solver protected by cairn's memory API.
 *
 * The n x n global grid is split by rows over the ranks (the first n % P ranks get one extra row).
 * Each rank stores its rows plus one halo row above and one below; halos are refreshed with
 * MPI_Sendrecv before every sweep. The edges are fixed: the top edge (global row 0) is 100.0, the
 * other three edges 0.0, the interior starts at 0.0.
 *
 * Checkpointed state: "grid" is the rank's own rows WITHOUT the halo rows (they are rebuilt by the
 * next exchange), "iter" the number of completed iterations. Two buffers alternate between sweeps,
 * so "grid" is protected again before each checkpoint to point at the current one.
 *
 * Every update is the same floating-point expression on the same inputs whatever the number of
 * ranks, so the final grid, and the `result` line (FNV-1a 64 of the global grid's bytes, row-major,
 * no halos), is identical bit for bit for any rank count and across restarts.
 *
 * With --device the grid lives in GPU memory between steps and cairn protects the device buffer itself
 * (heat2d_device.c: the sweep is a PTX kernel loaded through the CUDA driver API); the result is the same.
 *
 * Usage: heat2d [--n N] [--iters I] [--checkpoint-every K] [--sleep-ms S] [--no-restart] [--device]
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "cairn/cairn.h"
#include "cairn/cairn_device.h"
#include "heat2d_device.h"

#define TOP_EDGE_VALUE 100.0
#define OTHER_EDGE_VALUE 0.0

typedef struct options {
  long n;
  long iters;
  long checkpoint_every;
  long sleep_ms;
  int no_restart;
  int device;
} options;

typedef struct domain {
  int rank, nprocs;
  long n;          /* global grid is n x n */
  long rows;       /* rows owned by this rank */
  long first_row;  /* global index of the first owned row */
  double *cur;     /* (rows + 2) x n: halo, owned rows, halo */
  double *next;
  gpu_grid *gpu;   /* --device: the grid lives there; cur is then the host's copy for halos and the result */
} domain;

static int world_rank = 0;

/* Every cairn call goes through here: a failure is reported with its detail and aborts the job. */
static void check(int rc, const char *call) {
  if (rc != CAIRN_SUCCESS) {
    fprintf(stderr, "heat2d: %s failed: %s: %s\n", call, cairn_strerror(rc), cairn_last_error());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static void check_mpi(int rc, const char *call) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fprintf(stderr, "heat2d: %s failed on rank %d: %s\n", call, world_rank, text);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: heat2d [--n N] [--iters I] [--checkpoint-every K] [--sleep-ms S] [--no-restart]\n"
          "  --n N                 global grid is N x N (default 256, at least 3 and the rank count)\n"
          "  --iters I             Jacobi iterations (default 1000)\n"
          "  --checkpoint-every K  cairn_checkpoint every K iterations (default 100; 0 = never)\n"
          "  --sleep-ms S          sleep S ms per iteration, to slow the run down (default 0)\n"
          "  --no-restart          start from scratch even if a checkpoint exists\n"
          "  --device              keep the grid in GPU memory (CUDA driver loaded at run time)\n");
}

/* Parses a non-negative decimal integer; returns 0 on success. */
static int parse_long(const char *text, long *out) {
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0) return -1;
  *out = value;
  return 0;
}

/* Returns 0 on success, 1 for --help, -1 (message printed on rank 0) on bad input. */
static int parse_options(int argc, char **argv, options *opt) {
  opt->n = 256;
  opt->iters = 1000;
  opt->checkpoint_every = 100;
  opt->sleep_ms = 0;
  opt->no_restart = 0;
  opt->device = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    long *target = NULL;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return 1;
    if (strcmp(arg, "--no-restart") == 0) {
      opt->no_restart = 1;
      continue;
    }
    if (strcmp(arg, "--device") == 0) {
      opt->device = 1;
      continue;
    }
    if (strcmp(arg, "--n") == 0) target = &opt->n;
    else if (strcmp(arg, "--iters") == 0) target = &opt->iters;
    else if (strcmp(arg, "--checkpoint-every") == 0) target = &opt->checkpoint_every;
    else if (strcmp(arg, "--sleep-ms") == 0) target = &opt->sleep_ms;
    if (target == NULL) {
      if (world_rank == 0) fprintf(stderr, "heat2d: unknown option '%s'\n", arg);
      return -1;
    }
    if (i + 1 >= argc || parse_long(argv[i + 1], target) != 0) {
      if (world_rank == 0)
        fprintf(stderr, "heat2d: %s needs a non-negative integer, got '%s'\n", arg,
                i + 1 < argc ? argv[i + 1] : "(nothing)");
      return -1;
    }
    i++;
  }
  if (opt->n < 3) {
    if (world_rank == 0) fprintf(stderr, "heat2d: --n must be at least 3, got %ld\n", opt->n);
    return -1;
  }
  return 0;
}

static double *cell(const domain *d, double *grid, long local_row, long col) {
  /* local_row 0 is the upper halo, 1..rows the owned rows, rows + 1 the lower halo */
  return grid + (size_t)local_row * (size_t)d->n + (size_t)col;
}

static int is_fixed(const domain *d, long global_row, long col) {
  return global_row == 0 || global_row == d->n - 1 || col == 0 || col == d->n - 1;
}

static double fixed_value(long global_row) {
  return global_row == 0 ? TOP_EDGE_VALUE : OTHER_EDGE_VALUE;
}

/* Fills both buffers: fixed edges (never written by a sweep), zero interior, zero halos. */
static void initialize(domain *d) {
  for (long r = 0; r < d->rows + 2; r++) {
    long global_row = d->first_row + r - 1;
    for (long c = 0; c < d->n; c++) {
      double value = 0.0;
      if (r >= 1 && r <= d->rows && is_fixed(d, global_row, c)) value = fixed_value(global_row);
      *cell(d, d->cur, r, c) = value;
      *cell(d, d->next, r, c) = value;
    }
  }
}

static void check_gpu(int rc, const char *what, const char *err) {
  if (rc != 0) {
    fprintf(stderr, "heat2d: %s failed on rank %d: %s\n", what, world_rank, err);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static void exchange_halos(domain *d) {
  char err[512];
  if (d->gpu) check_gpu(gpu_rows_out(d->gpu, d->cur, err, sizeof err), "copying rows out of the GPU", err);
  int up = d->rank > 0 ? d->rank - 1 : MPI_PROC_NULL;
  int down = d->rank < d->nprocs - 1 ? d->rank + 1 : MPI_PROC_NULL;
  int count = (int)d->n;
  /* first owned row goes up, the lower neighbour's first row arrives in the lower halo */
  check_mpi(MPI_Sendrecv(cell(d, d->cur, 1, 0), count, MPI_DOUBLE, up, 1,
                         cell(d, d->cur, d->rows + 1, 0), count, MPI_DOUBLE, down, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
  /* last owned row goes down, the upper neighbour's last row arrives in the upper halo */
  check_mpi(MPI_Sendrecv(cell(d, d->cur, d->rows, 0), count, MPI_DOUBLE, down, 2,
                         cell(d, d->cur, 0, 0), count, MPI_DOUBLE, up, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
  if (d->gpu) check_gpu(gpu_halos_in(d->gpu, d->cur, err, sizeof err), "copying halos into the GPU", err);
}

static void sweep(domain *d) {
  if (d->gpu) {
    char err[512];
    check_gpu(gpu_sweep(d->gpu, err, sizeof err), "the sweep kernel", err);
    return;
  }
  for (long r = 1; r <= d->rows; r++) {
    long global_row = d->first_row + r - 1;
    if (global_row == 0 || global_row == d->n - 1) continue;
    const double *above = cell(d, d->cur, r - 1, 0);
    const double *here = cell(d, d->cur, r, 0);
    const double *below = cell(d, d->cur, r + 1, 0);
    double *out = cell(d, d->next, r, 0);
    for (long c = 1; c < d->n - 1; c++)
      out[c] = 0.25 * (above[c] + below[c] + here[c - 1] + here[c + 1]);
  }
  double *tmp = d->cur;
  d->cur = d->next;
  d->next = tmp;
}

/* The grid is distributed by rows (the same split cairn's BLOCK_ROWS uses) and the iteration count is
 * the same everywhere, so a checkpoint can be restarted on any number of ranks. */
static void protect_state(domain *d, int64_t *iter) {
  cairn_distribution rows = {CAIRN_DIST_BLOCK_ROWS, 0, 0, (size_t)d->n, (size_t)d->n};
  cairn_distribution same = {CAIRN_DIST_REPLICATED, 1, 0, 0, 0};
  void *grid = d->gpu ? gpu_owned_rows(d->gpu) : (void *)cell(d, d->cur, 1, 0);
  check(cairn_protect_distributed("grid", grid, (size_t)d->rows * (size_t)d->n, CAIRN_DOUBLE,
                                  &rows),
        "cairn_protect_distributed(grid)");
  check(cairn_protect_distributed("iter", iter, 1, CAIRN_INT64, &same), "cairn_protect_distributed(iter)");
}

static void take_checkpoint(domain *d, int64_t *iter) {
  protect_state(d, iter); /* the current buffer changes with every sweep */
  check(cairn_checkpoint(), "cairn_checkpoint");
  /* device_copy = return: the next sweeps queued on the example's stream wait for cairn's copy (with
   * device_copy = wait, the copy is done already and this costs nothing) */
  if (d->gpu) check(cairn_device_wait_copied(d->gpu->stream), "cairn_device_wait_copied");
}

static void sleep_ms(long ms) {
  if (ms <= 0) return;
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

typedef struct fnv1a64 {
  uint64_t state;
} fnv1a64;

static void fnv1a64_init(fnv1a64 *h) { h->state = UINT64_C(0xcbf29ce484222325); }

static void fnv1a64_update(fnv1a64 *h, const void *data, size_t len) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t s = h->state;
  for (size_t i = 0; i < len; i++) {
    s ^= p[i];
    s *= UINT64_C(0x100000001b3);
  }
  h->state = s;
}

/* Rank 0 receives every rank's rows in rank (hence row-major) order and hashes them as they come,
 * so the global grid never has to fit in one process. Returns the hash on rank 0. */
static uint64_t hash_global_grid(const domain *d, long max_rows) {
  fnv1a64 h;
  fnv1a64_init(&h);
  int count = (int)(d->rows * d->n);
  if (d->rank != 0) {
    check_mpi(MPI_Send(cell(d, d->cur, 1, 0), count, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD), "MPI_Send");
    return 0;
  }
  fnv1a64_update(&h, cell(d, d->cur, 1, 0), (size_t)count * sizeof(double));
  double *buffer = malloc((size_t)max_rows * (size_t)d->n * sizeof(double));
  if (buffer == NULL) {
    fprintf(stderr, "heat2d: out of memory gathering the grid\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int source = 1; source < d->nprocs; source++) {
    MPI_Status status;
    int received = 0;
    check_mpi(MPI_Recv(buffer, (int)(max_rows * d->n), MPI_DOUBLE, source, 3, MPI_COMM_WORLD,
                       &status),
              "MPI_Recv");
    check_mpi(MPI_Get_count(&status, MPI_DOUBLE, &received), "MPI_Get_count");
    fnv1a64_update(&h, buffer, (size_t)received * sizeof(double));
  }
  free(buffer);
  return h.state;
}

static const char *level_name(int level) {
  switch (level) {
    case CAIRN_LEVEL_L1: return "L1";
    case CAIRN_LEVEL_L2: return "L2";
    case CAIRN_LEVEL_L3: return "L3";
    default: return "none";
  }
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); /* cairn copes with any level */
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);

  options opt;
  int parsed = parse_options(argc, argv, &opt);
  if (parsed != 0) {
    if (world_rank == 0) usage(parsed > 0 ? stdout : stderr);
    MPI_Finalize();
    return parsed > 0 ? 0 : 2;
  }

  domain d;
  memset(&d, 0, sizeof d);
  d.rank = world_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &d.nprocs);
  d.n = opt.n;
  long base_rows = d.n / d.nprocs, extra = d.n % d.nprocs;
  long max_rows = base_rows + (extra > 0 ? 1 : 0);
  if (base_rows < 1 || (double)max_rows * (double)d.n > (double)INT_MAX || d.n > INT_MAX) {
    if (world_rank == 0)
      fprintf(stderr, "heat2d: --n %ld does not fit %d ranks (need n >= ranks and rows*n < 2^31)\n",
              d.n, d.nprocs);
    MPI_Finalize();
    return 2;
  }
  d.rows = base_rows + (d.rank < extra ? 1 : 0);
  d.first_row = d.rank * base_rows + (d.rank < extra ? d.rank : extra);
  size_t cells = (size_t)(d.rows + 2) * (size_t)d.n;
  d.gpu = NULL;
  d.cur = malloc(cells * sizeof(double));
  d.next = malloc(cells * sizeof(double));
  if (d.cur == NULL || d.next == NULL) {
    fprintf(stderr, "heat2d: out of memory on rank %d (%zu cells)\n", d.rank, cells);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  initialize(&d);
  gpu_grid gpu;
  if (opt.device) {
    char err[512];
    MPI_Comm node;
    int local_rank = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    check_gpu(gpu_open(&gpu, local_rank, d.n, d.rows, d.first_row, d.cur, d.next, err, sizeof err),
              "opening the GPU", err);
    d.gpu = &gpu;
  }

  check(cairn_init(MPI_COMM_WORLD, NULL), "cairn_init");
  /* cairn's copy of the device grid follows the sweeps queued on this stream */
  if (d.gpu) check(cairn_device_stream(d.gpu->stream), "cairn_device_stream");
  int64_t iter = 0;
  protect_state(&d, &iter);

  if (world_rank == 0) {
    printf("heat2d: n=%ld ranks=%d iters=%ld checkpoint-every=%ld thread-level=%s%s\n", d.n,
           d.nprocs, opt.iters, opt.checkpoint_every,
           provided >= MPI_THREAD_MULTIPLE ? "multiple" : "below-multiple", d.gpu ? " grid=device" : "");
    fflush(stdout);
  }

  if (!opt.no_restart) {
    int available = 0, version = 0;
    int rc = cairn_restart_available(&available, &version);
    if (rc == CAIRN_ERR_UNRECOVERABLE && world_rank == 0)
      fprintf(stderr, "heat2d: checkpoints exist but none can be rebuilt; --no-restart starts over\n");
    check(rc, "cairn_restart_available");
    if (available) {
      int level = CAIRN_LEVEL_NONE;
      check(cairn_restart(), "cairn_restart");
      check(cairn_restart_level(&version, &level), "cairn_restart_level");
      if (iter < 0 || iter > opt.iters) {
        if (world_rank == 0)
          fprintf(stderr, "heat2d: checkpoint version %d is at iteration %" PRId64
                          ", outside 0..--iters %ld\n", version, iter, opt.iters);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      if (world_rank == 0) {
        printf("restart: version %d from level %s\n", version, level_name(level));
        printf("heat2d: resuming at iteration %" PRId64 "\n", iter);
        fflush(stdout);
      }
    }
  }

  while (iter < opt.iters) {
    exchange_halos(&d);
    sweep(&d);
    iter++;
    sleep_ms(opt.sleep_ms);

    int due = opt.checkpoint_every > 0 && iter % opt.checkpoint_every == 0 && iter < opt.iters;
    int flag = 0;
    check(cairn_need_checkpoint(&flag), "cairn_need_checkpoint");
    if (due || flag) take_checkpoint(&d, &iter);

    check(cairn_should_exit(&flag), "cairn_should_exit");
    if (flag) {
      if (world_rank == 0) {
        printf("heat2d: exiting on request at iteration %" PRId64 "\n", iter);
        fflush(stdout);
      }
      check(cairn_finalize(), "cairn_finalize");
      if (d.gpu) gpu_close(d.gpu);
      free(d.cur);
      free(d.next);
      MPI_Finalize();
      return 0;
    }
  }

  if (d.gpu) {
    char err[512];
    check_gpu(gpu_grid_out(d.gpu, d.cur, err, sizeof err), "copying the grid out of the GPU", err);
  }
  uint64_t hash = hash_global_grid(&d, max_rows);
  /* finalize before printing, so `result` stays the last line whatever cairn logs */
  check(cairn_finalize(), "cairn_finalize");
  if (world_rank == 0) {
    printf("result %016" PRIx64 "\n", hash);
    fflush(stdout);
  }
  if (d.gpu) gpu_close(d.gpu);
  free(d.cur);
  free(d.next);
  MPI_Finalize();
  return 0;
}
