// SCR's dataset calls: SCR_Start_output, SCR_Route_file, SCR_Complete_output, and the dataset
// management calls SCR_Current, SCR_Drop and SCR_Delete. How each kind of dataset travels:
//  - checkpoint (SCR_FLAG_CHECKPOINT): a cairn version; SCR_Route_file routes the file's base name with
//    cairn_route_file (node-local cache) and SCR_Complete_output is cairn_complete_output.
//  - output (SCR_FLAG_OUTPUT): each file is written beside its final path under a partial name and
//    renamed into place once every rank's output is valid (and, for a checkpoint, once cairn kept it).
//  - neither flag: the files go to the node-local cache and are deleted at completion.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/lexical_path.hpp"
#include "../common/whole_file.hpp"
#include "cairn/cairn.h"
#include "include/scr.h"
#include "scr_output.hpp"
#include "scr_state.hpp"

namespace cairn::scr {

std::string phase_error(Phase p) {
  switch (p) {
    case Phase::uninit: return "call SCR_Init first";
    case Phase::finalized: return "SCR_Finalize was called";
    case Phase::output: return "an output is open (call SCR_Complete_output first)";
    case Phase::restart: return "a restart is open (call SCR_Complete_restart first)";
    case Phase::idle: break;
  }
  return "not allowed now";
}

void note_dataset_name(const std::string& name) {
  long id = 0;
  if (sscanf(name.c_str(), "scr.dataset.%ld", &id) == 1 && id > state().dataset_id) state().dataset_id = id;
}

namespace {

// The node-local directory for files of a dataset that is neither a checkpoint nor output.
std::string scratch_dir() {
  char dir[4096];
  if (cairn_local_dir(dir, sizeof dir) != CAIRN_SUCCESS) return "";
  return std::string(dir) + "/scr-scratch";
}

// The files of an output dataset: rank 0 gathers every rank's list and writes the index.
std::string write_output_index(const std::string& name, const std::vector<std::string>& mine) {
  State& st = state();
  std::string packed;
  for (const auto& f : mine) packed += f + '\0';
  int len = static_cast<int>(packed.size()), nranks = 0;
  MPI_Comm_size(st.comm, &nranks);
  std::vector<int> lens(static_cast<size_t>(nranks)), displs(static_cast<size_t>(nranks));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, st.comm);
  std::string all;
  if (st.rank == 0) {
    int total = 0;
    for (int r = 0; r < nranks; ++r) displs[r] = total, total += lens[r];
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(packed.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, st.comm);
  if (st.rank != 0) return "";
  std::vector<std::string> files;
  for (size_t i = 0; i < all.size();) {
    size_t z = all.find('\0', i);
    files.push_back(all.substr(i, z - i));
    i = z + 1;
  }
  return write_file_atomic(index_path(st.output_prefix, name), encode_index(files));
}

// Rank 0 reads the index of output dataset `name`; every rank learns whether it exists.
bool read_output_index(const std::string& name, std::vector<std::string>* files, std::string* why) {
  State& st = state();
  int found = 0;
  if (st.rank == 0) {
    std::string path = index_path(st.output_prefix, name);
    if (auto bytes = files::read_whole_file(path)) {
      auto decoded = decode_index(*bytes);
      if (decoded) *files = *decoded, found = 1;
      else *why = path + ": not an output index; left alone";
    }
  }
  MPI_Bcast(&found, 1, MPI_INT, 0, st.comm);
  return found == 1;
}

// SCR_Drop and SCR_Delete: cairn's versions of that name, and the output index (with its files).
int forget_dataset(const char* call, const char* name, bool remove_files_too) {
  State& st = state();
  if (!name || !*name) return fail(call, "name is NULL or empty");
  if (st.phase != Phase::idle) return fail(call, phase_error(st.phase));
  if (!st.enabled) return SCR_SUCCESS;
  int rc = cairn_delete_versions(name, CAIRN_DELETE_LABELLED);
  if (rc != CAIRN_SUCCESS && rc != CAIRN_ERR_NO_CHECKPOINT) return fail_cairn(call, rc);
  std::vector<std::string> files;
  std::string why;
  bool output = read_output_index(name, &files, &why);
  if (st.rank == 0 && !why.empty()) fprintf(stderr, "SCR: warning: %s: %s\n", call, why.c_str());
  if (output && st.rank == 0) {
    if (remove_files_too)
      for (const auto& e : remove_files(files, st.output_prefix))
        fprintf(stderr, "SCR: warning: %s('%s'): %s\n", call, name, e.c_str());
    std::string index = index_path(st.output_prefix, name);
    if (unlink(index.c_str()) != 0) fprintf(stderr, "SCR: warning: %s: unlink(%s) failed\n", call, index.c_str());
  }
  MPI_Barrier(st.comm);  // every rank returns once the files are gone
  if (rc == CAIRN_ERR_NO_CHECKPOINT && !output) return fail(call, std::string("no dataset is named '") + name + "'");
  return SCR_SUCCESS;
}

}  // namespace
}  // namespace cairn::scr

