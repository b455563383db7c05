/* cairn: multilevel checkpoint/restart for MPI applications.
 *
 * The whole public C API. C99-clean; every call returns 0 on success or a negative CAIRN_ERR_* code
 * (see cairn_errors.h); cairn_last_error() gives the detail of the calling thread's last failure.
 *
 * Collective calls are collective over the communicator given to cairn_init() and must be made by
 * every rank in the same order. Unless stated otherwise, calls are made from the application's main
 * thread (the thread that called cairn_init); cairn_strerror() and cairn_last_error() are safe from
 * any thread.
 */
#ifndef CAIRN_CAIRN_H
#define CAIRN_CAIRN_H

#include <stddef.h>
#include <mpi.h>

#include "cairn/cairn_errors.h"
#include "cairn/cairn_version.h"

#if defined(_WIN32)
#define CAIRN_EXPORT
#elif defined(__GNUC__)
#define CAIRN_EXPORT __attribute__((visibility("default")))
#else
#define CAIRN_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: CAIRN_SUCCESS (0) and CAIRN_ERR_* (negative). */
enum cairn_error {
#define CAIRN_X_ENUM(name, value, text) CAIRN_##name = value,
  CAIRN_ERROR_LIST(CAIRN_X_ENUM)
#undef CAIRN_X_ENUM
};

/* Element types of protected regions; the type fixes the element size. */
typedef enum cairn_type {
  CAIRN_BYTE = 0,   /* 1 byte, opaque */
  CAIRN_CHAR = 1,   /* char */
  CAIRN_INT = 2,    /* int */
  CAIRN_INT32 = 3,  /* int32_t */
  CAIRN_INT64 = 4,  /* int64_t */
  CAIRN_UINT32 = 5, /* uint32_t */
  CAIRN_UINT64 = 6, /* uint64_t */
  CAIRN_FLOAT = 7,  /* float */
  CAIRN_DOUBLE = 8, /* double */
  CAIRN_LONG = 9,   /* long */
  CAIRN_COMPLEX_FLOAT = 10, /* float _Complex: two floats (Fortran complex(4), numpy complex64) */
  CAIRN_COMPLEX_DOUBLE = 11 /* double _Complex: two doubles (Fortran complex(8), numpy complex128) */
} cairn_type;

/* Restart sources reported by cairn_restart_level(). */
enum cairn_level {
  CAIRN_LEVEL_NONE = 0, /* no restart happened */
  CAIRN_LEVEL_L1 = 1,   /* node-local cache */
  CAIRN_LEVEL_L2 = 2,   /* rebuilt from redundancy data of other failure groups */
  CAIRN_LEVEL_L3 = 3    /* the parallel file system (prefix) */
};

/* ---- Set-up ------------------------------------------------------------------------------------ */

/* Start cairn on `comm` (duplicated internally; the caller keeps ownership of `comm`).
 * config_path: a TOML config file, or NULL for defaults plus CAIRN_* environment variables
 * (precedence: environment over file over defaults). Collective.
 * Errors: CAIRN_ERR_CONFIG (unknown knob, bad value; detail in cairn_last_error()),
 * CAIRN_ERR_IO (cache or prefix directory not usable), CAIRN_ERR_ALREADY_INITIALIZED. */
CAIRN_EXPORT int cairn_init(MPI_Comm comm, const char *config_path);

/* Wait for all background work, flush the newest version to L3 if the policy asks for it
 * (flush_on_finalize), release resources. Cache contents stay for a later restart. Collective. */
CAIRN_EXPORT int cairn_finalize(void);

/* ---- Memory API -------------------------------------------------------------------------------- */

/* Register (or update) the named region [ptr, ptr + count * sizeof(type)). The memory stays owned
 * by the caller and must stay valid until unprotected or finalize. Protecting an existing name again
 * updates its pointer, count and type. `name` is at most 255 bytes. Local (not collective). */
CAIRN_EXPORT int cairn_protect(const char *name, void *ptr, size_t count, cairn_type type);

/* Forget the named region. Errors: CAIRN_ERR_UNKNOWN_REGION. Local. */
CAIRN_EXPORT int cairn_unprotect(const char *name);

/* Take a new version of every protected region. Returns once the node-local (L1) snapshot is taken:
 * the application may change its memory right away. L2 redundancy and the L3 flush proceed in the
 * background. Collective. */
CAIRN_EXPORT int cairn_checkpoint(void);

/* Block until the newest version has reached every level its policy asks for (protected at L2; and
 * flushed at L3 when it is a flush version). Collective. */
CAIRN_EXPORT int cairn_wait(void);

/* *available = 1 and *version = the newest version that can be rebuilt completely, or *available = 0
 * when there is no checkpoint at all. `version` may be NULL. The answer comes from what every rank
 * holds (L1 records, L2 protection, committed L3 versions, their manifests' checksums), without reading
 * the data: cairn_restart() then reads it once, straight into the regions, verifying every chunk as it
 * lands; should a chunk fail then, cairn_restart() restores the next older version that verifies and
 * cairn_restart_level() names it. Checkpoints that exist but cannot be rebuilt (more failures than the
 * redundancy tolerates and nothing usable in L3) are CAIRN_ERR_UNRECOVERABLE, with a message saying per
 * version what was found and what was missing: a silent fresh start would throw the run's progress
 * away. Collective. */
