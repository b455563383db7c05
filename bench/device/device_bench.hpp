// cairn-bench --device (device_bench.cpp): checkpoint and restart of GPU memory beside the bare pinned
// copies of the same bytes. Its options come from cairn-bench's one command line (main.cpp).
#pragma once

#include <string>
#include <vector>

namespace bench_device {

struct Options {
  std::vector<std::string> sizes{"1G", "8G"};  // bytes of device memory, one measurement each
  int reps = 3;                                // timed repetitions, the median reported
  std::string cache_dir = "/dev/shm";
  std::string prefix = "/tmp";                 // where the work directory goes
  std::string driver = "libcuda.so.1";         // the CUDA driver library
  bool json = false;
};

// One process per GPU (MPI is initialized here, not launched). Returns the exit status: 0, 1 when a
// CUDA or cairn call fails, 2 when the driver cannot be loaded, sees no GPU, or a size is below 4K.
int run(const Options& o);

}  // namespace bench_device
