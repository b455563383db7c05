// The /proc/self/maps reader behind the copy-on-write snapshotter's choice of what it can protect
// (cache/cow/mappings.hpp): parsing, the reasons given, and a fuzz loop over mutated lines.
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>

#include "cache/cow/mappings.hpp"

namespace cairn::cow {
namespace {

const char* const kSample =
    "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n"
    "7f0000100000-7f0000200000 rw-s 00000000 00:01 4242                       /dev/shm/slot-0.data\n"
    "7f0000200000-7f0000300000 rw-p 00001000 08:01 1234                       /home/u/data.bin\n"
    "7f0000300000-7f0000400000 r--p 00000000 00:00 0 \n"
    "7f0000400000-7f0000600000 rw-p 00000000 00:0f 99                         /anon_hugepage (deleted)\n"
    "7f0000600000-7f0000700000 rw-s 00000000 00:05 17                         /dev/nvidia0\n"
    "7f0000700000-7f0000800000 rw-p 00000000 00:00 0                          [anon:solver state]\n"
    "7f0000800000-7f0000900000 rw-s 00000000 00:01 5                          /SYSV00000000 (deleted)\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

TEST(CowMappings, ParsesTheKernelsLines) {
  auto m = parse_mappings(kSample);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_EQ(m->size(), 11u);
  const Mapping& heap = (*m)[0];
  EXPECT_EQ(heap.start, 0x55d0c0a00000u);
  EXPECT_EQ(heap.end, 0x55d0c0a21000u);
  EXPECT_TRUE(heap.readable && heap.writable && !heap.shared);
  EXPECT_EQ(heap.path, "[heap]");
  EXPECT_EQ((*m)[1].path, "");
  EXPECT_EQ((*m)[2].inode, 4242u);
  EXPECT_TRUE((*m)[2].shared);
  EXPECT_EQ((*m)[5].path, "/anon_hugepage (deleted)");
  EXPECT_EQ((*m)[7].path, "[anon:solver state]");
}

TEST(CowMappings, SaysWhyARangeCannotBeProtected) {
  auto m = parse_mappings(kSample).value();
  auto why = [&](uint64_t a, uint64_t b) { return unprotectable_reason(m, a, b); };
  EXPECT_EQ(why(0x55d0c0a00000, 0x55d0c0a21000), "");
  EXPECT_EQ(why(0x7f0000000000, 0x7f0000100000), "");
  EXPECT_EQ(why(0x7f0000700000, 0x7f0000800000), "");
  EXPECT_EQ(why(0x7ffd00001000, 0x7ffd00002000), "");
  EXPECT_EQ(why(0x7f0000100000, 0x7f0000101000), "shared memory (/dev/shm/slot-0.data)");
  EXPECT_EQ(why(0x7f0000200000, 0x7f0000201000), "file-backed memory (/home/u/data.bin)");
  EXPECT_EQ(why(0x7f0000300000, 0x7f0000301000), "read-only memory");
  EXPECT_EQ(why(0x7f0000400000, 0x7f0000401000), "hugetlb pages");
  EXPECT_EQ(why(0x7f0000600000, 0x7f0000601000), "shared memory (/dev/nvidia0)");
  EXPECT_EQ(why(0x7f0000800000, 0x7f0000801000), "shared memory (/SYSV00000000 (deleted))");
  EXPECT_EQ(why(0xffffffffff600000, 0xffffffffff601000), "special memory ([vsyscall])");
  // spanning two mappings: the first that cannot be protected decides
  EXPECT_EQ(why(0x7f00000ff000, 0x7f0000101000), "shared memory (/dev/shm/slot-0.data)");
  EXPECT_EQ(why(0x7f0000900000, 0x7f0000901000), "not entirely mapped");
  EXPECT_EQ(why(0x55d0c0a20000, 0x55d0c0a22000), "not entirely mapped");
  EXPECT_TRUE(readable(m, 0x7f0000000000, 0x7f0000300000));
  EXPECT_FALSE(readable(m, 0x7f0000900000, 0x7f0000900010));
  EXPECT_FALSE(readable(m, 0xffffffffff600000, 0xffffffffff600010));
}

TEST(CowMappings, ReadsThisProcess) {
  void* p = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* s = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto m = read_mappings();
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto a = reinterpret_cast<uint64_t>(p), b = reinterpret_cast<uint64_t>(s);
  EXPECT_EQ(unprotectable_reason(*m, a, a + (1 << 20)), "");
  EXPECT_NE(unprotectable_reason(*m, b, b + (1 << 20)).find("shared memory"), std::string::npos);
  munmap(p, 1 << 20);
  munmap(s, 1 << 20);
}

// The kernel's answer for a few ranges (PROCMAP_QUERY where there is one) equals the text's mappings
// that overlap them.
TEST(CowMappings, QueriedRangesMatchTheText) {
  void* p = mmap(nullptr, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* s = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto a = reinterpret_cast<uint64_t>(p), b = reinterpret_cast<uint64_t>(s);
  int local = 0;
  auto stack = reinterpret_cast<uint64_t>(&local);
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{a, a + (4 << 20)}, {b, b + (1 << 20)}, {stack, stack + 8},
                                                       {a + 4096, a + 8192}};
  auto queried = mappings_in(ranges);
  auto text = read_mappings();
  ASSERT_TRUE(queried.is_ok()) << queried.status().message();
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  std::vector<Mapping> want;
  for (const auto& m : *text)
    for (const auto& [lo, hi] : ranges)
      if (m.start < hi && lo < m.end) {
        want.push_back(m);
        break;
      }
  ASSERT_EQ(queried->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*queried)[i].start, want[i].start);
    EXPECT_EQ((*queried)[i].end, want[i].end);
    EXPECT_EQ((*queried)[i].shared, want[i].shared);
    EXPECT_EQ((*queried)[i].writable, want[i].writable);
    EXPECT_EQ((*queried)[i].inode, want[i].inode);
    EXPECT_EQ((*queried)[i].path, want[i].path);
  }
  EXPECT_EQ(unprotectable_reason(*queried, a, a + (4 << 20)), "");
  EXPECT_NE(unprotectable_reason(*queried, b, b + (1 << 20)).find("shared memory"), std::string::npos);
  munmap(p, 4 << 20);
  munmap(s, 1 << 20);
}