CAIRN_EXPORT int cairn_restart_available(int *available, int *version);

/* Restore every protected region from the newest recoverable version (the one cairn_restart_available()
 * found, when it was called), verified. A protected region whose size differs from the checkpoint's is
 * CAIRN_ERR_SIZE_MISMATCH (nothing is restored then). After an error the regions may hold part of a
 * version; they hold a whole verified version only after a success.
 * Errors: CAIRN_ERR_NO_CHECKPOINT (nothing found), CAIRN_ERR_UNRECOVERABLE (as above). Collective. */
CAIRN_EXPORT int cairn_restart(void);

/* After a restart: the version it came from and the level (enum cairn_level) it was read from.
 * Either pointer may be NULL. Local. */
CAIRN_EXPORT int cairn_restart_level(int *version, int *level);

/* ---- Distributions: restart on another rank count, live redistribution ------------------------ */

/* How a region is spread over the ranks. A region protected with cairn_protect() is PRIVATE. */
typedef enum cairn_dist_kind {
  CAIRN_DIST_PRIVATE = 0,      /* per-rank data: a restart needs the same number of ranks */
  CAIRN_DIST_REPLICATED = 1,   /* the same on every rank: stored once (rank 0's copy) */
  CAIRN_DIST_BLOCK = 2,        /* 1-D array of global_count elements in contiguous pieces; rank r of P
                                  holds global_count/P elements, one more when r < global_count % P */
  CAIRN_DIST_BLOCK_CYCLIC = 3, /* 1-D array dealt in blocks of block_size elements: block j to rank j%P;
                                  a rank stores its blocks in order, contiguously */
  CAIRN_DIST_BLOCK_ROWS = 4,   /* rows x cols array (row-major) split by rows as BLOCK splits elements */
  CAIRN_DIST_BLOCK_COLS = 5    /* rows x cols array split by columns; a rank stores rows x its columns,
                                  row-major */
} cairn_dist_kind;

typedef struct cairn_distribution {
  int kind;            /* cairn_dist_kind */
  size_t global_count; /* BLOCK, BLOCK_CYCLIC: elements of the global array */
  size_t block_size;   /* BLOCK_CYCLIC: elements per block */
  size_t rows, cols;   /* BLOCK_ROWS, BLOCK_COLS: global shape in elements */
} cairn_distribution;

/* Like cairn_protect(), with a distribution: local_count must equal cairn_local_count(dist) on the
 * current communicator (REPLICATED: the whole array on every rank). Such regions can be restarted on
 * another number of ranks and moved by cairn_redistribute(). Local. */
CAIRN_EXPORT int cairn_protect_distributed(const char *name, void *ptr, size_t local_count, cairn_type type,
                                           const cairn_distribution *dist);

/* The number of elements this rank holds under `dist` on cairn's current communicator: what to
 * allocate before cairn_restart() on a new rank count, or after cairn_redistribute(). Local. */
CAIRN_EXPORT int cairn_local_count(const cairn_distribution *dist, size_t *count);

/* Called by cairn_restart() and cairn_redistribute() when a distributed region's local count changes:
 * return a buffer of at least new_count elements (it becomes the region's pointer; the old one is not
 * freed by cairn), or NULL to fail with CAIRN_ERR_NO_MEMORY. */
typedef void *(*cairn_resize_fn)(const char *name, size_t new_count, void *user_data);

/* Register a resize callback for a protected region (NULL removes it). Without one, a region whose
 * local count would change is CAIRN_ERR_SIZE_MISMATCH. Local. */
CAIRN_EXPORT int cairn_set_resize(const char *name, cairn_resize_fn fn, void *user_data);

/* Move every distributed region from the layout over cairn's current communicator to the layout over
 * new_comm, and make new_comm cairn's communicator. Collective over the larger of the two
 * communicators, which must contain the other:
 *  - growing (new_comm from MPI_Comm_spawn + MPI_Intercomm_merge): every process of new_comm calls it;
 *    processes new to the job first call cairn_init(MPI_COMM_SELF, ...) and protect their regions
 *    (count 0 is fine) with resize callbacks;
 *  - shrinking (new_comm from MPI_Comm_split): every process of the current communicator calls it,
 *    those leaving with new_comm = MPI_COMM_NULL; they hand their data over and leave cairn
 *    finalized (later calls return CAIRN_ERR_NOT_INITIALIZED).
 * PRIVATE regions cannot change rank count (CAIRN_ERR_NOT_SUPPORTED naming the region). Background
 * work is completed first; versions taken before keep their layout and can still be restarted. */
CAIRN_EXPORT int cairn_redistribute(MPI_Comm new_comm);

/* ---- File API (for codes that write their own checkpoint files) ------------------------------- */

