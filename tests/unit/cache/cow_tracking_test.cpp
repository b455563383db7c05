// The copy-on-write snapshotter's write tracking (CowOptions::track_writes, cache/cow/cow_snapshot.hpp):
// between snapshots the memory stays write-protected, the first write to a block is noted per chunk of
// the stream, and a snapshot into a slot that holds an earlier snapshot copies only the chunks written
// since -- the rest stays in the slot, unread. Real memory, real userfaultfd, real threads; every slot is
// compared with the bytes of its begin().
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "base/manifest.hpp"
#include "cache/cow/cow_snapshot.hpp"
#include "cache/cow/cow_snapshotter.hpp"  // thp_allowed()

namespace cairn {
namespace {

#define SKIP_WITHOUT_COW()                                    \
  do {                                                        \
    std::string why = cow_unsupported_reason();               \
    if (!why.empty()) GTEST_SKIP() << "no cow here: " << why; \
  } while (0)

constexpr uint32_t kChunk = 1 << 20;

struct Mem {
  uint8_t* p = nullptr;
  uint64_t size = 0;
  explicit Mem(uint64_t n) : size(n) {
    void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    p = static_cast<uint8_t*>(m);
    for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  }
  ~Mem() {
    if (p) munmap(p, size);
  }
  std::vector<uint8_t> bytes() const { return std::vector<uint8_t>(p, p + size); }
};

std::unique_ptr<Snapshotter> tracking_cow(uint64_t fault_block = kChunk, bool huge_pages = false, uint32_t unprotect_ahead = 0) {
  CowOptions o;
  o.fault_block = fault_block;
  o.huge_pages = huge_pages;  // with huge pages, writes un-protect whole fault blocks
  // Most tests here count the writes that wait for an un-protection: none is un-protected ahead of them
  // unless a test asks for it.
  o.unprotect_ahead = unprotect_ahead;
  auto s = make_cow_snapshotter(o);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

// One snapshot of `regions` (a stream of `len` bytes) into `slot`; `previous`/`gen`: what the slot holds
// (none when gen is 0). `during` runs between begin() and complete().
template <class F>
SnapshotReport take(Snapshotter& s, const std::vector<SnapshotRegion>& regions, uint64_t len, std::vector<uint8_t>& slot,
                    uint64_t gen, F during) {
  slot.resize(len);
  s.set_chunking(kChunk, len);
  if (gen) s.set_previous(chunk_hashes(slot.data(), len, kChunk), gen);
  Status b = s.begin(regions, slot.data());
  EXPECT_TRUE(b.is_ok()) << b.message();
  during();
  Status c = s.complete();
  EXPECT_TRUE(c.is_ok()) << c.message();
  return s.report();
}
SnapshotReport take(Snapshotter& s, const std::vector<SnapshotRegion>& regions, uint64_t len, std::vector<uint8_t>& slot,
                    uint64_t gen) {
  return take(s, regions, len, slot, gen, [] {});
}

std::set<size_t> changed_chunks(const SnapshotReport& r) {
  std::set<size_t> out;
  for (size_t i = 0; i < r.chunk_changed.size(); ++i)
    if (r.chunk_changed[i]) out.insert(i);
  return out;
}

TEST(CowTracking, OnlyTheChunksWrittenSinceTheSlotsSnapshotAreCopied) {
  SKIP_WITHOUT_COW();
  auto s = tracking_cow();
  Mem m(16 * kChunk);
  const std::vector<SnapshotRegion> regions{{"state", m.p, m.size, 0}};
  std::vector<uint8_t> a, b;  // two slots, used in turn as the pipeline does

  SnapshotReport r1 = take(*s, regions, m.size, a, 0);
  ASSERT_NE(r1.generation, 0u);
  EXPECT_TRUE(r1.chunk_changed.empty());  // nothing to compare with: all copied
  EXPECT_FALSE(r1.written_known);  // the tracking starts here
  EXPECT_TRUE(a == m.bytes());

  m.p[3 * kChunk + 5] ^= 1;
  m.p[10 * kChunk] ^= 1;
  SnapshotReport r2 = take(*s, regions, m.size, b, 0);
  EXPECT_TRUE(b == m.bytes());
  // The two writes since r1 began each waited for an un-protection only (their chunks were in a slot).
  EXPECT_EQ(r2.unprotect_faults, 2u);
  EXPECT_GT(r2.unprotect_wait_seconds, 0.0);
  EXPECT_EQ(r2.faults, 0u);
  EXPECT_TRUE(r2.written_known);  // whatever the slot: what was written since the snapshot before
  EXPECT_EQ(r2.written_bytes, 2ull * kChunk);

  m.p[5 * kChunk + 77] ^= 1;
  const auto before = m.bytes();
  a[1] ^= 0xff;  // a chunk of a that is not copied keeps what the slot had, even wrong
  SnapshotReport r3 = take(*s, regions, m.size, a, r1.generation, [&] { m.p[7 * kChunk + 9] ^= 1; });
  EXPECT_EQ(changed_chunks(r3), (std::set<size_t>{3, 5, 10}));
  EXPECT_EQ(r3.unprotect_faults, 1u);  // chunk 5, before r3
  EXPECT_EQ(r3.unchanged_bytes, 13ull * kChunk);
  EXPECT_EQ(r3.protected_bytes, 3ull * kChunk);
  EXPECT_EQ(r3.written_bytes, 1ull * kChunk);  // chunk 5: the write during r3 is the next interval's
  EXPECT_EQ(a[1], static_cast<uint8_t>(before[1] ^ 0xff));
  a[1] ^= 0xff;
  EXPECT_TRUE(a == before);  // the bytes of the call, the write during the snapshot not in them
  // The unchanged chunks' hashes are the slot's previous ones, known before the seal.
  ASSERT_EQ(r3.chunk_known.size(), 16u);
  EXPECT_EQ(r3.chunk_known[0], 1);
  EXPECT_EQ(r3.chunk_known[3], 0);

  // b holds r2's snapshot: since then chunk 5 (before r3) and chunk 7 (during r3) were written.
  SnapshotReport r4 = take(*s, regions, m.size, b, r2.generation);
  EXPECT_EQ(changed_chunks(r4), (std::set<size_t>{5, 7}));
  EXPECT_EQ(r4.unprotect_faults, 1u);  // chunk 7, during r3: left in place, so it waited for no copy
  EXPECT_EQ(r4.written_bytes, 1ull * kChunk);
  EXPECT_TRUE(b == m.bytes());

  // Nothing written: nothing copied, nothing waits.
  SnapshotReport r5 = take(*s, regions, m.size, b, r4.generation);
  EXPECT_TRUE(changed_chunks(r5).empty());
  EXPECT_EQ(r5.unchanged_bytes, m.size);
  EXPECT_TRUE(r5.written_known);
  EXPECT_EQ(r5.written_bytes, 0u);
  EXPECT_TRUE(b == m.bytes());
  // A generation the slot cannot hold (a future one) or a hash list of another length: all copied.
  SnapshotReport r6 = take(*s, regions, m.size, a, r5.generation + 7);
  EXPECT_TRUE(r6.chunk_changed.empty());
  EXPECT_TRUE(a == m.bytes());
}

// Bytes in transparent huge pages of the mappings overlapping [p, p + n) (/proc/self/smaps).
uint64_t anon_huge_bytes(const uint8_t* p, uint64_t n) {
  std::ifstream in("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  bool overlaps = false;
  uint64_t total = 0;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0, kb = 0;
    char sep = 0;
    if (sscanf(line.c_str(), "%lx-%lx%c", &lo, &hi, &sep) == 3 && sep == ' ')
      overlaps = lo < a + n && a < hi;
    else if (overlaps && sscanf(line.c_str(), "AnonHugePages: %lu kB", &kb) == 1)
      total += static_cast<uint64_t>(kb) << 10;
  }
  return total;
}

// Between snapshots the copier gathers the protected memory into huge pages. Tracking writes, what is
// not written since the last snapshot stays write-protected, and kernels that refuse to gather
// write-protected pages answer EINVAL block by block: a block never written at the start of the range
// must not stop the gathering of the written ones after it, and a gathered block stays tracked.
TEST(CowTracking, WrittenBlocksAreGatheredIntoHugePagesPastProtectedOnes) {
  SKIP_WITHOUT_COW();
  constexpr uint64_t kHuge = 2 << 20, kBlocks = 8;
  void* raw = mmap(nullptr, (kBlocks + 1) * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(raw, MAP_FAILED);
  auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  madvise(p, kBlocks * kHuge, MADV_NOHUGEPAGE);  // 4 KiB pages to begin with, whatever THP's default
  memset(p, 7, kBlocks * kHuge);
  madvise(p, kBlocks * kHuge, MADV_HUGEPAGE);
  if (!cow::thp_allowed() || madvise(p, kHuge, 25 /* MADV_COLLAPSE */) != 0 || anon_huge_bytes(p, kHuge) < kHuge) {
    munmap(raw, (kBlocks + 1) * kHuge);
    GTEST_SKIP() << "no transparent huge pages or MADV_COLLAPSE here";
  }
  {
    auto s = tracking_cow(kHuge, true);
    const std::vector<SnapshotRegion> regions{{"state", p + kHuge, (kBlocks - 1) * kHuge, 0}};
    const uint64_t len = (kBlocks - 1) * kHuge;
    std::vector<uint8_t> a, b;
    take(*s, regions, len, a, 0);
    // The first block of the region is never written; the others are, during the next snapshot.
    SnapshotReport r = take(*s, regions, len, b, 0, [&] {
      for (uint64_t k = 2; k < kBlocks; ++k) p[k * kHuge + 123] ^= 1;
    });
    EXPECT_EQ(r.generation, 2u);
    const uint64_t want = (kBlocks - 2) * kHuge;
    uint64_t got = 0;
    // The gathering runs on the copier, a background thread: beside busy threads of normal priority (other
    // tests on a loaded machine) it may get little of a CPU, so wait up to 30 s for it.
    for (int i = 0; i < 1200 && got < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      got = anon_huge_bytes(p + 2 * kHuge, want);
    }
    EXPECT_GE(got, want) << "the written blocks after a protected one were not gathered into huge pages";
    // A write to the first block is still seen, whether the kernel gathered it or not.
    p[kHuge + 5] ^= 1;
    SnapshotReport r3 = take(*s, regions, len, a, 1);
    EXPECT_EQ(changed_chunks(r3).count(0), 1u);
    EXPECT_TRUE(a == std::vector<uint8_t>(p + kHuge, p + kHuge + len));
  }
  munmap(raw, (kBlocks + 1) * kHuge);
}

// A write to a tracked block above its first page un-protects it from that page up, which splits its
// huge page into 4 KiB pages, and nothing gathers it while the tracking goes on. When the snapshotter
// ends (the session's end), the tracked memory is gathered back into huge pages: the application's
// memory as it was, not 4 KiB pages for the rest of the process.
TEST(CowTracking, TheEndOfTrackingGathersTheBlocksItSplitBackIntoHugePages) {
  SKIP_WITHOUT_COW();
  constexpr uint64_t kHuge = 2 << 20, kBlocks = 6, kLen = kBlocks * kHuge;
  void* raw = mmap(nullptr, kLen + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(raw, MAP_FAILED);
  auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  madvise(p, kLen, MADV_HUGEPAGE);
  memset(p, 7, kLen);
  bool huge = cow::thp_allowed();
  for (uint64_t k = 0; huge && k < kBlocks; ++k) huge = madvise(p + k * kHuge, kHuge, 25 /* MADV_COLLAPSE */) == 0;
  if (!huge || anon_huge_bytes(p, kLen) < kLen) {
    munmap(raw, kLen + kHuge);
    GTEST_SKIP() << "no transparent huge pages or MADV_COLLAPSE here";
  }
  const std::vector<SnapshotRegion> regions{{"state", p, kLen, 0}};
  std::vector<uint8_t> a;
  {
    auto s = tracking_cow(kHuge, true);
    take(*s, regions, kLen, a, 0);
    for (uint64_t k = 0; k < kBlocks; k += 2) p[k * kHuge + kHuge / 2] ^= 1;  // every other block, half-way up
    const uint64_t split = anon_huge_bytes(p, kLen);
    if (split == kLen) {
      s.reset();
      munmap(raw, kLen + kHuge);
      GTEST_SKIP() << "this kernel un-protected part of a huge page without splitting it";
    }
    EXPECT_LE(split, kLen - kBlocks / 2 * kHuge) << "the written blocks were not split";
  }
  if (anon_huge_bytes(p, kLen) < kLen) {
    // Not gathered: a failure of the snapshotter's, unless the kernel cannot gather them now either
    // (memory too fragmented or short on this machine at this moment).
    const int rc = madvise(p, kLen, 25 /* MADV_COLLAPSE */);
    const int err = errno;
    if (rc != 0 || anon_huge_bytes(p, kLen) < kLen) {
      munmap(raw, kLen + kHuge);
      GTEST_SKIP() << "the kernel cannot gather this memory into huge pages now (" << (rc ? strerror(err) : "fewer huge pages") << ")";
    }
    ADD_FAILURE() << "the blocks the tracking split were left in 4 KiB pages (a later MADV_COLLAPSE gathered them)";
  }
  for (uint64_t k = 0; k < kBlocks; ++k) EXPECT_EQ(p[k * kHuge + kHuge / 2], k % 2 == 0 ? 6 : 7);
  munmap(raw, kLen + kHuge);
}

// `len` bytes `offset` past a 2 MiB boundary of a fresh private mapping, each byte fill(i); unmapped
// when it goes (declare it before the snapshotter, which must end first).
struct PastABoundary {
  static constexpr uint64_t kHuge = 2 << 20;
  void* raw = MAP_FAILED;
  uint64_t len;
  uint8_t* p = nullptr;       // the boundary
  uint8_t* region = nullptr;  // p + offset
  PastABoundary(uint64_t n, uint64_t offset, uint8_t (*fill)(uint64_t)) : len(n) {
    raw = mmap(nullptr, len + 2 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(raw, MAP_FAILED);
    if (raw == MAP_FAILED) return;
    p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
    region = p + offset;
    for (uint64_t i = 0; i < len; ++i) region[i] = fill(i);
  }
  PastABoundary(const PastABoundary&) = delete;  // owns the mapping
  PastABoundary& operator=(const PastABoundary&) = delete;
  ~PastABoundary() {
    if (raw != MAP_FAILED) munmap(raw, len + 2 * kHuge);
  }
};

// With huge pages a write un-protects its whole 2 MiB block, and every chunk with a byte in that block
// counts as changed. A region that is not aligned to the blocks has chunks that straddle two of them: such
// a chunk is copied only in the block that was written; its part in the other stays in the slot.
TEST(CowTracking, AChangedChunkIsCopiedOnlyInTheBlocksWrittenSince) {
  SKIP_WITHOUT_COW();
  if (!cow::thp_allowed()) GTEST_SKIP() << "transparent huge pages are \"never\" here";
  constexpr uint64_t kHuge = PastABoundary::kHuge, kLen = 6 * kChunk;
  // A page into block 0: the chunks straddle the blocks.
  PastABoundary mem(kLen, 4096, [](uint64_t i) { return static_cast<uint8_t>(i * 7 + (i >> 13)); });
  ASSERT_NE(mem.region, nullptr);
  uint8_t *p = mem.p, *region = mem.region;
  {
    auto s = tracking_cow(kHuge, true);
    const std::vector<SnapshotRegion> regions{{"state", region, kLen, 0}};
    std::vector<uint8_t> a;
    SnapshotReport r1 = take(*s, regions, kLen, a, 0);
    p[kHuge + 5] ^= 1;  // block 1 from its first page: stream bytes [2 MiB - 4 KiB, 4 MiB - 4 KiB), chunks 1-3
    const std::vector<uint8_t> want(region, region + kLen);
    a[kChunk + 100] ^= 0xff;  // chunk 1's part in block 0, not written since r1
    SnapshotReport r2 = take(*s, regions, kLen, a, r1.generation);
    EXPECT_EQ(changed_chunks(r2), (std::set<size_t>{1, 2, 3}));
    EXPECT_EQ(r2.unchanged_bytes, 3 * kChunk);
    EXPECT_EQ(r2.protected_bytes, kHuge);  // block 1 only, not chunks 1-3 whole
    EXPECT_EQ(a[kChunk + 100], static_cast<uint8_t>(want[kChunk + 100] ^ 0xff)) << "copied though not written";
    a[kChunk + 100] ^= 0xff;
    EXPECT_TRUE(a == want);
    // A slot two snapshots back: block 1 written since, the rest still held.
    std::vector<uint8_t> b = want;
    p[3 * kHuge + 5] ^= 1;  // block 3: its only page of the region, chunk 5's last
    const std::vector<uint8_t> want3(region, region + kLen);
    SnapshotReport r3 = take(*s, regions, kLen, b, r1.generation);
    EXPECT_EQ(changed_chunks(r3), (std::set<size_t>{1, 2, 3, 5}));
    EXPECT_EQ(r3.protected_bytes, kHuge + 4096);
    EXPECT_TRUE(b == want3);
  }
}

// With huge pages, the first write to a block in a generation lifts its protection from the written page
// up only; a second write to the block lifts the rest. A region a page short of a 2 MiB boundary (as
// malloc places a large block) has each of its blocks' first page in the huge page below: a writer of
// such a block reaches that page first, and the rest of that huge page -- another block of the region --
// is neither un-protected nor copied next time.
TEST(CowTracking, AWriteAboveABlocksFirstPageLiftsItsProtectionFromThatPageUp) {
  SKIP_WITHOUT_COW();
  if (!cow::thp_allowed()) GTEST_SKIP() << "transparent huge pages are \"never\" here";
  constexpr uint64_t kHuge = PastABoundary::kHuge, kLen = 6 * kChunk, kPage = 4096;
  // Stream byte 0 is huge page 0's last page.
  PastABoundary mem(kLen, kHuge - kPage, [](uint64_t i) { return static_cast<uint8_t>(i * 5 + (i >> 12)); });
  ASSERT_NE(mem.region, nullptr);
  uint8_t* region = mem.region;
  {
    auto s = tracking_cow(kHuge, true);
    const std::vector<SnapshotRegion> regions{{"state", region, kLen, 0}};
    std::vector<uint8_t> a;
    SnapshotReport r1 = take(*s, regions, kLen, a, 0);
    // The region's second 2 MiB (stream [2, 4) MiB: chunks 2 and 3) written upward, as a solver does:
    // its first page is huge page 1's last, the rest huge page 2.
    for (uint64_t i = 2 * kChunk; i < 4 * kChunk; i += 512) region[i] ^= 0x5a;
    const std::vector<uint8_t> want(region, region + kLen);
    SnapshotReport r2 = take(*s, regions, kLen, a, r1.generation);
    EXPECT_EQ(r2.unprotect_faults, 2u);  // one in each huge page
    // Huge page 1 is chunks 0 and 1 (stream [4 KiB, 2 MiB + 4 KiB) less its last page): only that page
    // was un-protected, so chunks 0 and 1 stay in the slot; chunk 4 holds huge page 2's last page.
    EXPECT_EQ(changed_chunks(r2), (std::set<size_t>{2, 3, 4}));
    EXPECT_EQ(r2.protected_bytes, 2 * kChunk + kPage);  // chunks 2 and 3, and chunk 4's page in huge page 2
    EXPECT_TRUE(a == want);

    // Downward from huge page 1's last page: the first write lifts that page, the second all the rest
    // of the block; the writes below it fault no more.
    std::vector<uint8_t> b = a;
    for (uint64_t i = 2 * kChunk + 100; i >= kPage; i -= kPage) region[i] ^= 0x33;  // huge page 1 only
    const std::vector<uint8_t> want3(region, region + kLen);
    SnapshotReport r3 = take(*s, regions, kLen, b, r2.generation);
    EXPECT_EQ(r3.unprotect_faults, 2u);
    EXPECT_EQ(changed_chunks(r3), (std::set<size_t>{0, 1, 2}));
    EXPECT_TRUE(b == want3);
  }
}

class CowTrackingBlocks : public ::testing::TestWithParam<bool> {};

TEST_P(CowTrackingBlocks, WritesFromManyThreadsAndTheKernelAreAllSeen) {
  SKIP_WITHOUT_COW();
  auto s = GetParam() ? tracking_cow(2 << 20, true) : tracking_cow(256 << 10);
  Mem m(32 * kChunk);
  const std::vector<SnapshotRegion> regions{{"state", m.p, m.size, 0}};
  std::vector<uint8_t> slots[2];
  uint64_t gens[2] = {0, 0};
  std::mt19937_64 rng(7);
  for (int round = 0; round < 24; ++round) {
    std::vector<uint8_t>& slot = slots[round % 2];
    const auto want = m.bytes();
    auto writer = [&](uint64_t seed) {
      std::mt19937_64 r(seed);
      for (int k = 0; k < 40; ++k) m.p[r() % m.size] ^= static_cast<uint8_t>(1 + r() % 255);
    };
    SnapshotReport rep = take(*s, regions, m.size, slot, gens[round % 2], [&] {
      std::thread t1(writer, rng()), t2(writer, rng());
      t1.join();
      t2.join();
    });
    ASSERT_TRUE(slot == want) << "round " << round;
    if (round >= 2) {
      EXPECT_EQ(rep.chunk_changed.size(), 32u) << "round " << round;  // incremental
    }
    gens[round % 2] = rep.generation;
    // Between snapshots: a few chunks by threads, one by the kernel (read(2) into the memory).
    std::thread t(writer, rng());
    t.join();
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const char text[] = "written by the kernel";
    ASSERT_EQ(write(fds[1], text, sizeof text), static_cast<ssize_t>(sizeof text));
    const uint64_t at = (rng() % 32) * kChunk + 4096 * (rng() % 200);
    ASSERT_EQ(read(fds[0], m.p + at, sizeof text), static_cast<ssize_t>(sizeof text));
    close(fds[0]);
    close(fds[1]);
  }
}

INSTANTIATE_TEST_SUITE_P(HugePages, CowTrackingBlocks, ::testing::Bool());

// A block the application writes between every two snapshots is un-protected by the copier as soon as
// it is copied (CowOptions::unprotect_ahead), noted written before the write: the write waits for
// nothing. After `unprotect_ahead` snapshots in a row its writes are seen again, so that a block the
// application has left stops being copied; every slot holds the bytes of its begin() all along.
TEST(CowTracking, ABlockWrittenBetweenEverySnapshotIsUnprotectedAheadUntilTheWriterLeavesIt) {
  SKIP_WITHOUT_COW();
  auto s = tracking_cow(kChunk, false, 2);
  Mem m(16 * kChunk);
  const std::vector<SnapshotRegion> regions{{"state", m.p, m.size, 0}};
  std::vector<uint8_t> a;
  uint64_t held = 0;
  auto next = [&](bool write9) {
    m.p[4 * kChunk + 10] ^= 1;
    if (write9) m.p[9 * kChunk + 99] ^= 1;
    const auto want = m.bytes();
    SnapshotReport r = take(*s, regions, m.size, a, held);
    EXPECT_TRUE(a == want) << "generation " << r.generation;
    held = r.generation;
    return r;
  };
  SnapshotReport r1 = take(*s, regions, m.size, a, 0);
  held = r1.generation;
  SnapshotReport r2 = next(true);  // chunks 4 and 9 written in generation 1
  EXPECT_EQ(r2.unprotect_faults, 2u);
  EXPECT_EQ(r2.unprotected_ahead, 0u);  // written in one generation only
  SnapshotReport r3 = next(true);       // and in generation 2: both un-protected as r3 copies them
  EXPECT_EQ(r3.unprotect_faults, 2u);
  EXPECT_EQ(r3.unprotected_ahead, 2u);
  EXPECT_EQ(changed_chunks(r3), (std::set<size_t>{4, 9}));
  SnapshotReport r4 = next(false);  // only chunk 4 now; it waited for nothing
  EXPECT_EQ(r4.unprotect_faults, 0u);
  EXPECT_EQ(r4.unprotected_ahead, 2u);
  EXPECT_EQ(changed_chunks(r4), (std::set<size_t>{4, 9}));  // 9 noted written ahead, copied again
  // Two snapshots un-protected both ahead: r5 leaves them protected, and the writes are seen again.
  SnapshotReport r5 = next(false);
  EXPECT_EQ(r5.unprotect_faults, 0u);
  EXPECT_EQ(r5.unprotected_ahead, 0u);
  EXPECT_EQ(changed_chunks(r5), (std::set<size_t>{4, 9}));
  SnapshotReport r6 = next(false);
  EXPECT_EQ(r6.unprotect_faults, 1u);
  EXPECT_EQ(changed_chunks(r6), (std::set<size_t>{4}));  // chunk 9, left, no longer copied
  EXPECT_EQ(r6.unprotected_ahead, 1u);                   // chunk 4: written in generations 4 and 5
  // r7 un-protects chunk 4 ahead again, and a write reaches it during the snapshot: the slot holds the
  // bytes of the call whether the write came before the copier (it waited for the copy, and r7 left the
  // block to it) or after (the block was open).
  m.p[4 * kChunk + 10] ^= 1;
  const auto before = m.bytes();
  SnapshotReport r7 = take(*s, regions, m.size, a, held, [&] { m.p[4 * kChunk + 77] ^= 1; });
  EXPECT_TRUE(a == before);
  EXPECT_EQ(r7.unprotect_faults, 0u);  // the write before r7: r6 had un-protected it ahead
  EXPECT_EQ(changed_chunks(r7), (std::set<size_t>{4}));
  SnapshotReport r8 = take(*s, regions, m.size, a, r7.generation);
  EXPECT_EQ(changed_chunks(r8), (std::set<size_t>{4}));
  EXPECT_TRUE(a == m.bytes());
}

// A writer that outruns the copier: the copier un-protects ahead blocks 0-3 first while the writer,
// right after begin(), writes blocks 4 and 5 -- its write to 4 has the fault handler copy 4, and then
// the next block to un-protect ahead, 5, which the handler copies and un-protects too, so that the
// writer's write there waits for nothing. Every slot holds the bytes of its begin().
TEST(CowTracking, TheBlockAheadOfAWriterIsUnprotectedAheadByTheFaultHandlerToo) {
  SKIP_WITHOUT_COW();
  auto s = tracking_cow(kChunk, false, 8);
  Mem m(16 * kChunk);
  const std::vector<SnapshotRegion> regions{{"state", m.p, m.size, 0}};
  std::vector<uint8_t> a;
  SnapshotReport r = take(*s, regions, m.size, a, 0);
  auto write = [&](uint64_t from, uint64_t to, uint8_t v) {
    for (uint64_t i = from * kChunk; i < to * kChunk; i += 4096) m.p[i + v] ^= v;
  };
  for (uint8_t v = 1; v <= 2; ++v) {  // blocks 0-5 written in generations 1 and 2
    write(0, 6, v);
    r = take(*s, regions, m.size, a, r.generation);
  }
  uint64_t waited_for_unprotection = 0, ahead = 0;
  // Generations 3-10 (four passes of two snapshots): eight in a row un-protected ahead, the most
  // CowOptions::unprotect_ahead = 8 allows; a fifth pass would see the writes again.
  for (uint8_t v = 3; v <= 6; ++v) {
    write(0, 4, v);
    const auto before = m.bytes();
    r = take(*s, regions, m.size, a, r.generation, [&] { write(4, 6, v); });
    EXPECT_TRUE(a == before) << "pass " << int(v);
    EXPECT_EQ(changed_chunks(r), (std::set<size_t>{0, 1, 2, 3, 4, 5})) << "pass " << int(v);
    ahead += r.unprotected_ahead;
    SnapshotReport next = take(*s, regions, m.size, a, r.generation);
    EXPECT_TRUE(a == m.bytes()) << "pass " << int(v);
    waited_for_unprotection += next.unprotect_faults;  // the writes of this pass that found a copied block protected
    r = next;
  }
  // Blocks 0-3 every pass (by the copier; nothing writes them during the snapshot), and block 5 by the
  // handler in at least two passes of four: on a loaded machine this thread may be kept off the CPU
  // until the copier has copied block 5 itself, and the write then finds it copied but protected.
  EXPECT_GE(ahead, 4u * 4 + 2);
  EXPECT_LE(waited_for_unprotection, 2u);
}

// With huge pages a block is un-protected ahead where the writes un-protected it: from its first written
// page up. A region a page short of a 2 MiB boundary, written upward over its second 2 MiB between every
// two snapshots, has two blocks written (that page's huge page and the next): both un-protected ahead,
// each as far as a write would have, so the versions copy no more than with the writes' own faults.
TEST(CowTracking, UnprotectingAheadLiftsWhatTheWritesLiftedAndNoMore) {
  SKIP_WITHOUT_COW();
  if (!cow::thp_allowed()) GTEST_SKIP() << "transparent huge pages are \"never\" here";
  constexpr uint64_t kHuge = PastABoundary::kHuge, kLen = 6 * kChunk, kPage = 4096;
  // Stream byte 0 is huge page 0's last page.
  PastABoundary mem(kLen, kHuge - kPage, [](uint64_t i) { return static_cast<uint8_t>(i * 5 + (i >> 12)); });
  ASSERT_NE(mem.region, nullptr);
  uint8_t* region = mem.region;
  {
    auto s = tracking_cow(kHuge, true, 8);
    const std::vector<SnapshotRegion> regions{{"state", region, kLen, 0}};
    std::vector<uint8_t> a;
    SnapshotReport r = take(*s, regions, kLen, a, 0);
    for (int v = 2; v <= 5; ++v) {
      for (uint64_t i = 2 * kChunk; i < 4 * kChunk; i += 512) region[i] ^= static_cast<uint8_t>(v);
      const std::vector<uint8_t> want(region, region + kLen);
      r = take(*s, regions, kLen, a, r.generation);
      EXPECT_TRUE(a == want) << "version " << v;
      // Chunks 2 and 3, and chunk 4's page in huge page 2; chunks 0 and 1 stay in the slot.
      EXPECT_EQ(changed_chunks(r), (std::set<size_t>{2, 3, 4})) << "version " << v;
      EXPECT_EQ(r.protected_bytes, 2 * kChunk + kPage) << "version " << v;
      // Versions 2 and 3: the writes before them found both blocks protected (one fault in each); from
      // version 3 on both are un-protected as soon as copied, and the writes before 4 and 5 wait for none.
      EXPECT_EQ(r.unprotect_faults, v <= 3 ? 2u : 0u) << "version " << v;
      EXPECT_EQ(r.unprotected_ahead, v >= 3 ? 2u : 0u) << "version " << v;
    }
  }
}

TEST(CowTracking, ChunksNotWhollyInProtectedPagesAreAlwaysCopied) {
  SKIP_WITHOUT_COW();
  auto s = tracking_cow();
  Mem m(9 * kChunk);
  // A region starting 100 bytes into a page: its first and last partial pages are copied in begin().
  const uint64_t len = 8 * kChunk + 12345;
  const std::vector<SnapshotRegion> regions{{"state", m.p + 100, len, 0}};
  std::vector<uint8_t> a;
  SnapshotReport r1 = take(*s, regions, len, a, 0);
  SnapshotReport r2 = take(*s, regions, len, a, r1.generation);
  EXPECT_EQ(changed_chunks(r2), (std::set<size_t>{0, 8}));
  EXPECT_TRUE(a == std::vector<uint8_t>(m.p + 100, m.p + 100 + len));
}

TEST(CowTracking, ForgettingUnmappingOrAnotherLayoutStartsOver) {
  SKIP_WITHOUT_COW();
  auto s = tracking_cow();
  Mem m(8 * kChunk), other(4 * kChunk);
  std::vector<SnapshotRegion> regions{{"state", m.p, m.size, 0}};
  std::vector<uint8_t> a;
  SnapshotReport r = take(*s, regions, m.size, a, 0);

  // forget(): the memory is the application's alone again, the next snapshot copies everything.
  s->forget(m.p + kChunk, 10);
  m.p[2 * kChunk] ^= 1;
  r = take(*s, regions, m.size, a, r.generation);
  EXPECT_TRUE(r.chunk_changed.empty());
  EXPECT_TRUE(a == m.bytes());
  r = take(*s, regions, m.size, a, r.generation);
  EXPECT_TRUE(changed_chunks(r).empty());

  // Memory discarded between snapshots (reads back as zeros): seen through the remove event.
  ASSERT_EQ(madvise(m.p + 4 * kChunk, kChunk, MADV_DONTNEED), 0);
  r = take(*s, regions, m.size, a, r.generation);
  EXPECT_TRUE(r.chunk_changed.empty());
  EXPECT_TRUE(a == m.bytes());
  EXPECT_EQ(a[4 * kChunk + 3], 0);

  // Another region: another layout of the stream.
  regions.push_back({"other", other.p, other.size, m.size});
  r = take(*s, regions, m.size + other.size, a, r.generation);
  EXPECT_TRUE(r.chunk_changed.empty());
  std::vector<uint8_t> want = m.bytes();
  want.insert(want.end(), other.p, other.p + other.size);
  EXPECT_TRUE(a == want);
  other.p[kChunk] ^= 1;
  r = take(*s, regions, m.size + other.size, a, r.generation);
  EXPECT_EQ(changed_chunks(r), (std::set<size_t>{9}));

  // Without tracking (l1_incremental = off): nothing stays protected, every snapshot copies all.
  CowOptions off;
  off.track_writes = false;
  auto plain = make_cow_snapshotter(off);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_FALSE((*plain)->tracks_writes());
  std::vector<uint8_t> c;
  r = take(**plain, regions, m.size + other.size, c, 0);
  EXPECT_EQ(r.generation, 0u);
  r = take(**plain, regions, m.size + other.size, c, 1);
  EXPECT_TRUE(r.chunk_changed.empty());
}

// Destroying the snapshotter while it tracks leaves the memory writable and unregistered.
TEST(CowTracking, NothingLeftProtectedAfterwards) {
  SKIP_WITHOUT_COW();
  Mem m(4 * kChunk);
  const std::vector<SnapshotRegion> regions{{"state", m.p, m.size, 0}};
  {
    auto s = tracking_cow();
    std::vector<uint8_t> a;
    take(*s, regions, m.size, a, 0);
  }
  memset(m.p, 7, m.size);  // would wait forever on a protection nobody serves
  // The range can be registered again by a new snapshotter.
  auto s = tracking_cow();
  std::vector<uint8_t> a;
  SnapshotReport r = take(*s, regions, m.size, a, 0);
  EXPECT_TRUE(r.fallbacks.empty());
  EXPECT_TRUE(a == m.bytes());
}

}  // namespace
}  // namespace cairn
