// cairn-bench --device (device_bench.cpp): checkpoint and restart of GPU memory beside the bare pinned
// copies of the same bytes. Its options come from cairn-bench's one command line (main.cpp).
#pragma once

#include <string>
#include <vector>

#include "options.hpp"

namespace cairn::bench {

// The common options (bench.hpp; ranks unused: one process) with the device's defaults: 3 repetitions,
// and a list of sizes.
struct DeviceOptions : CommonOptions {
  DeviceOptions() { reps = 3; }
  std::vector<std::string> sizes{"1G", "8G"};  // bytes of device memory, one measurement each
  std::string driver = "libcuda.so.1";         // the CUDA driver library
};

// One process per GPU (MPI is initialized here, not launched). Returns the exit status: 0, 1 when a
// CUDA or cairn call fails, 2 when the driver cannot be loaded, sees no GPU, or a size is below 4K.
int run_device(const DeviceOptions& o);

}  // namespace cairn::bench
