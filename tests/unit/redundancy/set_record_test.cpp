// The L2 set record, v<N>.set (src/redundancy/set_record.hpp; docs/format.md, "L1 cache"): the layout the
// format gives, every flipped bit and every truncation refused, and the decoder's fuzzer.
#include "redundancy/set_record.hpp"

#include <gtest/gtest.h>

#include <random>

#include "base/xxh.hpp"
#include "../fuzz.hpp"

namespace cairn::redundancy {
namespace {

SetRecord sample_record() {
  SetRecord r;
  r.scheme = Redundancy::rs;
  r.n = 3;
  r.m = 1;
  r.ranks = {0, 2, 4};
  r.manifests = {"manifest of rank 0", "of rank 2", ""};
  return r;
}

void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The bytes the format describes, written independently of the encoder.
std::string spec_encode(const SetRecord& r, uint32_t format = 1) {
  std::string s = "CAIRNSET";
  put32(s, format);
  put32(s, static_cast<uint32_t>(r.scheme));
  put32(s, r.n);
  put32(s, r.m);
  for (size_t i = 0; i < r.n; ++i) {
    put32(s, r.ranks[i]);
    put32(s, static_cast<uint32_t>(r.manifests[i].size()));
    s += r.manifests[i];
  }
  uint64_t h = XXH3_64bits(s.data(), s.size());
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((h >> (8 * i)) & 0xff));
  return s;
}

TEST(SetRecord, LayoutAsTheFormatSays) {
  SetRecord r = sample_record();
  std::string bytes = encode_set_record(r);
  EXPECT_EQ(bytes, spec_encode(r));
  auto back = decode_set_record(bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->scheme, Redundancy::rs);
  EXPECT_EQ(back->n, 3u);
  EXPECT_EQ(back->m, 1u);
  EXPECT_EQ(back->ranks, r.ranks);
  EXPECT_EQ(back->manifests, r.manifests);
}

TEST(SetRecord, EveryFlippedBitAndTruncationIsRefused) {
  std::string bytes = encode_set_record(sample_record());
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      EXPECT_FALSE(decode_set_record(bad).is_ok()) << "flip at byte " << i << " bit " << bit;
    }
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_set_record(bytes.substr(0, n)).is_ok()) << "truncated to " << n;
  EXPECT_FALSE(decode_set_record(bytes + "x").is_ok());
}

TEST(SetRecord, WhatThisCodeDoesNotKnowIsRefusedEvenWithAGoodChecksum) {
  SetRecord r = sample_record();
  EXPECT_EQ(decode_set_record(spec_encode(r, 2)).status().code(), Code::ERR_FORMAT);  // a newer format
  r.scheme = static_cast<Redundancy>(7);
  EXPECT_EQ(decode_set_record(spec_encode(r)).status().code(), Code::ERR_FORMAT);
  r = sample_record();
  r.m = 4;  // more parity than members
  EXPECT_EQ(decode_set_record(spec_encode(r)).status().code(), Code::ERR_CORRUPT);
  r = sample_record();
  r.n = 5000;
  r.ranks.resize(5000);
  r.manifests.resize(5000);
  EXPECT_EQ(decode_set_record(spec_encode(r)).status().code(), Code::ERR_CORRUPT);
}

// Random and mutated records (resealed half the time, so that mutations get past the checksum): the
// decoder never crashes, refuses cleanly, and what it accepts re-encodes to the same bytes.
TEST(SetRecordFuzz, RandomAndMutatedRecordsNeverCrash) {
  std::mt19937_64 rng(0x5e7);
  const std::vector<std::string> corpus = {encode_set_record(sample_record()), encode_set_record(SetRecord{}),
                                          spec_encode(SetRecord{Redundancy::xor_set, 2, 1, {5, 6}, {"a", "bc"}})};
  const std::vector<std::string> tokens = {std::string("\0\0\0\0", 4), std::string("\xff\xff\xff\xff", 4),
                                           std::string("\x01\0\0\0", 4), std::string("\x10\0\0\0", 4), "CAIRNSET"};
  int accepted = 0, mutated_accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b;
    bool mutated = iter % 2 != 0;
    if (!mutated) {
      b = fuzz::random_bytes(rng, 120);
      if (rng() % 2) b = "CAIRNSET" + b;
    } else {
      b = corpus[rng() % corpus.size()];
      fuzz::mutate(b, rng, tokens);
    }
    if (rng() % 2 && b.size() >= 8) {  // reseal: the checksum over what precedes it
      b.resize(b.size() - 8);
      uint64_t h = XXH3_64bits(b.data(), b.size());
      for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>((h >> (8 * i)) & 0xff));
    }
    auto r = decode_set_record(b);
    if (!r.is_ok()) {
      ASSERT_TRUE(r.status().code() == Code::ERR_FORMAT || r.status().code() == Code::ERR_CORRUPT)
          << "iteration " << iter << ": " << r.status().message();
      continue;
    }
    ++accepted;
    mutated_accepted += mutated ? 1 : 0;
    ASSERT_EQ(r->ranks.size(), r->n);
    ASSERT_EQ(r->manifests.size(), r->n);
    ASSERT_EQ(encode_set_record(*r), b) << "iteration " << iter;
  }
  EXPECT_GT(mutated_accepted, 100) << "no mutation reached a successful decode; the fuzz loop is too blunt";
  EXPECT_GE(accepted, mutated_accepted);
}

}  // namespace
}  // namespace cairn::redundancy
