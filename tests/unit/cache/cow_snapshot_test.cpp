// The copy-on-write snapshotter (cache/cow/cow_snapshot.hpp) on real memory, real userfaultfd and real
// threads: whatever the application writes after begin(), from however many threads (or the kernel on
// its behalf), the slot ends up with the bytes of the call; a write the fault handler thread is late
// for is served by the copier; regions that cannot be protected are copied and say why; misuse is an
// error; nothing is left behind.
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "base/manifest.hpp"
#include "base/xxh3_copy.hpp"
#include "cache/cow/cow_snapshot.hpp"
#include "cache/cow/userfault.hpp"

namespace cairn {
namespace {

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

#define SKIP_WITHOUT_COW()                                    \
  do {                                                        \
    std::string why = cow_unsupported_reason();               \
    if (!why.empty()) GTEST_SKIP() << "no cow here: " << why; \
  } while (0)

// Private anonymous memory, filled with a pattern that differs per seed.
struct Anon {
  uint8_t* p = nullptr;
  uint64_t size = 0;
  Anon(uint64_t n, int flags = MAP_PRIVATE | MAP_ANONYMOUS, int prot = PROT_READ | PROT_WRITE) : size(n) {
    void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, flags, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    p = static_cast<uint8_t*>(m);
    fill(p, n, 1);
    if (prot != (PROT_READ | PROT_WRITE)) {
      EXPECT_EQ(mprotect(p, n, prot), 0);
    }
  }
  ~Anon() {
    if (p) munmap(p, size);
  }
  static void fill(uint8_t* p, uint64_t n, uint64_t seed) {
    for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  }
};

std::unique_ptr<Snapshotter> cow(CowOptions o = {}) {
  auto s = make_cow_snapshotter(o);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

// Snapshot `regions` into a fresh slot, run `write` right after begin(), complete, and return the slot.
template <class F>
std::vector<uint8_t> snapshot(Snapshotter& s, const std::vector<SnapshotRegion>& regions, F write, Status* st = nullptr) {
  uint64_t total = 0;
  for (const auto& r : regions) total = std::max(total, r.offset + r.size);
  std::vector<uint8_t> slot(total, 0xEE);
  Status b = s.begin(regions, slot.data());
  EXPECT_TRUE(b.is_ok()) << b.message();
  write();
  Status c = s.complete();
  if (st)
    *st = c;
  else
    EXPECT_TRUE(c.is_ok()) << c.message();
  return slot;
}

std::vector<uint8_t> bytes(const uint8_t* p, uint64_t n) { return std::vector<uint8_t>(p, p + n); }

TEST(CowSnapshot, EveryPageWrittenRightAfterBegin) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  Anon a(64 << 20);
  // The copier goes front to back: a write to the last page right after begin() waits for its copy,
  // unless this thread is kept off the CPU for the whole copy (a loaded machine: then try again).
  uint64_t faults = 0;
  for (int round = 0; round < 5 && faults == 0; ++round) {
    auto before = bytes(a.p, a.size);
    auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [&] {
      a.p[a.size - 1] ^= 1;
      memset(a.p, 0x5A + round, a.size);
    });
    EXPECT_TRUE(slot == before);
    EXPECT_EQ(a.p[12345], 0x5A + round);
    SnapshotReport r = s->report();
    EXPECT_EQ(r.bytes, a.size);
    EXPECT_EQ(r.protected_bytes, a.size);
    EXPECT_GE(r.copy_seconds, r.blocking_seconds);
    faults = r.faults;
  }
  EXPECT_GT(faults, 0u) << "no write waited for its page in five snapshots";
}

// The threads of this process whose name (/proc/self/task/*/comm) is `name`.
std::vector<pid_t> threads_named(const std::string& name) {
  std::vector<pid_t> tids;
  DIR* d = opendir("/proc/self/task");
  if (!d) return tids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string n;
    if (std::getline(comm, n) && n == name) tids.push_back(static_cast<pid_t>(std::stol(e->d_name)));
  }
  closedir(d);
  return tids;
}

// The fault handler thread kept off its CPU (SCHED_IDLE, beside a thread that spins there), as when the
// scheduler queues it behind the copier: a write that waits for its copy is served by the copier once it
// has waited on the descriptor for a moment, and the slot still holds the bytes of the call. With write
// tracking (the default) and without.
class CowLateHandler : public ::testing::TestWithParam<bool> {};

