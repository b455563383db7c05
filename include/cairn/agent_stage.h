/* cairn agent stage plugins: what a checkpoint-service agent does with a version, beyond the built-in
 * stages (verify, compress, write), without touching the daemons. docs/service.md, "Agent plugins".
 *
 * A plugin is a shared object that exports one C function, cairn_agent_stage(), returning a static
 * description of the stage. The controller names it in an application's chain
 * (`--chain NAME=verify,write,plugin:/abs/path/libmine.so:ARG`); each agent of that application loads
 * it (dlopen) when it starts, and then, for every version of every rank it moves:
 *
 *   state = begin(&version, err, err_len)     NULL: the version fails, err says why
 *   data(state, offset, bytes, len, ...)      the rank's stream bytes, in stream order, each byte once
 *   finish(state, ...)  or  abort(state)      exactly one of them; both release `state`
 *
 * The bytes are the version's stream as the application's restart reads it (uncompressed, whatever the
 * chain stores), and every byte has passed the `verify` stage before the plugin sees it -- except that a
 * checksum chunk is checked when its last byte arrives: when it fails, abort() follows bytes the plugin
 * has already seen. So a plugin makes its output count only in finish() (write to a temporary name and
 * rename there, as the L3 writer does). A non-zero return of data() or finish() fails the version: the
 * rank's embedded flusher then writes it (its L3 copy is never lost), and no manifest is written by the
 * agent. Calls come from one thread of the agent, one version at a time; a plugin needs no locking of
 * its own. It runs as the service's user.
 */
#ifndef CAIRN_AGENT_STAGE_H
#define CAIRN_AGENT_STAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CAIRN_AGENT_STAGE_ABI 1

/* One version of one rank, as the stage sees it at begin(). Strings are NUL-terminated and live until
 * finish() or abort() returns. */
struct cairn_stage_version {
  const char* application; /* the application's name */
  const char* prefix;      /* its L3 prefix (absolute) */
  const char* version_dir; /* the version directory's name under the prefix (e.g. "v00000004") */
  uint64_t version;
  uint32_t rank, nranks;
  uint64_t total_size;     /* the stream's bytes */
  uint32_t chunk_size;     /* the manifest's checksum chunk */
  const char* manifest;    /* the rank's manifest, byte for byte as L3 stores it (rank-<r>.manifest) */
  size_t manifest_len;
  const char* arg;         /* the text after the plugin's path in the chain ("" when none) */
};

struct cairn_agent_stage {
  uint32_t abi; /* CAIRN_AGENT_STAGE_ABI */
  const char* name;
  void* (*begin)(const struct cairn_stage_version* v, char* err, size_t err_len);
  int (*data)(void* state, uint64_t offset, const void* bytes, size_t len, char* err, size_t err_len);
  int (*finish)(void* state, char* err, size_t err_len);
  void (*abort)(void* state);
};

/* The one symbol a plugin exports (visible even when the plugin is built with -fvisibility=hidden). */
#if defined(__GNUC__)
#define CAIRN_AGENT_STAGE_EXPORT __attribute__((visibility("default")))
#else
#define CAIRN_AGENT_STAGE_EXPORT
#endif
CAIRN_AGENT_STAGE_EXPORT const struct cairn_agent_stage* cairn_agent_stage(void);
typedef const struct cairn_agent_stage* (*cairn_agent_stage_fn)(void);
#define CAIRN_AGENT_STAGE_SYMBOL "cairn_agent_stage"

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_AGENT_STAGE_H */
