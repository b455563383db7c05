// The L1 cache's own formats (src/cache/cache_store.hpp; docs/format.md, "L1 cache"): the names of a
// rank's files, made and parsed in one place, and the L1 record (slot index + manifest), with the
// fuzzers of both decoders. The store's behaviour on real files is in store_test.cpp.
#include "cache/cache_store.hpp"

#include <gtest/gtest.h>

#include <random>

#include "../fuzz.hpp"
#include "../stream_manifest.hpp"

namespace cairn {
namespace {

TEST(L1Names, MadeAsTheFormatSays) {
  EXPECT_EQ(rank_dir_name(0), "r0");
  EXPECT_EQ(rank_dir_name(4294967295u), "r4294967295");
  EXPECT_EQ(version_file_name(42, VersionFile::record), "v42.l1");
  EXPECT_EQ(version_file_name(42, VersionFile::set), "v42.set");
  EXPECT_EQ(version_file_name(42, VersionFile::protected_marker), "v42.protected");
  EXPECT_EQ(version_file_name(42, VersionFile::files), "v42.files");
  EXPECT_EQ(slot_file_name(3, SlotFile::data), "slot-3.data");
  EXPECT_EQ(slot_file_name(3, SlotFile::red), "slot-3.red");
  Layout l;
  l.cache_job = "/dev/shm/cairn-job";
  EXPECT_EQ(rank_dir(l, "node1", 7), "/dev/shm/cairn-job/node1/r7");
  EXPECT_EQ(rank_dir(l, "node1", 7), l.rank_cache("node1", 7));  // the runtime's name for it agrees
}

TEST(L1Names, ParsedExactlyAsMade) {
  uint32_t r = 0;
  EXPECT_TRUE(parse_rank_dir_name("r12", &r));
  EXPECT_EQ(r, 12u);
  for (const char* bad : {"r", "r-1", "r+1", "r012", "r1x", "R1", "r4294967296", "node0", "", "r 1"})
    EXPECT_FALSE(parse_rank_dir_name(bad, &r)) << bad;

  uint64_t v = 0;
  VersionFile kind{};
  EXPECT_TRUE(parse_version_file_name("v18446744073709551615.protected", &v, &kind));
  EXPECT_EQ(v, 18446744073709551615ull);
  EXPECT_EQ(kind, VersionFile::protected_marker);
  EXPECT_TRUE(parse_version_file_name("v0.set", &v, &kind));
  EXPECT_EQ(kind, VersionFile::set);
  for (const char* bad : {"v.l1", "v7", "v7.", "v07.l1", "v7.l1.tmp.42", "v7.L1", "v18446744073709551616.l1",
                          "x7.l1", "v7.l1x", "v-7.l1", "v7.data", "slot-1.data"})
    EXPECT_FALSE(parse_version_file_name(bad, &v, &kind)) << bad;

  uint32_t slot = 0;
  SlotFile sk{};
  EXPECT_TRUE(parse_slot_file_name("slot-63.red", &slot, &sk));
  EXPECT_EQ(slot, 63u);
  EXPECT_EQ(sk, SlotFile::red);
  for (const char* bad : {"slot-.data", "slot-1", "slot-01.data", "slot-1.data.tmp.9", "slot-4294967296.data",
                          "slot1.data", "slot-1.l1"})
    EXPECT_FALSE(parse_slot_file_name(bad, &slot, &sk)) << bad;
}

// Every name of a random number round-trips; random and mutated names never crash and, when they
// parse, are exactly the name made from what they parse to.
TEST(L1NamesFuzz, RandomAndMutatedNamesNeverCrash) {
  std::mt19937_64 rng(0x11a3e5);
  const std::vector<std::string> tokens = {"r", "v", "slot-", ".l1", ".set", ".protected", ".files", ".data",
                                           ".red", "0", "9", "4294967296", "18446744073709551616", ".tmp"};
  int mutated_parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    uint64_t x = rng() >> (rng() % 64);
    std::string name;
    switch (iter % 4) {
      case 0: name = rank_dir_name(static_cast<uint32_t>(x)); break;
      case 1: name = version_file_name(x, static_cast<VersionFile>(rng() % 4)); break;
      case 2: name = slot_file_name(static_cast<uint32_t>(x), static_cast<SlotFile>(rng() % 2)); break;
      case 3: name = fuzz::random_bytes(rng, 24); break;
    }
    const bool mutated = iter % 8 >= 4;
    if (mutated) fuzz::mutate(name, rng, tokens);
    int hits = 0;
    uint32_t r, slot;
    uint64_t v;
    VersionFile vk;
    SlotFile sk;
    if (parse_rank_dir_name(name, &r)) {
      ASSERT_EQ(rank_dir_name(r), name);
      ++hits;
    }
    if (parse_version_file_name(name, &v, &vk)) {
      ASSERT_EQ(version_file_name(v, vk), name);
      ++hits;
    }
    if (parse_slot_file_name(name, &slot, &sk)) {
      ASSERT_EQ(slot_file_name(slot, sk), name);
      ++hits;
    }
    ASSERT_LE(hits, 1) << name;  // no name is two kinds of file
    if (!mutated && iter % 4 != 3) {
      ASSERT_EQ(hits, 1) << name;  // every name made parses
    }
    if (mutated && hits) ++mutated_parsed;
  }
  EXPECT_GT(mutated_parsed, 100);
}

Manifest small_manifest(uint64_t v) {
  return stream_manifest("0123456789", {.version = v, .rank = 1, .nranks = 2, .chunk_size = 4, .node = "node0", .label = "ckpt"});
}

TEST(L1Record, SlotThenManifest) {
  L1Record rec{0x01020304u, small_manifest(9)};
  std::string bytes = encode_l1_record(rec);
  ASSERT_GT(bytes.size(), 4u);
  EXPECT_EQ(bytes.substr(0, 4), std::string("\x04\x03\x02\x01", 4));  // u32, little-endian
  EXPECT_EQ(bytes.substr(4), encode_manifest(rec.manifest));
  auto back = decode_l1_record(bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->slot, rec.slot);
  EXPECT_TRUE(back->manifest == rec.manifest);

  auto short_one = decode_l1_record(std::string("\x01\x00", 2));
  ASSERT_FALSE(short_one.is_ok());
  EXPECT_EQ(short_one.status().code(), Code::ERR_CORRUPT);
  EXPECT_FALSE(decode_l1_record(bytes.substr(0, bytes.size() - 1)).is_ok());  // the manifest's checksum
}

// Random and mutated records: the decoder never crashes, rejects with a clean error, and what it
// accepts re-encodes to the same bytes; some mutations (of the slot index) still decode.
TEST(L1RecordFuzz, RandomAndMutatedRecordsNeverCrash) {
  std::mt19937_64 rng(0x11c0de);
  const std::string seed = encode_l1_record({1, small_manifest(3)});
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b;
    if (iter % 2 == 0) {
      b = fuzz::random_bytes(rng, 300);
    } else {
      b = seed;
      if (rng() % 2) {
        b[rng() % 4] = static_cast<char>(rng());  // the slot index alone: still a record
      } else {
        fuzz::mutate(b, rng);
      }
    }
    auto r = decode_l1_record(b);
    if (!r.is_ok()) {
      ASSERT_TRUE(r.status().code() == Code::ERR_CORRUPT || r.status().code() == Code::ERR_FORMAT)
          << "iteration " << iter << ": " << r.status().message();
      continue;
    }
    ++accepted;
    ASSERT_EQ(encode_l1_record(*r), b) << "iteration " << iter;
  }
  EXPECT_GT(accepted, 1000);
}

}  // namespace
}  // namespace cairn