TEST_P(CowLateHandler, AWriteTheHandlerThreadIsLateForIsServedByTheCopier) {
  SKIP_WITHOUT_COW();
  CowOptions o;
  o.track_writes = GetParam();
  auto s = cow(o);
  const std::vector<pid_t> handlers = threads_named("cairn-cow-fault");
  ASSERT_FALSE(handlers.empty()) << "no thread named cairn-cow-fault";
  ASSERT_EQ(threads_named("cairn-cow-copy").size(), handlers.size());
  cpu_set_t mine, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_param none{};
  for (pid_t tid : handlers) {
    ASSERT_EQ(sched_setaffinity(tid, sizeof one, &one), 0) << strerror(errno);
    if (sched_setscheduler(tid, SCHED_IDLE, &none) != 0) GTEST_SKIP() << "SCHED_IDLE refused: " << strerror(errno);
  }
  std::atomic<bool> spin{true};
  std::thread spinner([&] {
    (void)sched_setaffinity(0, sizeof one, &one);
    while (spin.load(std::memory_order_relaxed)) {
    }
  });
  Anon a(64 << 20);
  uint64_t late = 0, faults = 0;
  // The copier goes front to back: a write near the end right after begin() waits for its copy (a
  // block of its own each round: a block written before is copied first the next time).
  for (int round = 0; round < 5 && late == 0; ++round) {
    auto before = bytes(a.p, a.size);
    uint8_t* at = a.p + a.size - 1 - static_cast<uint64_t>(round) * (4 << 20);
    auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [&] { *at ^= 0x5A; });
    EXPECT_TRUE(slot == before);
    EXPECT_EQ(*at, before[at - a.p] ^ 0x5A);
    SnapshotReport r = s->report();
    late += r.late_faults;
    faults += r.faults;
  }
  spin = false;
  spinner.join();
  for (pid_t tid : handlers) (void)sched_setscheduler(tid, SCHED_OTHER, &none);
  EXPECT_GT(faults, 0u) << "no write waited for its page in five snapshots";
  EXPECT_GT(late, 0u) << "the copier served none of the " << faults << " writes the handler thread could not run for";
}

INSTANTIATE_TEST_SUITE_P(TrackingWrites, CowLateHandler, ::testing::Bool());

TEST(CowSnapshot, NoWriteAtAll) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  Anon a(16 << 20);
  auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [] {});
  EXPECT_TRUE(slot == bytes(a.p, a.size));
  EXPECT_EQ(s->report().faults, 0u);
}

TEST(CowSnapshot, FirstAndLastByte) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  Anon a(8 << 20);
  auto before = bytes(a.p, a.size);
  auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [&] {
    a.p[0] ^= 0xFF;
    a.p[a.size - 1] ^= 0xFF;
  });
  EXPECT_TRUE(slot == before);
  EXPECT_LE(s->report().faults, 2u);  // the copier may have been first
}

TEST(CowSnapshot, PagesNeverTouchedAreProtectedToo) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  const uint64_t n = 64 << 20;
  void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* p = static_cast<uint8_t*>(m);
  memset(p, 3, 1 << 20);  // the rest has never been touched
  std::vector<uint8_t> want(n, 0);
  memset(want.data(), 3, 1 << 20);
  auto slot = snapshot(*s, {{"u", p, n, 0}}, [&] {
    p[n - 1] = 9;  // far ahead of the copier
    memset(p, 9, n);
  });
  EXPECT_TRUE(slot == want);
  munmap(m, n);
}

TEST(CowSnapshot, ManyThreadsWriteDuringTheCopy) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  Anon a(96 << 20), b(32 << 20);
  auto before_a = bytes(a.p, a.size), before_b = bytes(b.p, b.size);
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> go{false};
    std::vector<std::thread> writers;
    auto slot = snapshot(*s, {{"a", a.p, a.size, 0}, {"b", b.p, b.size, a.size}}, [&] {
      for (int t = 0; t < 8; ++t)
        writers.emplace_back([&, t] {
          while (!go) std::this_thread::yield();
          std::mt19937_64 rng(static_cast<uint64_t>(t * 100 + round));
          Anon& x = t % 2 ? a : b;
          if (t == 0) {  // one sweeps its region front to back, like a solver
            for (uint64_t i = 0; i < x.size; i += 64) x.p[i] = static_cast<uint8_t>(i);
            return;
          }
          for (int k = 0; k < 4000; ++k) x.p[rng() % x.size] = static_cast<uint8_t>(k);
        });
      go = true;
      for (auto& w : writers) w.join();
    });
    EXPECT_TRUE(std::equal(before_a.begin(), before_a.end(), slot.begin())) << "round " << round;
    EXPECT_TRUE(std::equal(before_b.begin(), before_b.end(), slot.begin() + static_cast<long>(a.size))) << "round " << round;
    before_a = bytes(a.p, a.size);
    before_b = bytes(b.p, b.size);
  }
}

