/* malleable: an application that grows and shrinks while it runs, its state moved by cairn.
 *
 * The state is two 1-D global arrays of G doubles and a step counter:
 *   "a"     protected with CAIRN_DIST_BLOCK        (rank r of P holds a contiguous piece),
 *   "c"     protected with CAIRN_DIST_BLOCK_CYCLIC (blocks of --block elements dealt round robin),
 *   "step"  protected with CAIRN_DIST_REPLICATED   (the same on every rank).
 * Both arrays have a resize callback (cairn_set_resize) that reallocates them when cairn changes
 * the local count. Every step updates each element from its GLOBAL index and the step number only,
 * so the arrays, and the final `result` line (FNV-1a 64 of "a" then "c", each in global order),
 * are the same bit for bit whatever the number of ranks and whenever it changes.
 *
 * The run starts on P ranks (4 in the example). After step --grow-at the ranks spawn --grow-by new
 * processes of this binary (MPI_Comm_spawn with --joined), merge the intercommunicator and call
 * cairn_redistribute(merged): the state moves from P to P + grow-by ranks; the newcomers learn the
 * step from the replicated counter. After step --shrink-at the ranks split off the first
 * --shrink-to of them and call cairn_redistribute(new or MPI_COMM_NULL): the others hand their data
 * over and leave. --fixed runs the same steps on the starting communicator, for comparison.
 * A checkpoint is taken every --checkpoint-every steps, before and after each change.
 *
 * Usage: malleable [--n G] [--steps S] [--checkpoint-every K] [--grow-at S1] [--grow-by N]
 *                  [--shrink-at S2] [--shrink-to M] [--block B] [--fixed]
 *   (--joined is internal: it marks the processes started by MPI_Comm_spawn)
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "cairn/cairn.h"

typedef struct options {
  long n;                /* G, elements of each global array */
  long steps;            /* steps in all */
  long checkpoint_every; /* 0 = never */
  long grow_at, grow_by; /* grow after step grow_at (0 = never) by grow_by processes */
  long shrink_at;        /* shrink after step shrink_at (0 = never) ... */
  long shrink_to;        /* ... to the first shrink_to ranks */
  long block;            /* block size of "c" */
  int fixed;             /* no growing or shrinking */
  int joined;            /* started by MPI_Comm_spawn */
} options;

/* The application's state. The pointers and counts are changed by the resize callbacks. */
typedef struct state {
  double *a; /* block */
  size_t na;
  double *c; /* block-cyclic */
  size_t nc;
  int64_t step; /* replicated */
} state;

static int world_rank = 0; /* for messages only */

static void fail_abort(void) {
  fflush(stdout);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Every cairn call goes through here: a failure is reported with its detail and aborts the job. */
static void check(int rc, const char *call) {
  if (rc != CAIRN_SUCCESS) {
    fprintf(stderr, "malleable: %s failed (world rank %d): %s: %s\n", call, world_rank, cairn_strerror(rc),
            cairn_last_error());
    fail_abort();
  }
}

static void check_mpi(int rc, const char *call) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fprintf(stderr, "malleable: %s failed (world rank %d): %s\n", call, world_rank, text);
    fail_abort();
  }
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: malleable [--n G] [--steps S] [--checkpoint-every K] [--grow-at S1] [--grow-by N]\n"
          "                 [--shrink-at S2] [--shrink-to M] [--block B] [--fixed]\n"
          "  --n G                 elements of each global array (default 1000003)\n"
          "  --steps S             steps in all (default 30)\n"
          "  --checkpoint-every K  cairn_checkpoint every K steps (default 5; 0 = never)\n"
          "  --grow-at S1          after step S1, spawn N processes and redistribute (default 10; 0 = never)\n"
          "  --grow-by N           processes to spawn (default 2)\n"
          "  --shrink-at S2        after step S2, keep the first M ranks (default 20; 0 = never)\n"
          "  --shrink-to M         ranks kept by the shrink (default 3)\n"
          "  --block B             block size of the block-cyclic array (default 1000)\n"
          "  --fixed               the same steps on the starting ranks, never growing or shrinking\n");
}

static int parse_long(const char *text, long *out) {
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0) return -1;
  *out = value;
  return 0;
}

