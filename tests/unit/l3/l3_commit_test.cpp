// COMMIT, the file that makes a version count in L3 (src/l3/l3_store.hpp; docs/format.md, "L3"): its
// text, what a reader refuses, the names of a rank's files beside it, and the decoder's fuzzer.
#include <gtest/gtest.h>

#include <random>

#include "../fuzz.hpp"
#include "l3/l3_store.hpp"

namespace cairn::l3 {
namespace {

TEST(L3Commit, TextAsTheFormatSays) {
  EXPECT_EQ(encode_commit({42, 8, "step 100"}), "cairn-commit 1\nversion 42\nnranks 8\nlabel step 100\n");
  EXPECT_EQ(encode_commit({1, 1, "two\nlines"}), "cairn-commit 1\nversion 1\nnranks 1\nlabel two lines\n");
  auto c = decode_commit(encode_commit({18446744073709551615ull, 4294967295u, ""}));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->version, 18446744073709551615ull);
  EXPECT_EQ(c->nranks, 4294967295u);
  EXPECT_EQ(c->label, "");
}

TEST(L3Commit, ANewerWritersLinesAreSkipped) {
  auto c = decode_commit("cairn-commit 2\nversion 7\nwritten_by agent-3\nnranks 2\nlabel x y\n");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->version, 7u);
  EXPECT_EQ(c->nranks, 2u);
  EXPECT_EQ(c->label, "x y");
}

TEST(L3Commit, RefusesWhatIsNotAWholeCommit) {
  struct Case {
    const char* text;
    Code code;
  } cases[] = {
      {"", Code::ERR_FORMAT},
      {"cairn-commit\nversion 1\nnranks 1\n", Code::ERR_FORMAT},
      {"cairn-commit 0\nversion 1\nnranks 1\n", Code::ERR_FORMAT},
      {"cairn-where 1\nversion 1\nnranks 1\n", Code::ERR_FORMAT},
      {"cairn-commit 1\nnranks 1\n", Code::ERR_CORRUPT},
      {"cairn-commit 1\nversion 1\n", Code::ERR_CORRUPT},
      {"cairn-commit 1\nversion 1x\nnranks 1\n", Code::ERR_CORRUPT},
      {"cairn-commit 1\nversion 18446744073709551616\nnranks 1\n", Code::ERR_CORRUPT},
      {"cairn-commit 1\nversion 1\nnranks 4294967296\n", Code::ERR_CORRUPT},
      {"cairn-commit 1\nversion -1\nnranks 1\n", Code::ERR_CORRUPT},
  };
  for (const auto& c : cases) {
    auto r = decode_commit(c.text);
    ASSERT_FALSE(r.is_ok()) << c.text;
    EXPECT_EQ(r.status().code(), c.code) << c.text << ": " << r.status().message();
  }
}

TEST(L3Names, RankFilesParsedExactlyAsMade) {
  Layout l;
  l.prefix = "/p";
  uint32_t r = 0;
  RankFile kind{};
  for (RankFile k : {RankFile::data, RankFile::manifest, RankFile::where, RankFile::chunks}) {
    std::string path = k == RankFile::data       ? data_path(l, 3, 17)
                       : k == RankFile::manifest ? manifest_path(l, 3, 17)
                       : k == RankFile::where    ? where_path(l, 3, 17)
                                                 : chunks_path(l, 3, 17);
    std::string name = path.substr(path.rfind('/') + 1);
    ASSERT_TRUE(parse_rank_file_name(name, &r, &kind)) << name;
    EXPECT_EQ(r, 17u);
    EXPECT_EQ(kind, k);
  }
  for (const char* bad : {"rank-.data", "rank-1", "rank-01.data", "rank-1.data.tmp.5", "rank-4294967296.data",
                          "node-n0.1.data", "COMMIT", "rank--1.where"})
    EXPECT_FALSE(parse_rank_file_name(bad, &r, &kind)) << bad;
}

// Random and mutated COMMIT files: the decoder never crashes, refuses cleanly, and what it accepts
// re-encodes to a file that decodes the same.
TEST(L3CommitFuzz, RandomAndMutatedFilesNeverCrash) {
  std::mt19937_64 rng(0xc0331);
  const std::vector<std::string> corpus = {encode_commit({42, 8, "step 100"}), encode_commit({1, 1, ""})};
  const std::vector<std::string> tokens = {"\n", " ", "version ", "nranks ", "label ", "0", "18446744073709551615",
                                           "18446744073709551616", "4294967296", "-", "cairn-commit 1\n"};
  int mutated_accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    bool mutated = iter % 2 != 0;
    std::string text = mutated ? corpus[rng() % corpus.size()] : "cairn-commit 1\n" + fuzz::random_bytes(rng, 80);
    if (mutated) fuzz::mutate(text, rng, tokens);
    auto c = decode_commit(text);
    if (!c.is_ok()) {
      ASSERT_TRUE(c.status().code() == Code::ERR_FORMAT || c.status().code() == Code::ERR_CORRUPT)
          << "iteration " << iter << ": " << c.status().message();
      continue;
    }
    mutated_accepted += mutated ? 1 : 0;
    auto again = decode_commit(encode_commit(*c));
    ASSERT_TRUE(again.is_ok()) << "iteration " << iter;
    EXPECT_EQ(again->version, c->version);
    EXPECT_EQ(again->nranks, c->nranks);
    EXPECT_EQ(again->label, c->label);
  }
  EXPECT_GT(mutated_accepted, 100) << "no mutation reached a successful decode; the fuzz loop is too blunt";
}

}  // namespace
}  // namespace cairn::l3