// Fault blocks smaller than the copier's chunks: a sweeping writer's faults copy ahead of it too.
TEST(CowSnapshot, SmallFaultBlocks) {
  SKIP_WITHOUT_COW();
  CowOptions o;
  o.fault_block = 64 << 10;
  auto s = cow(o);
  Anon a(32 << 20);
  for (int round = 0; round < 3; ++round) {
    auto before = bytes(a.p, a.size);
    auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [&] {
      for (uint64_t i = a.size; i-- > 0;) a.p[i] = static_cast<uint8_t>(i + round);  // against the copier
    });
    EXPECT_TRUE(slot == before) << "round " << round;
  }
}

// kB of transparent huge pages in the mapping that holds p (/proc/self/smaps).
long huge_kb_at(const void* p) {
  std::ifstream in("/proc/self/smaps");
  auto a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0;
    char sep = 0;
    if (sscanf(line.c_str(), "%lx-%lx%c", &lo, &hi, &sep) == 3 && sep == ' ') inside = lo <= a && a < hi;
    long kb = 0;
    if (inside && sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

// Between snapshots the protected memory is gathered into huge pages (where THP is allowed), so the
// next protection is cheap; with huge_pages = false it is left as the application had it.
TEST(CowSnapshot, HugePagesAreGatheredBetweenSnapshots) {
  SKIP_WITHOUT_COW();
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  // "madvise": memory is in 4 KiB pages until someone asks (here: the snapshotter's MADV_COLLAPSE);
  // "always" gives huge pages from the first touch, "never" none at all.
  if (mode.find("[madvise]") == std::string::npos) GTEST_SKIP() << "THP mode here: " << mode;
  int gathered_after = 0;  // polls the gathering took; the run without it waits twice as long
  for (bool gather : {true, false}) {
    CowOptions o;
    o.huge_pages = gather;
    auto s = cow(o);
    const uint64_t n = 16 << 20;
    void* raw = mmap(nullptr, n + (2 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(raw, MAP_FAILED);
    auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + (2 << 20) - 1) & ~uintptr_t((2 << 20) - 1));
    Anon::fill(p, n, 3);
    EXPECT_EQ(huge_kb_at(p), 0);
    auto before = bytes(p, n);
    auto slot = snapshot(*s, {{"u", p, n, 0}}, [] {});
    EXPECT_TRUE(slot == before);
    long kb = 0;
    int polls = gather ? 200 : 2 * gathered_after + 2;
    for (int i = 0; i < polls && kb < static_cast<long>(n >> 10); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      kb = huge_kb_at(p);
      if (gather) gathered_after = i + 1;
    }
    if (gather)
      EXPECT_EQ(kb, static_cast<long>(n >> 10)) << "not gathered into huge pages after 10 s";
    else
      EXPECT_EQ(kb, 0);
    slot = snapshot(*s, {{"u", p, n, 0}}, [&] { memset(p, 0, n); });  // and still exact
    EXPECT_TRUE(slot == before);
    s.reset();
    munmap(raw, n + (2 << 20));
  }
}

// One snapshotter, many snapshots of changing region sets (more pages, fewer, others): every one exact.
TEST(CowSnapshot, ManySnapshotsOfChangingRegions) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  Anon a(8 << 20), b(24 << 20), c(1 << 20);
  for (int round = 0; round < 12; ++round) {
    std::vector<SnapshotRegion> regions;
    uint64_t off = 0;
    for (Anon* x : {&a, &b, &c})
      if ((round >> (x == &a ? 0 : x == &b ? 1 : 2)) & 1 || x == &c) {
        regions.push_back({"r", x->p, x->size, off});
        off += x->size;
      }
    std::vector<uint8_t> want;
    for (const auto& r : regions) {
      auto* p = static_cast<const uint8_t*>(r.src);
      want.insert(want.end(), p, p + r.size);
    }
    auto slot = snapshot(*s, regions, [&] {
      for (const auto& r : regions) memset(const_cast<void*>(r.src), round, r.size);
    });
    EXPECT_TRUE(slot == want) << "round " << round;
  }
}

// A solver's working set: the same tenth of the blocks written right after every begin(). From the
// second snapshot on the copier copies those blocks first (and the fault handler reads ahead among
// them): the slot still holds the bytes of the call, every time.
TEST(CowSnapshot, AWorkingSetWrittenEverySnapshot) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  const uint64_t block = 2 << 20;
  Anon a(64 << 20);
  for (int round = 0; round < 6; ++round) {
    auto before = bytes(a.p, a.size);
    auto slot = snapshot(*s, {{"w", a.p, a.size, 0}}, [&] {
      for (uint64_t b : {29, 19, 9}) memset(a.p + b * block, 0x30 + round, block);
    });
    EXPECT_TRUE(slot == before) << "round " << round;
    EXPECT_EQ(a.p[19 * block + 7], 0x30 + round);
    EXPECT_EQ(s->report().protected_bytes, a.size);
  }
}