/* Returns 0 on success, 1 for --help, -1 (message printed on world rank 0) on bad input. */
static int parse_options(int argc, char **argv, options *opt) {
  opt->n = 1000003;
  opt->steps = 30;
  opt->checkpoint_every = 5;
  opt->grow_at = 10;
  opt->grow_by = 2;
  opt->shrink_at = 20;
  opt->shrink_to = 3;
  opt->block = 1000;
  opt->fixed = 0;
  opt->joined = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    long *target = NULL;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return 1;
    if (strcmp(arg, "--fixed") == 0) {
      opt->fixed = 1;
      continue;
    }
    if (strcmp(arg, "--joined") == 0) {
      opt->joined = 1;
      continue;
    }
    if (strcmp(arg, "--n") == 0) target = &opt->n;
    else if (strcmp(arg, "--steps") == 0) target = &opt->steps;
    else if (strcmp(arg, "--checkpoint-every") == 0) target = &opt->checkpoint_every;
    else if (strcmp(arg, "--grow-at") == 0) target = &opt->grow_at;
    else if (strcmp(arg, "--grow-by") == 0) target = &opt->grow_by;
    else if (strcmp(arg, "--shrink-at") == 0) target = &opt->shrink_at;
    else if (strcmp(arg, "--shrink-to") == 0) target = &opt->shrink_to;
    else if (strcmp(arg, "--block") == 0) target = &opt->block;
    if (target == NULL) {
      if (world_rank == 0) fprintf(stderr, "malleable: unknown option '%s'\n", arg);
      return -1;
    }
    if (i + 1 >= argc || parse_long(argv[i + 1], target) != 0) {
      if (world_rank == 0)
        fprintf(stderr, "malleable: %s needs a non-negative integer, got '%s'\n", arg,
                i + 1 < argc ? argv[i + 1] : "(nothing)");
      return -1;
    }
    i++;
  }
  const char *bad = NULL;
  if (opt->n < 1 || opt->n > INT_MAX) bad = "--n must be in 1..2^31-1 (the final gather uses int counts)";
  else if (opt->block < 1) bad = "--block must be at least 1";
  else if (opt->grow_at > 0 && opt->grow_by < 1) bad = "--grow-by must be at least 1";
  else if (opt->shrink_at > 0 && opt->shrink_to < 1) bad = "--shrink-to must be at least 1";
  else if (opt->grow_at > 0 && opt->shrink_at > 0 && opt->shrink_at <= opt->grow_at)
    bad = "--shrink-at must come after --grow-at";
  if (bad != NULL) {
    if (world_rank == 0) fprintf(stderr, "malleable: %s\n", bad);
    return -1;
  }
  return 0;
}

/* ---- the distributions and their resize callbacks ------------------------------------------------ */

static cairn_distribution dist_a(const options *opt) {
  cairn_distribution d = {CAIRN_DIST_BLOCK, (size_t)opt->n, 0, 0, 0};
  return d;
}
static cairn_distribution dist_c(const options *opt) {
  cairn_distribution d = {CAIRN_DIST_BLOCK_CYCLIC, (size_t)opt->n, (size_t)opt->block, 0, 0};
  return d;
}
static cairn_distribution dist_step(void) {
  cairn_distribution d = {CAIRN_DIST_REPLICATED, 1, 0, 0, 0};
  return d;
}

/* cairn asks for a buffer of new_count elements; the old contents are not needed (cairn moves the
 * data from its own copy), so realloc is fine. cairn does not free the old buffer: realloc does. */
static void *resize_array(double **ptr, size_t *count, size_t new_count) {
  double *p = realloc(*ptr, (new_count > 0 ? new_count : 1) * sizeof(double));
  if (p == NULL) return NULL;
  *ptr = p;
  *count = new_count;
  return p;
}
static void *resize_a(const char *name, size_t new_count, void *user) {
  (void)name;
  state *s = user;
  return resize_array(&s->a, &s->na, new_count);
}
static void *resize_c(const char *name, size_t new_count, void *user) {
  (void)name;
  state *s = user;
  return resize_array(&s->c, &s->nc, new_count);
}

