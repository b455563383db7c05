/* file_api_app: exercises cairn's file API (route, start/complete output, have/start/complete restart)
 * across separate launches, with files and a protected memory region mixed in one version.
 *
 *   --phase write   versions 1..4, labels "step-<v>"; each rank writes "rank<r>.dat" through
 *                   cairn_route_file() with write(2): a deterministic payload whose size depends on
 *                   rank and version (the last rank's file is empty), and protects a small region.
 *                   At version 3 rank 1 passes valid=0: every rank must get CAIRN_ERR_INVALID_VERSION.
 *   --phase read    (a later launch) the newest version must be "step-4"; every rank reads its file
 *                   back and checks it and the region byte for byte; prints "file_api: OK version 4".
 *   --phase reject  (after write or read) rank 0 rejects "step-4" with cairn_complete_restart(0); the
 *                   next offer must be "step-2" (step-3 was invalid), whose data is then checked too.
 *   --simulate-nodes K   give rank r the failure group "node<r*K/P>" (CAIRN_NODE) unless CAIRN_NODE
 *                   is already set, e.g. by `cairn run`, so a plain mpirun can use L2 redundancy.
 *
 * Needs at least 2 ranks. Exit status 0 on success; on a mismatch every rank exits non-zero after a
 * message naming the rank, the file and the first differing byte.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "cairn/cairn.h"

#define VERSIONS 4
#define INVALID_VERSION 3 /* rank 1 declares this one invalid */
#define META_COUNT 8
#define META_MAGIC INT64_C(0x636169726e)

static int rank = 0, nprocs = 1;

static void fail_call(const char *call, int rc, const char *expected) {
  fprintf(stderr, "file_api: rank %d: %s returned %d (%s), expected %s: %s\n", rank, call, rc,
          cairn_strerror(rc), expected, cairn_last_error());
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void check(int rc, const char *call) {
  if (rc != CAIRN_SUCCESS) fail_call(call, rc, "success");
}

/* ---- the expected data --------------------------------------------------------------------- */

static size_t payload_size(int r, int version) {
  if (r == nprocs - 1) return 0; /* one rank's file is empty */
  return 1000 + 4099 * (size_t)r + 65537 * (size_t)version;
}

static unsigned char payload_byte(int r, int version, size_t i) {
  uint32_t x = (uint32_t)i * UINT32_C(2654435761) + (uint32_t)r * 40503u + (uint32_t)version * 977u;
  return (unsigned char)((x >> 13) ^ (x >> 24));
}

static void fill_meta(int64_t *meta, int version) {
  meta[0] = META_MAGIC;
  meta[1] = rank;
  meta[2] = nprocs;
  meta[3] = version;
  meta[4] = (int64_t)payload_size(rank, version);
  for (int i = 5; i < META_COUNT; i++) meta[i] = (int64_t)version * 1000 + rank * 10 + i;
}

static void file_name(char *out, size_t len) { snprintf(out, len, "rank%d.dat", rank); }

/* ---- write phase --------------------------------------------------------------------------- */

/* Writes the payload with write(2); returns 0 or -1 with a message. */
static int write_payload(const char *path, int version) {
  size_t size = payload_size(rank, version);
  unsigned char *data = malloc(size + 1);
  if (data == NULL) return -1;
  for (size_t i = 0; i < size; i++) data[i] = payload_byte(rank, version, i);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    fprintf(stderr, "file_api: rank %d: open(%s) for writing: %s\n", rank, path, strerror(errno));
    free(data);
    return -1;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "file_api: rank %d: write(%s): %s\n", rank, path, strerror(errno));
      close(fd);
      free(data);
      return -1;
    }
    done += (size_t)n;
  }
  free(data);
  if (close(fd) != 0) {
    fprintf(stderr, "file_api: rank %d: close(%s): %s\n", rank, path, strerror(errno));
    return -1;
  }
  return 0;
}