// Regions that start and end inside pages: the partial pages are shared with memory that is not the
// region's (here: other regions and bytes of no region), which the application writes freely.
TEST(CowSnapshot, OddSizesAndAlignments) {
  SKIP_WITHOUT_COW();
  CowOptions o;
  o.eager_below = 0;  // protect even the small ones
  auto s = cow(o);
  Anon a(64 * kPage);
  std::vector<SnapshotRegion> regions;
  struct Span {
    uint64_t from, len;
  };
  std::vector<Span> spans = {{100, 3 * kPage},                  // starts and ends mid-page
                             {3 * kPage + 100, 1},              // one byte, in the previous one's last page
                             {3 * kPage + 200, kPage + 17},     // shares that page too
                             {8 * kPage, 8 * kPage},            // page aligned
                             {16 * kPage - 1, 2},               // straddles a boundary, no whole page
                             {20 * kPage + 7, 30 * kPage + 9},  // long, odd both ends
                             {60 * kPage + 11, kPage - 11}};    // ends at the mapping's end
  uint64_t off = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    regions.push_back({"r" + std::to_string(i), a.p + spans[i].from, spans[i].len, off});
    off += spans[i].len;
  }
  auto before = bytes(a.p, a.size);
  auto slot = snapshot(*s, regions, [&] {
    for (uint64_t i = 0; i < a.size; i += 97) a.p[i] ^= 0x33;  // inside and between the regions
    a.p[a.size - 1] ^= 1;
  });
  for (size_t i = 0; i < spans.size(); ++i)
    EXPECT_EQ(0, memcmp(slot.data() + regions[i].offset, before.data() + spans[i].from, spans[i].len)) << regions[i].name;
  EXPECT_GT(s->report().protected_bytes, 0u);
  EXPECT_LT(s->report().protected_bytes, a.size);
}

// A region on the main thread's stack (a local array): the calls made after begin() use the stack
// below it, the region's own pages are protected like any anonymous memory.
TEST(CowSnapshot, ARegionOnTheStack) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  alignas(64) uint8_t local[256 << 10];
  Anon::fill(local, sizeof local, 9);
  auto before = bytes(local, sizeof local);
  auto slot = snapshot(*s, {{"local", local, sizeof local, 0}}, [&] { memset(local, 0, sizeof local); });
  EXPECT_TRUE(slot == before);
  EXPECT_GE(s->report().protected_bytes, sizeof local - 2 * kPage);
  EXPECT_TRUE(s->report().fallbacks.empty());
}

