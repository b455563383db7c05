// The interposer's checkpoint thread: a thread per rank that owns every cairn call, so the application's
// own threads never block in one. It starts cairn (cairn_init on MPI_COMM_WORLD) and restores the newest
// version the application's files can be rebuilt from; then it reports this rank's steps (vfs.hpp) to
// rank 0's checkpoint thread, which decides when a step is complete on every rank -- every rank has
// closed every file of the step it opened, and has committed at least CAIRN_INTERPOSE_FILES of them --
// and tells every rank's thread to take it as a version (the same cairn collectives in the same order on
// every rank). At MPI_Finalize the last complete step is taken and cairn is finalized
// (docs/interpose.md). Not an agent: the service's agents (src/service/agent) are processes of cairnd.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

namespace cairn::interpose {

struct Settings {
  std::string pattern;     // CAIRN_INTERPOSE_PATTERN
  int files_per_rank = 1;  // CAIRN_INTERPOSE_FILES: files a rank commits per step
  int keep = 2;            // CAIRN_INTERPOSE_KEEP: steps whose files stay visible
  bool prefault = true;    // CAIRN_INTERPOSE_PREFAULT: prepare the space of the next generation
  int settle_ms = 100;     // CAIRN_INTERPOSE_SETTLE_MS: quiet time before a step not shaped like the last is taken
  bool verbose = false;    // CAIRN_LOG=info|debug
};

// The settings from the environment; nullopt when the interposer is off (no pattern), with *error set
// when a variable is set but wrong.
std::optional<Settings> settings_from_env(std::string* error);

// Called from the MPI_Init/MPI_Init_thread wrappers once MPI is up (`provided`: the thread level):
// returns when the application's files are in place, or the interposer stays off (with a message).
void start_checkpoint_thread(int provided);
// Called from the MPI_Finalize wrapper before MPI is finalized.
void finish_checkpoint_thread();

}  // namespace cairn::interpose
