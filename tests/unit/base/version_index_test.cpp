// base/version_index.hpp: the version index's codec (docs/format.md "The version index"), its ranges,
// the rule a restart follows, and a fuzz of the decoder.
#include "base/version_index.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <random>

#include "base/fsutil.hpp"
#include "../fuzz.hpp"

namespace cairn {
namespace {

TEST(VersionIndex, RoundTripAndRanges) {
  VersionIndex idx;
  idx.current = 4;
  idx.skip = {5, 6, 7, 8, 9, 10, 12};
  idx.added = {3};
  EXPECT_EQ(format_version_ranges(idx.skip), "5-10,12");
  std::string text = encode_index(idx);
  EXPECT_NE(text.find("skip=5-10,12\n"), std::string::npos) << text;
  auto back = decode_index(text);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(*back, idx);
  EXPECT_EQ(*decode_index(encode_index(VersionIndex{})), VersionIndex{});
  std::set<uint64_t> r;
  EXPECT_TRUE(parse_version_ranges("1,3-4", &r));
  EXPECT_EQ(r, (std::set<uint64_t>{1, 3, 4}));
  for (const char* bad : {"0", "4-3", "4-4", "a", "1,,2", "-3", "1-", "01", "1 2", "100000000", "1-2000000"})
    EXPECT_FALSE(parse_version_ranges(bad, &r)) << bad;
}

TEST(VersionIndex, DecoderRefusesWhatIsNotAnIndex) {
  for (const char* bad : {"", "garbage", "cairn-index=2\ncurrent=0\n", "cairn-index=1\n", "cairn-index=1\ncurrent=x\n",
                          "cairn-index=1\ncurrent=0\nskip=5-\n", "cairn-index=1\ncurrent=0\nadded=z\n"}) {
    auto r = decode_index(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::ERR_FORMAT);
  }
}

TEST(VersionIndex, WhatARestartPassesOver) {
  VersionIndex idx;
  idx.skip = {5, 7};
  EXPECT_FALSE(restart_passes_over(idx, 4, 0));
  EXPECT_TRUE(restart_passes_over(idx, 5, 0));
  EXPECT_FALSE(restart_passes_over(idx, 6, 0));
  EXPECT_TRUE(restart_passes_over(idx, 6, 4)) << "restart_version 4: newer versions are passed over";
  EXPECT_FALSE(restart_passes_over(idx, 4, 4));
  EXPECT_FALSE(restart_passes_over(idx, 3, 4));
}

TEST(VersionIndex, ReadAndWriteAFile) {
  const std::string path = "/tmp/cairn-unit-index-" + std::to_string(getpid());
  (void)fs::remove_file(path);
  auto none = read_index(path);
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->skip.empty() && none->current == 0) << "no file: every version may be taken";
  VersionIndex idx;
  idx.current = 2;
  idx.skip = {3};
  ASSERT_TRUE(write_index(path, idx).is_ok());
  EXPECT_EQ(*read_index(path), idx);
  ASSERT_TRUE(fs::write_file_atomic(path, "junk").is_ok());
  auto bad = read_index(path);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << "the error names the file";
  (void)fs::remove_file(path);
}

TEST(VersionIndexFuzz, RandomAndMutatedIndexesNeverCrash) {
  std::mt19937_64 rng(20261127);
  VersionIndex seed;
  seed.current = 9;
  seed.skip = {10, 11, 12, 20};
  seed.added = {3, 4};
  const std::string valid = encode_index(seed);
  const std::vector<std::string> tokens = {"=", "\n", ",", "-", "skip", "current", "added", "cairn-index", "1",
                                           "99999999", "0", "#"};
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = i % 5 == 0 ? fuzz::random_bytes(rng, 64) : valid;
    if (i % 5) fuzz::mutate(s, rng, tokens);
    auto r = decode_index(s);
    if (!r.is_ok()) {
      EXPECT_EQ(r.status().code(), Code::ERR_FORMAT);
      continue;
    }
    ++accepted;
    auto again = decode_index(encode_index(*r));
    ASSERT_TRUE(again.is_ok()) << s;
    EXPECT_EQ(*again, *r);
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace cairn
