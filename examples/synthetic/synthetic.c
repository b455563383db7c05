/* synthetic: the synthetic application of the iCheck evaluation (docs/examples.md, docs/service.md).
 *
 * Every rank protects one array of --size bytes (floats) and the iteration counter, sweeps the whole
 * array once per iteration (--work passes of a multiply-add: memory-bound, like the stencil codes whose
 * checkpoints the service drains), and checkpoints every --checkpoint-every iterations. At the end rank 0
 * prints the compute time per iteration (the sweeps alone, without the checkpoint calls: what a version
 * draining in the background slows down), the time cairn_checkpoint blocked, and `result <hex>` (FNV-1a
 * 64 over every rank's array in rank order), identical for a run with failures and restarts and one
 * without.
 *
 * Usage: synthetic [--size BYTES[K|M|G]] [--iters N] [--checkpoint-every K] [--work W] [--touch PCT [--roll R]]
 *                  [--sleep-ms S]
 *                  [--burst FROM:TO:MS] [--probe-agents] [--need-checkpoint] [--print-checkpoints]
 *                  [--no-restart]
 *
 * --need-checkpoint leaves the choice to the library: it checkpoints whenever cairn_need_checkpoint says
 * one is due (the interval, interval_seconds and mtbf_seconds knobs: a fixed interval or Daly's optimum
 * from the measured cost), as cairn-bench --campaign runs it; --print-checkpoints has rank 0 print a line
 * per checkpoint ("synthetic: checkpoint at iteration I blocked B after A": the seconds cairn_checkpoint
 * blocked, the seconds since the previous one returned, -1 for the first of a launch), which it reads.
 *
 * --touch PCT sweeps only the first PCT % of the array (default 100): the rest keeps its first values, as
 * most solvers leave part of their state alone between checkpoints (what l1_incremental saves). With
 * --roll R the swept part travels instead: it moves on by its own length every R iterations, wrapping at
 * the end; with R = --checkpoint-every (and PCT at most 50) a version differs from the one before it in one
 * part and from the one before that in two, as in a code whose active region moves (what a delta update of
 * L2 parity saves).
 *
 * --burst changes how often it checkpoints mid-run (iterations FROM to TO sleep MS ms instead of S), so
 * that the checkpoint traffic rises and falls: the service's dynamic agents follow it. --probe-agents
 * calls cairn_probe_agents every iteration and prints each change of a rank's agent.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "cairn/cairn.h"

typedef struct options {
  long long size;
  long iters, checkpoint_every, work, sleep_ms, touch;
  long burst_from, burst_to, burst_ms;
  int no_restart, probe_agents, need_checkpoint, print_checkpoints;
  long roll;
} options;

static int world_rank = 0;

static void check(int rc, const char *call) {
  if (rc != CAIRN_SUCCESS) {
    fprintf(stderr, "synthetic: %s failed: %s: %s\n", call, cairn_strerror(rc), cairn_last_error());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: synthetic [--size BYTES] [--iters N] [--checkpoint-every K] [--work W] [--sleep-ms S] [--no-restart]\n"
          "  --size BYTES          protected bytes per rank, K/M/G suffixes (default 4M)\n"
          "  --iters N             iterations (default 100)\n"
          "  --checkpoint-every K  cairn_checkpoint every K iterations (default 10; 0 = never)\n"
          "  --work W              passes over the array per iteration (default 1)\n"
          "  --touch PCT           sweep only the first PCT %% of the array (default 100)\n"
          "  --roll R              the swept PCT %% moves on by its length every R iterations (wrapping)\n"
          "  --sleep-ms S          sleep S ms per iteration (default 0)\n"
          "  --burst FROM:TO:MS    iterations FROM to TO sleep MS ms instead (checkpoints come faster or slower)\n"
          "  --probe-agents        call cairn_probe_agents every iteration; print each change of a rank's agent\n"
          "  --need-checkpoint     checkpoint when cairn_need_checkpoint says so (the interval knobs), not every K\n"
          "  --print-checkpoints   rank 0 prints each checkpoint: its iteration, the seconds it blocked, and the\n"
          "                        seconds since the previous one returned (-1 for the first of a launch)\n"
          "  --no-restart          start from scratch even if a checkpoint exists\n");
}

static int parse_count(const char *text, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < 0) return -1;
  *out = v;
  return 0;
}

static int parse_bytes(const char *text, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || v <= 0) return -1;
  long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1LL << 10, end++;
  else if (*end == 'M' || *end == 'm') mult = 1LL << 20, end++;
  else if (*end == 'G' || *end == 'g') mult = 1LL << 30, end++;
  if (*end) return -1;
  *out = v * mult;
  return 0;
}

/* 0: parsed; 1: --help; -1: bad input (message printed on rank 0). */
static int parse_options(int argc, char **argv, options *o) {
  o->size = 4LL << 20, o->iters = 100, o->checkpoint_every = 10, o->work = 1, o->sleep_ms = 0, o->no_restart = 0;
  o->burst_from = o->burst_to = o->burst_ms = 0, o->probe_agents = 0, o->need_checkpoint = 0;
  o->print_checkpoints = 0, o->roll = 0;
  o->touch = 100;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long *target = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
    if (!strcmp(a, "--no-restart")) {
      o->no_restart = 1;
      continue;
    }
    if (!strcmp(a, "--probe-agents")) {
      o->probe_agents = 1;
      continue;
    }
    if (!strcmp(a, "--need-checkpoint")) {
      o->need_checkpoint = 1;
      continue;
    }
    if (!strcmp(a, "--print-checkpoints")) {
      o->print_checkpoints = 1;
      continue;
    }
    if (!strcmp(a, "--burst")) {
      if (i + 1 >= argc || sscanf(argv[i + 1], "%ld:%ld:%ld", &o->burst_from, &o->burst_to, &o->burst_ms) != 3 ||
          o->burst_from < 0 || o->burst_to < o->burst_from || o->burst_ms < 0) {
        if (world_rank == 0) fprintf(stderr, "synthetic: --burst needs FROM:TO:MS (iterations, milliseconds)\n");
        return -1;
      }
      i++;
      continue;
    }
    if (!strcmp(a, "--size")) {
      if (i + 1 >= argc || parse_bytes(argv[i + 1], &o->size) != 0) {
        if (world_rank == 0) fprintf(stderr, "synthetic: --size needs a byte count (4M, 1G, ...)\n");
        return -1;
      }
      i++;
      continue;
    }
    if (!strcmp(a, "--iters")) target = &o->iters;
    else if (!strcmp(a, "--checkpoint-every")) target = &o->checkpoint_every;
    else if (!strcmp(a, "--work")) target = &o->work;
    else if (!strcmp(a, "--sleep-ms")) target = &o->sleep_ms;
    else if (!strcmp(a, "--touch")) target = &o->touch;
    else if (!strcmp(a, "--roll")) target = &o->roll;
    if (!target || i + 1 >= argc || parse_count(argv[i + 1], target) != 0) {
      if (world_rank == 0) fprintf(stderr, "synthetic: bad option or value near '%s'\n", a);
      return -1;
    }
    i++;
  }
  if (o->touch < 0 || o->touch > 100) {
    if (world_rank == 0) fprintf(stderr, "synthetic: --touch needs a percentage, 0..100\n");
    return -1;
  }
  if (o->size < (long long)sizeof(float)) {
    if (world_rank == 0) fprintf(stderr, "synthetic: --size must hold at least one float\n");
    return -1;
  }
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One iteration: every element depends only on itself, the rank and the pass, so the result is the same
 * however the run is cut by restarts. */
