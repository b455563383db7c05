// cairn-bench --snapshot: what a checkpoint costs the application with snapshot = copy and with
// snapshot = cow, for the same state, beside memcpy measured in the same run (docs/performance.md,
// "Copy-on-write snapshots").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cairn::bench {

struct SnapshotBenchArgs {
  std::vector<uint64_t> sizes;  // bytes of state per rank, measured in turn
  int reps = 5;
  std::string cache_dir;        // the L1 cache's base
  std::string work_dir;         // the run's work directory (the L3 prefix goes inside)
  std::string job;              // the cache's job name (the parent removes <cache_dir>/cairn-<job>)
  bool json = false;
  bool verbose = false;         // pass the library's info lines on
};

// One rank's part (MPI initialized, every rank its own simulated node); rank 0 prints the report.
void run_snapshot_child(const SnapshotBenchArgs& args);

}  // namespace cairn::bench
