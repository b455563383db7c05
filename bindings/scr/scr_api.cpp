// SCR's C API on cairn's public C API (include/cairn/cairn.h). A checkpoint dataset is a cairn version
// built with the file API (its files routed into the node-local cache by their base name); an output
// dataset's files are written beside their final place in the prefix and renamed into place when every
// rank's output is valid (scr_output.hpp); a dataset that is both does both. SCR's parameters become
// cairn's knobs through scr_params.hpp. docs/scr.md says what each call does and where cairn differs.
#include <mpi.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../common/lexical_path.hpp"
#include "cairn/cairn.h"
#include "include/scr.h"
#include "scr_output.hpp"
#include "scr_params.hpp"
#include "scr_state.hpp"

namespace cairn::scr {

State& state() {
  static State s;
  return s;
}

int fail(const char* call, const std::string& why) {
  fprintf(stderr, "SCR: rank %d: %s: %s\n", state().rank, call, why.c_str());
  fflush(stderr);
  return SCR_FAILURE;
}

int fail_cairn(const char* call, int rc) {
  return fail(call, std::string(cairn_strerror(rc)) + ": " + cairn_last_error());
}

// Every rank's `ok`, AND-ed. Collective over the library's communicator.
bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, state().comm);
  return all == 1;
}

void copy_name(const std::string& s, char* out) {
  if (!out) return;
  snprintf(out, SCR_MAX_FILENAME, "%s", s.c_str());
}

[[noreturn]] void exit_after_halt(const char* call) {
  if (state().rank == 0)
    fprintf(stderr, "SCR: %s: a halt condition is active and SCR_HALT_EXIT=1: finalizing and exiting\n", call);
  SCR_Finalize();
  MPI_Finalize();
  exit(0);
}

}  // namespace cairn::scr

using namespace cairn::scr;
namespace paths = cairn::paths;

