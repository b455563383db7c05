// L1 cache store and L3 store: records, markers, commit, listing and pruning on real files. (The formats
// alone, with their fuzzers: l1_files_test, set_record_test, l3_where_test, l3_commit_test.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "cache/cache_store.hpp"
#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"

namespace cairn {
namespace {

std::string temp_dir(const char* tag) {
  std::string d = "/tmp/cairn-unit-" + std::string(tag) + "-" + std::to_string(getpid());
  fs::remove_tree(d).ignore();
  EXPECT_TRUE(fs::make_dirs(d).is_ok());
  return d;
}

Manifest sample(uint64_t v, uint32_t rank, const std::string& data) {
  Manifest m;
  m.version = v;
  m.label = "ckpt." + std::to_string(v);
  m.rank = rank;
  m.nranks = 2;
  m.node = "n0";
  m.chunk_size = 4;
  m.total_size = data.size();
  RegionEntry e;
  e.name = "x";
  e.count = data.size();
  e.size = data.size();
  m.regions.push_back(e);
  m.chunk_hashes = chunk_hashes(data.data(), data.size(), m.chunk_size);
  return m;
}

// Before a slot is overwritten: the versions it holds, and any whose record cannot be read, are forgotten;
// the other slot's version stays.
TEST(CacheStore, ReleaseSlotForgetsItsOccupantAndUnreadableRecords) {
  std::string dir = temp_dir("release");
  CacheStore c;
  ASSERT_TRUE(c.open(dir + "/r0", 2).is_ok());
  ASSERT_TRUE(c.write_record(3, L1Record{0, sample(3, 0, "abc")}).is_ok());
  ASSERT_TRUE(c.write_record(4, L1Record{1, sample(4, 0, "def")}).is_ok());
  ASSERT_TRUE(c.write_record(5, L1Record{0, sample(6, 0, "ghi")}).is_ok());  // names version 6: unreadable
  ASSERT_TRUE(c.release_slot(0).is_ok());
  EXPECT_EQ(c.versions(), std::vector<uint64_t>{4});
  fs::remove_tree(dir).ignore();
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) st.st_size = -1;
  return st;
}

// A store of two slots whose preparation of two pieces each is asked for while a copy holds it.
class HeldPreparation : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("prep-hold");
    ASSERT_TRUE(c_.open(dir_ + "/r0", 2).is_ok());
    hold_ = std::make_unique<CacheStore::PrepareHold>(c_);
    c_.prepare(kSize, 0, [](int) { return false; });
  }
  void TearDown() override {
    hold_.reset();
    c_.finish_prepare();
    fs::remove_tree(dir_).ignore();
  }
  static constexpr uint64_t kSize = 2 * MappedFile::kPrefaultPiece;
  std::string dir_;
  CacheStore c_;
  std::unique_ptr<CacheStore::PrepareHold> hold_;
};

// The preparation waits at its next piece while a copy holds it, and goes on once the hold ends.
TEST_F(HeldPreparation, WaitsUntilTheHoldEnds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Created, not one piece allocated; the second slot not begun.
  EXPECT_EQ(stat_of(c_.slot_path(0)).st_size, 0);
  EXPECT_EQ(stat_of(c_.slot_path(0)).st_blocks, 0);
  EXPECT_EQ(stat_of(c_.slot_path(1)).st_size, -1);
  hold_.reset();
  c_.finish_prepare();
  for (int s = 0; s < 2; ++s) {
    struct stat st = stat_of(c_.slot_path(s));
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), kSize) << "slot " << s;
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, kSize) << "slot " << s;
  }
  auto slot = c_.slot(1, kSize);  // prepared: mapped without waiting
  ASSERT_TRUE(slot.is_ok());
  EXPECT_EQ((*slot)->size(), kSize);
}

// A restart stops a held preparation (it does not wait for the hold), and the next prepare() goes on.
TEST_F(HeldPreparation, StopDoesNotWaitForTheHold) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c_.stop_prepare();  // returns with the hold still held
  EXPECT_EQ(stat_of(c_.slot_path(1)).st_size, -1);
  hold_.reset();
  c_.prepare(kSize, 0, [](int) { return false; });
  c_.finish_prepare();
  for (int s = 0; s < 2; ++s) EXPECT_EQ(static_cast<uint64_t>(stat_of(c_.slot_path(s)).st_size), kSize) << "slot " << s;
}

