// cairn-bench --scr / --interpose: what a code that writes its own checkpoint files waits for, through
// the SCR-compatible library (bindings/scr) and through the LD_PRELOAD interposer (bindings/interpose),
// beside the same bytes written by the code itself to node-local files and to the file system with
// fsync, and beside the memory API's blocking copy -- all in one run (docs/performance.md, "Files: SCR and
// the interposer"). Kept apart from cairn_bench.cpp: its own MPI jobs, its own report.
#pragma once

#include <cstdint>
#include <string>

#include "options.hpp"

namespace cairn::bench {

// The common options (bench.hpp; prefix_base: the "file system" of the fsync'ed write and the prefix;
// cache_dir: node-local storage, the plain write's and cairn's cache) with the levels' defaults.
struct FileModeOptions : CommonOptions {
  bool scr = false, interpose = false, file_api = false;
  std::string interpose_lib;  // "" : found beside the library or in the build tree
  std::string child_dir, child_job, child_stage;  // a rank's (--child-*: the parent passes them on)
};

// The parent (starts the MPI jobs, prints the report) or, under CAIRN_BENCH_CHILD=1, one rank.
int run_file_modes(const FileModeOptions& o, int argc, char** argv);

}  // namespace cairn::bench
