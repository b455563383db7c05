// A simulated CUDA driver for the tests that run without a GPU: the entry points of
// src/device/cuda_driver.h, built as a shared library that cairn loads in place of libcuda.so.1 (the
// cuda_driver knob). It behaves as the driver does where cairn relies on it:
//   - device memory is not readable by the host: cuMemAlloc maps a memfd twice, PROT_NONE at the address
//     it hands out and read-write at an address only this library uses, so a stray memcpy from a device
//     pointer faults as it would on a GPU; cuMemFree unmaps both;
//   - streams run their work in order on a thread each (copies, event records, waits on events, kernel
//     launches), asynchronously to the caller; FAKE_CUDA_COPY_DELAY_US slows each copy down, so that a
//     test sees the order and not an accident of timing;
//   - calls that need a current context fail without one (CUDA_ERROR_INVALID_CONTEXT);
//   - host registration counts its calls and refuses overlapping ranges, as the driver does.
// FAKE_CUDA_DEVICES=0 simulates a machine whose driver sees no GPU. The one kernel it runs is the
// example's (examples/heat2d, --device): heat2d_sweep, the same arithmetic as the PTX that the example
// carries, so that the example's restart tests run here too; the PTX itself runs only on a GPU
// (tests/device/run.sh).
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "device/cuda_driver.h"

namespace {
struct Ctx {
  int id;
} g_ctx{1};
thread_local CUcontext t_current = nullptr;

std::mutex g_mu;
struct Alloc {
  size_t size;
  uint8_t* backing;
};
std::map<uintptr_t, Alloc> g_allocs;         // device address -> allocation
std::map<uintptr_t, uintptr_t> g_registered;  // host begin -> end
std::atomic<long> g_registrations{0};
std::atomic<long> g_copies{0};

bool have_ctx() { return t_current != nullptr; }

// The backing bytes of device range [p, p + len), or nullptr when it is not inside one allocation.
uint8_t* backing(CUdeviceptr p, size_t len) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.upper_bound(static_cast<uintptr_t>(p));
  if (it == g_allocs.begin()) return nullptr;
  --it;
  if (p < it->first || p + len > it->first + it->second.size) return nullptr;
  return it->second.backing + (p - it->first);
}

long copy_delay_us() {
  const char* d = getenv("FAKE_CUDA_COPY_DELAY_US");
  return d ? atol(d) : 0;
}
}  // namespace

struct CUevent_st {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
};

struct CUstream_st {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> work;
  uint64_t queued = 0, done = 0;
  bool stop = false;
  std::thread runner;
  CUstream_st() {
    runner = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        cv.wait(lock, [this] { return stop || !work.empty(); });
        if (work.empty()) return;
        auto w = std::move(work.front());
        work.pop_front();
        lock.unlock();
        w();
        lock.lock();
        ++done;
        cv.notify_all();
      }
    });
  }
  void push(std::function<void()> w) {
    std::lock_guard<std::mutex> lock(mu);
    work.push_back(std::move(w));
    ++queued;
    cv.notify_all();
  }
  void sync() {
    std::unique_lock<std::mutex> lock(mu);
    uint64_t target = queued;
    cv.wait(lock, [&] { return done >= target; });
  }
  ~CUstream_st() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      cv.notify_all();
    }
    runner.join();
  }
};

struct CUmod_st {
  int id;
};
struct CUfunc_st {
  int id;
};

namespace {
CUstream_st* legacy_stream() {
  static CUstream_st* s = new CUstream_st();  // stream 0 (never destroyed)
  return s;
}
CUstream_st* of(CUstream s) { return s ? s : legacy_stream(); }
CUmod_st g_module{1};
CUfunc_st g_sweep{1};
}  // namespace