TEST(CacheStore, RecordsSlotsAndMarkers) {
  std::string dir = temp_dir("cache");
  CacheStore c;
  ASSERT_TRUE(c.open(dir + "/r0", 2).is_ok());
  auto slot = c.slot(1, 1000);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_GE((*slot)->size(), 1000u);
  memcpy((*slot)->data(), "hello world", 11);
  Manifest m = sample(7, 0, "hello world");
  ASSERT_TRUE(c.write_record(7, L1Record{1, m}).is_ok());
  auto rec = c.read_record(7);
  ASSERT_TRUE(rec.is_ok()) << rec.status().message();
  EXPECT_EQ(rec->slot, 1u);
  EXPECT_EQ(rec->manifest, m);
  EXPECT_TRUE(verify_stream(rec->manifest, (*slot)->data(), 11).is_ok());
  EXPECT_EQ(c.versions(), std::vector<uint64_t>{7});
  EXPECT_EQ(c.version_in_slot(1), 7u);
  EXPECT_FALSE(c.is_protected(7));
  ASSERT_TRUE(c.mark_protected(7).is_ok());
  EXPECT_TRUE(c.is_protected(7));
  // The slot outlives the mapping: a new store sees the same bytes.
  CacheStore again;
  ASSERT_TRUE(again.open(dir + "/r0", 2).is_ok());
  auto s2 = again.slot(1, 0);
  ASSERT_TRUE(s2.is_ok());
  EXPECT_EQ(memcmp((*s2)->data(), "hello world", 11), 0);
  ASSERT_TRUE(c.drop(7).is_ok());
  EXPECT_TRUE(c.versions().empty());
  EXPECT_FALSE(c.is_protected(7));
  // A record for another version under this name is refused.
  ASSERT_TRUE(c.write_record(8, L1Record{0, sample(9, 0, "abc")}).is_ok());
  EXPECT_EQ(c.read_record(8).status().code(), Code::ERR_CORRUPT);
  fs::remove_tree(dir).ignore();
}

TEST(L3Store, CommitListPrune) {
  std::string dir = temp_dir("l3");
  Config cfg;
  cfg.prefix = dir;
  cfg.cache_dir = dir;
  Layout l = make_layout(cfg);
  for (uint64_t v = 1; v <= 4; ++v) {
    std::string data = "version-" + std::to_string(v);
    for (uint32_t r = 0; r < 2; ++r) {
      Manifest m = sample(v, r, data);
      ASSERT_TRUE(l3::write_rank(l, m, reinterpret_cast<const uint8_t*>(data.data())).is_ok());
    }
    if (v != 3) {
      ASSERT_TRUE(l3::commit(l, v, 2, "ckpt." + std::to_string(v)).is_ok());
    }
  }
  auto listed = l3::list_committed(l);
  ASSERT_EQ(listed.size(), 3u) << "version 3 has no COMMIT";
  EXPECT_EQ(listed[0].version, 4u);
  EXPECT_EQ(listed[0].label, "ckpt.4");
  EXPECT_EQ(l3::max_version_present(l), 4u);
  auto m = l3::read_manifest(l, 4, 1);
  ASSERT_TRUE(m.is_ok());
  std::string buf(m->total_size, '\0');
  ASSERT_TRUE(l3::read_data(l, *m, reinterpret_cast<uint8_t*>(buf.data())).is_ok());
  EXPECT_EQ(buf, "version-4");
  ASSERT_TRUE(l3::prune(l, 1).is_ok());
  listed = l3::list_committed(l);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].version, 4u) << "the newest committed version is never removed";
  EXPECT_FALSE(fs::exists(l.l3_version_dir(3))) << "uncommitted older directory removed";
  // A truncated data file is detected before any checksum work.
  ASSERT_EQ(truncate(l3::data_path(l, 4, 0).c_str(), 3), 0);
  auto m0 = l3::read_manifest(l, 4, 0);
  ASSERT_TRUE(m0.is_ok());
  EXPECT_EQ(l3::read_data(l, *m0, reinterpret_cast<uint8_t*>(buf.data())).code(), Code::ERR_CORRUPT);
  fs::remove_tree(dir).ignore();
}

}  // namespace
}  // namespace cairn
