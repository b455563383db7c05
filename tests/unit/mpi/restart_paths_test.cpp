// The direct restart paths on real MPI ranks (ctest runs it on 4, each its own simulated node):
// cairn_restart without cairn_restart_available reads the newest version straight into the regions --
// from the L1 slot file, or from L3 in place when the caches are gone -- and still returns success only
// for verified bytes: a damaged or truncated slot, or a damaged L3 file, falls back to the next level or
// the next older version, and a size mismatch on any rank leaves every rank's regions untouched.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_store.hpp"
#include "cairn/cairn.h"
#include "base/fsutil.hpp"
#include "core/runtime.hpp"
#include "l3/l3_store.hpp"
#include "base/stream_reader.hpp"
#include "mpi_test_main.hpp"
#include "scratch_job.hpp"
#include "../damage.hpp"

namespace cairn {
namespace {

int g_rank = 0, g_size = 1;

using test::everywhere;

// Region contents of version `v` on this rank: reproducible, different per rank, region and version.
std::vector<uint8_t> contents(size_t len, int region, int v) {
  std::mt19937_64 rng(static_cast<uint64_t>(g_rank) * 1000003 + region * 1009 + v);
  std::vector<uint8_t> out(len);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

class RestartPaths : public ::testing::Test {
 protected:
  // Sizes that put region boundaries inside checksum chunks (64 KiB) and read pieces.
  static constexpr size_t kA = 300001, kB = 1 << 20;

  void SetUp() override {
    root_ = test::start_scratch_job("restartpaths", "paths", counter_++);
    a_.assign(kA, 0);
    b_.assign(kB, 0);
  }
  void TearDown() override {
    decide_slot_read_for_tests(std::nullopt);  // a test that chose the way to read leaves it to the probe
    if (Runtime::instance()) Runtime::destroy().ignore();
    test::end_scratch_job(root_);
  }

  void start(size_t b_len = kB) {
    ASSERT_TRUE(Runtime::create(MPI_COMM_WORLD, nullptr).is_ok());
    if (b_.size() != b_len) b_.assign(b_len, 0x22);
    ASSERT_TRUE(Runtime::instance()->protect("a", a_.data(), a_.size(), CAIRN_BYTE).is_ok());
    ASSERT_TRUE(Runtime::instance()->protect("b", b_.data(), b_.size(), CAIRN_BYTE).is_ok());
  }
  void stop() { ASSERT_TRUE(Runtime::destroy().is_ok()); }

  // Versions 1..n, each with its own contents, every one flushed to L3.
  void take_versions(int n) {
    start();
    for (int v = 1; v <= n; ++v) {
      a_ = contents(kA, 0, v);
      b_ = contents(kB, 1, v);
      ASSERT_TRUE(Runtime::instance()->protect("a", a_.data(), a_.size(), CAIRN_BYTE).is_ok());
      ASSERT_TRUE(Runtime::instance()->protect("b", b_.data(), b_.size(), CAIRN_BYTE).is_ok());
      ASSERT_TRUE(Runtime::instance()->checkpoint().is_ok());
      ASSERT_TRUE(Runtime::instance()->wait_all().is_ok());
    }
    stop();
    std::fill(a_.begin(), a_.end(), 0x11);
    std::fill(b_.begin(), b_.end(), 0x22);
  }

  std::string rank_dir(int rank) const {
    return root_ + "/cache/cairn-paths/node" + std::to_string(rank) + "/r" + std::to_string(rank);
  }
  std::string slot_file(int rank, uint64_t v) const {
    CacheStore cs;
    EXPECT_TRUE(cs.open(rank_dir(rank), 2).is_ok());
    auto rec = cs.read_record(v);
    EXPECT_TRUE(rec.is_ok()) << rec.status().message();
    return cs.slot_path(rec ? static_cast<int>(rec->slot) : 0);
  }
  static void flip(const std::string& path, uint64_t at) { test::flip_byte(path, at, 0x40); }
  void remove_caches() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
      ASSERT_TRUE(fs::remove_tree(root_ + "/cache").is_ok());
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Versions 2 and then 3 restarted from L1, read the given way; then, a chunk of version 3 damaged, from L3.
  void restart_through_mapping(SlotRead way) {
    decide_slot_read_for_tests(way);
    take_versions(2);
    start();
    expect_restart_from(CAIRN_LEVEL_L1, 2);
    a_ = contents(kA, 0, 3);  // new buffers: protected again
    b_ = contents(kB, 1, 3);
    ASSERT_TRUE(Runtime::instance()->protect("a", a_.data(), a_.size(), CAIRN_BYTE).is_ok());
    ASSERT_TRUE(Runtime::instance()->protect("b", b_.data(), b_.size(), CAIRN_BYTE).is_ok());
    ASSERT_TRUE(Runtime::instance()->checkpoint().is_ok());
    ASSERT_TRUE(Runtime::instance()->wait_all().is_ok());
    stop();
    start();
    expect_restart_from(CAIRN_LEVEL_L1, 3);
    stop();
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 1) flip(slot_file(1, 3), 5);  // a chunk of region a
    MPI_Barrier(MPI_COMM_WORLD);
    start();
    expect_restart_from(CAIRN_LEVEL_L3, 3);
    stop();
  }
  // Restart with cairn_restart alone (the direct paths); the level and version it came from.
  // cairn_restart on every rank: ERR_SIZE_MISMATCH everywhere, and no rank's regions written (start
  // take_versions left them filled with 0x11 and 0x22).
  void expect_size_mismatch_untouched() {
    Status st = Runtime::instance()->restart();
    EXPECT_TRUE(everywhere(st.code() == Code::ERR_SIZE_MISMATCH)) << st.message();
    bool untouched = std::all_of(a_.begin(), a_.end(), [](uint8_t c) { return c == 0x11; }) &&
                     std::all_of(b_.begin(), b_.end(), [](uint8_t c) { return c == 0x22; });
    EXPECT_TRUE(everywhere(untouched));
  }
  // cairn_restart on every rank: it must succeed everywhere, from `level`, with version v in the regions.
  void expect_restart_from(int level, int v) {
    Status st = Runtime::instance()->restart();
    int got_v = 0, got_level = 0;
    Runtime::instance()->restart_level(&got_v, &got_level);
    EXPECT_TRUE(everywhere(st.is_ok())) << st.message();
    EXPECT_EQ(got_level, level);
    EXPECT_EQ(got_v, v);
    EXPECT_TRUE(everywhere(holds(v)));
  }
  bool holds(int v) const { return a_ == contents(kA, 0, v) && b_ == contents(kB, 1, v); }

  std::string root_;
  std::vector<uint8_t> a_, b_;
  static int counter_;
};
int RestartPaths::counter_ = 0;

TEST_F(RestartPaths, L1SlotReadIntoTheRegions) {
  take_versions(2);
  start();
  expect_restart_from(CAIRN_LEVEL_L1, 2);
  stop();
}

TEST_F(RestartPaths, DamagedSlotFallsBackToL3InPlace) {
  take_versions(2);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 2) flip(slot_file(2, 2), kA + 70000);  // a chunk of region b
  MPI_Barrier(MPI_COMM_WORLD);
  start();
  expect_restart_from(CAIRN_LEVEL_L3, 2);  // single: no L2; version 2 is in L3
  stop();
}

// The same two through each mapping a machine may have measured faster for a slot of 128 MiB or more:
// the cache's own mapping of the slot, or a new read-only one (each piece hashed where it lies and copied
// on); the checkpoint after the restart writes the slot (through the cache's mapping, which the restart
// left as it was, or made); a damaged chunk still sends the restart to L3.
TEST_F(RestartPaths, L1SlotReadThroughTheCachesMapping) { restart_through_mapping(SlotRead::cache_mapping); }
TEST_F(RestartPaths, L1SlotReadThroughANewReadOnlyMapping) { restart_through_mapping(SlotRead::own_mapping); }

TEST_F(RestartPaths, TruncatedSlotFallsBack) {
  take_versions(2);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 1) {
    ASSERT_EQ(truncate(slot_file(1, 2).c_str(), kA / 2), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  start();
  expect_restart_from(CAIRN_LEVEL_L3, 2);
  stop();
}

TEST_F(RestartPaths, DamagedL3FileFallsBackToTheOlderVersion) {
  take_versions(2);
  remove_caches();
  if (g_rank == 3) {
    Config cfg;
    cfg.prefix = root_ + "/prefix";
    cfg.job = "paths";
    Layout l = make_layout(cfg);
    flip(l3::data_path(l, 2, 3), kA + kB - 5);  // the last chunk
  }
  MPI_Barrier(MPI_COMM_WORLD);
  start();
  // Version 2 was read in place on every rank, rejected, and version 1 written over it.
  expect_restart_from(CAIRN_LEVEL_L3, 1);
  stop();
}

TEST_F(RestartPaths, SizeMismatchOnOneRankTouchesNoRegion) {
  take_versions(1);
  remove_caches();
  start(g_rank == 3 ? kB + 8 : kB);  // rank 3 protects another size
  expect_size_mismatch_untouched();
  stop();
}

TEST_F(RestartPaths, SizeMismatchWithTheCachesTouchesNoRegion) {
  take_versions(1);
  start(g_rank == 1 ? kB - 8 : kB);  // every rank but 1 could read its slot in place
  expect_size_mismatch_untouched();
  stop();
}

TEST_F(RestartPaths, RestartAvailableThenRestartStagesL3) {
  take_versions(2);
  remove_caches();
  start();
  int avail = 0, version = 0;
  ASSERT_TRUE(Runtime::instance()->restart_available(&avail, &version).is_ok());
  EXPECT_EQ(avail, 1);
  EXPECT_EQ(version, 2);
  // restart_available must not have touched the regions.
  EXPECT_TRUE(everywhere(std::all_of(a_.begin(), a_.end(), [](uint8_t c) { return c == 0x11; })));
  expect_restart_from(CAIRN_LEVEL_L3, 2);
  stop();
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  return cairn::test::run_mpi_tests(argc, argv, [](int rank, int size) { cairn::g_rank = rank, cairn::g_size = size; });
}