/* Protect an array. A process spawned into a running job protects it empty (count 0) on cairn over
 * MPI_COMM_SELF, as cairn.h says for cairn_redistribute; cairn 0.1.0's cairn_protect_distributed checks
 * the count against the layout over MPI_COMM_SELF (the whole array) and refuses 0 with
 * CAIRN_ERR_SIZE_MISMATCH. Then the empty region is protected with cairn_protect: cairn_redistribute
 * gives it the distribution recorded by the job's ranks (and sizes it through the callback). */
static void protect_array(const char *name, double *ptr, size_t count, const cairn_distribution *d, int joining) {
  int rc = cairn_protect_distributed(name, ptr, count, CAIRN_DOUBLE, d);
  if (rc == CAIRN_ERR_SIZE_MISMATCH && joining && count == 0) {
    static int noted = 0;
    if (!noted++)
      fprintf(stderr, "malleable: note: cairn_protect_distributed refused an empty region before joining (%s); "
                      "protecting it with cairn_protect, cairn_redistribute sets its distribution\n",
              cairn_last_error());
    rc = cairn_protect(name, ptr, 0, CAIRN_DOUBLE);
  }
  check(rc, "cairn_protect_distributed");
}

/* Protect the three regions with their distributions and callbacks. A process spawned into a running
 * job calls this on cairn over MPI_COMM_SELF with empty arrays: cairn_redistribute sizes them. */
static void protect_state(state *s, const options *opt) {
  cairn_distribution da = dist_a(opt), dc = dist_c(opt), ds = dist_step();
  protect_array("a", s->a, s->na, &da, opt->joined);
  check(cairn_set_resize("a", resize_a, s), "cairn_set_resize(a)");
  protect_array("c", s->c, s->nc, &dc, opt->joined);
  check(cairn_set_resize("c", resize_c, s), "cairn_set_resize(c)");
  check(cairn_protect_distributed("step", &s->step, 1, CAIRN_INT64, &ds), "cairn_protect_distributed(step)");
}

/* The local counts cairn_local_count gives on cairn's current communicator must be what we hold. */
static void check_counts(const state *s, const options *opt) {
  cairn_distribution da = dist_a(opt), dc = dist_c(opt);
  size_t want_a = 0, want_c = 0;
  check(cairn_local_count(&da, &want_a), "cairn_local_count(a)");
  check(cairn_local_count(&dc, &want_c), "cairn_local_count(c)");
  if (want_a != s->na || want_c != s->nc) {
    fprintf(stderr, "malleable: world rank %d holds %zu/%zu elements of a/c, cairn_local_count says %zu/%zu\n",
            world_rank, s->na, s->nc, want_a, want_c);
    fail_abort();
  }
}

/* ---- global indices (the layout rules of cairn.h) ------------------------------------------------ */

/* BLOCK: rank r of P holds G/P elements, one more when r < G%P; its first global index. */
static size_t block_first(size_t g, int nranks, int rank) {
  size_t p = (size_t)nranks, r = (size_t)rank, q = g / p, rem = g % p;
  return r * q + (r < rem ? r : rem);
}

/* BLOCK_CYCLIC: block j goes to rank j % P; a rank stores its blocks in order. Local element k of
 * rank r is element k % b of its (k / b)-th block, global block r + (k / b) * P. */
static size_t cyclic_global(size_t k, size_t b, int nranks, int rank) {
  size_t j = (size_t)rank + (k / b) * (size_t)nranks;
  return j * b + k % b;
}

static double initial_a(size_t g) { return (double)(g % 1000) * 1e-3; }
static double initial_c(size_t g) { return 1.0 / (double)(1 + g % 7); }

static void initialize(state *s, const options *opt, int nranks, int rank) {
  size_t g = (size_t)opt->n, b = (size_t)opt->block;
  size_t first = block_first(g, nranks, rank);
  for (size_t k = 0; k < s->na; k++) s->a[k] = initial_a(first + k);
  for (size_t k = 0; k < s->nc; k++) s->c[k] = initial_c(cyclic_global(k, b, nranks, rank));
}

/* One step: each element from its own value, its global index and the step number. */
static void compute_step(state *s, const options *opt, int nranks, int rank) {
  size_t g = (size_t)opt->n, b = (size_t)opt->block;
  double t = (double)s->step;
  size_t first = block_first(g, nranks, rank);
  for (size_t k = 0; k < s->na; k++) {
    double i = (double)(first + k);
    s->a[k] = s->a[k] * 0.5 + sin(i * 0.001 + t);
  }
  for (size_t k = 0; k < s->nc; k++) {
    double i = (double)cyclic_global(k, b, nranks, rank);
    s->c[k] = s->c[k] * 0.25 + cos(i * 0.002 - t);
  }
  s->step++;
}

