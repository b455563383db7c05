// The CUDA driver API, loaded at run time: cairn has no build-time CUDA dependency. Driver::load
// dlopens the library (libcuda.so.1 by default; the cuda_driver knob names another, which the tests use
// for their simulated driver, tests/device/fake_cuda.cpp), looks up every function of the table in
// device/cuda_driver.h, and calls cuInit. What cairn asks of the driver, and what it keeps (one stream,
// pinned L1 slots), is in docs/gpu.md.
#pragma once

#include <memory>
#include <string>

#include "base/status.hpp"
#include "device/cuda_driver.h"

namespace cairn::device {

// The driver's functions: one pointer per entry of CAIRN_CUDA_FUNCTIONS.
struct Api {
#define CAIRN_CUDA_MEMBER(name, symbol, params) cairn_cu_##name##_t name = nullptr;
  CAIRN_CUDA_FUNCTIONS(CAIRN_CUDA_MEMBER)
#undef CAIRN_CUDA_MEMBER
};

class Driver {
 public:
  // dlopen `path`, resolve the table, cuInit(0). ERR_NOT_SUPPORTED naming the library and dlerror() (or the
  // missing symbol, or cuInit's error) when it cannot be used.
  static Result<std::unique_ptr<Driver>> load(const std::string& path);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  const Api& api() const { return api_; }
  const std::string& path() const { return path_; }
  int devices() const { return devices_; }  // cuDeviceGetCount after cuInit (0: none)
  // ERR_IO "call: CUDA error N (CUDA_ERROR_...: text)" unless rc is CUDA_SUCCESS.
  Status check(CUresult rc, const char* call) const;
  std::string error_text(CUresult rc) const;

 private:
  Driver() = default;
  void* handle_ = nullptr;
  std::string path_;
  Api api_;
  int devices_ = 0;
};

// The process's driver: loaded at the first call for a path and kept until the process ends (a
// library's CUDA state must outlive every pinned slot and stream). `path` "off" or "" means none:
// ERR_NOT_SUPPORTED. A failed load is remembered and returned again without another try.
Result<Driver*> process_driver(const std::string& path);

// What the driver says of a pointer to `bytes` bytes.
struct PointerInfo {
  bool device = false;      // device memory (cuMemAlloc, cudaMalloc, a framework's allocator)
  CUcontext context = nullptr;
  int ordinal = -1;
  uint64_t range_start = 0, range_size = 0;  // the allocation that holds it
};
// Device memory (not managed memory, which the host reads itself) is `device`; memory the driver does
// not know, or host memory it registered, is not. A device pointer whose allocation ends before
// ptr + bytes is ERR_INVALID_ARG.
Result<PointerInfo> classify(const Driver& driver, const void* ptr, uint64_t bytes);

// Whether the host can read the first and the last byte of [ptr, ptr + bytes) (no fault: the kernel
// answers). Device memory of a driver cairn could not load, and freed memory, read as false.
bool host_readable(const void* ptr, uint64_t bytes);

// Make `context` current on the calling thread (when it is not already).
Status make_current(const Driver& driver, CUcontext context);

}  // namespace cairn::device
