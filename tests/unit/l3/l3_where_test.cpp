// The L3 where-record, rank-<r>.where (src/l3/l3_placement.hpp; docs/format.md, "L3"): the text the format
// gives, what is refused, and the decoder's fuzzer. Reading every layout through it: l3_layout_test.cpp.
#include <gtest/gtest.h>

#include <random>

#include "../fuzz.hpp"
#include "l3/l3_placement.hpp"

namespace cairn::l3 {
namespace {

void expect_same(const Where& a, const Where& b) {
  EXPECT_EQ(a.file, b.file);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_EQ(a.stored, b.stored);
  EXPECT_EQ(a.zstd, b.zstd);
  EXPECT_EQ(a.chunk_stored, b.chunk_stored);
}

TEST(L3Where, TextAsTheFormatSays) {
  Where plain{"/p/v00000003/node-n0.1.data", 4096, 1000, false, {}};
  EXPECT_EQ(encode_where(plain), "cairn-where 1\nfile /p/v00000003/node-n0.1.data\noffset 4096\nstored 1000\ncompress none\n");
  Where packed{"/x/y z", 5, 10, true, {4, 6}};
  EXPECT_EQ(encode_where(packed), "cairn-where 1\nfile /x/y z\noffset 5\nstored 10\ncompress zstd\nchunks 2\n4\n6\n");
  for (const Where& w : {plain, packed}) {
    auto back = decode_where(encode_where(w));
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    expect_same(*back, w);
  }
}

TEST(L3Where, RefusesWhatIsIncompleteOrInconsistent) {
  struct Case {
    const char* text;
    Code code;
  } cases[] = {
      {"", Code::ERR_FORMAT},
      {"cairn-where 2\nfile /x\ncompress none\n", Code::ERR_FORMAT},
      {"cairn-where 1\nfile /x\ncompress none\nsize 3\n", Code::ERR_FORMAT},  // an unknown key
      {"cairn-where 1\ncompress none\n", Code::ERR_CORRUPT},                  // no file
      {"cairn-where 1\nfile /x\n", Code::ERR_CORRUPT},                        // no compress
      {"cairn-where 1\nfile /x\ncompress gzip\n", Code::ERR_CORRUPT},
      {"cairn-where 1\nfile /x\noffset x\ncompress none\n", Code::ERR_CORRUPT},
      {"cairn-where 1\nfile /x\ncompress zstd\nstored 5\nchunks 1\n4\n", Code::ERR_CORRUPT},  // 4 != 5
      {"cairn-where 1\nfile /x\ncompress none\nstored 4\nchunks 1\n4\n", Code::ERR_CORRUPT},  // chunks, not zstd
      {"cairn-where 1\nfile /x\ncompress zstd\nchunks 4294967296\n", Code::ERR_CORRUPT},      // not allocated
      {"cairn-where 1\nfile /x\ncompress zstd\nchunks 3\n1\n", Code::ERR_CORRUPT},
      {"cairn-where 1\nfile /x\ncompress zstd\nstored 1\nchunks 2\n18446744073709551615\n2\n", Code::ERR_CORRUPT},
      {"cairn-where 1\nfile /x\noffset 18446744073709551615\nstored 2\ncompress none\n", Code::ERR_CORRUPT},
  };
  for (const auto& c : cases) {
    auto w = decode_where(c.text);
    ASSERT_FALSE(w.is_ok()) << c.text;
    EXPECT_EQ(w.status().code(), c.code) << c.text << ": " << w.status().message();
  }
}

// Random and mutated records: the decoder never crashes or allocates for counts the text cannot hold,
// refuses cleanly, and what it accepts re-encodes to a record that decodes the same.
TEST(L3WhereFuzz, RandomAndMutatedRecordsNeverCrash) {
  std::mt19937_64 rng(0x3e4e);
  const std::vector<std::string> corpus = {
      encode_where({"/p/v00000003/rank-0.data", 0, 1000, false, {}}),
      encode_where({"/q/v00000009/node-n1.0.data", 1 << 20, 300, true, {100, 150, 50}})};
  const std::vector<std::string> tokens = {"\n", " ", "file", "offset", "stored", "compress", "chunks", "zstd",
                                           "none", "0", "18446744073709551615", "18446744073709551616", "-1",
                                           "4294967296", "cairn-where 1\n"};
  int accepted = 0, mutated_accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    bool mutated = iter % 2 != 0;
    std::string text = mutated ? corpus[rng() % corpus.size()] : "cairn-where 1\n" + fuzz::random_bytes(rng, 100);
    if (mutated) fuzz::mutate(text, rng, tokens);
    auto w = decode_where(text);
    if (!w.is_ok()) {
      ASSERT_TRUE(w.status().code() == Code::ERR_FORMAT || w.status().code() == Code::ERR_CORRUPT)
          << "iteration " << iter << ": " << w.status().message();
      continue;
    }
    ++accepted;
    mutated_accepted += mutated ? 1 : 0;
    ASSERT_LE(w->chunk_stored.size(), text.size());
    auto again = decode_where(encode_where(*w));
    ASSERT_TRUE(again.is_ok()) << "iteration " << iter << ": " << again.status().message();
    expect_same(*again, *w);
  }
  EXPECT_GT(mutated_accepted, 100) << "no mutation reached a successful decode; the fuzz loop is too blunt";
}

}  // namespace
}  // namespace cairn::l3
