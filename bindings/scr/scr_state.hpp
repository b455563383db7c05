// The SCR library's state between calls (one per process), shared by scr_api.cpp (start-up, restart,
// policy, SCR_Config) and scr_dataset.cpp (datasets, files, dataset management).
#pragma once

#include <mpi.h>

#include <map>
#include <string>
#include <vector>

#include "scr_params.hpp"

namespace cairn::scr {

// SCR's states: which calls are allowed when.
enum class Phase { uninit, idle, output, restart, finalized };

// A file routed in the current output phase.
struct RoutedFile {
  std::string final_path;  // where SCR's name points (absolute); output files end up here
  std::string routed;      // what SCR_Route_file returned
};

// The dataset between SCR_Start_output and SCR_Complete_output.
struct OpenDataset {
  std::string name;
  bool checkpoint = false, output = false;
  double started = 0;                       // MPI_Wtime at SCR_Start_output
  std::map<std::string, RoutedFile> files;  // by base name (checkpoints) or final path (output only)
};

struct State {
  Phase phase = Phase::uninit;
  bool enabled = true;                // SCR_ENABLE
  std::vector<Setting> app;           // SCR_Config settings, in call order
  Mapping mapping;                    // filled by SCR_Init
  std::string output_prefix;          // absolute SCR_PREFIX, else the working directory at SCR_Init
  MPI_Comm comm = MPI_COMM_NULL;      // the library's own duplicate of MPI_COMM_WORLD
  int rank = 0;
  OpenDataset out;
  long dataset_id = 0;                // for default names scr.dataset.<id>
  // SCR_Need_checkpoint's policy
  long need_checkpoint_calls = 0;
  double last_checkpoint_end = 0;
  double checkpoint_seconds = 0;      // total time of the checkpoints timed
  long checkpoints_timed = 0;
};

State& state();
// Prints "SCR: rank R: call: why" on stderr; returns SCR_FAILURE.
int fail(const char* call, const std::string& why);
// A failed cairn call: its error name and detail.
int fail_cairn(const char* call, int rc);
// Every rank's `ok`, AND-ed (collective over state().comm).
bool all_ranks(bool ok);
// Copy into a caller's SCR_MAX_FILENAME buffer (NULL: nothing).
void copy_name(const std::string& s, char* out);
// Why a call is not allowed in this phase.
std::string phase_error(Phase p);
// A dataset name seen at restart: default names (scr.dataset.<id>) continue after its id.
void note_dataset_name(const std::string& name);
// SCR_HALT_EXIT: finalize cairn and MPI, exit(0).
[[noreturn]] void exit_after_halt(const char* call);

}  // namespace cairn::scr
