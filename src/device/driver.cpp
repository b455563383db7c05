#include "device/driver.hpp"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>

namespace cairn::device {

Driver::~Driver() {
  // The library stays loaded: a driver's state must not go away under pinned memory or streams that
  // other objects of the process may still hold.
}

std::string Driver::error_text(CUresult rc) const {
  const char* text = nullptr;
  if (api_.cuGetErrorString && api_.cuGetErrorString(rc, &text) == CUDA_SUCCESS && text)
    return "CUDA error " + std::to_string(rc) + " (" + text + ")";
  return "CUDA error " + std::to_string(rc);
}

Status Driver::check(CUresult rc, const char* call) const {
  if (rc == CUDA_SUCCESS) return Status::ok();
  return make_error(Code::ERR_IO, "%s: %s", call, error_text(rc).c_str());
}

Result<std::unique_ptr<Driver>> Driver::load(const std::string& path) {
  std::unique_ptr<Driver> d(new Driver());
  d->path_ = path;
  d->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!d->handle_) {
    const char* why = dlerror();
    return make_error(Code::ERR_NOT_SUPPORTED, "cannot load the CUDA driver '%s': %s", path.c_str(), why ? why : "dlopen failed");
  }
#define CAIRN_CUDA_RESOLVE(name, symbol, params)                                                                \
  d->api_.name = reinterpret_cast<cairn_cu_##name##_t>(dlsym(d->handle_, symbol));                             \
  if (!d->api_.name)                                                                                           \
    return make_error(Code::ERR_NOT_SUPPORTED, "the CUDA driver '%s' lacks %s (cairn needs a driver of CUDA 11.0 or newer)", \
                      path.c_str(), symbol);
  CAIRN_CUDA_FUNCTIONS(CAIRN_CUDA_RESOLVE)
#undef CAIRN_CUDA_RESOLVE
  CAIRN_TRY(d->check(d->api_.cuInit(0), "cuInit").prefixed("CUDA driver '" + path + "'"));
  int count = 0;
  CAIRN_TRY(d->check(d->api_.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  d->devices_ = count;
  return d;
}

Result<Driver*> process_driver(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, Result<std::unique_ptr<Driver>>> loaded;
  if (path.empty() || path == "off")
    return make_error(Code::ERR_NOT_SUPPORTED, "device memory support is off (cuda_driver = off)");
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(path);
  if (it == loaded.end()) it = loaded.emplace(path, Driver::load(path)).first;
  if (!it->second.is_ok()) return it->second.status();
  return it->second.value().get();
}

Result<PointerInfo> classify(const Driver& driver, const void* ptr, uint64_t bytes) {
  PointerInfo info;
  const Api& a = driver.api();
  if (!ptr || driver.devices() == 0) return info;
  const auto p = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  unsigned int type = 0;
  CUresult rc = a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  // Memory the driver never saw (malloc, mmap) is CUDA_ERROR_INVALID_VALUE: host memory.
  if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_NOT_INITIALIZED || rc == CUDA_ERROR_INVALID_CONTEXT) return info;
  CAIRN_TRY(driver.check(rc, "cuPointerGetAttribute(MEMORY_TYPE)"));
  if (type != CU_MEMORYTYPE_DEVICE) return info;
  int managed = 0;
  if (a.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS && managed) return info;
  info.device = true;
  CAIRN_TRY(driver.check(a.cuPointerGetAttribute(&info.context, CU_POINTER_ATTRIBUTE_CONTEXT, p),
                         "cuPointerGetAttribute(CONTEXT)"));
  (void)a.cuPointerGetAttribute(&info.ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
  if (!info.context && info.ordinal >= 0) {  // memory of a pool (cuMemAllocAsync) names no context
    CUdevice dev = 0;
    CAIRN_TRY(driver.check(a.cuDeviceGet(&dev, info.ordinal), "cuDeviceGet"));
    CAIRN_TRY(driver.check(a.cuDevicePrimaryCtxRetain(&info.context, dev), "cuDevicePrimaryCtxRetain"));
  }
  CUdeviceptr start = 0;
  size_t size = 0;
  if (a.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p) == CUDA_SUCCESS &&
      a.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) == CUDA_SUCCESS) {
    info.range_start = start;
    info.range_size = size;
    if (p < start || p + bytes > start + size)
      return make_error(Code::ERR_INVALID_ARG,
                        "%llu bytes at device address 0x%llx run past the end of their allocation "
                        "(0x%llx, %llu bytes)", static_cast<unsigned long long>(bytes),
                        static_cast<unsigned long long>(p), static_cast<unsigned long long>(start),
                        static_cast<unsigned long long>(size));
  }
  return info;
}

bool host_readable(const void* ptr, uint64_t bytes) {
  if (bytes == 0) return true;
  auto readable = [](const void* p) {
    char byte;
    iovec local{&byte, 1}, remote{const_cast<void*>(p), 1};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    // Where the call itself is refused (seccomp, EPERM), there is nothing to learn: assume readable.
    return n == 1 || (n < 0 && errno != EFAULT);
  };
  return readable(ptr) && readable(static_cast<const uint8_t*>(ptr) + bytes - 1);
}

Status make_current(const Driver& driver, CUcontext context) {
  CUcontext now = nullptr;
  if (driver.api().cuCtxGetCurrent(&now) == CUDA_SUCCESS && now == context) return Status::ok();
  return driver.check(driver.api().cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

}  // namespace cairn::device
