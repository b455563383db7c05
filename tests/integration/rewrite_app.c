/* rewrite_app: an application that rewrites its whole state right after every checkpoint, the worst case
 * for a copy-on-write snapshot (every page is written while the copier is still at work). Each rank owns
 * --mib MiB of uint64 words; every iteration replaces each word by a function of itself, the iteration
 * and its index, front to back on even iterations and back to front on odd ones (so the writer both
 * follows and meets the copier). Before that, each iteration -- so right after a checkpoint too -- every
 * rank receives a quarter of its left neighbour's state straight into its own (MPI_Sendrecv): on one
 * host MPI's shared-memory transport writes it from the other process (process_vm_writev), a write by
 * the kernel into protected memory. A restarted run must end with the state of a run that never failed:
 * rank 0 prints `result <hex>`, a hash of every rank's final state, and `restart: version V from level
 * L` when it restarted, like heat2d, so tests/integration/scenario.py can drive it under `cairn run`.
 * After cairn_finalize every rank checks that cairn left nothing behind (a thread, a userfaultfd, memory
 * registered for write-protect) and aborts if it did.
 *
 * Usage: rewrite_app [--mib M] [--iters I] [--checkpoint-every K] [--sleep-ms S] [--no-restart]
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cairn/cairn.h"

static int world_rank = 0;

static void check(int rc, const char *call) {
  if (rc != CAIRN_SUCCESS) {
    fprintf(stderr, "rewrite_app: %s failed: %s: %s\n", call, cairn_strerror(rc), cairn_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= UINT64_C(0x7fb5d329728ea185);
  x ^= x >> 27;
  return x;
}

static void rewrite(uint64_t *s, size_t n, int64_t iter) {
  uint64_t salt = (uint64_t)iter * UINT64_C(0x9e3779b97f4a7c15);
  if (iter % 2 == 0)
    for (size_t i = 0; i < n; i++) s[i] = mix(s[i] + salt + i);
  else
    for (size_t i = n; i-- > 0;) s[i] = mix(s[i] + salt + i);
}

/* What cairn may leave behind in this process: threads, userfaultfd descriptors, memory still registered
 * for write-protect ("uw" in smaps' VmFlags). Compared before cairn_init and after cairn_finalize. */
typedef struct leftovers {
  int threads, uffds, registered;
} leftovers;

static leftovers look_for_leftovers(void) {
  leftovers l = {0, 0, 0};
  char path[512], target[512];
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') l.threads++;
  if (d) closedir(d);
  d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n > 0) {
      target[n] = 0;
      if (strstr(target, "userfaultfd")) l.uffds++;
    }
  }
  if (d) closedir(d);
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[1024];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " uw")) l.registered++;
  if (f) fclose(f);
  return l;
}

static const char *level_name(int level) {
  return level == CAIRN_LEVEL_L1 ? "L1" : level == CAIRN_LEVEL_L2 ? "L2" : level == CAIRN_LEVEL_L3 ? "L3" : "none";
}

int main(int argc, char **argv) {
  int provided = 0, nprocs = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  long mib = 2, iters = 100, every = 5, sleep_ms = 0;
  int no_restart = 0;
  for (int i = 1; i < argc; i++) {
    long *target = NULL;
    if (strcmp(argv[i], "--no-restart") == 0) {
      no_restart = 1;
      continue;
    }
    if (strcmp(argv[i], "--mib") == 0) target = &mib;
    else if (strcmp(argv[i], "--iters") == 0) target = &iters;
    else if (strcmp(argv[i], "--checkpoint-every") == 0) target = &every;
    else if (strcmp(argv[i], "--sleep-ms") == 0) target = &sleep_ms;
    if (target == NULL || i + 1 >= argc) {
      if (world_rank == 0) fprintf(stderr, "rewrite_app: unknown or incomplete option %s\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
    *target = strtol(argv[++i], NULL, 10);
  }
  if (mib < 1 || iters < 1 || every < 0) {
    if (world_rank == 0) fprintf(stderr, "rewrite_app: --mib and --iters must be at least 1\n");
    MPI_Finalize();
    return 2;
  }
  size_t n = (size_t)mib << 17; /* words */
  uint64_t *state = malloc(n * sizeof *state);
  if (state == NULL) {
    fprintf(stderr, "rewrite_app: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < n; i++) state[i] = mix(((uint64_t)world_rank << 40) + i);
  int64_t iter = 0;

  MPI_Barrier(MPI_COMM_WORLD);
  leftovers before = look_for_leftovers();
  check(cairn_init(MPI_COMM_WORLD, NULL), "cairn_init");
  cairn_distribution same = {CAIRN_DIST_REPLICATED, 1, 0, 0, 0};
  check(cairn_protect("state", state, n, CAIRN_UINT64), "cairn_protect(state)");
  check(cairn_protect_distributed("iter", &iter, 1, CAIRN_INT64, &same), "cairn_protect_distributed(iter)");
  if (!no_restart) {
    int available = 0, version = 0, level = CAIRN_LEVEL_NONE;
    check(cairn_restart_available(&available, &version), "cairn_restart_available");
    if (available) {
      check(cairn_restart(), "cairn_restart");
      check(cairn_restart_level(&version, &level), "cairn_restart_level");
      if (world_rank == 0) {
        printf("restart: version %d from level %s\n", version, level_name(level));
        printf("rewrite_app: resuming at iteration %" PRId64 "\n", iter);
        fflush(stdout);
      }
    }
  }

  int right = (world_rank + 1) % nprocs, left = (world_rank + nprocs - 1) % nprocs;
  size_t quarter = n / 4;
  while (iter < iters) {
    MPI_Sendrecv(state, (int)quarter, MPI_UINT64_T, right, 7, state + quarter, (int)quarter, MPI_UINT64_T, left, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    rewrite(state, n, iter);
    iter++;
    if (sleep_ms > 0) {
      struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
    }
    int flag = 0;
    check(cairn_need_checkpoint(&flag), "cairn_need_checkpoint");
    if ((every > 0 && iter % every == 0 && iter < iters) || flag) check(cairn_checkpoint(), "cairn_checkpoint");
    check(cairn_should_exit(&flag), "cairn_should_exit");
    if (flag) {
      if (world_rank == 0) printf("rewrite_app: exiting on request at iteration %" PRId64 "\n", iter);
      check(cairn_finalize(), "cairn_finalize");
      MPI_Finalize();
      return 0;
    }
  }

  /* Every rank's digest of its state, combined on rank 0 in rank order. */
  uint64_t digest = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < n; i++) digest = mix(digest ^ state[i]);
  uint64_t *all = world_rank == 0 ? malloc((size_t)nprocs * sizeof *all) : NULL;
  MPI_Gather(&digest, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  check(cairn_finalize(), "cairn_finalize");
  leftovers after = look_for_leftovers();
  if (after.threads != before.threads || after.uffds != before.uffds || after.registered != 0) {
    fprintf(stderr, "rewrite_app: rank %d: cairn left behind threads %d -> %d, userfaultfds %d -> %d, %d mappings "
                    "registered for write-protect\n", world_rank, before.threads, after.threads, before.uffds, after.uffds,
            after.registered);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  if (world_rank == 0) {
    uint64_t h = 0;
    for (int r = 0; r < nprocs; r++) h = mix(h ^ all[r]);
    printf("result %016" PRIx64 "\n", h);
    fflush(stdout);
    free(all);
  }
  free(state);
  MPI_Finalize();
  return 0;
}