TEST(CowSnapshot, RegionsThatCannotBeProtectedAreCopiedAndSayWhy) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  uint64_t n = 1 << 20;
  Anon shared(n, MAP_SHARED | MAP_ANONYMOUS);
  Anon readonly(n, MAP_PRIVATE | MAP_ANONYMOUS, PROT_READ);
  char path[] = "/tmp/cairn-cow-file-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(n)), 0);
  auto* file = static_cast<uint8_t*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
  ASSERT_NE(file, MAP_FAILED);
  Anon::fill(file, n, 5);
  Anon ok(n);
  Anon big(2 << 20);
  std::vector<SnapshotRegion> regions = {{"shared", shared.p, n, 0},
                                         {"readonly", readonly.p, n, n},
                                         {"file", file, n, 2 * n},
                                         {"ok", ok.p, n, 3 * n},
                                         {"inside_ok", ok.p + kPage, (64 << 10) + 2 * kPage, 4 * n},
                                         {"big", big.p, 2 << 20, 5 * n}};
  std::vector<std::vector<uint8_t>> before;
  for (const auto& r : regions) before.push_back(bytes(static_cast<const uint8_t*>(r.src), r.size));
  auto slot = snapshot(*s, regions, [&] {
    memset(shared.p, 1, n);
    memset(file, 1, n);
    memset(ok.p, 1, n);
  });
  for (size_t i = 0; i < regions.size(); ++i)
    EXPECT_EQ(0, memcmp(slot.data() + regions[i].offset, before[i].data(), regions[i].size)) << regions[i].name;
  std::map<std::string, std::string> why;
  for (const auto& f : s->report().fallbacks) why[f.region] = f.why;
  EXPECT_NE(why["shared"].find("shared memory"), std::string::npos) << why["shared"];
  EXPECT_NE(why["readonly"].find("read-only"), std::string::npos) << why["readonly"];
  EXPECT_NE(why["file"].find("file-backed memory (" + std::string(path) + ")"), std::string::npos) << why["file"];
  EXPECT_NE(why["inside_ok"].find("shares pages with region 'ok'"), std::string::npos) << why["inside_ok"];
  EXPECT_EQ(why.count("ok"), 0u);
  EXPECT_EQ(why.count("big"), 0u);
  EXPECT_EQ(s->report().protected_bytes, n + (2u << 20));
  munmap(file, n);
  close(fd);
  unlink(path);
}

TEST(CowSnapshot, MisuseIsASequenceError) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  Anon a(4 << 20);
  std::vector<uint8_t> slot(a.size);
  EXPECT_EQ(s->complete().code(), Code::ERR_SEQUENCE);
  ASSERT_TRUE(s->begin({{"u", a.p, a.size, 0}}, slot.data()).is_ok());
  Status again = s->begin({{"u", a.p, a.size, 0}}, slot.data());
  EXPECT_EQ(again.code(), Code::ERR_SEQUENCE);
  EXPECT_NE(again.message().find("still in flight"), std::string::npos);
  EXPECT_TRUE(s->complete().is_ok());
  EXPECT_TRUE(slot == bytes(a.p, a.size));
  Status unmapped = s->begin({{"gone", reinterpret_cast<void*>(uintptr_t{1} << 46), 1 << 20, 0}}, slot.data());
  EXPECT_EQ(unmapped.code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(unmapped.message().find("'gone'"), std::string::npos);
  EXPECT_FALSE(make_cow_snapshotter({3 << 20, 256 << 10, 0}).is_ok());
}

// The kernel writing on the application's behalf (read(2) into a region, or another process with
// process_vm_writev, as MPI's shared-memory transports do) waits for the page's copy like a store does.
TEST(CowSnapshot, WritesByTheKernelWaitToo) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  Anon a(64 << 20);
  auto before = bytes(a.p, a.size);
  pid_t self = getpid();
  bool peer_wrote = false;
  // The writes land near the end, which the copier reaches last; the peer is started before begin().
  uint8_t* by_read = a.p + a.size - (1 << 20) + 5;
  uint8_t* by_peer = a.p + a.size - (2 << 20);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  if (child == 0) {
    char msg[] = "from another process", c;
    if (read(go[0], &c, 1) != 1) _exit(2);
    iovec local{msg, sizeof msg}, remote{by_peer, sizeof msg};
    if (process_vm_writev(self, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof msg)) _exit(0);
    _exit(errno == EPERM ? 77 : 1);  // 77: ptrace_scope forbids a child to write its parent
  }
  auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [&] {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(write(fds[1], "0123456789", 10), 10);
    EXPECT_EQ(read(fds[0], by_read, 10), 10) << strerror(errno);
    close(fds[0]);
    close(fds[1]);
    ASSERT_EQ(write(go[1], "g", 1), 1);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    peer_wrote = WEXITSTATUS(status) == 0;
    EXPECT_TRUE(peer_wrote || WEXITSTATUS(status) == 77) << WEXITSTATUS(status);
  });
  EXPECT_TRUE(slot == before);
  close(go[0]);
  close(go[1]);
  EXPECT_EQ(0, memcmp(by_read, "0123456789", 10));
  if (peer_wrote) {
    EXPECT_STREQ(reinterpret_cast<char*>(by_peer), "from another process");
  }
}