TEST(CowMappings, RejectsWhatIsNotAMapsLine) {
  for (const char* bad : {"xyz", "7f00-7e00 rw-p 0 00:00 0", "7f00-7f10 rw-x 0 00:00 0", "7f00-7f10 rw-p",
                          "7f00-7f10 rw-p 0 00:00 12a", "-7f10 rw-p 0 00:00 0", "7f00 7f10 rw-p 0 00:00 0"}) {
    auto m = parse_mappings(bad);
    ASSERT_FALSE(m.is_ok()) << bad;
    EXPECT_EQ(m.status().code(), Code::ERR_FORMAT);
  }
}

// Mutated maps text: never a crash; what parses is sorted and each range ordered.
TEST(CowMappingsFuzz, MutatedTextNeverCrashes) {
  std::mt19937_64 rng(0xc0f);
  const std::string seed = kSample;
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string t = seed;
    for (int ops = 1 + int(rng() % 4); ops > 0 && !t.empty(); --ops) {
      size_t at = rng() % t.size();
      switch (rng() % 5) {
        case 0: t[at] = char(rng()); break;
        case 1: t.insert(at, std::string(1 + rng() % 8, "0f- \n:p"[rng() % 7])); break;
        case 2: t.erase(at, 1 + rng() % 24); break;
        case 3: t.resize(at); break;
        case 4: t.insert(at, "ffffffffffffffffffff"); break;
      }
    }
    auto m = parse_mappings(t);
    if (!m.is_ok()) {
      ASSERT_EQ(m.status().code(), Code::ERR_FORMAT);
      continue;
    }
    ++accepted;
    for (size_t i = 0; i < m->size(); ++i) {
      ASSERT_LE((*m)[i].start, (*m)[i].end);
      if (i) {
        ASSERT_LE((*m)[i - 1].start, (*m)[i].start);
      }
    }
    (void)unprotectable_reason(*m, 0x7f0000000000, 0x7f0000900000);
    (void)readable(*m, 0, ~0ull);
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace cairn::cow
