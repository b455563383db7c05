// cairn-bench --scr / --interpose: what a code that writes its own checkpoint files waits for, through
// the SCR-compatible library (bindings/scr) and through the LD_PRELOAD interposer (bindings/interpose),
// beside the same bytes written by the code itself to node-local files and to the file system with
// fsync, and beside the memory API's blocking copy -- all in one run (docs/performance.md, "Files: SCR and
// the interposer"). Kept apart from cairn_bench.cpp: its own MPI jobs, its own report.
#pragma once

#include <cstdint>
#include <string>

namespace cairn::bench {

struct FileModeOptions {
  bool scr = false, interpose = false, file_api = false;
  int ranks = 2;
  uint64_t size = 0;  // bytes per rank
  std::string size_text;
  int reps = 5;
  std::string prefix_base = "/tmp";   // the "file system" of the fsync'ed write, and the prefix
  std::string cache_dir = "/dev/shm";  // node-local storage: the plain write and cairn's cache
  std::string interpose_lib;           // "" : found beside the library or in the build tree
  bool json = false, verbose = false;
};

// The parent (starts the MPI jobs, prints the report) or, under CAIRN_BENCH_CHILD=1, one rank.
int run_file_modes(const FileModeOptions& o, int argc, char** argv);

}  // namespace cairn::bench
