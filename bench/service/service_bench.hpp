// cairn-bench --service: service mode beside the embedded flusher and a synchronous write (docs/performance.md,
// "Service mode"). The parent (service_bench.cpp) starts a cairnd controller and manager on 127.0.0.1,
// runs the measuring MPI job (service_bench_child.cpp) and stops the daemons; the job's rank 0 prints the
// JSON object. Entered from cairn_bench.cpp's main when --service is on the command line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cairn_bench_service {

struct Options {
  int ranks = 2;
  std::string size_text = "64M";
  uint64_t size = 0;
  int reps = 3;
  std::string prefix_base = "/tmp";
  std::string cache_dir = "/dev/shm";
  std::string cairnd;          // the cairnd executable (default: beside cairn-bench, or in PATH)
  std::string provider = "tcp;ofi_rxm";
  bool json = false;
  bool verbose = false;
  // --placement (service_placement.cpp)
  int versions = 12;
  double agent_mbs = 200;
  int child_app = -1;
  // Set by the parent for the MPI job.
  std::string child_dir, child_service;
};

// The parent's helpers (service_bench.cpp).
// Starts args (PATH searched); with `log`, its stdout and stderr are appended there.
pid_t spawn(const std::vector<std::string>& args, const std::string& log = "");
int wait_exit(pid_t pid);
// A file's contents; "" when it cannot be read.
std::string slurp(const std::string& path);
std::string find_cairnd(const std::string& given);
std::string find_cairn(const std::string& cairnd);
std::vector<std::string> words(const char* s);

// --service --placement: the parent (daemons, three jobs per policy, the report) and one application's job.
int run_placement(const Options& o, int argc, char** argv);
int run_placement_child(const Options& o, int argc, char** argv);

// The whole of `cairn-bench --service ...` (parent or child); the exit status.
// --service, or with placement --service --placement; the parent, or under CAIRN_BENCH_CHILD=1 one rank.
int run(Options& o, bool placement, int argc, char** argv);

// The measuring MPI job (service_bench_child.cpp).
int run_child(const Options& o, int argc, char** argv);

}  // namespace cairn_bench_service