using namespace cairn::scr;
namespace paths = cairn::paths;

extern "C" {

int SCR_Start_output(const char* name, int flags) {
  State& st = state();
  if (st.phase != Phase::idle) return fail("SCR_Start_output", phase_error(st.phase));
  if (flags & ~(SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT))
    return fail("SCR_Start_output", "flags " + std::to_string(flags) +
                                        ": use SCR_FLAG_CHECKPOINT, SCR_FLAG_OUTPUT or both");
  ++st.dataset_id;
  std::string label = name ? name : "scr.dataset." + std::to_string(st.dataset_id);
  if (label.empty() || label.size() > 255)
    return fail("SCR_Start_output", "a dataset name has 1 to 255 bytes in cairn (got " + std::to_string(label.size()) +
                                        ")");
  st.out = OpenDataset{};
  st.out.name = label;
  st.out.checkpoint = flags & SCR_FLAG_CHECKPOINT;
  st.out.output = flags & SCR_FLAG_OUTPUT;
  st.out.started = MPI_Wtime();
  if (st.enabled && st.out.checkpoint) {
    int rc = cairn_start_output(label.c_str(), 0);
    if (rc != CAIRN_SUCCESS) return fail_cairn("SCR_Start_output", rc);
  }
  if (!st.out.checkpoint && !st.out.output && st.rank == 0)
    fprintf(stderr, "SCR: warning: SCR_Start_output('%s', SCR_FLAG_NONE): the dataset is neither a checkpoint nor "
            "output; its files are dropped at SCR_Complete_output\n", label.c_str());
  st.phase = Phase::output;
  return SCR_SUCCESS;
}

int SCR_Route_file(const char* name, char* file) {
  State& st = state();
  if (!name || !*name || !file) return fail("SCR_Route_file", "name or file is NULL or empty");
  if (strlen(name) >= SCR_MAX_FILENAME)
    return fail("SCR_Route_file", "name longer than SCR_MAX_FILENAME - 1 bytes");
  if ((st.phase != Phase::output && st.phase != Phase::restart) || !st.enabled) {
    copy_name(name, file);  // outside a phase SCR hands the name back unchanged
    return SCR_SUCCESS;
  }
  const std::string full = paths::absolute(name);
  const std::string base = paths::base_name(full);
  if (base.empty() || base.size() > 255) return fail("SCR_Route_file", std::string("'") + name + "' names no file");
  char routed[SCR_MAX_FILENAME];
  if (st.phase == Phase::restart) {
    int rc = cairn_route_file(base.c_str(), routed, sizeof routed);
    if (rc != CAIRN_SUCCESS) return fail_cairn("SCR_Route_file", rc);
    if (access(routed, R_OK) != 0) return fail("SCR_Route_file", std::string(routed) + ": " + strerror(errno));
    copy_name(routed, file);
    return SCR_SUCCESS;
  }
  OpenDataset& d = st.out;
  if (d.output && !paths::is_under(full, st.output_prefix))
    return fail("SCR_Route_file", full + " is not under the prefix " + st.output_prefix + " (SCR_PREFIX)");
  std::string key = d.checkpoint ? base : full;
  if (auto it = d.files.find(key); it != d.files.end()) {
    if (it->second.final_path != full)
      return fail("SCR_Route_file", full + " and " + it->second.final_path + " have the same file name; a rank's "
                  "files of one checkpoint need different names");
    copy_name(it->second.routed, file);
    return SCR_SUCCESS;
  }
  RoutedFile f;
  f.final_path = full;
  // An output file's directory is made now, as SCR does, so a failure shows here.
  std::string err = d.output ? make_dirs(paths::dir_name(full)) : "";
  if (d.checkpoint) {
    int rc = cairn_route_file(base.c_str(), routed, sizeof routed);
    if (rc != CAIRN_SUCCESS) return fail_cairn("SCR_Route_file", rc);
    f.routed = routed;
  } else if (d.output) {
    f.routed = partial_path(full, st.rank);
  } else {
    std::string dir = scratch_dir();
    if (dir.empty()) return fail_cairn("SCR_Route_file", CAIRN_ERR_IO);
    f.routed = dir + "/" + base;
    err = make_dirs(dir);
  }
  if (!err.empty()) return fail("SCR_Route_file", err);
  if (f.routed.size() >= SCR_MAX_FILENAME) return fail("SCR_Route_file", f.routed + ": longer than SCR_MAX_FILENAME");
  copy_name(f.routed, file);
  d.files.emplace(key, std::move(f));
  return SCR_SUCCESS;
}

int SCR_Complete_output(int valid) {
  State& st = state();
  if (st.phase != Phase::output) return fail("SCR_Complete_output", "call SCR_Start_output before SCR_Complete_output");
  st.phase = Phase::idle;
  OpenDataset d = std::move(st.out);
  st.out = OpenDataset{};
  if (!st.enabled) return all_ranks(valid != 0) ? SCR_SUCCESS : SCR_FAILURE;

  bool ok = valid != 0;
  std::string why = ok ? "" : "this rank passed valid=0";
  std::vector<std::string> partials;  // output files waiting for the verdict
  if (d.output) {
    bool all = all_ranks(ok);  // copy nothing for a dataset that is invalid anyway
    for (const auto& [key, f] : d.files) {
      std::string partial = d.checkpoint ? partial_path(f.final_path, st.rank) : f.routed;
      partials.push_back(partial);
      if (!all || !ok) continue;
      std::string err = d.checkpoint ? copy_file(f.routed, partial) : sync_file(partial);
      if (!err.empty()) ok = false, why = err;
    }
    ok = ok && all;
  }
  bool kept = ok;
  if (d.checkpoint) {
    int rc = cairn_complete_output(ok ? 1 : 0);
    kept = rc == CAIRN_SUCCESS;
    if (!kept && ok) why = std::string(cairn_strerror(rc)) + ": " + cairn_last_error();
  } else {
    kept = all_ranks(ok);
    if (!kept && ok) why = "another rank's output failed";
  }
  if (d.output) {
    std::vector<std::string> finals;
    for (const auto& [key, f] : d.files) finals.push_back(f.final_path);
    for (size_t i = 0; i < partials.size(); ++i) {
      if (!kept) {
        unlink(partials[i].c_str());
      } else if (rename(partials[i].c_str(), finals[i].c_str()) != 0) {
        why = "rename(" + partials[i] + ", " + finals[i] + "): " + strerror(errno);
        kept = false;
      }
    }
    MPI_Barrier(st.comm);  // every rank's files are in place when any rank returns
    if (kept) {
      std::string err = write_output_index(d.name, finals);
      if (!err.empty()) fprintf(stderr, "SCR: warning: output index of '%s': %s\n", d.name.c_str(), err.c_str());
    }
  } else if (!d.checkpoint) {
    for (const auto& [key, f] : d.files) unlink(f.routed.c_str());
  }
  if (d.checkpoint) {
    st.checkpoint_seconds += MPI_Wtime() - d.started;
    ++st.checkpoints_timed;
    st.last_checkpoint_end = MPI_Wtime();
  }
  if (!kept) {
    if (valid != 0 && !why.empty()) fail("SCR_Complete_output", "dataset '" + d.name + "' dropped: " + why);
    return SCR_FAILURE;
  }
  if (d.checkpoint && st.mapping.library.halt_exit) {
    int stop = 0;
    if (cairn_should_exit(&stop) == CAIRN_SUCCESS && stop) exit_after_halt("SCR_Complete_output");
  }
  return SCR_SUCCESS;
}

int SCR_Current(const char* name) {
  State& st = state();
  if (!name || !*name) return fail("SCR_Current", "name is NULL or empty");
  if (st.phase != Phase::idle) return fail("SCR_Current", phase_error(st.phase));
  if (!st.enabled) return SCR_SUCCESS;
  int rc = cairn_delete_versions(name, CAIRN_DELETE_NEWER);
  if (rc == CAIRN_ERR_NO_CHECKPOINT) return fail("SCR_Current", std::string("no checkpoint is named '") + name + "'");
  return rc == CAIRN_SUCCESS ? SCR_SUCCESS : fail_cairn("SCR_Current", rc);
}

int SCR_Drop(const char* name) { return forget_dataset("SCR_Drop", name, false); }
int SCR_Delete(const char* name) { return forget_dataset("SCR_Delete", name, true); }

}  // extern "C"