sigjmp_buf g_jump;
std::atomic<int> g_segv{0};
void on_segv(int) {
  g_segv++;
  siglongjmp(g_jump, 1);
}

TEST(CowSnapshot, TheApplicationsOwnSegvHandlerStillWorks) {
  SKIP_WITHOUT_COW();
  g_segv = 0;
  struct sigaction sa {}, old {};
  sa.sa_handler = on_segv;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
  auto s = cow();
  Anon a(8 << 20), guard(kPage, MAP_PRIVATE | MAP_ANONYMOUS, PROT_NONE);
  auto before = bytes(a.p, a.size);
  auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [&] {
    if (sigsetjmp(g_jump, 1) == 0) *reinterpret_cast<volatile uint8_t*>(guard.p) = 1;  // the application's fault
    memset(a.p, 0, a.size);
  });
  EXPECT_EQ(g_segv.load(), 1);
  EXPECT_TRUE(slot == before);
  sigaction(SIGSEGV, &old, nullptr);
}

TEST(CowSnapshot, FreeingARegionInFlightFailsTheSnapshotNotTheProcess) {
  SKIP_WITHOUT_COW();
  auto s = cow();
  uint64_t n = 256 << 20;
  std::vector<uint8_t> slot(n);
  for (bool unmap : {true, false}) {
    void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    memset(m, 7, n);
    ASSERT_TRUE(s->begin({{"state", m, n, 0}}, slot.data()).is_ok());
    if (unmap)
      munmap(m, n);
    else
      madvise(m, n, MADV_DONTNEED);
    Status st = s->complete();
    if (!unmap && st.is_ok()) {
      // The copier got through before the handler read the madvise (which zaps only after that
      // read): then the snapshot is whole and right.
      EXPECT_TRUE(std::all_of(slot.begin(), slot.end(), [](uint8_t b) { return b == 7; }));
    } else {
      EXPECT_EQ(st.code(), Code::ERR_SEQUENCE) << st.message();
      EXPECT_NE(st.message().find("'state'"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find(unmap ? "unmapped" : "discarded"), std::string::npos) << st.message();
    }
    if (!unmap) munmap(m, n);
  }
  // and the snapshotter goes on working
  Anon a(4 << 20);
  auto before = bytes(a.p, a.size);
  auto again = snapshot(*s, {{"u", a.p, a.size, 0}}, [&] { memset(a.p, 1, a.size); });
  EXPECT_TRUE(again == before);
}

int count_entries(const char* dir, const char* link_contains) {
  int n = 0;
  DIR* d = opendir(dir);
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (!link_contains) {
      ++n;
      continue;
    }
    char target[256] = {};
    std::string p = std::string(dir) + "/" + e->d_name;
    if (readlink(p.c_str(), target, sizeof target - 1) > 0 && strstr(target, link_contains)) ++n;
  }
  closedir(d);
  return n;
}

// "uw" in /proc/self/smaps' VmFlags: the mapping is registered for userfaultfd write-protect.
bool registered_anywhere() {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmFlags:", 0) == 0 && line.find(" uw") != std::string::npos) return true;
  return false;
}

TEST(CowSnapshot, NothingLeftBehind) {
  SKIP_WITHOUT_COW();
  {  // the detector sees a registration
    Anon x(kPage);
    auto uffd = cow::Userfault::open();
    ASSERT_TRUE(uffd.is_ok());
    ASSERT_EQ(uffd->register_wp(reinterpret_cast<uint64_t>(x.p), kPage), 0);
    EXPECT_TRUE(registered_anywhere());
    ASSERT_EQ(uffd->unregister(reinterpret_cast<uint64_t>(x.p), kPage), 0);
    EXPECT_FALSE(registered_anywhere());
  }
  int threads = count_entries("/proc/self/task", nullptr);
  int uffds = count_entries("/proc/self/fd", "userfaultfd");
  {
    auto s = cow();
    EXPECT_EQ(count_entries("/proc/self/task", nullptr), threads + 2);
    EXPECT_EQ(count_entries("/proc/self/fd", "userfaultfd"), uffds + 1);
    Anon a(16 << 20);
    std::vector<uint8_t> slot(a.size);
    ASSERT_TRUE(s->begin({{"u", a.p, a.size, 0}}, slot.data()).is_ok());
    ASSERT_TRUE(s->complete().is_ok());
    EXPECT_FALSE(registered_anywhere());
    // destroyed with a snapshot in flight: it finishes first
    ASSERT_TRUE(s->begin({{"u", a.p, a.size, 0}}, slot.data()).is_ok());
    memset(a.p, 2, a.size);
    s.reset();
    EXPECT_FALSE(registered_anywhere());
    EXPECT_EQ(a.p[a.size / 2], 2);
  }
  EXPECT_EQ(count_entries("/proc/self/task", nullptr), threads);
  EXPECT_EQ(count_entries("/proc/self/fd", "userfaultfd"), uffds);
}

