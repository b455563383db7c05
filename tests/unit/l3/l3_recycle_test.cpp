// The recycle pool (l3_store.hpp: prune with recycle, RankWriter::open, drop_recycled): a pruned
// version's own data files go to <prefix>/.cairn/recycle, one per rank; the next writer of that rank
// overwrites the file in place and cuts it to what it wrote, so a version reads back bit for bit whatever
// the recycled file held; a file a kept version still names never goes there.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"
#include "two_rank_prefix.hpp"

namespace cairn::l3 {
namespace {

ino_t inode_of(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

uint64_t size_of(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

class L3Recycle : public TwoRankPrefix {
 protected:
  L3Recycle() : TwoRankPrefix("l3recycle") {}
  void write(uint64_t v, const std::string data[2], int full_every = 0) { TwoRankPrefix::write(v, data, full_every); }
};

TEST_F(L3Recycle, PruneMovesTheRemovedVersionsDataFilesIntoThePoolOnePerRank) {
  for (uint64_t v = 1; v <= 3; ++v) {
    std::string s[2] = {bytes_of(8 * 4096, v), bytes_of(5 * 4096 + 3, 10 + v)};
    write(v, s);
  }
  const ino_t v2_rank0 = inode_of(data_path(l_, 2, 0)), v2_rank1 = inode_of(data_path(l_, 2, 1));
  ASSERT_TRUE(prune(l_, 1, /*recycle=*/true).is_ok());
  EXPECT_FALSE(fs::exists(l_.l3_version_dir(1)));
  EXPECT_FALSE(fs::exists(l_.l3_version_dir(2)));
  EXPECT_TRUE(read_commit(l_, 3).is_ok());
  // Newest first: version 2's files took the pool's places, version 1's were deleted.
  EXPECT_EQ(inode_of(recycle_path(l_, 0)), v2_rank0);
  EXPECT_EQ(inode_of(recycle_path(l_, 1)), v2_rank1);
  auto names = fs::list_dir(recycle_dir(l_));
  ASSERT_TRUE(names.is_ok());
  EXPECT_EQ(names->size(), 2u);
  // The pool is under the control directory, not a version: nothing lists it as one.
  EXPECT_EQ(version_dirs(l_), std::vector<uint64_t>{3});
}

TEST_F(L3Recycle, TheNextWriterOverwritesThePoolsFileAndCutsItToItsVersion) {
  // Rank 0's versions shrink (the pool's file is longer than the next version), rank 1's grow.
  std::string big = bytes_of(9 * 4096 + 100, 1), small = bytes_of(3 * 4096 + 5, 2);
  std::string s1[2] = {big, small};
  write(1, s1);
  write(2, s1);
  ASSERT_TRUE(prune(l_, 1, true).is_ok());
  const ino_t pooled0 = inode_of(recycle_path(l_, 0)), pooled1 = inode_of(recycle_path(l_, 1));
  ASSERT_NE(pooled0, 0u);
  ASSERT_NE(pooled1, 0u);
  std::string s3[2] = {bytes_of(2 * 4096 + 9, 3), bytes_of(12 * 4096 + 1, 4)};
  write(3, s3);
  EXPECT_EQ(inode_of(data_path(l_, 3, 0)), pooled0) << "overwritten in place";
  EXPECT_EQ(inode_of(data_path(l_, 3, 1)), pooled1);
  EXPECT_FALSE(fs::exists(recycle_path(l_, 0)));
  EXPECT_FALSE(fs::exists(recycle_path(l_, 1)));
  EXPECT_EQ(size_of(data_path(l_, 3, 0)), s3[0].size()) << "nothing of the longer old version past the end";
  EXPECT_EQ(size_of(data_path(l_, 3, 1)), s3[1].size());
  for (uint32_t r = 0; r < 2; ++r) EXPECT_TRUE(read_back(3, r, s3[r]).is_ok()) << r;
  // With the pool empty, the next version's files are new.
  write(4, s1);
  EXPECT_TRUE(read_back(4, 0, big).is_ok());
  EXPECT_TRUE(read_back(4, 1, small).is_ok());
}

TEST_F(L3Recycle, WithoutRecycleOrWithAPoolPlaceTakenTheFilesAreDeleted) {
  std::string s[2] = {bytes_of(4 * 4096, 1), bytes_of(4 * 4096, 2)};
  for (uint64_t v = 1; v <= 3; ++v) write(v, s);
  ASSERT_TRUE(prune(l_, 2, false).is_ok());
  EXPECT_FALSE(fs::exists(l_.l3_version_dir(1)));
  EXPECT_FALSE(fs::exists(recycle_dir(l_)));
  // A place taken keeps what is there: the pool holds at most one file per rank.
  ASSERT_TRUE(fs::make_dirs(recycle_dir(l_)).is_ok());
  ASSERT_TRUE(fs::write_file_atomic(recycle_path(l_, 0), "an earlier one", true).is_ok());
  write(4, s);  // rank 0 takes the pool's file, rank 1 writes a new one
  EXPECT_FALSE(fs::exists(recycle_path(l_, 0)));
  ASSERT_TRUE(fs::write_file_atomic(recycle_path(l_, 0), "an earlier one", true).is_ok());
  const ino_t earlier = inode_of(recycle_path(l_, 0));
  ASSERT_TRUE(prune(l_, 2, true).is_ok());  // removes 2
  EXPECT_EQ(inode_of(recycle_path(l_, 0)), earlier);
  EXPECT_EQ(fs::read_file(recycle_path(l_, 0)).value(), "an earlier one");
  EXPECT_TRUE(fs::exists(recycle_path(l_, 1)));
  EXPECT_FALSE(fs::exists(l_.l3_version_dir(2)));
  // drop_recycled empties it (and an empty or absent pool is fine).
  ASSERT_TRUE(drop_recycled(l_).is_ok());
  EXPECT_FALSE(fs::exists(recycle_dir(l_)));
  EXPECT_TRUE(drop_recycled(l_).is_ok());
  for (uint64_t v = 3; v <= 4; ++v)
    for (uint32_t r = 0; r < 2; ++r) EXPECT_TRUE(read_back(v, r, s[r]).is_ok()) << v << " " << r;
}

TEST_F(L3Recycle, AFileAKeptIncrementalVersionNamesNeverGoesToThePool) {
  std::string s[2] = {bytes_of(4 * 4096, 1), bytes_of(4 * 4096, 2)};
  write(1, s, 10);
  for (uint64_t v = 2; v <= 4; ++v) {
    s[0].replace((v % 4) * 4096, 4096, bytes_of(4096, 100 + v));
    write(v, s, 10);
  }
  // Version 4 (kept) names 1, 2 and 3 for rank 0: nothing is removed, nothing recycled.
  ASSERT_TRUE(prune(l_, 1, true).is_ok());
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_TRUE(read_commit(l_, v).is_ok()) << v;
  EXPECT_FALSE(fs::exists(recycle_dir(l_)));
  ASSERT_TRUE(read_back(4, 0, s[0]).is_ok());
  // An incremental version 5 written over nothing recycled still reads back; a full version 6 frees 1..5.
  s[0].replace(0, 4096, bytes_of(4096, 205));
  write(5, s, 10);
  ASSERT_TRUE(read_back(5, 0, s[0]).is_ok());
  std::string fresh[2] = {bytes_of(4 * 4096, 7), bytes_of(4 * 4096, 8)};
  write(6, fresh, 0);
  ASSERT_TRUE(prune(l_, 1, true).is_ok());
  for (uint64_t v = 1; v <= 5; ++v) EXPECT_FALSE(fs::exists(l_.l3_version_dir(v))) << v;
  EXPECT_TRUE(fs::exists(recycle_path(l_, 0)));
  // The next version takes the recycled file, and every byte of it is its own.
  write(7, s, 0);
  for (uint32_t r = 0; r < 2; ++r) EXPECT_TRUE(read_back(7, r, s[r]).is_ok()) << r;
  EXPECT_TRUE(read_back(6, 0, fresh[0]).is_ok());
}

TEST_F(L3Recycle, AWriterThatDoesNotFinishLeavesNeitherPoolFileNorVersionFile) {
  std::string s[2] = {bytes_of(4 * 4096, 1), bytes_of(4 * 4096, 2)};
  write(1, s);
  write(2, s);
  ASSERT_TRUE(prune(l_, 1, true).is_ok());
  ASSERT_TRUE(fs::exists(recycle_path(l_, 0)));
  {
    Manifest m = stream_manifest(s[0], {.version = 3, .rank = 0, .nranks = 2});
    RankWriter w;
    ASSERT_TRUE(w.open(l_, m, RankPlacement{}, nullptr).is_ok());
    ASSERT_TRUE(w.write(0, reinterpret_cast<const uint8_t*>(s[0].data()), 4096).is_ok());
  }  // destroyed before finish()
  EXPECT_FALSE(fs::exists(recycle_path(l_, 0)));
  EXPECT_FALSE(fs::exists(data_path(l_, 3, 0)));
  auto names = fs::list_dir(l_.l3_version_dir(3));
  ASSERT_TRUE(names.is_ok());
  EXPECT_TRUE(names->empty());
}

// Removal finds a record being written that names the version (COMMIT put back): the version stays
// whole, its file never reaches the pool.
TEST_F(L3Recycle, AVersionAWriterInFlightNamesKeepsItsFile) {
  std::string s[2] = {bytes_of(4 * 4096, 1), bytes_of(4 * 4096, 2)};
  write(1, s);
  std::string t[2] = {bytes_of(4 * 4096, 3), bytes_of(4 * 4096, 4)};
  write(2, t);
  const ino_t v1 = inode_of(data_path(l_, 1, 0));
  // Version 3 of rank 0, not committed yet, whose chunk record names version 1's chunk 3.
  Manifest m = stream_manifest(s[0], {.version = 3, .rank = 0, .nranks = 2});
  RankWriter w;
  ASSERT_TRUE(w.open(l_, m, RankPlacement{}, nullptr).is_ok());
  ASSERT_TRUE(w.write(0, reinterpret_cast<const uint8_t*>(s[0].data()), 3 * 4096).is_ok());
  w.record_chunks(ChunkRecord{.version = 3, .chunks = 4, .chunk_size = 4096, .depth = 1, .stored = 3 * 4096,
                              .runs = {{0, 3, 3, 0}, {3, 1, 1, 3 * 4096}}});
  auto finished = w.finish();
  ASSERT_TRUE(finished.is_ok()) << finished.status().message();
  ASSERT_TRUE(prune(l_, 1, true).is_ok());
  EXPECT_TRUE(read_commit(l_, 1).is_ok()) << "COMMIT put back";
  EXPECT_EQ(inode_of(data_path(l_, 1, 0)), v1);
  EXPECT_FALSE(fs::exists(recycle_path(l_, 0)));
  EXPECT_TRUE(read_back(1, 0, s[0]).is_ok());
}

// A data file a user linked elsewhere to keep it is deleted from the version as before, never overwritten;
// what lies in the pool under a rank's name but is not a file of its own (a link, a directory) is removed
// and the writer makes a new file, the link's target untouched.
TEST_F(L3Recycle, ALinkOrAFileWithAnotherNameIsNeverOverwritten) {
  std::string s[2] = {bytes_of(6 * 4096, 1), bytes_of(6 * 4096, 2)};
  write(1, s);
  write(2, s);
  const std::string kept = root_ + "/kept-by-hand";
  ASSERT_EQ(::link(data_path(l_, 1, 0).c_str(), kept.c_str()), 0);
  ASSERT_TRUE(prune(l_, 1, true).is_ok());
  EXPECT_FALSE(fs::exists(l_.l3_version_dir(1)));
  EXPECT_FALSE(fs::exists(recycle_path(l_, 0))) << "a file with a second name stays out of the pool";
  EXPECT_TRUE(fs::exists(recycle_path(l_, 1)));
  // Rank 0's place: a link to a file outside; rank 1's: a directory where its file was.
  const std::string victim = root_ + "/victim";
  ASSERT_TRUE(fs::write_file_atomic(victim, "not cairn's", true).is_ok());
  ASSERT_EQ(::symlink(victim.c_str(), recycle_path(l_, 0).c_str()), 0);
  ASSERT_TRUE(fs::remove_file(recycle_path(l_, 1)).is_ok());
  ASSERT_TRUE(fs::make_dirs(recycle_path(l_, 1) + "/inside").is_ok());
  std::string t[2] = {bytes_of(5 * 4096, 3), bytes_of(7 * 4096, 4)};
  write(3, t);
  for (uint32_t r = 0; r < 2; ++r) EXPECT_TRUE(read_back(3, r, t[r]).is_ok()) << r;
  EXPECT_EQ(fs::read_file(victim).value(), "not cairn's");
  EXPECT_EQ(fs::read_file(kept).value(), s[0]);
  EXPECT_FALSE(fs::exists(recycle_path(l_, 0)));
  EXPECT_FALSE(fs::exists(recycle_path(l_, 1)));
  auto names = fs::list_dir(l_.l3_version_dir(3));
  ASSERT_TRUE(names.is_ok());
  for (const auto& n : *names) EXPECT_EQ(n.find(".part-"), std::string::npos) << n;
}

TEST_F(L3Recycle, AnEmptyStreamCutsTheRecycledFileToNothing) {
  std::string s[2] = {bytes_of(6 * 4096, 1), bytes_of(6 * 4096, 2)};
  write(1, s);
  write(2, s);
  ASSERT_TRUE(prune(l_, 1, true).is_ok());
  const ino_t pooled = inode_of(recycle_path(l_, 0));
  ASSERT_NE(pooled, 0u);
  std::string t[2] = {"", bytes_of(4096, 5)};
  write(3, t);
  EXPECT_EQ(inode_of(data_path(l_, 3, 0)), pooled);
  EXPECT_EQ(size_of(data_path(l_, 3, 0)), 0u);
  EXPECT_TRUE(read_back(3, 0, "").is_ok());
  EXPECT_TRUE(read_back(3, 1, t[1]).is_ok());
}

}  // namespace
}  // namespace cairn::l3
