// cairn-bench --device: checkpoint and restart of device (GPU) memory beside the bus's own limits, measured
// in the same run on the same bytes: the bare pinned device-to-host copy (cuMemcpyDtoHAsync into registered
// memory) and the bare host-to-device copy from pinned memory. One MPI process per GPU; run it under mpirun
// (-np 1) or alone. The CUDA driver is loaded at run time, as the library does.
//
//   checkpoint (device_copy = wait)   cairn_checkpoint's time; target >= 0.8 x the pinned DtoH copy
//   checkpoint (device_copy = return) cairn_checkpoint's time; target <= 1 ms (and the copy's own time)
//   restart                           cairn_restart from L1 into the device buffer, verified; target >= 0.8
//                                     x the pinned HtoD copy
// The first checkpoints of each mode pin their slots (once per slot) and are not timed.
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "cairn/cairn.h"
#include "cairn/cairn_device.h"
#include "base/xxh.hpp"
#include "device/driver.hpp"

#include "bench.hpp"
#include "device/device_bench.hpp"

namespace cairn::bench {
namespace {
using cairn::device::Driver;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

#define CU(call)                                                                       \
  do {                                                                                 \
    CUresult rc_ = (call);                                                             \
    if (rc_ != CUDA_SUCCESS) {                                                         \
      fprintf(stderr, "cairn-bench --device: %s: %s\n", #call, drv.error_text(rc_).c_str()); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)
#define CAIRN(call)                                                                                    \
  do {                                                                                                 \
    int rc_ = (call);                                                                                  \
    if (rc_ != CAIRN_SUCCESS) {                                                                        \
      fprintf(stderr, "cairn-bench --device: %s: %s: %s\n", #call, cairn_strerror(rc_), cairn_last_error()); \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

// The machine's limits for the same bytes, measured in this run.
struct Limits {
  double dtoh = 0, htod = 0;  // the bare copies between `dev` and pinned host memory
  double hash = 0;            // xxh3 of the bytes on hash_threads threads: the verification's limit
  int hash_threads = 0;
  double htod_hashing = 0;    // the pinned HtoD copy while hash_threads threads hash the same bytes: the
                              // limit of a verified restore where the two share the memory's bandwidth
  double pageable_htod = 0;   // HtoD from ordinary (pageable) memory: the limit where the slot is not pinned
};

// xxh3 of [host, host + bytes) in 1 MiB chunks on `threads` threads, as the library verifies.
void hash_all(const uint8_t* host, uint64_t bytes, int threads) {
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (uint64_t off; (off = next.fetch_add(1 << 20)) < bytes;)
        (void)XXH3_64bits(host + off, std::min<uint64_t>(1 << 20, bytes - off));
    });
  for (auto& t : pool) t.join();
}

void* populated(uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    perror("cairn-bench --device: mmap");
    exit(1);
  }
  memset(p, 0x5A, bytes);
  return p;
}

// Each figure the median of `reps` after a warm-up.
Limits bare_copies(const Driver& drv, CUdeviceptr dev, uint64_t bytes, int reps) {
  const auto& a = drv.api();
  Limits l;
  auto* host = static_cast<uint8_t*>(populated(bytes));
  CU(a.cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE));
  CUstream s = nullptr;
  CU(a.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // The verify limit: this process's threads (as many as device_hash_threads, 8, and its CPUs allow).
  cpu_set_t cpus;
  l.hash_threads = 8;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) l.hash_threads = std::min(l.hash_threads, CPU_COUNT(&cpus));
  std::vector<double> d2h, h2d, hs, both, pageable;
  for (int i = 0; i <= reps; ++i) {
    auto t0 = Clock::now();
    CU(a.cuMemcpyDtoHAsync(host, dev, bytes, s));
    CU(a.cuStreamSynchronize(s));
    if (i) d2h.push_back(seconds_since(t0));
    t0 = Clock::now();
    CU(a.cuMemcpyHtoDAsync(dev, host, bytes, s));
    CU(a.cuStreamSynchronize(s));
    if (i) h2d.push_back(seconds_since(t0));
    t0 = Clock::now();
    hash_all(host, bytes, l.hash_threads);
    if (i) hs.push_back(seconds_since(t0));
    t0 = Clock::now();
    CU(a.cuMemcpyHtoDAsync(dev, host, bytes, s));
    hash_all(host, bytes, l.hash_threads);
    CU(a.cuStreamSynchronize(s));
    if (i) both.push_back(seconds_since(t0));
  }
  CU(a.cuStreamSynchronize(s));
  CU(a.cuMemHostUnregister(host));
  for (int i = 0; i <= reps; ++i) {
    auto t0 = Clock::now();
    CU(a.cuMemcpyHtoDAsync(dev, host, bytes, s));
    CU(a.cuStreamSynchronize(s));
    if (i) pageable.push_back(seconds_since(t0));
  }
  CU(a.cuStreamDestroy(s));
  munmap(host, bytes);
  const auto gbps = [&](const std::vector<double>& t) { return static_cast<double>(bytes) / median(t) / 1e9; };
  l.dtoh = gbps(d2h);
  l.htod = gbps(h2d);
  l.hash = gbps(hs);
  l.htod_hashing = gbps(both);
  l.pageable_htod = gbps(pageable);
  return l;
}

struct ModeResult {
  double checkpoint_s = 0;    // median cairn_checkpoint
  double copied_s = 0;        // median until the device copy is done (return mode: after checkpoint)
  double restart_s = 0;       // median cairn_restart_available + cairn_restart (wait mode only)
  double restart_plan_s = 0;  // of which cairn_restart_available (the search and the plan)
  double restart_unpinned_s = 0;  // the same after cairn_finalize and cairn_init: the slot mapped anew,
                                  // not pinned, as a relaunched job finds it
  bool restored_ok = false;   // the device buffer after restart equals the checkpoint's bytes
};

// cairn_init with device_copy = mode, `reps` timed checkpoints after two warm-ups (one per slot), and in wait
// mode `reps` restarts from L1 into the device buffer, each checked against the bytes checkpointed.
ModeResult run_mode(const Driver& drv, CUdeviceptr dev, uint64_t bytes, const DeviceOptions& o, const char* mode,
                    const std::string& work) {
  const auto& a = drv.api();
  setenv("CAIRN_DEVICE_COPY", mode, 1);
  setenv("CAIRN_PREFIX", (work + "/prefix").c_str(), 1);
  setenv("CAIRN_CACHE_DIR", o.cache_dir.c_str(), 1);
  setenv("CAIRN_JOB", ("bench-device-" + std::to_string(getpid())).c_str(), 1);
  setenv("CAIRN_REDUNDANCY", "single", 1);
  setenv("CAIRN_FLUSH_EVERY", "0", 1);
  setenv("CAIRN_FLUSH_ON_FINALIZE", "0", 1);
  setenv("CAIRN_CUDA_DRIVER", o.driver.c_str(), 1);
  setenv("CAIRN_SNAPSHOT", "copy", 1);
  ModeResult r;
  CAIRN(cairn_init(MPI_COMM_SELF, nullptr));
  CAIRN(cairn_protect("state", reinterpret_cast<void*>(static_cast<uintptr_t>(dev)), bytes, CAIRN_BYTE));
  const bool wait = strcmp(mode, "wait") == 0;
  std::vector<double> ck, copied, rs;
  for (int i = 0; i < o.reps + 2; ++i) {
    auto t0 = Clock::now();
    CAIRN(cairn_checkpoint());
    double t = seconds_since(t0);
    CAIRN(cairn_device_wait_copied(nullptr));
    double c = seconds_since(t0);
    CAIRN(cairn_wait());
    if (i >= 2) {
      ck.push_back(t);
      copied.push_back(c);
    }
  }
  r.checkpoint_s = median(ck);
  r.copied_s = median(copied);
  if (wait) {
    // What the newest version holds, to check each restart against.
    std::vector<uint8_t> expect(bytes), got(bytes);
    std::vector<double> plan;
    CU(a.cuMemcpyDtoHAsync(expect.data(), dev, bytes, nullptr));
    CU(a.cuStreamSynchronize(nullptr));
    r.restored_ok = true;
    // One timed restart: the device buffer overwritten first (`fill`), so that the restart has to bring
    // every byte back; checked against the checkpoint's bytes. Returns (plan, whole) seconds.
    auto timed_restart = [&](uint8_t fill) {
      std::vector<uint8_t> junk(1 << 20, fill);
      for (uint64_t off = 0; off < bytes; off += junk.size())
        CU(a.cuMemcpyHtoDAsync(dev + off, junk.data(), std::min<uint64_t>(junk.size(), bytes - off), nullptr));
      CU(a.cuStreamSynchronize(nullptr));
      int available = 0;
      auto t0 = Clock::now();
      CAIRN(cairn_restart_available(&available, nullptr));
      double planned = seconds_since(t0);
      CAIRN(cairn_restart());
      double whole = seconds_since(t0);
      CU(a.cuMemcpyDtoHAsync(got.data(), dev, bytes, nullptr));
      CU(a.cuStreamSynchronize(nullptr));
      r.restored_ok = r.restored_ok && available == 1 && memcmp(got.data(), expect.data(), bytes) == 0;
      return std::make_pair(planned, whole);
    };
    for (int i = 0; i < o.reps; ++i) {
      auto [planned, whole] = timed_restart(static_cast<uint8_t>(0xA5 + i));
      plan.push_back(planned);
      rs.push_back(whole);
    }
    r.restart_s = median(rs);
    r.restart_plan_s = median(plan);
    // A relaunched job maps the slot anew and has not pinned it: once, after a finalize and an init.
    CAIRN(cairn_finalize());
    CAIRN(cairn_init(MPI_COMM_SELF, nullptr));
    CAIRN(cairn_protect("state", reinterpret_cast<void*>(static_cast<uintptr_t>(dev)), bytes, CAIRN_BYTE));
    r.restart_unpinned_s = timed_restart(0x3C).second;
  }
  CAIRN(cairn_finalize());
  std::string cmd = "rm -rf '" + work + "/prefix' '" + o.cache_dir + "/cairn-bench-device-" + std::to_string(getpid()) + "'";
  if (system(cmd.c_str()) != 0) fprintf(stderr, "cairn-bench --device: could not remove %s\n", work.c_str());
  return r;
}
}  // namespace

int run_device(const DeviceOptions& o) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  auto loaded = cairn::device::process_driver(o.driver);
  if (!loaded.is_ok()) {
    fprintf(stderr, "cairn-bench --device: %s\n", loaded.status().message().c_str());
    MPI_Finalize();
    return 2;
  }
  const Driver& drv = **loaded;
  if (drv.devices() == 0) {
    fprintf(stderr, "cairn-bench --device: the CUDA driver %s sees no GPU\n", o.driver.c_str());
    MPI_Finalize();
    return 2;
  }
  const auto& a = drv.api();
  CUdevice dev0 = 0;
  CUcontext ctx = nullptr;
  CU(a.cuDeviceGet(&dev0, 0));
  CU(a.cuDevicePrimaryCtxRetain(&ctx, dev0));
  CU(a.cuCtxSetCurrent(ctx));
  std::string work = o.prefix_base + "/cairn-bench-device-" + std::to_string(getpid());
  nlohmann::json out = nlohmann::json::array();
  bool all_met = true;
  for (const auto& text : o.sizes) {
    uint64_t bytes = 0;
    if (!parse_size(text, &bytes) || bytes < 4096) {
      fprintf(stderr, "cairn-bench --device: --size %s: expected a size of at least 4K\n", text.c_str());
      return 2;
    }
    CUdeviceptr dev = 0;
    CU(a.cuMemAlloc(&dev, bytes));
    {  // a pattern, so that nothing is zero pages anywhere
      std::vector<uint8_t> fill(16 << 20);
      for (size_t i = 0; i < fill.size(); ++i) fill[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
      for (uint64_t off = 0; off < bytes; off += fill.size())
        CU(a.cuMemcpyHtoDAsync(dev + off, fill.data(), std::min<uint64_t>(fill.size(), bytes - off), nullptr));
      CU(a.cuStreamSynchronize(nullptr));
    }
    const Limits l = bare_copies(drv, dev, bytes, o.reps);
    const double dtoh = l.dtoh, htod = l.htod;
    ModeResult w = run_mode(drv, dev, bytes, o, "wait", work);
    ModeResult r = run_mode(drv, dev, bytes, o, "return", work);
    CU(a.cuMemFree(dev));
    const double gb = static_cast<double>(bytes) / 1e9;
    double ck_gbps = gb / w.checkpoint_s, rs_gbps = gb / w.restart_s;
    bool ck_met = ck_gbps >= 0.8 * dtoh, rs_met = rs_gbps >= 0.8 * htod, ret_met = r.checkpoint_s <= 1e-3;
    all_met = all_met && ck_met && rs_met && ret_met && w.restored_ok;
    nlohmann::json j = {{"bytes", bytes},
                        {"pinned_dtoh_gbps", dtoh},
                        {"pinned_htod_gbps", htod},
                        {"hash_gbps", l.hash},
                        {"hash_threads", l.hash_threads},
                        {"htod_hashing_gbps", l.htod_hashing},
                        {"pageable_htod_gbps", l.pageable_htod},
                        {"checkpoint_wait_s", w.checkpoint_s},
                        {"checkpoint_wait_gbps", ck_gbps},
                        {"checkpoint_wait_ratio", ck_gbps / dtoh},
                        {"checkpoint_wait_target_met", ck_met},
                        {"checkpoint_return_ms", r.checkpoint_s * 1e3},
                        {"checkpoint_return_copied_gbps", gb / r.copied_s},
                        {"checkpoint_return_target_met", ret_met},
                        {"restart_s", w.restart_s},
                        {"restart_gbps", rs_gbps},
                        {"restart_ratio", rs_gbps / htod},
                        {"restart_target_met", rs_met},
                        {"restart_ratio_to_htod_hashing", rs_gbps / l.htod_hashing},
                        {"restart_plan_ms", w.restart_plan_s * 1e3},
                        {"restart_unpinned_gbps", gb / w.restart_unpinned_s},
                        {"restart_unpinned_ratio", gb / w.restart_unpinned_s / l.pageable_htod},
                        {"restart_bit_exact", w.restored_ok}};
    out.push_back(j);
    if (!o.json) {
      printf("%s per rank: pinned DtoH %.1f GB/s, HtoD %.1f GB/s; xxh3 on %d threads %.1f GB/s; HtoD while hashing "
             "%.1f GB/s; pageable HtoD %.1f GB/s\n", text.c_str(), dtoh, htod, l.hash_threads, l.hash, l.htod_hashing,
             l.pageable_htod);
      printf("  checkpoint (wait)   %8.2f ms  %6.1f GB/s  %.2f x DtoH  (target >= 0.8) %s\n", w.checkpoint_s * 1e3,
             ck_gbps, ck_gbps / dtoh, ck_met ? "met" : "MISSED");
      printf("  checkpoint (return) %8.3f ms  (target <= 1 ms) %s; its copy done after %.2f ms (%.1f GB/s)\n",
             r.checkpoint_s * 1e3, ret_met ? "met" : "MISSED", r.copied_s * 1e3, gb / r.copied_s);
      printf("  restart from L1     %8.2f ms  %6.1f GB/s  %.2f x HtoD  (target >= 0.8) %s; bit for bit: %s\n",
             w.restart_s * 1e3, rs_gbps, rs_gbps / htod, rs_met ? "met" : "MISSED", w.restored_ok ? "yes" : "NO");
      printf("    of which the plan %.2f ms; %.2f x HtoD while hashing; unpinned slot (a relaunch) %.1f GB/s = %.2f x "
             "pageable HtoD\n", w.restart_plan_s * 1e3, rs_gbps / l.htod_hashing, gb / w.restart_unpinned_s,
             gb / w.restart_unpinned_s / l.pageable_htod);
      fflush(stdout);
    }
  }
  if (o.json) printf("%s\n", nlohmann::json{{"device", out}, {"targets_met", all_met}}.dump(2).c_str());
  rmdir(work.c_str());
  MPI_Finalize();
  return 0;
}

}  // namespace cairn::bench