/* ---- the result ---------------------------------------------------------------------------------- */

static uint64_t fnv1a64(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

/* Gather both arrays on rank 0 of comm, put them in global order and hash "a" then "c". */
static uint64_t hash_global(const state *s, const options *opt, MPI_Comm comm) {
  int rank = 0, nranks = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  size_t g = (size_t)opt->n, b = (size_t)opt->block;
  int *counts = NULL, *displs = NULL;
  double *all_a = NULL, *all_c = NULL, *global_c = NULL;
  if (rank == 0) {
    counts = malloc((size_t)nranks * sizeof(int));
    displs = malloc((size_t)nranks * sizeof(int));
    all_a = malloc(g * sizeof(double));
    all_c = malloc(g * sizeof(double));
    global_c = malloc(g * sizeof(double));
    if (!counts || !displs || !all_a || !all_c || !global_c) {
      fprintf(stderr, "malleable: out of memory gathering the arrays\n");
      fail_abort();
    }
  }
  int na = (int)s->na, nc = (int)s->nc;
  /* "a": the pieces in rank order are the global order */
  check_mpi(MPI_Gather(&na, 1, MPI_INT, counts, 1, MPI_INT, 0, comm), "MPI_Gather");
  if (rank == 0)
    for (int r = 0, off = 0; r < nranks; off += counts[r], r++) displs[r] = off;
  check_mpi(MPI_Gatherv(s->a, na, MPI_DOUBLE, all_a, counts, displs, MPI_DOUBLE, 0, comm), "MPI_Gatherv");
  /* "c": each rank's blocks in order, dealt back to their global places */
  check_mpi(MPI_Gather(&nc, 1, MPI_INT, counts, 1, MPI_INT, 0, comm), "MPI_Gather");
  if (rank == 0)
    for (int r = 0, off = 0; r < nranks; off += counts[r], r++) displs[r] = off;
  check_mpi(MPI_Gatherv(s->c, nc, MPI_DOUBLE, all_c, counts, displs, MPI_DOUBLE, 0, comm), "MPI_Gatherv");
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  if (rank == 0) {
    size_t placed = 0;
    for (int r = 0; r < nranks; r++)
      for (size_t k = 0; k < (size_t)counts[r]; k++, placed++)
        global_c[cyclic_global(k, b, nranks, r)] = all_c[(size_t)displs[r] + k];
    if (placed != g) {
      fprintf(stderr, "malleable: gathered %zu elements of c, expected %zu\n", placed, g);
      fail_abort();
    }
    h = fnv1a64(h, all_a, g * sizeof(double));
    h = fnv1a64(h, global_c, g * sizeof(double));
  }
  free(counts);
  free(displs);
  free(all_a);
  free(all_c);
  free(global_c);
  return h;
}

/* ---- growing and shrinking ----------------------------------------------------------------------- */

/* The job's communicators. comm is the one the application computes on (cairn's, too); the others are
 * kept to be disconnected when the spawned processes part from the job. */
typedef struct job {
  MPI_Comm comm;   /* current communicator (MPI_COMM_WORLD, the merged one, then the split one) */
  MPI_Comm inter;  /* original processes: the intercommunicator to the spawned ones; spawned: the parent */
  MPI_Comm merged; /* the merged intracommunicator while it exists */
  int owns_comm;   /* comm was created here (freed at the end) */
} job;

/* The path of this binary, for MPI_Comm_spawn. */
static void self_path(char *out, size_t len, const char *argv0) {
  ssize_t n = readlink("/proc/self/exe", out, len - 1);
  if (n > 0) {
    out[n] = '\0';
    return;
  }
  snprintf(out, len, "%s", argv0);
}

/* Every current rank: spawn grow_by processes, merge, redistribute over the merged communicator. */
static void grow(job *jb, state *s, const options *opt, int argc, char **argv) {
  int before = 0;
  MPI_Comm_size(jb->comm, &before);
  char path[4096];
  self_path(path, sizeof path, argv[0]);
  /* the children get our options plus --joined */
  char **child_argv = malloc((size_t)(argc + 1) * sizeof(char *));
  if (child_argv == NULL) fail_abort();
  for (int i = 1; i < argc; i++) child_argv[i - 1] = argv[i];
  child_argv[argc - 1] = "--joined";
  child_argv[argc] = NULL;
  int *errcodes = malloc((size_t)opt->grow_by * sizeof(int));
  if (errcodes == NULL) fail_abort();
  check_mpi(MPI_Comm_spawn(path, child_argv, (int)opt->grow_by, MPI_INFO_NULL, 0, jb->comm, &jb->inter, errcodes),
            "MPI_Comm_spawn");
  for (long i = 0; i < opt->grow_by; i++) check_mpi(errcodes[i], "MPI_Comm_spawn (a spawned process)");
  free(errcodes);
  free(child_argv);
  check_mpi(MPI_Intercomm_merge(jb->inter, 0, &jb->merged), "MPI_Intercomm_merge"); /* we come first */
  check(cairn_redistribute(jb->merged), "cairn_redistribute (grow)");
  check_counts(s, opt);
  if (jb->owns_comm) MPI_Comm_free(&jb->comm);
  jb->comm = jb->merged;
  jb->owns_comm = 0; /* merged is freed by part_from_spawned */
  int after = 0, rank = 0;
  MPI_Comm_size(jb->comm, &after);
  MPI_Comm_rank(jb->comm, &rank);
  if (rank == 0) {
    printf("malleable: grew %d -> %d at step %" PRId64 "\n", before, after, s->step);
    fflush(stdout);
  }
}

/* A spawned process: join the parent's job, take its part of the state. */
static void join(job *jb, state *s, const options *opt) {
  check_mpi(MPI_Comm_get_parent(&jb->inter), "MPI_Comm_get_parent");
  if (jb->inter == MPI_COMM_NULL) {
    fprintf(stderr, "malleable: --joined is for processes started by MPI_Comm_spawn\n");
    fail_abort();
  }
  check_mpi(MPI_Intercomm_merge(jb->inter, 1, &jb->merged), "MPI_Intercomm_merge"); /* we come last */
  check(cairn_init(MPI_COMM_SELF, NULL), "cairn_init (joining)");
  /* empty: cairn_redistribute sizes them through the resize callbacks */
  s->a = NULL;
  s->na = 0;
  s->c = NULL;
  s->nc = 0;
  s->step = 0;
  protect_state(s, opt);
  check(cairn_redistribute(jb->merged), "cairn_redistribute (join)");
  check_counts(s, opt);
  jb->comm = jb->merged;
  jb->owns_comm = 0;
}

/* Every process of the merged communicator: free it and disconnect the intercommunicator (collective
 * over both sides), so that the spawned and the original processes can finalize independently.
 * Open MPI 4.1: MPI_Comm_disconnect on the merged intracommunicator hangs in its PMIx fence (whether
 * called before or after the intercommunicator's); MPI_Comm_free on it and MPI_Comm_disconnect on the
 * intercommunicator work. */
static void part_from_spawned(job *jb) {
  check_mpi(MPI_Comm_free(&jb->merged), "MPI_Comm_free(merged)");
  check_mpi(MPI_Comm_disconnect(&jb->inter), "MPI_Comm_disconnect(inter)");
}

/* Every current rank: keep the first shrink_to ranks, the others hand their data over.
 * Returns 1 if this process left the job. */
static int shrink(job *jb, state *s, const options *opt) {
  int before = 0, rank = 0;
  MPI_Comm_size(jb->comm, &before);
  MPI_Comm_rank(jb->comm, &rank);
  MPI_Comm next = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(jb->comm, rank < opt->shrink_to ? 0 : MPI_UNDEFINED, rank, &next), "MPI_Comm_split");
  check(cairn_redistribute(next), "cairn_redistribute (shrink)");
  int left = next == MPI_COMM_NULL;
  if (!left) check_counts(s, opt);
  int after = 0;
  if (!left) MPI_Comm_size(next, &after);
  /* The spawned processes part from the original ones (part_from_spawned); the original processes
   * stay in MPI_COMM_WORLD and finalize together. */
  if (jb->merged != MPI_COMM_NULL) part_from_spawned(jb);
  else if (jb->owns_comm) MPI_Comm_free(&jb->comm);
  jb->comm = next;
  jb->owns_comm = !left;
  if (!left && rank == 0) {
    printf("malleable: shrank %d -> %d at step %" PRId64 "\n", before, after, s->step);
    fflush(stdout);
  }
  return left;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); /* cairn copes with any level */
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);

  options opt;
  int parsed = parse_options(argc, argv, &opt);
  if (parsed != 0) {
    if (world_rank == 0 && !opt.joined) usage(parsed > 0 ? stdout : stderr);
    MPI_Finalize();
    return parsed > 0 ? 0 : 2;
  }

  job jb = {MPI_COMM_WORLD, MPI_COMM_NULL, MPI_COMM_NULL, 0};
  state s;
  memset(&s, 0, sizeof s);
  int grown = 0, shrunk = 0;
  if (opt.joined) {
    join(&jb, &s, &opt);
    grown = 1; /* the job we joined has grown */
  } else {
    int nranks = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!opt.fixed && opt.shrink_at > 0 &&
        opt.shrink_to > nranks + (opt.grow_at > 0 ? opt.grow_by : 0)) {
      if (world_rank == 0) fprintf(stderr, "malleable: --shrink-to %ld is more ranks than the job has\n", opt.shrink_to);
      MPI_Finalize();
      return 2;
    }
    check(cairn_init(MPI_COMM_WORLD, NULL), "cairn_init");
    cairn_distribution da = dist_a(&opt), dc = dist_c(&opt);
    check(cairn_local_count(&da, &s.na), "cairn_local_count(a)");
    check(cairn_local_count(&dc, &s.nc), "cairn_local_count(c)");
    s.a = malloc((s.na > 0 ? s.na : 1) * sizeof(double));
    s.c = malloc((s.nc > 0 ? s.nc : 1) * sizeof(double));
    if (s.a == NULL || s.c == NULL) {
      fprintf(stderr, "malleable: out of memory on rank %d\n", world_rank);
      fail_abort();
    }
    initialize(&s, &opt, nranks, world_rank);
    protect_state(&s, &opt);
    if (world_rank == 0) {
      printf("malleable: n=%ld block=%ld steps=%ld checkpoint-every=%ld ranks=%d mode=%s\n", opt.n, opt.block,
             opt.steps, opt.checkpoint_every, nranks, opt.fixed ? "fixed" : "malleable");
      fflush(stdout);
    }
  }

  while (s.step < opt.steps) {
    int nranks = 0, rank = 0;
    MPI_Comm_size(jb.comm, &nranks);
    MPI_Comm_rank(jb.comm, &rank);
    compute_step(&s, &opt, nranks, rank);
    if (opt.checkpoint_every > 0 && s.step % opt.checkpoint_every == 0) check(cairn_checkpoint(), "cairn_checkpoint");
    if (opt.fixed) continue;
    if (!grown && opt.grow_at > 0 && s.step == opt.grow_at) {
      grow(&jb, &s, &opt, argc, argv);
      grown = 1;
    }
    if (!shrunk && opt.shrink_at > 0 && s.step == opt.shrink_at) {
      shrunk = 1;
      if (shrink(&jb, &s, &opt)) {
        /* This process left: cairn is already finalized for it (cairn_redistribute did it). */
        free(s.a);
        free(s.c);
        MPI_Finalize();
        return 0;
      }
    }
  }

  int rank = 0, nranks = 0;
  MPI_Comm_rank(jb.comm, &rank);
  MPI_Comm_size(jb.comm, &nranks);
  uint64_t hash = hash_global(&s, &opt, jb.comm);
  /* finalize before printing, so `result` stays the last line whatever cairn logs */
  check(cairn_finalize(), "cairn_finalize");
  if (rank == 0) {
    printf("malleable: finished %" PRId64 " steps on %d ranks\n", s.step, nranks);
    printf("result %016" PRIx64 "\n", hash);
    fflush(stdout);
  }
  if (jb.owns_comm) MPI_Comm_free(&jb.comm);
  if (jb.merged != MPI_COMM_NULL) part_from_spawned(&jb); /* grown but never shrunk: jb.comm is merged */
  free(s.a);
  free(s.c);
  MPI_Finalize();
  return 0;
}