static int phase_write(void) {
  int64_t meta[META_COUNT];
  check(cairn_protect("meta", meta, META_COUNT, CAIRN_INT64), "cairn_protect(meta)");
  for (int version = 1; version <= VERSIONS; version++) {
    char label[32], name[64], path[4096];
    snprintf(label, sizeof label, "step-%d", version);
    fill_meta(meta, version);
    check(cairn_start_output(label, 0), "cairn_start_output");
    file_name(name, sizeof name);
    check(cairn_route_file(name, path, sizeof path), "cairn_route_file");
    int valid = write_payload(path, version) == 0;
    if (version == INVALID_VERSION && rank == 1) valid = 0;
    int rc = cairn_complete_output(valid);
    if (version == INVALID_VERSION) {
      if (rc != CAIRN_ERR_INVALID_VERSION)
        fail_call("cairn_complete_output (step-3, rank 1 invalid)", rc, "CAIRN_ERR_INVALID_VERSION");
    } else if (rc != CAIRN_SUCCESS) {
      fail_call("cairn_complete_output", rc, "success");
    }
  }
  if (rank == 0) printf("file_api: wrote step-1..step-%d (step-%d declared invalid)\n", VERSIONS,
                        INVALID_VERSION);
  return 0;
}

/* ---- read and reject phases ---------------------------------------------------------------- */

static int label_version(const char *label) {
  int version = 0;
  char tail = 0;
  if (sscanf(label, "step-%d%c", &version, &tail) != 1) return -1;
  return version;
}

/* Reads this rank's file through cairn_route_file() and compares it; returns 1 when it matches. */
static int check_file(int version) {
  char name[64], path[4096];
  file_name(name, sizeof name);
  check(cairn_route_file(name, path, sizeof path), "cairn_route_file");
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    fprintf(stderr, "file_api: rank %d: open(%s) for reading: %s\n", rank, path, strerror(errno));
    return 0;
  }
  size_t expected = payload_size(rank, version);
  unsigned char *data = malloc(expected + 4096);
  size_t got = 0;
  int ok = data != NULL;
  while (ok) {
    ssize_t n = read(fd, data + got, expected + 4096 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fprintf(stderr, "file_api: rank %d: read(%s): %s\n", rank, path, strerror(errno));
      ok = 0;
    }
    if (n <= 0) break;
    got += (size_t)n;
    if (got == expected + 4096) break; /* longer than expected; enough to say so */
  }
  close(fd);
  if (ok && got != expected) {
    fprintf(stderr, "file_api: rank %d: %s (%s) has %zu%s bytes, expected %zu\n", rank, name, path,
            got, got == expected + 4096 ? "+" : "", expected);
    ok = 0;
  }
  for (size_t i = 0; ok && i < expected; i++) {
    if (data[i] != payload_byte(rank, version, i)) {
      fprintf(stderr, "file_api: rank %d: %s (%s) differs at byte %zu: 0x%02x, expected 0x%02x\n",
              rank, name, path, i, data[i], payload_byte(rank, version, i));
      ok = 0;
    }
  }
  free(data);
  return ok;
}

static int check_meta(const int64_t *meta, int version) {
  int64_t expected[META_COUNT];
  fill_meta(expected, version);
  for (int i = 0; i < META_COUNT; i++) {
    if (meta[i] != expected[i]) {
      fprintf(stderr, "file_api: rank %d: region meta[%d] = %" PRId64 ", expected %" PRId64
                      " (version %d)\n", rank, i, meta[i], expected[i], version);
      return 0;
    }
  }
  return 1;
}

