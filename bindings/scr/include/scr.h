/* scr.h: the SCR 3.x C API, implemented by cairn (libcairn_scr; `-lscr` through the libscr.so link
 * installed beside it, see docs/scr.md). A code written for LLNL's Scalable Checkpoint/Restart library
 * builds against this header and links against cairn unchanged; its datasets get cairn's levels
 * (node-local cache, redundancy across nodes, background flush, verified restart).
 *
 * Every call returns SCR_SUCCESS or SCR_FAILURE (SCR returns !SCR_SUCCESS, the same 1); a failure
 * prints the reason on standard error, with the rank, and never aborts. Calls are collective over
 * MPI_COMM_WORLD unless stated otherwise, as in SCR. SCR's semantics, return codes and constants are
 * kept; where cairn differs (SCR_Config is local, the dataset name is at most 255 bytes) docs/scr.md
 * says so.
 */
#ifndef SCR_H
#define SCR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SCR_EXPORT __attribute__((visibility("default")))
#else
#define SCR_EXPORT
#endif

/* The SCR API version this header implements. */
#define SCR_MAJOR_VERSION "3"
#define SCR_MINOR_VERSION "1"
#define SCR_PATCH_VERSION "0"
#define SCR_VERSION "v3.1.0"

/* Return codes. SCR's header defines only SCR_SUCCESS; its calls return 1 on failure. */
#define SCR_SUCCESS (0)
#ifndef SCR_FAILURE
#define SCR_FAILURE (1)
#endif

/* Room a caller gives for a file or dataset name returned by SCR, terminating NUL included. */
#define SCR_MAX_FILENAME 1024

/* Dataset flags for SCR_Start_output, OR'd together. */
#define SCR_FLAG_NONE (0 << 0)       /* for initialising variables */
#define SCR_FLAG_CHECKPOINT (1 << 0) /* the job can restart from this dataset */
#define SCR_FLAG_OUTPUT (1 << 1)     /* the dataset's files must reach the prefix directory */

/* ---- Start-up and shut-down ----------------------------------------------------------------- */

/* After MPI_Init: reads SCR's parameters (environment, user config file, SCR_Config) and starts cairn
 * on MPI_COMM_WORLD. Call once. */
SCR_EXPORT int SCR_Init(void);

/* Before MPI_Finalize: waits for background work and flushes the newest checkpoint to the prefix
 * (even with SCR_FLUSH=0, see docs/scr.md). Call once. */
SCR_EXPORT int SCR_Finalize(void);

/* "KEY=VALUE" sets a parameter (before SCR_Init; returns NULL), "KEY=" unsets a value set by an
 * earlier call (returns NULL), "KEY" returns the effective value in a string the caller frees, or
 * NULL when unset. Descriptors as in SCR: "CKPT=0 TYPE=XOR SET_SIZE=8", query "CKPT=0 TYPE".
 * Local in cairn (in SCR a collective with identical strings). */
SCR_EXPORT const char *SCR_Config(const char *config);

/* SCR_Config with printf-style formatting. */
SCR_EXPORT const char *SCR_Configf(const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- Files ----------------------------------------------------------------------------------- */

/* The path (at most SCR_MAX_FILENAME bytes, into `file`) under which to write or read `name`: in an
 * output phase a file in the node-local cache (checkpoints) or beside its final place in the prefix
 * (output-only datasets); in a restart phase the restored file (SCR_FAILURE if the checkpoint has no
 * such file); outside both, `name` itself. Directories are created as needed. Local. */
SCR_EXPORT int SCR_Route_file(const char *name, char *file);

/* ---- Restart --------------------------------------------------------------------------------- */

/* *flag = 1 and the checkpoint's name in `name` (SCR_MAX_FILENAME bytes; may be NULL) when the job
 * can restart from a checkpoint that cairn can rebuild completely, else *flag = 0. */
SCR_EXPORT int SCR_Have_restart(int *flag, char *name);

/* Load the newest recoverable checkpoint; its files become readable through SCR_Route_file. */
SCR_EXPORT int SCR_Start_restart(char *name);

/* End the restart: valid = 0 on any rank rejects the checkpoint, and SCR_Have_restart then offers
 * the one before it. SCR_SUCCESS only when every rank passed valid = 1. */
SCR_EXPORT int SCR_Complete_restart(int valid);

/* ---- Checkpoints (SCR 1.x names, kept) ------------------------------------------------------- */

/* *flag = 1 when a checkpoint is due: SCR_CHECKPOINT_INTERVAL, SCR_CHECKPOINT_SECONDS,
 * SCR_CHECKPOINT_OVERHEAD, or a halt condition (scr_halt's `cairn halt`, the time limit, a signal). */
SCR_EXPORT int SCR_Need_checkpoint(int *flag);

/* SCR_Start_output(NULL, SCR_FLAG_CHECKPOINT). */
SCR_EXPORT int SCR_Start_checkpoint(void);

/* SCR_Complete_output(valid). */
SCR_EXPORT int SCR_Complete_checkpoint(int valid);

/* ---- Output ---------------------------------------------------------------------------------- */

/* Begin a dataset named `name` (NULL: "scr.dataset.<id>"; at most 255 bytes) with `flags`
 * (SCR_FLAG_CHECKPOINT, SCR_FLAG_OUTPUT or both). */
SCR_EXPORT int SCR_Start_output(const char *name, int flags);

/* End the dataset: every file routed since SCR_Start_output is closed. SCR_SUCCESS only when every
 * rank passed valid = 1 and every file was kept; otherwise the dataset is dropped everywhere. */
SCR_EXPORT int SCR_Complete_output(int valid);

/* ---- Datasets -------------------------------------------------------------------------------- */

/* Make the checkpoint `name` the newest: checkpoints taken after it are deleted. */
SCR_EXPORT int SCR_Current(const char *name);

/* Forget the dataset `name`: cairn's copies go, files of an output dataset in the prefix stay. */
SCR_EXPORT int SCR_Drop(const char *name);

/* Delete the dataset `name`: cairn's copies and the files of an output dataset in the prefix. */
SCR_EXPORT int SCR_Delete(const char *name);

/* ---- Environment ----------------------------------------------------------------------------- */

/* A static string naming the SCR API version and cairn's; do not free it. Local. */
SCR_EXPORT char *SCR_Get_version(void);

/* *flag = 1 when the job should exit now (a halt condition, the time limit minus SCR_HALT_SECONDS,
 * a signal), after the checkpoint it asked for. */
SCR_EXPORT int SCR_Should_exit(int *flag);

#ifdef __cplusplus
}
#endif

#endif /* SCR_H */
