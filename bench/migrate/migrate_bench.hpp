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

#include "options.hpp"

namespace cairn::bench {

// The common options (bench.hpp) with the migration's defaults: 4 ranks of 64 MiB, 3 repetitions.
struct MigrateBenchOptions : CommonOptions {
  MigrateBenchOptions() { ranks = 4, size_text = "64M", size = 64ull << 20, reps = 3; }
  int nodes = 2;
  int buffers = 8;
  uint64_t buffer_size = 8ull << 20;
  std::string cairn;  // the cairn tool; "" : beside cairn-bench (installed) or in the build tree
};

// The parent: the runs, the limits, the report.
int run_migrate_bench(const MigrateBenchOptions& o);
// One rank of the application the parent runs under `cairn run` (cairn-bench --migrate-app).
int run_migrate_app(int argc, char** argv, uint64_t size);

}  // namespace cairn::bench