/* cairn_have_restart must offer `expected_label` on every rank. */
static void expect_offer(const char *expected_label) {
  int available = 0;
  char label[256] = "";
  check(cairn_have_restart(&available, label, sizeof label), "cairn_have_restart");
  if (!available || strcmp(label, expected_label) != 0) {
    fprintf(stderr, "file_api: rank %d: cairn_have_restart offers %s%s%s, expected \"%s\"\n", rank,
            available ? "\"" : "nothing", available ? label : "", available ? "\"" : "",
            expected_label);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* start_restart, check file and region of `expected_label`; returns 1 on every rank when all match
 * (the restart is left open for the caller to complete). */
static int restart_and_check(int64_t *meta, const char *expected_label) {
  char label[256] = "";
  for (int i = 0; i < META_COUNT; i++) meta[i] = -1; /* must be overwritten by the restart */
  check(cairn_start_restart(label, sizeof label), "cairn_start_restart");
  int ok = 1;
  if (strcmp(label, expected_label) != 0) {
    fprintf(stderr, "file_api: rank %d: cairn_start_restart loaded \"%s\", expected \"%s\"\n", rank,
            label, expected_label);
    ok = 0;
  }
  int version = label_version(expected_label);
  if (ok) ok = check_file(version);
  if (ok) ok = check_meta(meta, version);
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all_ok;
}

static int phase_read(void) {
  int64_t meta[META_COUNT];
  check(cairn_protect("meta", meta, META_COUNT, CAIRN_INT64), "cairn_protect(meta)");
  expect_offer("step-4");
  int ok = restart_and_check(meta, "step-4");
  check(cairn_complete_restart(ok), "cairn_complete_restart");
  if (!ok) {
    if (rank == 0) fprintf(stderr, "file_api: FAILED: step-4 did not read back intact\n");
    return 1;
  }
  if (rank == 0) printf("file_api: OK version 4\n");
  return 0;
}

static int phase_reject(void) {
  int64_t meta[META_COUNT];
  check(cairn_protect("meta", meta, META_COUNT, CAIRN_INT64), "cairn_protect(meta)");
  expect_offer("step-4");
  char label[256] = "";
  check(cairn_start_restart(label, sizeof label), "cairn_start_restart");
  int rc = cairn_complete_restart(rank == 0 ? 0 : 1);
  if (rc != CAIRN_SUCCESS && rc != CAIRN_ERR_INVALID_VERSION)
    fail_call("cairn_complete_restart (rank 0 rejects)", rc, "success or CAIRN_ERR_INVALID_VERSION");
  /* step-4 rejected, step-3 was never valid: step-2 is next, and must be intact. */
  expect_offer("step-2");
  int ok = restart_and_check(meta, "step-2");
  check(cairn_complete_restart(ok), "cairn_complete_restart");
  if (!ok) {
    if (rank == 0) fprintf(stderr, "file_api: FAILED: step-2 did not read back intact\n");
    return 1;
  }
  if (rank == 0) printf("file_api: OK rejected step-4, offered step-2\n");
  return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: file_api_app --phase write|read|reject [--simulate-nodes K]\n");
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

  const char *phase = NULL;
  long nodes = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--phase") == 0 && i + 1 < argc) {
      phase = argv[++i];
    } else if (strcmp(argv[i], "--simulate-nodes") == 0 && i + 1 < argc) {
      nodes = strtol(argv[++i], NULL, 10);
    } else {
      phase = NULL;
      break;
    }
  }
  int known = phase != NULL && (strcmp(phase, "write") == 0 || strcmp(phase, "read") == 0 ||
                                strcmp(phase, "reject") == 0);
  if (!known || nodes < 0 || nprocs < 2) {
    if (rank == 0) {
      if (nprocs < 2) fprintf(stderr, "file_api: needs at least 2 ranks\n");
      usage();
    }
    MPI_Finalize();
    return 2;
  }
  if (nodes > 0 && getenv("CAIRN_NODE") == NULL) {
    char node[32];
    snprintf(node, sizeof node, "node%ld", (long)rank * nodes / nprocs);
    setenv("CAIRN_NODE", node, 1);
  }

  check(cairn_init(MPI_COMM_WORLD, NULL), "cairn_init");
  int status;
  if (strcmp(phase, "write") == 0) status = phase_write();
  else if (strcmp(phase, "read") == 0) status = phase_read();
  else status = phase_reject();
  check(cairn_finalize(), "cairn_finalize");
  fflush(stdout);
  MPI_Finalize();
  return status;
}
