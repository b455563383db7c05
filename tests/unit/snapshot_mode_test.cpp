// The snapshot knob's choice (cache/snapshot_mode.hpp): copy, cow and auto, on this machine's kernel and
// on a fake /sys with and without RDMA devices.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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
  if (cow_unsupported_reason().empty())
    EXPECT_NE(with.why.find("the checkpoint service reads the L1 slots only"), std::string::npos) << with.why;
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
  } else {
    EXPECT_STREQ(c.snapshotter->name(), "copy");
  }
}

}  // namespace
}  // namespace cairn