// Where userfaultfd is refused (an unprivileged process with vm.unprivileged_userfaultfd = 0 and no
// access to /dev/userfaultfd), the reason says so; the caller then copies.
TEST(CowSnapshot, RefusedUserfaultfdGivesTheReason) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to an unprivileged user";
  std::ifstream sysctl("/proc/sys/vm/unprivileged_userfaultfd");
  int unprivileged = 1;
  if (!(sysctl >> unprivileged) || unprivileged != 0) GTEST_SKIP() << "vm.unprivileged_userfaultfd is not 0 here";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    std::string why = cow_unsupported_reason();
    auto made = make_cow_snapshotter();
    std::string out = why + "|" + (made.is_ok() ? "made" : std::to_string(made.status().c_code()));
    if (write(fds[1], out.data(), out.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  char buf[1024] = {};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string got(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
  EXPECT_NE(got.find("not permitted"), std::string::npos) << got;
  EXPECT_NE(got.find("vm.unprivileged_userfaultfd"), std::string::npos) << got;
  EXPECT_NE(got.find("|" + std::to_string(static_cast<int>(Code::ERR_NOT_SUPPORTED))), std::string::npos) << got;
}

// With the slot's previous stream known (its chunk hashes), the copy snapshotter hashes each chunk first
// and copies only those that differ; a chunk spanning two regions is hashed across both.
TEST(CopySnapshot, OnlyChangedChunksAreCopiedWhenTheSlotsStreamIsKnown) {
  const uint32_t chunk = 4096;
  std::vector<uint8_t> a(3 * chunk + 100), b(2 * chunk - 100);  // chunk 3 spans the end of a and b
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 13 + 1);
  const uint64_t len = a.size() + b.size();
  std::vector<SnapshotRegion> regions{{"a", a.data(), a.size(), 0}, {"b", b.data(), b.size(), a.size()}};
  auto s = make_copy_snapshotter();
  std::vector<uint8_t> slot(len);
  s->set_chunking(chunk, len);
  ASSERT_TRUE(s->begin(regions, slot.data()).is_ok());
  ASSERT_TRUE(s->complete().is_ok());
  EXPECT_EQ(s->report().unchanged_bytes, 0u);
  EXPECT_TRUE(s->report().chunk_hashes.empty());  // a plain copy hashes nothing
  std::vector<uint64_t> held = chunk_hashes(slot.data(), len, chunk);
  ASSERT_EQ(held.size(), 5u);

  a[10] ^= 1;              // chunk 0
  b[b.size() - 1] ^= 1;    // chunk 4 (the last, short)
  b[5] ^= 1;               // chunk 3, across a and b
  s->set_chunking(chunk, len);
  s->set_previous(held);
  ASSERT_TRUE(s->begin(regions, slot.data()).is_ok());
  ASSERT_TRUE(s->complete().is_ok());
  std::vector<uint8_t> want(a);
  want.insert(want.end(), b.begin(), b.end());
  EXPECT_TRUE(slot == want);
  const SnapshotReport r = s->report();
  EXPECT_EQ(r.bytes, len);
  EXPECT_EQ(r.unchanged_bytes, 2u * chunk);  // chunks 1 and 2
  EXPECT_EQ(r.chunk_hashes, chunk_hashes(want.data(), len, chunk));
  EXPECT_EQ(r.chunk_known, std::vector<uint8_t>(5, 1));

  // The slot's bytes of an unchanged chunk are not rewritten (what makes it cheaper): a chunk the slot
  // holds differently from what its hash says stays as it is.
  held = chunk_hashes(slot.data(), len, chunk);
  slot[chunk + 1] ^= 0xff;
  s->set_chunking(chunk, len);
  s->set_previous(held);
  ASSERT_TRUE(s->begin(regions, slot.data()).is_ok());
  EXPECT_EQ(s->report().unchanged_bytes, len);
  EXPECT_NE(slot[chunk + 1], want[chunk + 1]);

  // A previous stream of another chunk count, or one told before set_chunking, is not used.
  s->set_chunking(chunk, len);
  s->set_previous(std::vector<uint64_t>(4, 0));
  ASSERT_TRUE(s->begin(regions, slot.data()).is_ok());
  EXPECT_EQ(s->report().unchanged_bytes, 0u);
  EXPECT_TRUE(slot == want);
  s->set_previous(held);
  s->set_chunking(chunk, len);
  ASSERT_TRUE(s->begin(regions, slot.data()).is_ok());
  EXPECT_EQ(s->report().unchanged_bytes, 0u);
  // Regions that leave a gap in the stream: copied whole.
  std::vector<SnapshotRegion> gap{{"a", a.data(), a.size(), 0}, {"b", b.data(), b.size() - 8, a.size() + 8}};
  s->set_chunking(chunk, len);
  s->set_previous(chunk_hashes(slot.data(), len, chunk));
  ASSERT_TRUE(s->begin(gap, slot.data()).is_ok());
  EXPECT_EQ(s->report().unchanged_bytes, 0u);
}

// A plain copy of a stream of 16 MiB or more hashes every chunk as it copies it (xxh3_copy) where the CPU
// can: chunks inside a region in one pass, a chunk across two regions and the short last one piece by
// piece. The hashes are the slot's, so the seal hashes nothing; the first such copy also times hashing
// alone, for l1_incremental = auto.
TEST(CowSnapshot, ALargePlainCopyHashesAsItCopies) {
  const uint32_t chunk = 1 << 20;
  // Two regions that meet inside chunk 9, and a stream whose last chunk is short.
  std::vector<uint8_t> a((9u << 20) + 4097), b((8u << 20) - 4097 + 777);
  std::mt19937_64 g(5);
  for (auto& x : a) x = static_cast<uint8_t>(g());
  for (auto& x : b) x = static_cast<uint8_t>(g());
  const uint64_t len = a.size() + b.size();
  ASSERT_GE(len, 16u << 20);
  std::vector<SnapshotRegion> regions{{"a", a.data(), a.size(), 0}, {"b", b.data(), b.size(), a.size()}};
  auto s = make_copy_snapshotter();
  std::vector<uint8_t> slot(len + 64);
  for (int round = 0; round < 2; ++round) {
    a[round * 4096] ^= 1;
    s->set_chunking(chunk, len);
    ASSERT_TRUE(s->begin(regions, slot.data() + 32).is_ok());  // a destination off the 64-byte lines
    ASSERT_TRUE(s->complete().is_ok());
    std::vector<uint8_t> want(a);
    want.insert(want.end(), b.begin(), b.end());
    ASSERT_EQ(memcmp(slot.data() + 32, want.data(), len), 0) << round;
    const SnapshotReport r = s->report();
    EXPECT_EQ(r.bytes, len);
    if (!xxh3_copy_fused()) {
      EXPECT_TRUE(r.chunk_hashes.empty()) << "without the fused pass the seal hashes";
      continue;
    }
    EXPECT_TRUE(r.hashed_copy);
    EXPECT_EQ(r.chunk_hashes, chunk_hashes(want.data(), len, chunk)) << round;
    EXPECT_EQ(r.chunk_known, std::vector<uint8_t>(r.chunk_hashes.size(), 1));
    EXPECT_EQ(r.unchanged_bytes, 0u);
    if (round == 0)
      EXPECT_GT(r.hash_ns_per_byte, 0) << "the first such copy times hashing alone";
    else
      EXPECT_EQ(r.hash_ns_per_byte, 0) << "once per snapshotter";
  }
}

TEST(CowSnapshot, TheCopySnapshotterReportsToo) {
  auto s = make_copy_snapshotter();
  Anon a(1 << 20);
  auto slot = snapshot(*s, {{"u", a.p, a.size, 0}}, [] {});
  EXPECT_TRUE(slot == bytes(a.p, a.size));
  EXPECT_EQ(s->report().bytes, a.size);
  EXPECT_STREQ(s->name(), "copy");
}

}  // namespace
}  // namespace cairn