extern "C" {

int SCR_Init(void) {
  State& st = state();
  if (st.phase != Phase::uninit) return fail("SCR_Init", "called twice (SCR_Init is called once per run)");
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (!up || down) return fail("SCR_Init", "call MPI_Init before SCR_Init");
  MPI_Comm_dup(MPI_COMM_WORLD, &st.comm);
  MPI_Comm_rank(st.comm, &st.rank);

  std::vector<std::string> file_errors;
  std::string file_used;
  Sources sources = process_sources(st.app, &file_errors, &file_used);
  st.mapping = map_parameters(sources);
  const LibrarySettings& lib = st.mapping.library;
  bool verbose = sources.env("SCR_DEBUG") && atoi(sources.env("SCR_DEBUG")) > 0;
  if (st.rank == 0) {
    for (const auto& e : file_errors) fprintf(stderr, "SCR: warning: %s (line skipped)\n", e.c_str());
    for (const auto& w : st.mapping.warnings) fprintf(stderr, "SCR: warning: %s\n", w.c_str());
    if (verbose) {
      if (!file_used.empty()) fprintf(stderr, "SCR: config file %s\n", file_used.c_str());
      for (const auto& n : st.mapping.notes) fprintf(stderr, "SCR: note: %s\n", n.c_str());
      for (const auto& [env, value] : st.mapping.cairn_env)
        fprintf(stderr, "SCR: %s=%s (from %s)\n", env.c_str(), value.c_str(), st.mapping.origin[env].c_str());
    }
  }
  st.enabled = lib.enabled;
  st.output_prefix = paths::absolute(lib.prefix.empty() ? "." : lib.prefix);
  st.last_checkpoint_end = MPI_Wtime();
  if (!st.enabled) {
    if (st.rank == 0 && verbose) fprintf(stderr, "SCR: SCR_ENABLE=0: cairn is not used\n");
    st.phase = Phase::idle;
    return SCR_SUCCESS;
  }

  // SCR's parameters reach cairn_init as CAIRN_* variables (below the user's own), then are removed.
  std::vector<std::string> added;
  for (const auto& [env, value] : st.mapping.cairn_env)
    if (!getenv(env.c_str()) && setenv(env.c_str(), value.c_str(), 0) == 0) added.push_back(env);
  int rc = cairn_init(MPI_COMM_WORLD, nullptr);
  for (const auto& env : added) unsetenv(env.c_str());
  if (rc != CAIRN_SUCCESS) {
    std::string why = std::string(cairn_strerror(rc)) + ": " + cairn_last_error();
    for (const auto& [env, from] : st.mapping.origin) why += "; " + env + " was set from " + from;
    MPI_Comm_free(&st.comm);
    return fail("SCR_Init", why);
  }
  st.phase = Phase::idle;
  if (!lib.current.empty()) {
    rc = cairn_delete_versions(lib.current.c_str(), CAIRN_DELETE_NEWER);
    if (rc != CAIRN_SUCCESS && st.rank == 0)
      fprintf(stderr, "SCR: warning: SCR_CURRENT=%s: %s\n", lib.current.c_str(), cairn_last_error());
  }
  if (lib.halt_exit) {
    int stop = 0;
    if (cairn_should_exit(&stop) == CAIRN_SUCCESS && stop) exit_after_halt("SCR_Init");
  }
  return SCR_SUCCESS;
}

int SCR_Finalize(void) {
  State& st = state();
  if (st.phase == Phase::uninit) return fail("SCR_Finalize", "call SCR_Init before SCR_Finalize");
  if (st.phase == Phase::finalized) return fail("SCR_Finalize", "called twice");
  int result = SCR_SUCCESS;
  if (st.phase == Phase::output) {
    result = fail("SCR_Finalize", "dataset '" + st.out.name + "' was never completed; it is dropped (call "
                  "SCR_Complete_output before SCR_Finalize)");
    SCR_Complete_output(0);
  } else if (st.phase == Phase::restart) {
    result = fail("SCR_Finalize", "call SCR_Complete_restart before SCR_Finalize");
    SCR_Complete_restart(1);
  }
  if (st.enabled) {
    int rc = cairn_finalize();
    if (rc != CAIRN_SUCCESS) result = fail_cairn("SCR_Finalize", rc);
  }
  st.phase = Phase::finalized;
  MPI_Comm_free(&st.comm);
  return result;
}

char* SCR_Get_version(void) {
  static char version[64];
  snprintf(version, sizeof version, "%s (cairn %d.%d.%d)", SCR_VERSION, CAIRN_VERSION_MAJOR, CAIRN_VERSION_MINOR,
           CAIRN_VERSION_PATCH);
  return version;
}

int SCR_Need_checkpoint(int* flag) {
  State& st = state();
  if (!flag) return fail("SCR_Need_checkpoint", "flag is NULL");
  *flag = 0;
  if (st.phase != Phase::idle) return fail("SCR_Need_checkpoint", phase_error(st.phase));
  const LibrarySettings& lib = st.mapping.library;
  ++st.need_checkpoint_calls;
  int need = 0;
  if (st.enabled) {
    int rc = cairn_need_checkpoint(&need);
    if (rc != CAIRN_SUCCESS) return fail_cairn("SCR_Need_checkpoint", rc);
  }
  if (lib.checkpoint_interval > 0 && st.need_checkpoint_calls % lib.checkpoint_interval == 0) need = 1;
  if (!need && lib.checkpoint_overhead > 0) {
    // As SCR: rank 0 decides from the mean checkpoint cost and the time since the last one.
    if (st.rank == 0) {
      if (st.checkpoints_timed == 0) {
        need = 1;
      } else {
        double cost = st.checkpoint_seconds / static_cast<double>(st.checkpoints_timed);
        double since = MPI_Wtime() - st.last_checkpoint_end;
        need = cost / (since + cost) * 100.0 < lib.checkpoint_overhead ? 1 : 0;
      }
    }
    MPI_Bcast(&need, 1, MPI_INT, 0, st.comm);
  }
  *flag = need;
  return SCR_SUCCESS;
}

int SCR_Should_exit(int* flag) {
  State& st = state();
  if (!flag) return fail("SCR_Should_exit", "flag is NULL");
  *flag = 0;
  if (st.phase == Phase::uninit || st.phase == Phase::finalized)
    return fail("SCR_Should_exit", phase_error(st.phase));
  if (!st.enabled) return SCR_SUCCESS;
  int rc = cairn_should_exit(flag);
  return rc == CAIRN_SUCCESS ? SCR_SUCCESS : fail_cairn("SCR_Should_exit", rc);
}

int SCR_Have_restart(int* flag, char* name) {
  State& st = state();
  if (!flag) return fail("SCR_Have_restart", "flag is NULL");
  *flag = 0;
  if (name) name[0] = '\0';
  if (st.phase != Phase::idle) return fail("SCR_Have_restart", phase_error(st.phase));
  if (!st.enabled) return SCR_SUCCESS;
  char label[256] = "";
  int rc = cairn_have_restart(flag, label, sizeof label);
  if (rc != CAIRN_SUCCESS) return fail_cairn("SCR_Have_restart", rc);
  if (*flag) {
    copy_name(label, name);
    note_dataset_name(label);
  }
  return SCR_SUCCESS;
}

int SCR_Start_restart(char* name) {
  State& st = state();
  if (name) name[0] = '\0';
  if (st.phase != Phase::idle) return fail("SCR_Start_restart", phase_error(st.phase));
  if (!st.enabled) return fail("SCR_Start_restart", "SCR_ENABLE=0: there is nothing to restart from");
  char label[256] = "";
  int rc = cairn_start_restart(label, sizeof label);
  if (rc == CAIRN_ERR_NO_CHECKPOINT)
    return fail("SCR_Start_restart", std::string("no checkpoint to restart from (ask SCR_Have_restart first): ") +
                                         cairn_last_error());
  if (rc != CAIRN_SUCCESS) return fail_cairn("SCR_Start_restart", rc);
  copy_name(label, name);
  note_dataset_name(label);
  st.phase = Phase::restart;
  return SCR_SUCCESS;
}

int SCR_Complete_restart(int valid) {
  State& st = state();
  if (st.phase != Phase::restart) return fail("SCR_Complete_restart", "call SCR_Start_restart before SCR_Complete_restart");
  st.phase = Phase::idle;
  st.last_checkpoint_end = MPI_Wtime();
  int rc = cairn_complete_restart(valid);
  if (rc == CAIRN_ERR_INVALID_VERSION) return SCR_FAILURE;  // SCR_Have_restart offers the one before
  return rc == CAIRN_SUCCESS ? SCR_SUCCESS : fail_cairn("SCR_Complete_restart", rc);
}

int SCR_Start_checkpoint(void) { return SCR_Start_output(nullptr, SCR_FLAG_CHECKPOINT); }
int SCR_Complete_checkpoint(int valid) { return SCR_Complete_output(valid); }

const char* SCR_Configf(const char* format, ...) {
  if (!format) return SCR_Config(nullptr);
  va_list args;
  va_start(args, format);
  int size = vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (size < 0) {
    fail("SCR_Configf", "the format cannot be printed");
    return nullptr;
  }
  std::string text(static_cast<size_t>(size) + 1, '\0');
  va_start(args, format);
  vsnprintf(text.data(), text.size(), format, args);
  va_end(args);
  return SCR_Config(text.c_str());
}

const char* SCR_Config(const char* config) {
  State& st = state();
  if (!config || !*config) return nullptr;
  std::string error;
  auto req = parse_config_request(config, &error);
  if (!req) {
    fail("SCR_Config", error);
    return nullptr;
  }
  if (req->op == ConfigRequest::Op::query) {
    std::vector<std::string> ignored;
    std::string file;
    Sources s = process_sources(st.app, &ignored, &file);
    auto v = lookup(s, req->setting.key, req->setting.value, req->query_child);
    return v ? strdup(v->c_str()) : nullptr;
  }
  if (st.phase != Phase::uninit) {
    fail("SCR_Config", std::string("'") + config + "': parameters are set before SCR_Init; after it they can only be "
                       "queried");
    return nullptr;
  }
  if (req->op == ConfigRequest::Op::unset) {
    std::erase_if(st.app, [&](const Setting& s) { return s.key == req->setting.key && s.children.empty(); });
    return nullptr;
  }
  st.app.push_back(req->setting);
  return nullptr;
}

}  // extern "C"
