// cairn-bench --migrate (docs/performance.md, "Process migration"): what it costs a job to leave a node,
// three ways, each repeated, in one run: `cairn migrate` moving the node's snapshots between the two
// caches of this machine (the one-host path), the same over libfabric (a reader on the node, a writer on
// the spare: the path between real hosts), and a halt followed by a restart from L3 with every cache gone.
// Beside them, the machine's limits for each path measured in the same run: a plain read/write copy of the
// same bytes on the cache's file system, a TCP stream of the same bytes over the loopback written into a
// file of the cache's file system as it arrives (what the tcp provider runs on, and what the writer does),
// and the write and read of the job's state on the prefix's file system.
#pragma once

#include <cstdint>
#include <string>

namespace cairn::bench {

struct MigrateBenchOptions {
  int ranks = 4;
  int nodes = 2;
  uint64_t size = 64ull << 20;  // bytes of state per rank
  int reps = 3;
  int buffers = 8;
  uint64_t buffer_size = 8ull << 20;
  std::string prefix_base = "/tmp";
  std::string cache_dir = "/dev/shm";
  std::string cairn;  // the cairn tool; "" : beside cairn-bench (installed) or in the build tree
  bool json = false, verbose = false;
};

// The parent: the runs, the limits, the report.
int run_migrate_bench(const MigrateBenchOptions& o);
// One rank of the application the parent runs under `cairn run` (cairn-bench --migrate-app).
int run_migrate_app(int argc, char** argv, uint64_t size);

}  // namespace cairn::bench