static void sweep(float *a, size_t n, int rank, long work) {
  const float add = (float)(rank + 1) * 1e-3f;
  for (long w = 0; w < work; w++)
    for (size_t i = 0; i < n; i++) a[i] = a[i] * 0.9990234375f + add;
}

/* Sweeps `len` of the n floats, from `first` on and wrapping at the end. */
static void sweep_part(float *a, size_t n, size_t len, size_t first, int rank, long work) {
  const size_t tail = len < n - first ? len : n - first;
  sweep(a + first, tail, rank, work);
  sweep(a, len - tail, rank, work);
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * UINT64_C(0x100000001b3);
  return h;
}

int main(int argc, char **argv) {
  int provided = 0, nprocs = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  options o;
  int parsed = parse_options(argc, argv, &o);
  if (parsed != 0) {
    if (world_rank == 0) usage(parsed > 0 ? stdout : stderr);
    MPI_Finalize();
    return parsed > 0 ? 0 : 2;
  }
  size_t n = (size_t)(o.size / (long long)sizeof(float));
  float *a = malloc(n * sizeof(float));
  if (!a) {
    fprintf(stderr, "synthetic: out of memory on rank %d (%zu floats)\n", world_rank, n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < n; i++) a[i] = (float)((i * 2654435761u + (size_t)world_rank) % 1000) * 1e-3f;
  int64_t iter = 0;

  check(cairn_init(MPI_COMM_WORLD, NULL), "cairn_init");
  check(cairn_protect("data", a, n, CAIRN_FLOAT), "cairn_protect(data)");
  check(cairn_protect("iter", &iter, 1, CAIRN_INT64), "cairn_protect(iter)");
  if (world_rank == 0) {
    if (o.need_checkpoint)
      printf("synthetic: %d ranks x %lld bytes, %ld iterations, checkpoint when cairn_need_checkpoint says\n", nprocs,
             o.size, o.iters);
    else
      printf("synthetic: %d ranks x %lld bytes, %ld iterations, checkpoint every %ld\n", nprocs, o.size, o.iters,
             o.checkpoint_every);
    fflush(stdout);
  }
  if (!o.no_restart) {
    int available = 0, version = 0, level = CAIRN_LEVEL_NONE;
    check(cairn_restart_available(&available, &version), "cairn_restart_available");
    if (available) {
      check(cairn_restart(), "cairn_restart");
      check(cairn_restart_level(&version, &level), "cairn_restart_level");
      if (world_rank == 0) {
        const char *names[] = {"none", "L1", "L2", "L3"};
        printf("restart: version %d from level %s\n", version, level >= 0 && level <= 3 ? names[level] : "none");
        printf("synthetic: resuming at iteration %" PRId64 "\n", iter);
        fflush(stdout);
      }
    }
  }

  double compute = 0, blocked = 0, last_return = 0;
  long computed = 0, checkpoints = 0;
  const double loop_start = now();
  while (iter < o.iters) {
    double t0 = now();
    const size_t len = (size_t)((unsigned long long)n * (unsigned long long)o.touch / 100u);
    /* (period mod n) x len stays below 2^64 for arrays of up to 2^32 floats */
    const unsigned long long period = o.roll > 0 ? (unsigned long long)(iter / o.roll) % n : 0;
    const size_t first = (size_t)(period * len % n);
    sweep_part(a, n, len, first, world_rank, o.work);
    compute += now() - t0;
    computed++;
    iter++;
    sleep_ms(iter > o.burst_from && iter <= o.burst_to ? o.burst_ms : o.sleep_ms);
    if (o.probe_agents) {
      int changed = 0;
      check(cairn_probe_agents(&changed), "cairn_probe_agents");
      if (changed) {
        printf("synthetic: rank %d: agents changed at iteration %" PRId64 "\n", world_rank, iter);
        fflush(stdout);
      }
    }
    int due = 0;
    if (o.need_checkpoint) check(cairn_need_checkpoint(&due), "cairn_need_checkpoint");
    else due = o.checkpoint_every > 0 && iter % o.checkpoint_every == 0;
    if (due && iter < o.iters) {
      double t1 = now();
      check(cairn_checkpoint(), "cairn_checkpoint");
      double t2 = now();
      blocked += t2 - t1;
      checkpoints++;
      if (o.print_checkpoints && world_rank == 0) {
        printf("synthetic: checkpoint at iteration %" PRId64 " blocked %.6f after %.6f\n", iter, t2 - t1,
               last_return > 0 ? t1 - last_return : -1.0);
        fflush(stdout);
      }
      last_return = t2;
    }
    int flag = 0;
    check(cairn_should_exit(&flag), "cairn_should_exit");
    if (flag) break;
  }

  const double loop_end = now();

  /* rank order hash of every array, gathered piece by piece on rank 0 */
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  if (world_rank == 0) {
    h = fnv1a(h, a, n * sizeof(float));
    float *buf = malloc(n * sizeof(float));
    for (int r = 1; r < nprocs; r++) {
      MPI_Recv(buf, (int)n, MPI_FLOAT, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      h = fnv1a(h, buf, n * sizeof(float));
    }
    free(buf);
  } else {
    MPI_Send(a, (int)n, MPI_FLOAT, 0, 7, MPI_COMM_WORLD);
  }
  /* a step as the application had it: the loop's wall time less cairn_checkpoint's, per iteration */
  const double per_step = computed ? (loop_end - loop_start - blocked) / (double)computed : 0;
  double per_iter = computed ? compute / (double)computed : 0, slowest = 0;
  MPI_Reduce(&per_iter, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  double per_ckpt = checkpoints ? blocked / (double)checkpoints : 0, worst = 0;
  MPI_Reduce(&per_ckpt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int exiting = iter < o.iters;
  check(cairn_finalize(), "cairn_finalize");
  if (world_rank == 0) {
    printf("synthetic: compute %.6f s/iteration (slowest rank), cairn_checkpoint blocked %.6f s on average\n", slowest,
           worst);
    printf("synthetic: steps %.6f s/iteration (rank 0: the loop less cairn_checkpoint)\n", per_step);
    if (!exiting) printf("result %016" PRIx64 "\n", h);
    fflush(stdout);
  }
  free(a);
  MPI_Finalize();
  return 0;
}
