// The snapshot knob's choice (cache/snapshot_mode.hpp): copy, cow and auto, on this machine's kernel and
// on a fake /sys with and without RDMA devices.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cache/cow/cow_snapshot.hpp"
#include "cache/snapshot_mode.hpp"

namespace cairn {
namespace {

// A writer that rewrites its state right after a checkpoint, 2 MiB at a time from the end: it meets the
// copier (which starts at the beginning, or at the blocks written first last time) only in the middle.
// Whether it outruns the copier in a given snapshot is still a race (a writer kept off its CPU loses
// it), so the tests below give it many snapshots to do so three times in a row.
void rewrite_from_the_end(uint8_t* state, uint64_t size, uint8_t value) {
  constexpr uint64_t kBlock = 2 << 20;
  for (uint64_t end = size; end > 0;) {
    const uint64_t begin = end > kBlock ? end - kBlock : 0;
    memset(state + begin, value, end - begin);
    end = begin;
  }
}

struct FakeSys {
  std::string root;
  FakeSys() {
    char t[] = "/tmp/cairn-sys-XXXXXX";
    root = mkdtemp(t);
    mkdir((root + "/class").c_str(), 0700);
  }
  void add(const std::string& cls, const std::string& dev) {
    mkdir((root + "/class/" + cls).c_str(), 0700);
    mkdir((root + "/class/" + cls + "/" + dev).c_str(), 0700);
  }
  ~FakeSys() { (void)!system(("rm -rf " + root).c_str()); }
};

TEST(SnapshotMode, RdmaDevicesAreListed) {
  FakeSys sys;
  EXPECT_TRUE(rdma_devices(sys.root).empty());
  sys.add("infiniband", "mlx5_1");
  sys.add("infiniband", "mlx5_0");
  sys.add("cxi", "cxi0");
  EXPECT_EQ(rdma_devices(sys.root), (std::vector<std::string>{"cxi0", "mlx5_0", "mlx5_1"}));
}

TEST(SnapshotMode, CopyIsCopy) {
  SnapshotChoice c = choose_snapshotter(SnapshotMode::copy);
  EXPECT_STREQ(c.snapshotter->name(), "copy");
  EXPECT_FALSE(c.warn);
}

TEST(SnapshotMode, AutoTakesCowWhereTheKernelAllowsAndNoNicCanWriteByDma) {
  FakeSys sys;
  const std::string unsupported = cow_unsupported_reason();
  SnapshotChoice c = choose_snapshotter(SnapshotMode::automatic, false, sys.root);
  EXPECT_FALSE(c.warn);
  if (unsupported.empty()) {
    EXPECT_STREQ(c.snapshotter->name(), "cow");
    EXPECT_NE(c.why.find("copy-on-write"), std::string::npos) << c.why;
  } else {
    EXPECT_STREQ(c.snapshotter->name(), "copy");
    EXPECT_NE(c.why.find(unsupported), std::string::npos) << c.why;
  }
  sys.add("infiniband", "mlx5_0");
  SnapshotChoice rdma = choose_snapshotter(SnapshotMode::automatic, false, sys.root);
  EXPECT_STREQ(rdma.snapshotter->name(), "copy");
  EXPECT_NE(rdma.why.find("RDMA devices (mlx5_0)"), std::string::npos) << rdma.why;
  EXPECT_NE(rdma.why.find("snapshot = cow"), std::string::npos) << rdma.why;
}

// The checkpoint service registers and reads the L1 slots, never the protected regions, and only after
// the snapshot is complete: it changes the reason, not the choice; RDMA devices still mean copy.
TEST(SnapshotMode, TheServiceDoesNotChangeTheChoice) {
  FakeSys sys;
  SnapshotChoice plain = choose_snapshotter(SnapshotMode::automatic, false, sys.root);
  SnapshotChoice with = choose_snapshotter(SnapshotMode::automatic, true, sys.root);
  EXPECT_STREQ(with.snapshotter->name(), plain.snapshotter->name());
  EXPECT_FALSE(with.warn);
  if (cow_unsupported_reason().empty()) {
    EXPECT_NE(with.why.find("the checkpoint service reads the L1 slots only"), std::string::npos) << with.why;
  }
  sys.add("infiniband", "mlx5_0");
  SnapshotChoice rdma = choose_snapshotter(SnapshotMode::automatic, true, sys.root);
  EXPECT_STREQ(rdma.snapshotter->name(), "copy");
  EXPECT_NE(rdma.why.find("RDMA devices (mlx5_0)"), std::string::npos) << rdma.why;
}

TEST(SnapshotMode, AnExplicitCowIsHonouredOrWarnedAbout) {
  FakeSys sys;
  sys.add("infiniband", "mlx5_0");
  SnapshotChoice c = choose_snapshotter(SnapshotMode::cow, false, sys.root);
  EXPECT_TRUE(c.warn);  // either it cannot, or the NIC may write by DMA
  if (cow_unsupported_reason().empty()) {
    EXPECT_STREQ(c.snapshotter->name(), "cow");
    EXPECT_NE(c.why.find("not seen"), std::string::npos) << c.why;
    // A DMA write between snapshots would be missed by the write tracking too: it is off there.
    EXPECT_FALSE(c.snapshotter->tracks_writes());
    EXPECT_NE(c.why.find("writes are not tracked"), std::string::npos) << c.why;
    FakeSys plain;
    SnapshotChoice tracked = choose_snapshotter(SnapshotMode::cow, false, plain.root);
    EXPECT_TRUE(tracked.snapshotter->tracks_writes());
    EXPECT_NE(tracked.why.find("notes which chunks are written"), std::string::npos) << tracked.why;
    SnapshotChoice off = choose_snapshotter(SnapshotMode::cow, false, plain.root, this_process_cpus(1), false);
    EXPECT_FALSE(off.snapshotter->tracks_writes());
  } else {
    EXPECT_STREQ(c.snapshotter->name(), "copy");
  }
}

// auto's first rule: a core to spare for the copier, from the rank's affinity and the node's ranks.
TEST(SnapshotMode, AutoWantsACoreToSpare) {
  EXPECT_EQ(no_spare_core({.usable = 2, .online = 16, .ranks_on_node = 8}), "");   // bound to two CPUs
  EXPECT_EQ(no_spare_core({.usable = 16, .online = 16, .ranks_on_node = 8}), "");  // unbound, two per rank
  EXPECT_EQ(no_spare_core({.usable = 2, .online = 2, .ranks_on_node = 1}), "");
  EXPECT_NE(no_spare_core({.usable = 1, .online = 16, .ranks_on_node = 1}).find("1 CPU only"), std::string::npos);
  EXPECT_NE(no_spare_core({.usable = 2, .online = 2, .ranks_on_node = 2}).find("2 ranks"), std::string::npos);
  EXPECT_NE(no_spare_core({.usable = 1, .online = 1, .ranks_on_node = 1}), "");
  FakeSys sys;
  SnapshotChoice c = choose_snapshotter(SnapshotMode::automatic, false, sys.root, {.usable = 1, .online = 8, .ranks_on_node = 1});
  EXPECT_STREQ(c.snapshotter->name(), "copy");
  EXPECT_FALSE(c.warn);
  EXPECT_NE(c.why.find("snapshot = auto: copy, because this rank may run on 1 CPU"), std::string::npos) << c.why;
  // An explicit cow is honoured on one CPU too.
  if (cow_unsupported_reason().empty()) {
    EXPECT_STREQ(choose_snapshotter(SnapshotMode::cow, false, sys.root, {.usable = 1, .online = 8, .ranks_on_node = 1})
                     .snapshotter->name(),
                 "cow");
  }
}

// auto's second rule: a snapshot whose writes reached a quarter of the protected memory first.
TEST(SnapshotMode, AWriterThatOutranTheCopierMeansCopy) {
  SnapshotReport r;
  r.protected_bytes = 256ull << 20;
  EXPECT_FALSE(writer_outran_copier(r, 2 << 20));
  r.faults = 13;  // a tenth of 128 blocks
  EXPECT_FALSE(writer_outran_copier(r, 2 << 20));
  r.faults = 32;
  EXPECT_TRUE(writer_outran_copier(r, 2 << 20));
  r.protected_bytes = 0;  // nothing protected: no copy-on-write to judge
  EXPECT_FALSE(writer_outran_copier(r, 2 << 20));
}

// auto's other way to a trial: a tracked snapshot after the application rewrote half of its state or
// more since the one before, whenever in the interval it wrote it.
TEST(SnapshotMode, AWriterThatRewroteMostOfItsStateMeansATrial) {
  SnapshotReport r;
  r.bytes = r.protected_bytes = 256ull << 20;
  r.written_bytes = 256ull << 20;
  EXPECT_FALSE(writer_rewrote_most(r));  // not known: the tracking started with this snapshot, or is off
  r.written_known = true;
  EXPECT_TRUE(writer_rewrote_most(r));
  r.written_bytes = 128ull << 20;
  EXPECT_TRUE(writer_rewrote_most(r));
  r.written_bytes = 26ull << 20;  // a tenth
  EXPECT_FALSE(writer_rewrote_most(r));
  r.written_bytes = 256ull << 20;
  r.protected_bytes = 0;  // nothing protected: no copy-on-write to judge
  EXPECT_FALSE(writer_rewrote_most(r));
}

// snapshot = auto where cow may run (a core to spare), over a state of 16 MiB of ones in memory aligned to
// 2 MiB, and a slot for it.
struct AutoOverAState {
  FakeSys sys;
  SnapshotChoice c = choose_snapshotter(SnapshotMode::automatic, false, sys.root, {.usable = 4, .online = 4, .ranks_on_node = 1});
  static constexpr uint64_t size = 16 << 20;
  std::unique_ptr<uint8_t, decltype(&free)> state{static_cast<uint8_t*>(aligned_alloc(2 << 20, size)), &free};
  std::vector<uint8_t> slot = std::vector<uint8_t>(size);
  AutoOverAState() { memset(state.get(), 1, size); }
  Status begin() { return c.snapshotter->begin({{"state", state.get(), size, 0}}, slot.data()); }
  Status complete() { return c.snapshotter->complete(); }
  const char* name() const { return c.snapshotter->name(); }
  SnapshotReport report() const { return c.snapshotter->report(); }
  void rewrite(uint8_t value) { rewrite_from_the_end(state.get(), size, value); }
};

// auto switches to copy after three such snapshots in a row, between two snapshots, and the report of the
// one that decided it still reads as cow's.
TEST(SnapshotMode, AutoSwitchesToCopyAfterAWriterOutranTheCopier) {
  if (!cow_unsupported_reason().empty()) GTEST_SKIP() << cow_unsupported_reason();
  AutoOverAState a;
  ASSERT_STREQ(a.name(), "cow");
  // Untouched during the snapshot: cow stays.
  ASSERT_TRUE(a.begin().is_ok());
  ASSERT_TRUE(a.complete().is_ok());
  EXPECT_STREQ(a.name(), "cow");
  // Rewritten at once: the blocks wait for their copies (unless this thread is kept off the CPU for
  // the whole copy: then again); the next snapshot is a copy.
  bool outran = false;
  for (int round = 0, in_a_row = 0; round < 40 && in_a_row < 3; ++round) {
    ASSERT_TRUE(a.begin().is_ok());
    a.rewrite(static_cast<uint8_t>(2 + round));
    ASSERT_TRUE(a.complete().is_ok());
    EXPECT_EQ(a.slot[0], round == 0 ? 1 : 1 + round);
    SnapshotReport cow = a.report();
    EXPECT_GT(cow.protected_bytes, 0u);  // the report of the snapshot just completed, still cow's
    outran = writer_outran_copier(cow, 2 << 20);
    in_a_row = outran ? in_a_row + 1 : 0;
    EXPECT_STREQ(a.name(), "cow");
  }
  ASSERT_TRUE(outran) << "no writer outran the copier three times in a row in forty snapshots";
  ASSERT_TRUE(a.begin().is_ok());
  EXPECT_STREQ(a.name(), "copy");
  memset(a.state.get(), 0x77, a.size);
  ASSERT_TRUE(a.complete().is_ok());
  EXPECT_EQ(a.report().protected_bytes, 0u);
  EXPECT_NE(a.slot[a.size / 2], 0x77);
}

// What auto weighs after a writer outran the copier: the application's waits under cow, from the
// snapshot's report, against the copy's blocking time.
TEST(SnapshotMode, AutoWeighsCowsWaitsAgainstTheCopysBlocking) {
  SnapshotReport r;
  r.blocking_seconds = 0.0003;
  r.fault_wait_seconds = 0.058;
  r.unprotect_wait_seconds = 0.055;
  r.copy_seconds = 0.35;  // the copier's own time: not the application's
  EXPECT_DOUBLE_EQ(cow_application_wait(r), 0.0003 + 0.058 + 0.055);
  EXPECT_TRUE(auto_prefers_cow(cow_application_wait(r), 0.185));   // 2 GiB, the full rewriter on a KVM guest
  EXPECT_FALSE(auto_prefers_cow(0.0005 + 0.007 + 0.252, 0.145));   // the same under a hypervisor's dear TLB flushes
  EXPECT_FALSE(auto_prefers_cow(0.02, 0.02));                      // a tie copies: nothing protected, nothing tracked
  EXPECT_TRUE(auto_prefers_cow(0.0057, 0.0150));                   // the protection alone against a copy
}

// A writer that rewrites its whole state between two checkpoints, never during a snapshot: no write
// waits for a copy, yet every block costs it an un-protection under cow. After three tracked snapshots
// of it, the next version copies; a writer of an eighth of its state keeps cow.
TEST(SnapshotMode, AutoTriesACopyForAWriterThatRewritesItsStateBetweenCheckpoints) {
  if (!cow_unsupported_reason().empty()) GTEST_SKIP() << cow_unsupported_reason();
  for (const uint64_t part : {AutoOverAState::size / 8, AutoOverAState::size}) {
    AutoOverAState a;
    a.c.snapshotter->set_chunking(1 << 20, a.size);
    int heavy = 0;
    for (int round = 0; round < 6; ++round) {
      ASSERT_TRUE(a.begin().is_ok());
      ASSERT_TRUE(a.complete().is_ok());
      const SnapshotReport r = a.report();
      ASSERT_GT(r.protected_bytes, 0u) << round;
      EXPECT_EQ(r.written_known, round > 0) << round;  // the tracking starts with the first snapshot
      if (round > 0) {
        EXPECT_EQ(r.written_bytes, part) << round;
      }
      EXPECT_EQ(r.faults, 0u) << "no write during a snapshot";
      heavy += writer_rewrote_most(r);
      memset(a.state.get(), 0x50 + round, part);  // between the checkpoints
      if (part < a.size && round == 5) break;
      if (heavy == 3) break;
    }
    ASSERT_TRUE(a.begin().is_ok());
    EXPECT_STREQ(a.name(), part < a.size ? "cow" : "copy") << part;
    ASSERT_TRUE(a.complete().is_ok());
    EXPECT_EQ(heavy, part < a.size ? 0 : 3);
    EXPECT_EQ(a.slot[0], a.state.get()[0]);
  }
}

// After three snapshots in a row in which the writer outran the copier, two versions copy; the one after
// them uses whichever of the two the median of the three snapshots' waits and the faster copy favour,
// and either way the slot holds the state of its begin().
TEST(SnapshotMode, AutoTriesACopyThenKeepsTheCheaper) {
  if (!cow_unsupported_reason().empty()) GTEST_SKIP() << cow_unsupported_reason();
  AutoOverAState a;
  ASSERT_STREQ(a.name(), "cow");
  ASSERT_TRUE(a.begin().is_ok());
  ASSERT_TRUE(a.complete().is_ok());
  std::vector<double> waits;  // cow_application_wait of each snapshot of a run in which the writer outran the copier
  for (int round = 0; round < 40 && waits.size() < 3; ++round) {
    ASSERT_TRUE(a.begin().is_ok());
    a.rewrite(static_cast<uint8_t>(2 + round));
    ASSERT_TRUE(a.complete().is_ok());
    if (writer_outran_copier(a.report(), 2 << 20))
      waits.push_back(cow_application_wait(a.report()));
    else
      waits.clear();
  }
  ASSERT_EQ(waits.size(), 3u) << "no writer outran the copier three times in a row in forty snapshots";
  std::sort(waits.begin(), waits.end());
  // The trial copies: two, the faster weighed.
  memset(a.state.get(), 0x30, a.size);
  ASSERT_TRUE(a.begin().is_ok());
  EXPECT_STREQ(a.name(), "copy");
  EXPECT_FALSE(a.c.snapshotter->tracks_writes()) << "the copy's version: nothing protected, nothing tracked";
  memset(a.state.get(), 0x2f, a.size);
  ASSERT_TRUE(a.complete().is_ok());
  double copy_s = a.report().blocking_seconds;
  EXPECT_EQ(a.slot[a.size - 1], 0x30);
  memset(a.state.get(), 0x31, a.size);
  ASSERT_TRUE(a.begin().is_ok());
  EXPECT_STREQ(a.name(), "copy") << "the second trial copy";
  memset(a.state.get(), 0x32, a.size);
  ASSERT_TRUE(a.complete().is_ok());
  copy_s = std::min(copy_s, a.report().blocking_seconds);
  EXPECT_EQ(a.slot[a.size - 1], 0x31);
  // From here on, the cheaper one.
  const bool cow = auto_prefers_cow(waits[1], copy_s);
  ASSERT_TRUE(a.begin().is_ok());
  EXPECT_STREQ(a.name(), cow ? "cow" : "copy")
      << "cow waited " << waits[1] << " s (the median), the copy blocked " << copy_s << " s";
  memset(a.state.get(), 0x33, a.size);  // during the snapshot: with cow, each block waits for its copy first
  ASSERT_TRUE(a.complete().is_ok());
  EXPECT_EQ(a.report().protected_bytes > 0, cow);
  EXPECT_EQ(a.slot[0], 0x32);
  EXPECT_EQ(a.slot[a.size / 2], 0x32);
  EXPECT_EQ(a.slot[a.size - 1], 0x32);
  // Decided for the rest of the run, even after another writer that outruns the copier.
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(a.begin().is_ok());
    EXPECT_STREQ(a.name(), cow ? "cow" : "copy") << round;
    memset(a.state.get(), 0x40 + round, a.size);
    ASSERT_TRUE(a.complete().is_ok());
    EXPECT_EQ(a.slot[a.size / 2], round == 0 ? 0x33 : 0x40 + round - 1);
  }
}

}  // namespace
}  // namespace cairn
