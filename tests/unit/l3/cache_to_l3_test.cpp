// The flush from L1 done outside the job (l3/cache_to_l3.hpp): a version complete in the cache reads
// back from L3 bit-exact; a damaged slot, a record that changed (the slot reused), a version already
// committed or not whole are refused, and nothing of a refused version is committed. On real files.
#include "l3/cache_to_l3.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <random>

#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"
#include "../stream_manifest.hpp"

namespace cairn {
namespace {

class CacheToL3 : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = "/tmp/cairn-cache-to-l3-" + std::to_string(getpid());
    fs::remove_tree(root_).ignore();
    layout_.prefix = root_ + "/prefix";
    layout_.control = layout_.prefix + "/.cairn";
    layout_.cache_job = root_ + "/cache";
    ASSERT_TRUE(fs::make_dirs(layout_.prefix).is_ok());
  }
  void TearDown() override { fs::remove_tree(root_).ignore(); }

  // Version v of an n-rank job in L1 (rank r on node<r>), as the library leaves it: the slot, then the
  // record. Returns what flush_from_cache is given.
  std::vector<l3::CachedRank> write_l1(uint64_t v, uint32_t n, int slot = 1) {
    std::vector<l3::CachedRank> out;
    for (uint32_t r = 0; r < n; ++r) {
      std::string data(1000 + 77 * r, '\0');
      std::mt19937_64 rng(v * 100 + r);
      for (auto& c : data) c = static_cast<char>(rng());
      Manifest m = stream_manifest(data, {.version = v, .rank = r, .nranks = n, .chunk_size = 256,
                                          .node = "node" + std::to_string(r), .label = "ckpt." + std::to_string(v)});
      CacheStore store;
      const std::string dir = rank_dir(layout_, m.node, r);
      EXPECT_TRUE(store.open(dir, 2).is_ok());
      auto mapped = store.slot(slot, data.size());
      EXPECT_TRUE(mapped.is_ok());
      memcpy((*mapped)->data(), data.data(), data.size());
      L1Record rec{static_cast<uint32_t>(slot), m};
      EXPECT_TRUE(store.write_record(v, rec).is_ok());
      out.push_back({dir, rec});
      streams_.push_back(data);
    }
    return out;
  }

  std::string root_;
  Layout layout_;
  std::vector<std::string> streams_;
};

TEST_F(CacheToL3, WritesEveryRankThenCommit) {
  auto ranks = write_l1(5, 3);
  uint64_t reported = 0;
  ASSERT_TRUE(l3::flush_from_cache(layout_, 5, ranks, [&](uint64_t b) { reported += b; }).is_ok());
  EXPECT_EQ(reported, streams_[0].size() + streams_[1].size() + streams_[2].size());
  auto c = l3::read_commit(layout_, 5);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->nranks, 3u);
  EXPECT_EQ(c->label, "ckpt.5");
  for (uint32_t r = 0; r < 3; ++r) {
    auto m = l3::read_manifest(layout_, 5, r);
    ASSERT_TRUE(m.is_ok());
    std::string back(m->total_size, '\0');
    ASSERT_TRUE(l3::read_data(layout_, *m, reinterpret_cast<uint8_t*>(back.data())).is_ok());
    EXPECT_EQ(back, streams_[r]);
  }
  // Committed now: a second flush is refused and changes nothing.
  Status again = l3::flush_from_cache(layout_, 5, ranks);
  EXPECT_EQ(again.code(), Code::ERR_INVALID_ARG) << again.message();
}

TEST_F(CacheToL3, ADamagedSlotIsRefusedAndNothingCommitted) {
  auto ranks = write_l1(6, 2);
  {
    CacheStore store;
    ASSERT_TRUE(store.open(ranks[1].rank_dir, 2).is_ok());
    auto slot = store.slot(1, 0);
    ASSERT_TRUE(slot.is_ok());
    (*slot)->data()[700] ^= 0x10;
  }
  Status st = l3::flush_from_cache(layout_, 6, ranks);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << st.message();
  EXPECT_NE(st.message().find("rank 1 ("), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(l3::commit_path(layout_, 6)));
}

TEST_F(CacheToL3, ARecordThatChangedMeansTheSlotWasReused) {
  auto ranks = write_l1(7, 2);
  // What the flush was told differs from the record on disk now (the job moved on).
  ranks[1].record.manifest.label = "older";
  Status st = l3::flush_from_cache(layout_, 7, ranks);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << st.message();
  EXPECT_NE(st.message().find("is the job still running?"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(l3::commit_path(layout_, 7)));
  // The record removed (the job dropped it to reuse the slot): refused too.
  ranks = write_l1(8, 2);
  ASSERT_TRUE(fs::remove_file(ranks[0].rank_dir + "/" + version_file_name(8, VersionFile::record)).is_ok());
  EXPECT_EQ(l3::flush_from_cache(layout_, 8, ranks).code(), Code::ERR_CORRUPT);
  EXPECT_FALSE(fs::exists(l3::commit_path(layout_, 8)));
}

TEST_F(CacheToL3, OnlyAWholeVersionIsFlushed) {
  auto ranks = write_l1(9, 3);
  auto missing = ranks;
  missing.erase(missing.begin() + 1);  // rank 1 absent: rank 2 is in its place
  EXPECT_EQ(l3::flush_from_cache(layout_, 9, missing).code(), Code::ERR_NO_CHECKPOINT);
  EXPECT_EQ(l3::flush_from_cache(layout_, 9, {}).code(), Code::ERR_NO_CHECKPOINT);
  EXPECT_EQ(l3::flush_from_cache(layout_, 10, ranks).code(), Code::ERR_NO_CHECKPOINT);  // records of 9
  EXPECT_FALSE(fs::exists(l3::commit_path(layout_, 9)));
  // An uncommitted directory of the version (an earlier attempt) is written over.
  ASSERT_TRUE(fs::make_dirs(layout_.l3_version_dir(9)).is_ok());
  ASSERT_TRUE(fs::write_file_atomic(l3::data_path(layout_, 9, 0), "partial").is_ok());
  ASSERT_TRUE(l3::flush_from_cache(layout_, 9, ranks).is_ok());
  auto m = l3::read_manifest(layout_, 9, 0);
  ASSERT_TRUE(m.is_ok());
  std::string back(m->total_size, '\0');
  ASSERT_TRUE(l3::read_data(layout_, *m, reinterpret_cast<uint8_t*>(back.data())).is_ok());
  EXPECT_EQ(back, streams_[0]);
}

}  // namespace
}  // namespace cairn
