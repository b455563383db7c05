// MappedFile::open_rw, as the cache prepares a slot: the file grows to the size asked, its pages are
// populated and touched from this thread (reads only, docs/performance.md "The first checkpoints: the
// slot's pages touched in the preparation"), and what the file held before is kept byte for byte -- a
// slot being prepared may hold a version. A gate stops the work between pieces.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "base/fsutil.hpp"
#include "cache/snapshot_slot.hpp"

namespace cairn {
namespace {

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
  return s;
}

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = "/dev/shm/cairn-mapped-file-" + std::to_string(getpid()); }
  void TearDown() override { ::unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(MappedFileTest, PreparingKeepsWhatTheFileHeldAndGrowsIt) {
  const uint64_t piece = MappedFile::kPrefaultPiece;
  const std::string held = pattern(piece + 12345);  // more than one piece of the gated preparation
  ASSERT_TRUE(fs::write_file_atomic(path_, held, false).is_ok());
  int gates = 0;
  auto f = MappedFile::open_rw(path_, 2 * piece, /*prefault=*/true, [&] { return ++gates > 0; });
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_GE(f->size(), 2 * piece);
  EXPECT_GE(gates, 2);  // asked between pieces
  // The touch: asked before each piece; a "no" ends it with success, and the next touch goes on from there.
  int asked = 0;
  EXPECT_TRUE(f->touch({}, [&] { return ++asked == 1; }).is_ok());  // the first piece, then stopped
  EXPECT_EQ(asked, 2);
  asked = 0;
  EXPECT_TRUE(f->touch({}, [&] { return ++asked > 0; }).is_ok());  // the second piece: done
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(f->touch({}, [&] { return ++asked > 0; }).is_ok());  // nothing left to ask about
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(f->touch([] { return false; }, {}).is_ok());  // nothing left: the gate not asked either
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), held.size()), held);
  for (uint64_t off = held.size(); off < 2 * piece; off += 4096) ASSERT_EQ(f->data()[off], 0) << off;
  // Without a gate (a checkpoint mapping a slot itself): one populate, the same bytes.
  auto g = MappedFile::open_rw(path_, 2 * piece, /*prefault=*/true);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(g->data()), held.size()), held);
}

// The file already has its size, so no fallocate piece asks the gate: the populate loop does,
// before each piece, and stops at the first "no".
TEST_F(MappedFileTest, AGateThatSaysStopEndsThePopulatingBetweenPieces) {
  const uint64_t piece = MappedFile::kPrefaultPiece;
  const std::string held = pattern(2 * piece);
  ASSERT_TRUE(fs::write_file_atomic(path_, held, false).is_ok());
  int gates = 0;
  auto f = MappedFile::open_rw(path_, 2 * piece, /*prefault=*/true, [&] { return ++gates < 2; });
  EXPECT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("stopped"), std::string::npos) << f.status().message();
  EXPECT_EQ(gates, 2);
  // What it did stays done and nothing changed: the file maps again, whole.
  auto g = MappedFile::open_rw(path_, 2 * piece, /*prefault=*/false);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(g->data()), held.size()), held);
}

}  // namespace
}  // namespace cairn