/* Path under which to write (during an output) or read (during a restart) the file `name`.
 * Outside an output or restart, returns the path of `name` in the newest restored version if any,
 * else `name` itself. path_out receives a NUL-terminated path of at most len bytes
 * (CAIRN_ERR_TRUNCATED if it does not fit). Local. */
CAIRN_EXPORT int cairn_route_file(const char *name, char *path_out, size_t len);

/* Begin a new version named `label` (may be NULL: "ckpt.<version>"). flags: 0 for now. Files routed
 * until cairn_complete_output() become part of the version, with every protected region. Collective. */
CAIRN_EXPORT int cairn_start_output(const char *label, int flags);

/* End the output begun by cairn_start_output(). The version is kept only if every rank passes
 * valid != 0; otherwise it is discarded everywhere and CAIRN_ERR_INVALID_VERSION is returned.
 * Collective. */
CAIRN_EXPORT int cairn_complete_output(int valid);

/* *available = 1 and the label of the newest recoverable version in label_out, or *available = 0.
 * Collective. */
CAIRN_EXPORT int cairn_have_restart(int *available, char *label_out, size_t len);

/* Load the newest recoverable version: its files become readable through cairn_route_file() and
 * every protected region is restored. label_out (may be NULL) receives its label. Collective. */
CAIRN_EXPORT int cairn_start_restart(char *label_out, size_t len);

/* End the restart begun by cairn_start_restart(). If any rank passes valid == 0 the version is
 * marked bad and the next cairn_have_restart() offers the one before it. Collective. */
CAIRN_EXPORT int cairn_complete_restart(int valid);

/* Which versions cairn_delete_versions() deletes (bit flags). */
enum cairn_delete_flags {
  CAIRN_DELETE_LABELLED = 1, /* every version whose label is `label` */
  CAIRN_DELETE_NEWER = 2     /* every version newer than the newest one labelled `label` */
};

/* Delete versions from every level -- each rank's L1 record and L2 data, and the L3 copy -- so that
 * restart no longer offers them. flags: CAIRN_DELETE_LABELLED, CAIRN_DELETE_NEWER or both; with
 * CAIRN_DELETE_NEWER alone the newest version labelled `label` becomes the newest version (what SCR
 * calls making a checkpoint current). Background work is completed first. Version numbers keep growing:
 * the next version is numbered after every version ever taken.
 * Errors: CAIRN_ERR_NO_CHECKPOINT (no version carries the label; nothing deleted), CAIRN_ERR_SEQUENCE
 * (an output or restart is open), CAIRN_ERR_INVALID_ARG. Collective. */
CAIRN_EXPORT int cairn_delete_versions(const char *label, int flags);

/* A directory on the file system of this rank's node-local cache that belongs to the caller: cairn
 * creates it (path_out receives it, NUL-terminated, at most len bytes) and never reads, writes or
 * cleans what is in it; it is lost with the node, like the cache. A file prepared there can be moved or
 * linked into a path from cairn_route_file() without copying its bytes. Local. */
CAIRN_EXPORT int cairn_local_dir(char *path_out, size_t len);

/* ---- Policy ------------------------------------------------------------------------------------ */

/* *flag = 1 when a checkpoint is due: interval_seconds of compute since the last one (interval =
 * fixed) or Daly's optimum from the measured checkpoint cost and mtbf_seconds (interval = auto), or an
 * exit request (halt file, end time, exit_signal) asks for one before the job exits. Collective (all
 * ranks get the same answer). */
CAIRN_EXPORT int cairn_need_checkpoint(int *flag);

/* *flag = 1 when the job should exit now: an exit request was made -- a halt file in the prefix
 * (`cairn halt`: its conditions are in docs/halt.md), the end time (end_time, or Slurm's, minus
 * halt_seconds), or the exit_signal (default SIGUSR1) or SIGTERM caught -- and the version it asked
 * for has been taken (a halt with `immediate` exits without one). Collective (all ranks get the same
 * answer). */
CAIRN_EXPORT int cairn_should_exit(int *flag);

/* ---- Service mode ------------------------------------------------------------------------------ */

/* Service mode with dynamic agents (the controller's --scale-agents, docs/service.md "Dynamic agents"):
 * the controller may give this rank another agent when it scales the application's agents. The rank
 * takes the new agent between versions only: at the next version it hands over (before that version
 * goes out), or earlier, at a point of the application's choosing, when it calls this (if a version is
 * in flight, as soon as that version is durable). *changed = 1 when this rank's agent is another than at
 * the previous call (a scaling change, or the replacement of a lost agent). Local (each rank answers for
 * itself; not collective); without service mode *changed is always 0. Waits at most a second. */
CAIRN_EXPORT int cairn_probe_agents(int *changed);

/* ---- Errors ------------------------------------------------------------------------------------ */

/* Static description of an error code; never NULL. Thread-safe. */
CAIRN_EXPORT const char *cairn_strerror(int code);

/* The calling thread's last error in detail (call, rank, path, errno, level), or "" if none.
 * Valid until the thread's next cairn call. Thread-safe. */
CAIRN_EXPORT const char *cairn_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_CAIRN_H */
