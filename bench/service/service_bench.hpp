// cairn-bench --service: service mode beside the embedded flusher and a synchronous write (docs/performance.md,
// "Service mode"). The parent (service_bench.cpp) starts a cairnd controller and manager on 127.0.0.1,
// runs the measuring MPI job (service_bench_child.cpp) and stops the daemons; the job's rank 0 prints the
// JSON object. Entered from cairn_bench.cpp's main when --service is on the command line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "options.hpp"

namespace cairn::bench {

// The common options (bench.hpp) with the service's defaults: 64 MiB per rank, 3 repetitions.
struct ServiceOptions : CommonOptions {
  ServiceOptions() { size_text = "64M", reps = 3; }
  std::string cairnd;          // the cairnd executable (default: beside cairn-bench, or in PATH)
  std::string provider = "tcp;ofi_rxm";
  // --placement (service_placement.cpp)
  int versions = 12;
  double agent_mbs = 200;
  int child_app = -1;
  // Set by the parent for the MPI job.
  std::string child_dir, child_service;
};

// --service --placement: the parent (daemons, three jobs per policy, the report) and one application's job.
int run_placement(const ServiceOptions& o, int argc, char** argv);
int run_placement_child(const ServiceOptions& o, int argc, char** argv);

// The whole of `cairn-bench --service ...` (parent or child); the exit status.
// --service, or with placement --service --placement; the parent, or under CAIRN_BENCH_CHILD=1 one rank.
int run_service(ServiceOptions& o, bool placement, int argc, char** argv);

// The measuring MPI job (service_bench_child.cpp).
int run_service_child(const ServiceOptions& o, int argc, char** argv);

}  // namespace cairn::bench