extern "C" {

__attribute__((visibility("default"))) long fake_cuda_registrations() { return g_registrations.load(); }
__attribute__((visibility("default"))) long fake_cuda_copies() { return g_copies.load(); }
__attribute__((visibility("default"))) long fake_cuda_registered_ranges() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<long>(g_registered.size());
}

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult cuGetErrorString(CUresult e, const char** text) {
  switch (e) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: *text = "part or all of the requested memory range is already mapped"; break;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: *text = "pointer does not correspond to a registered memory region"; break;
    default: *text = "unknown error"; break;
  }
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* count) {
  const char* n = getenv("FAKE_CUDA_DEVICES");
  *count = n ? atoi(n) : 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  int n = 0;
  cuDeviceGetCount(&n);
  if (ordinal < 0 || ordinal >= n) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = reinterpret_cast<CUcontext>(&g_ctx);
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = t_current;
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext ctx) {
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.upper_bound(static_cast<uintptr_t>(p));
  if (it == g_allocs.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (p >= it->first + it->second.size) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(&g_ctx); break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int*>(data) = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = it->first; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = it->second.size; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  int fd = memfd_create("fake-cuda-device", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void* dev = mmap(nullptr, bytes, PROT_NONE, MAP_SHARED, fd, 0);
  void* back = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (dev == MAP_FAILED || back == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  g_allocs[reinterpret_cast<uintptr_t>(dev)] = {bytes, static_cast<uint8_t*>(back)};
  *dptr = reinterpret_cast<uintptr_t>(dev);
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  legacy_stream()->sync();
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.find(static_cast<uintptr_t>(p));
  if (it == g_allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(it->first), it->second.size);
  munmap(it->second.backing, it->second.size);
  g_allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  auto b = reinterpret_cast<uintptr_t>(p), e = b + bytes;
  if (bytes == 0 || b % 4096 != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& [rb, re] : g_registered)
    if (rb < e && b < re) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  g_registered[b] = e;
  ++g_registrations;
  return CUDA_SUCCESS;
}
CUresult cuMemHostUnregister(void* p) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_registered.erase(reinterpret_cast<uintptr_t>(p))) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream s) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  uint8_t* from = backing(src, bytes);
  if (!from) return CUDA_ERROR_INVALID_VALUE;
  long delay = copy_delay_us();
  of(s)->push([=] {
    if (delay) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    memcpy(dst, from, bytes);
    ++g_copies;
  });
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream s) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  uint8_t* to = backing(dst, bytes);
  if (!to) return CUDA_ERROR_INVALID_VALUE;
  long delay = copy_delay_us();
  of(s)->push([=] {
    if (delay) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    memcpy(to, src, bytes);
    ++g_copies;
  });
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* s, unsigned int) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  *s = new CUstream_st();
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  s->sync();
  delete s;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) {
  of(s)->sync();
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned int) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  *e = new CUevent_st();
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
  delete e;
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream s) {
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    n = ++e->recorded;
  }
  of(s)->push([e, n] {
    std::lock_guard<std::mutex> lock(e->mu);
    if (e->completed < n) e->completed = n;
    e->cv.notify_all();
  });
  return CUDA_SUCCESS;
}
CUresult cuEventQuery(CUevent e) {
  std::lock_guard<std::mutex> lock(e->mu);
  return e->completed >= e->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult cuEventSynchronize(CUevent e) {
  std::unique_lock<std::mutex> lock(e->mu);
  uint64_t target = e->recorded;
  e->cv.wait(lock, [&] { return e->completed >= target; });
  return CUDA_SUCCESS;
}
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int) {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    target = e->recorded;
  }
  of(s)->push([e, target] {
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [&] { return e->completed >= target; });
  });
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!strstr(static_cast<const char*>(image), ".entry heat2d_sweep")) return CUDA_ERROR_INVALID_VALUE;
  *m = &g_module;
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (m != &g_module || strcmp(name, "heat2d_sweep") != 0) return CUDA_ERROR_INVALID_VALUE;
  *f = &g_sweep;
  return CUDA_SUCCESS;
}
// heat2d_sweep(double* next, const double* cur, long n, long rows, long first_row): for every owned row r
// (1..rows, local; halo rows 0 and rows+1) that is not a global edge row, and every interior column c,
// next[r][c] = 0.25 * (((cur[r-1][c] + cur[r+1][c]) + cur[r][c-1]) + cur[r][c+1]).
CUresult cuLaunchKernel(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, CUstream s, void** params, void**) {
  if (!have_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
  if (f != &g_sweep || !params) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr next = *static_cast<CUdeviceptr*>(params[0]), cur = *static_cast<CUdeviceptr*>(params[1]);
  long n = *static_cast<long*>(params[2]), rows = *static_cast<long*>(params[3]);
  long first = *static_cast<long*>(params[4]);
  size_t bytes = static_cast<size_t>(rows + 2) * static_cast<size_t>(n) * sizeof(double);
  auto* out = reinterpret_cast<double*>(backing(next, bytes));
  auto* in = reinterpret_cast<const double*>(backing(cur, bytes));
  if (!out || !in) return CUDA_ERROR_INVALID_VALUE;
  of(s)->push([=] {
    for (long r = 1; r <= rows; ++r) {
      long g = first + r - 1;
      if (g == 0 || g == n - 1) continue;
      const double* above = in + (r - 1) * n;
      const double* here = in + r * n;
      const double* below = in + (r + 1) * n;
      double* o = out + r * n;
      for (long c = 1; c < n - 1; ++c) {
        volatile double sum = above[c] + below[c];  // no contraction: the PTX's add.rn order
        sum = sum + here[c - 1];
        sum = sum + here[c + 1];
        o[c] = 0.25 * sum;
      }
    }
  });
  return CUDA_SUCCESS;
}

}  // extern "C"
