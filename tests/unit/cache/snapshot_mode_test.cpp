// The snapshot knob's choice (cache/snapshot_mode.hpp): copy, cow and auto, on this machine's kernel and
// on a fake /sys with and without RDMA devices.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cache/cow/cow_snapshot.hpp"
#include "cache/snapshot_mode.hpp"

namespace cairn {
namespace {

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

// auto switches to copy after such a snapshot, between two snapshots, and the report of the one that
// decided it still reads as cow's.
TEST(SnapshotMode, AutoSwitchesToCopyAfterAWriterOutranTheCopier) {
  if (!cow_unsupported_reason().empty()) GTEST_SKIP() << cow_unsupported_reason();
  FakeSys sys;
  SnapshotChoice c = choose_snapshotter(SnapshotMode::automatic, false, sys.root, {.usable = 4, .online = 4, .ranks_on_node = 1});
  ASSERT_STREQ(c.snapshotter->name(), "cow");
  const uint64_t size = 16 << 20;
  auto* state = static_cast<uint8_t*>(aligned_alloc(2 << 20, size));
  std::vector<uint8_t> slot(size);
  memset(state, 1, size);
  // Untouched during the snapshot: cow stays.
  ASSERT_TRUE(c.snapshotter->begin({{"state", state, size, 0}}, slot.data()).is_ok());
  ASSERT_TRUE(c.snapshotter->complete().is_ok());
  EXPECT_STREQ(c.snapshotter->name(), "cow");
  // Rewritten at once: the blocks wait for their copies (unless this thread is kept off the CPU for
  // the whole copy: then again); the next snapshot is a copy.
  bool outran = false;
  for (int round = 0; round < 5 && !outran; ++round) {
    ASSERT_TRUE(c.snapshotter->begin({{"state", state, size, 0}}, slot.data()).is_ok());
    memset(state, 2 + round, size);
    ASSERT_TRUE(c.snapshotter->complete().is_ok());
    EXPECT_EQ(slot[0], round == 0 ? 1 : 1 + round);
    SnapshotReport cow = c.snapshotter->report();
    EXPECT_GT(cow.protected_bytes, 0u);  // the report of the snapshot just completed, still cow's
    outran = writer_outran_copier(cow, 2 << 20);
    EXPECT_STREQ(c.snapshotter->name(), "cow");
  }
  ASSERT_TRUE(outran) << "no writer outran the copier in five snapshots";
  ASSERT_TRUE(c.snapshotter->begin({{"state", state, size, 0}}, slot.data()).is_ok());
  EXPECT_STREQ(c.snapshotter->name(), "copy");
  memset(state, 0x77, size);
  ASSERT_TRUE(c.snapshotter->complete().is_ok());
  EXPECT_EQ(c.snapshotter->report().protected_bytes, 0u);
  EXPECT_NE(slot[size / 2], 0x77);
  free(state);
}

}  // namespace
}  // namespace cairn
