// The device layer (src/device) on the simulated CUDA driver (tests/device/fake_cuda.cpp), which cairn
// loads through the same dlopen path as libcuda.so.1: loading and its failures, telling device memory from
// host memory, the pinned-slot bookkeeping, and the two copy modes' order of events.
#include <dlfcn.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/manifest.hpp"
#include "base/xxh.hpp"
#include "cache/snapshot_slot.hpp"
#include "device/device_snapshot.hpp"
#include "device/driver.hpp"
#include "device/pinned.hpp"

namespace cairn::device {
namespace {

const Driver& fake() {
  auto d = process_driver(CAIRN_FAKE_CUDA);
  EXPECT_TRUE(d.is_ok()) << d.status().message();
  return **d;
}

// The fake's counters (extra symbols of the test library).
long fake_counter(const char* name) {
  void* h = dlopen(CAIRN_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  auto fn = reinterpret_cast<long (*)()>(dlsym(h, name));
  long v = fn ? fn() : -1;
  dlclose(h);
  return v;
}

CUcontext context(const Driver& d) {
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  EXPECT_EQ(d.api().cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  EXPECT_EQ(d.api().cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  EXPECT_TRUE(make_current(d, ctx).is_ok());
  return ctx;
}

// Device memory holding `bytes` filled from `pattern`.
CUdeviceptr device_buffer(const Driver& d, const std::vector<uint8_t>& pattern) {
  CUdeviceptr p = 0;
  EXPECT_EQ(d.api().cuMemAlloc(&p, pattern.size()), CUDA_SUCCESS);
  EXPECT_EQ(d.api().cuMemcpyHtoDAsync(p, pattern.data(), pattern.size(), nullptr), CUDA_SUCCESS);
  EXPECT_EQ(d.api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  return p;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
  return v;
}

std::vector<uint8_t> read_device(const Driver& d, CUdeviceptr p, size_t n) {
  std::vector<uint8_t> v(n);
  EXPECT_EQ(d.api().cuMemcpyDtoHAsync(v.data(), p, n, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(d.api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  return v;
}

TEST(DeviceDriver, MissingLibraryIsAClearError) {
  auto d = Driver::load("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), Code::ERR_NOT_SUPPORTED);
  EXPECT_NE(d.status().message().find("/nonexistent/libcuda.so.1"), std::string::npos) << d.status().message();
  auto off = process_driver("off");
  EXPECT_EQ(off.status().code(), Code::ERR_NOT_SUPPORTED);
  // A library that is not a CUDA driver: the first missing entry point is named.
  auto other = Driver::load("libz.so.1");
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("lacks cuInit"), std::string::npos) << other.status().message();
}

TEST(DeviceDriver, TellsDeviceFromHostMemory) {
  const Driver& d = fake();
  context(d);
  std::vector<uint8_t> host(4096);
  auto h = classify(d, host.data(), host.size());
  ASSERT_TRUE(h.is_ok());
  EXPECT_FALSE(h->device);
  EXPECT_TRUE(host_readable(host.data(), host.size()));

  CUdeviceptr p = device_buffer(d, pattern(1 << 20, 1));
  void* dp = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  auto info = classify(d, dp, 1 << 20);
  ASSERT_TRUE(info.is_ok()) << info.status().message();
  EXPECT_TRUE(info->device);
  EXPECT_NE(info->context, nullptr);
  EXPECT_EQ(info->range_start, p);
  EXPECT_EQ(info->range_size, 1u << 20);
  EXPECT_FALSE(host_readable(dp, 1 << 20));  // as on a GPU: the host cannot read it
  // Inside the allocation is fine; past its end is an error naming the allocation.
  EXPECT_TRUE(classify(d, static_cast<uint8_t*>(dp) + 4096, 4096)->device);
  auto past = classify(d, static_cast<uint8_t*>(dp) + 4096, 1 << 20);
  ASSERT_FALSE(past.is_ok());
  EXPECT_EQ(past.status().code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(past.status().message().find("past the end"), std::string::npos);
  // Freed: the driver no longer knows it and the host cannot read it.
  ASSERT_EQ(d.api().cuMemFree(p), CUDA_SUCCESS);
  auto freed = classify(d, dp, 4096);
  ASSERT_TRUE(freed.is_ok());
  EXPECT_FALSE(freed->device);
  EXPECT_FALSE(host_readable(dp, 4096));
}

TEST(DevicePinned, ASlotIsRegisteredOnceAndReleasedWithItsMapping) {
  const Driver& d = fake();
  CUcontext ctx = context(d);
  PinnedRanges& ranges = pinned_ranges();
  long before = fake_counter("fake_cuda_registrations");
  auto slot = MappedFile::anonymous(8 << 20);
  ASSERT_TRUE(slot.is_ok());
  bool pinned = false;
  std::string why;
  ASSERT_TRUE(ranges.ensure(d, ctx, slot->data() + 100, 3 << 20, &pinned, &why).is_ok());
  EXPECT_TRUE(pinned) << why;
  ASSERT_TRUE(ranges.ensure(d, ctx, slot->data() + 4096, 1 << 20, &pinned, &why).is_ok());  // inside: nothing new
  EXPECT_EQ(fake_counter("fake_cuda_registrations") - before, 1);
  EXPECT_TRUE(ranges.covers(slot->data() + 100, 3 << 20));
  // A larger range over it: the old one is unregistered first (the driver refuses overlaps).
  ASSERT_TRUE(ranges.ensure(d, ctx, slot->data(), 6 << 20, &pinned, &why).is_ok());
  EXPECT_TRUE(pinned) << why;
  EXPECT_EQ(fake_counter("fake_cuda_registrations") - before, 2);
  long held = fake_counter("fake_cuda_registered_ranges");
  slot->reset();  // the unmap hook unregisters before the pages go
  EXPECT_EQ(fake_counter("fake_cuda_registered_ranges"), held - 1);
  EXPECT_EQ(ranges.count(), 0u);
}

struct Fixture {
  const Driver& d = fake();
  CUcontext ctx = context(d);
  static constexpr uint32_t kChunk = 64 << 10;
  std::vector<uint8_t> host = pattern(100000, 7);      // a host region, not chunk aligned
  std::vector<uint8_t> dev_bytes = pattern(3 << 20, 9);  // a device region of 48 chunks
  CUdeviceptr dev = device_buffer(d, dev_bytes);
  MappedFile slot = std::move(MappedFile::anonymous(host.size() + dev_bytes.size()).value());
  uint64_t total = host.size() + dev_bytes.size();
  std::vector<SnapshotRegion> regions() const {
    SnapshotRegion h{"a_host", host.data(), host.size(), 0};
    SnapshotRegion g{"b_dev", reinterpret_cast<void*>(static_cast<uintptr_t>(dev)), dev_bytes.size(), host.size()};
    g.device = true;
    g.device_context = ctx;
    return {h, g};
  }
  std::unique_ptr<DeviceSnapshotter> snapshotter(CopyMode mode) {
    CopyOptions o;
    o.mode = mode;
    o.piece = 512 << 10;
    o.hash_threads = 3;
    auto s = std::make_unique<DeviceSnapshotter>(make_copy_snapshotter(), o);
    s->set_driver(&d);
    s->set_chunking(kChunk, total);
    return s;
  }
  ~Fixture() { (void)d.api().cuMemFree(dev); }
};

struct CopyDelay {
  explicit CopyDelay(const char* us) { setenv("FAKE_CUDA_COPY_DELAY_US", us, 1); }
  ~CopyDelay() { unsetenv("FAKE_CUDA_COPY_DELAY_US"); }
};

TEST(DeviceSnapshot, WaitModeHasTheBytesWhenBeginReturnsAndHashesAhead) {
  Fixture f;
  CopyDelay slow("2000");
  auto s = f.snapshotter(CopyMode::wait);
  ASSERT_TRUE(s->begin(f.regions(), f.slot.data()).is_ok());
  // begin() returned: every device byte is in the slot already.
  EXPECT_EQ(memcmp(f.slot.data() + f.host.size(), f.dev_bytes.data(), f.dev_bytes.size()), 0);
  EXPECT_EQ(memcmp(f.slot.data(), f.host.data(), f.host.size()), 0);
  ASSERT_TRUE(s->complete().is_ok());
  SnapshotReport r = s->report();
  EXPECT_EQ(r.device_bytes, f.dev_bytes.size());
  EXPECT_EQ(r.bytes, f.total);
  // Hashed ahead: the chunks wholly inside the device region; the seal's result is the plain one.
  ASSERT_EQ(r.chunk_known.size(), (f.total + Fixture::kChunk - 1) / Fixture::kChunk);
  size_t known = 0;
  for (size_t i = 0; i < r.chunk_known.size(); ++i) {
    uint64_t b = i * Fixture::kChunk, e = std::min<uint64_t>(b + Fixture::kChunk, f.total);
    bool inside = b >= f.host.size();
    EXPECT_EQ(r.chunk_known[i] != 0, inside) << "chunk " << i;
    if (r.chunk_known[i]) {
      ++known;
      EXPECT_EQ(r.chunk_hashes[i], XXH3_64bits(f.slot.data() + b, e - b)) << "chunk " << i;
    }
  }
  EXPECT_GT(known, 40u);
}

TEST(DeviceSnapshot, ReturnModeReturnsBeforeTheCopyAndOrdersTheApplicationsStream) {
  Fixture f;
  CopyDelay slow("20000");  // 20 ms per piece, 7 pieces
  auto s = f.snapshotter(CopyMode::return_at_once);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(s->begin(f.regions(), f.slot.data()).is_ok());
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 0.02);  // queued, not copied
  EXPECT_NE(s->copied_event(), nullptr);
  EXPECT_EQ(f.d.api().cuEventQuery(s->copied_event()), CUDA_ERROR_NOT_READY);
  // The application's next write, ordered after cairn's copy on its own stream.
  CUstream app = nullptr;
  ASSERT_EQ(f.d.api().cuStreamCreate(&app, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_TRUE(s->wait_copied_on(app).is_ok());
  std::vector<uint8_t> next = pattern(f.dev_bytes.size(), 99);
  ASSERT_EQ(f.d.api().cuMemcpyHtoDAsync(f.dev, next.data(), next.size(), app), CUDA_SUCCESS);
  ASSERT_TRUE(s->complete().is_ok());
  ASSERT_EQ(f.d.api().cuStreamSynchronize(app), CUDA_SUCCESS);
  // The slot holds the bytes as they were at begin(); the device the application's new ones.
  EXPECT_EQ(memcmp(f.slot.data() + f.host.size(), f.dev_bytes.data(), f.dev_bytes.size()), 0);
  EXPECT_EQ(read_device(f.d, f.dev, next.size()), next);
  EXPECT_EQ(f.d.api().cuEventQuery(s->copied_event()), CUDA_SUCCESS);
  ASSERT_TRUE(s->wait_copied_on(nullptr).is_ok());
  (void)f.d.api().cuStreamDestroy(app);
}

TEST(DeviceSnapshot, TheApplicationsStreamIsFollowed) {
  Fixture f;
  auto s = f.snapshotter(CopyMode::wait);
  CUstream app = nullptr;
  ASSERT_EQ(f.d.api().cuStreamCreate(&app, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_TRUE(s->set_app_stream(app).is_ok());
  // A write queued on the application's stream, slow, before the checkpoint: the copy must see it.
  std::vector<uint8_t> latest = pattern(f.dev_bytes.size(), 42);
  {
    CopyDelay slow("50000");
    ASSERT_EQ(f.d.api().cuMemcpyHtoDAsync(f.dev, latest.data(), latest.size(), app), CUDA_SUCCESS);
  }
  ASSERT_TRUE(s->begin(f.regions(), f.slot.data()).is_ok());
  ASSERT_TRUE(s->complete().is_ok());
  EXPECT_EQ(memcmp(f.slot.data() + f.host.size(), latest.data(), latest.size()), 0);
  (void)f.d.api().cuStreamDestroy(app);
}

TEST(DeviceSnapshot, ASlotIsPinnedOnceForEveryVersion) {
  Fixture f;
  auto s = f.snapshotter(CopyMode::wait);
  long before = fake_counter("fake_cuda_registrations");
  for (int v = 0; v < 3; ++v) {
    ASSERT_TRUE(s->begin(f.regions(), f.slot.data()).is_ok());
    ASSERT_TRUE(s->complete().is_ok());
  }
  EXPECT_EQ(fake_counter("fake_cuda_registrations") - before, 1);
}

TEST(DeviceSnapshot, FreedDeviceMemoryFailsTheVersionAndTheNextOneWorks) {
  Fixture f;
  auto s = f.snapshotter(CopyMode::wait);
  auto regions = f.regions();
  CUdeviceptr gone = device_buffer(f.d, pattern(4096, 3));
  ASSERT_EQ(f.d.api().cuMemFree(gone), CUDA_SUCCESS);
  std::vector<SnapshotRegion> bad = regions;
  bad[1].src = reinterpret_cast<void*>(static_cast<uintptr_t>(gone));
  bad[1].size = 4096;
  Status st = s->begin(bad, f.slot.data());
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), Code::ERR_IO);
  EXPECT_NE(st.message().find("b_dev"), std::string::npos) << st.message();
  // The host snapshot was completed on the way out: the next version goes through.
  ASSERT_TRUE(s->begin(regions, f.slot.data()).is_ok());
  ASSERT_TRUE(s->complete().is_ok());
  EXPECT_EQ(memcmp(f.slot.data() + f.host.size(), f.dev_bytes.data(), f.dev_bytes.size()), 0);
}

TEST(DeviceSnapshot, RestoreCopiesIntoTheDevice) {
  Fixture f;
  auto s = f.snapshotter(CopyMode::wait);
  std::vector<uint8_t> back = pattern(f.dev_bytes.size(), 77);
  ASSERT_TRUE(s->copy_to_device(f.ctx, reinterpret_cast<void*>(static_cast<uintptr_t>(f.dev)), back.data(), back.size()).is_ok());
  EXPECT_EQ(read_device(f.d, f.dev, back.size()), back);
}

// The restart from L1 into device memory: a stream of two device regions over several restore pieces
// (small ones first), each verified, then copied (slowly: the copies queue behind the hashing threads); then the same with one
// damaged chunk, which fails the restore and names the chunk.
TEST(DeviceSnapshot, RestoreVerifiedCopiesVerifiedPiecesAndNamesADamagedChunk) {
  const Driver& d = fake();
  CUcontext ctx = context(d);
  constexpr uint32_t kChunk = 1 << 20;
  const uint64_t a_size = 3 * CopyOptions::kRestorePiece + 12345, b_size = 5 * kChunk;
  std::vector<uint8_t> stream = pattern(a_size + b_size, 21);
  Manifest m;
  m.total_size = stream.size();
  m.chunk_size = kChunk;
  std::vector<uint64_t>& hashes = m.chunk_hashes;
  for (uint64_t b = 0; b < stream.size(); b += kChunk)
    hashes.push_back(XXH3_64bits(stream.data() + b, std::min<uint64_t>(kChunk, stream.size() - b)));
  std::vector<uint8_t> zero_a(a_size, 0), zero_b(b_size, 0);
  CUdeviceptr a = device_buffer(d, zero_a), b = device_buffer(d, zero_b);
  DeviceSnapshotter s(make_copy_snapshotter(), CopyOptions{.hash_threads = 3});
  s.set_driver(&d);
  std::vector<DeviceSnapshotter::DeviceExtent> extents = {
      {0, a_size, reinterpret_cast<void*>(static_cast<uintptr_t>(a))},
      {a_size, b_size, reinterpret_cast<void*>(static_cast<uintptr_t>(b))}};
  {
    CopyDelay slow("3000");
    const long copies = fake_counter("fake_cuda_copies");
    Status st = s.restore_verified(ctx, stream.data(), m, extents);
    ASSERT_TRUE(st.is_ok()) << st.message();
    // The ramp, in rounds of one piece per hashing thread (3, or fewer where the test may run on fewer
    // CPUs): with 3, region a in pieces of 2, 2, 2, 4, 4, 4, 8, 8, 8 MiB, then its last 6 MiB and 12345
    // bytes; with 2, 2, 2, 4, 4, 8, 8, 16 MiB and the rest; with 1, 2, 4, 8, 16, 16 MiB and the rest.
    // Region b (5 MiB) in one piece.
    cpu_set_t cpus;
    ASSERT_EQ(sched_getaffinity(0, sizeof cpus, &cpus), 0);
    const long expected[] = {0, 7, 9, 11};
    EXPECT_EQ(fake_counter("fake_cuda_copies") - copies, expected[std::min(3, CPU_COUNT(&cpus))]);
  }
  EXPECT_EQ(read_device(d, a, a_size), std::vector<uint8_t>(stream.begin(), stream.begin() + a_size));
  EXPECT_EQ(read_device(d, b, b_size), std::vector<uint8_t>(stream.begin() + a_size, stream.end()));
  // One flipped byte in chunk 40 (in region a's last piece): ERR_CORRUPT naming it.
  stream[40ull * kChunk + 7] ^= 0x10;
  Status st = s.restore_verified(ctx, stream.data(), m, extents);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT);
  EXPECT_NE(st.message().find("chunk 40 "), std::string::npos) << st.message();
  // A chunk table that does not fit the stream is refused before anything is copied.
  hashes.pop_back();
  EXPECT_EQ(s.restore_verified(ctx, stream.data(), m, extents).code(), Code::ERR_CORRUPT);
  EXPECT_EQ(s.restore_verified(ctx, stream.data(), Manifest{}, {}).code(), Code::ERR_CORRUPT) << "no chunk size";
  (void)d.api().cuMemFree(a);
  (void)d.api().cuMemFree(b);
}

TEST(DeviceSnapshot, HostOnlyVersionsPassThrough) {
  std::vector<uint8_t> host = pattern(5000, 1);
  auto slot = MappedFile::anonymous(5000);
  DeviceSnapshotter s(make_copy_snapshotter(), CopyOptions{});
  s.set_chunking(4096, 5000);
  ASSERT_TRUE(s.begin({{"h", host.data(), host.size(), 0}}, slot->data()).is_ok());
  ASSERT_TRUE(s.complete().is_ok());
  EXPECT_EQ(memcmp(slot->data(), host.data(), host.size()), 0);
  EXPECT_TRUE(s.report().chunk_known.empty());
  EXPECT_EQ(s.copied_event(), nullptr);
  EXPECT_TRUE(s.wait_copied_on(nullptr).is_ok());  // no device copy: nothing to wait for
}

}  // namespace
}  // namespace cairn::device
