// Incremental L3 versions (src/l3/l3_chunks.hpp; docs/format.md, "L3"): the chunk record's text, what
// its decoder refuses, its fuzzer; the plan against the previous version; and through the store: an
// incremental version reads back bit-exact from the files it names, a missing holder makes it
// unreadable, and pruning keeps every version a kept one names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <random>

#include "../fuzz.hpp"
#include "../stream_manifest.hpp"
#include "base/fsutil.hpp"
#include "l3/l3_chunks.hpp"
#include "l3/l3_store.hpp"
#include "two_rank_prefix.hpp"

namespace cairn::l3 {
namespace {

ChunkRecord sample() {
  ChunkRecord r;
  r.version = 12;
  r.chunks = 5;
  r.chunk_size = 4096;
  r.depth = 2;
  r.stored = 4096 + 100;
  r.runs = {{0, 2, 10, 0}, {2, 1, 12, 0}, {3, 1, 11, 4096}, {4, 1, 12, 4096}};
  return r;
}

TEST(L3Chunks, TextAsTheFormatSays) {
  EXPECT_EQ(encode_chunk_record(sample()),
            "cairn-chunks 1\nversion 12\nchunks 5\nchunk_size 4096\ndepth 2\nstored 4196\n"
            "run 0 2 10 0\nrun 2 1 12 0\nrun 3 1 11 4096\nrun 4 1 12 4096\n");
  auto back = decode_chunk_record(encode_chunk_record(sample()));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(*back, sample());
  EXPECT_EQ(holders_of(*back), (std::set<uint64_t>{10, 11}));
  EXPECT_EQ(place_of(*back, 1).holder, 10u);
  EXPECT_EQ(place_of(*back, 1).offset, 4096u);
  EXPECT_EQ(place_of(*back, 3).holder, 11u);
  EXPECT_EQ(place_of(*back, 4).offset, 4096u);
}

TEST(L3Chunks, RefusesWhatIsIncompleteOrInconsistent) {
  const std::string head = "cairn-chunks 1\nversion 3\nchunks 2\nchunk_size 10\ndepth 1\nstored 10\n";
  struct Case {
    std::string text;
    Code code;
  } cases[] = {
      {"", Code::ERR_FORMAT},
      {"cairn-chunks 2\n", Code::ERR_FORMAT},
      {head + "run 0 1 2 0\nrun 1 1 3 0\nextra 1\n", Code::ERR_FORMAT},  // an unknown key
      {head + "run 0 1 2 0\n", Code::ERR_CORRUPT},                       // chunk 1 not covered
      {head + "run 0 1 2 0\nrun 0 2 3 0\n", Code::ERR_CORRUPT},          // overlapping
      {head + "run 1 1 2 0\nrun 0 1 3 0\n", Code::ERR_CORRUPT},          // out of order
      {head + "run 0 0 2 0\nrun 0 2 3 0\n", Code::ERR_CORRUPT},          // empty run
      {head + "run 0 2 4 0\n", Code::ERR_CORRUPT},                       // a newer holder
      {head + "run 0 2 2 18446744073709551615\n", Code::ERR_CORRUPT},    // extent past 2^64
      {head + "run 0 2 2\n", Code::ERR_CORRUPT},
      {head + "run 0 2 2 0 7\n", Code::ERR_CORRUPT},
      {head + "run 0 2 2 0", Code::ERR_CORRUPT},  // truncated
      {"cairn-chunks 1\nversion 3\nchunks 2\nchunk_size 10\ndepth 0\nstored 0\nrun 0 2 2 0\n", Code::ERR_CORRUPT},
      {"cairn-chunks 1\nversion 3\nchunks 2\nchunk_size 0\ndepth 1\nstored 0\nrun 0 2 2 0\n", Code::ERR_CORRUPT},
      {"cairn-chunks 1\nversion 3\nchunks 2\ndepth 1\nstored 0\nrun 0 2 2 0\n", Code::ERR_CORRUPT},
      {"cairn-chunks 1\nversion 3\nversion 3\nchunks 2\nchunk_size 10\ndepth 1\nstored 0\nrun 0 2 2 0\n", Code::ERR_CORRUPT},
      {"cairn-chunks 1\nversion 03\nchunks 2\nchunk_size 10\ndepth 1\nstored 0\nrun 0 2 2 0\n", Code::ERR_CORRUPT},
  };
  for (const auto& c : cases) {
    auto r = decode_chunk_record(c.text);
    ASSERT_FALSE(r.is_ok()) << c.text;
    EXPECT_EQ(r.status().code(), c.code) << c.text << ": " << r.status().message();
  }
  EXPECT_TRUE(decode_chunk_record(head + "run 0 1 2 0\nrun 1 1 3 0\n").is_ok());
}

// Random and mutated records: the decoder never crashes, refuses cleanly, and what it accepts re-encodes
// to a record that decodes the same.
TEST(L3ChunksFuzz, RandomAndMutatedRecordsNeverCrash) {
  std::mt19937_64 rng(0xc4a5);
  ChunkRecord big = sample();
  big.runs.clear();
  for (uint64_t c = 0; c < big.chunks; ++c) big.runs.push_back({c, 1, 10 + c % 3, c * 4096});
  const std::vector<std::string> corpus = {encode_chunk_record(sample()), encode_chunk_record(big)};
  const std::vector<std::string> tokens = {"\n", " ", "run ", "version ", "chunks ", "chunk_size ", "depth ", "stored ",
                                           "0", "1", "12", "18446744073709551615", "18446744073709551616",
                                           "4294967296", "-1", "cairn-chunks 1\n"};
  int mutated_accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    bool mutated = iter % 2 != 0;
    std::string text = mutated ? corpus[rng() % corpus.size()] : "cairn-chunks 1\n" + fuzz::random_bytes(rng, 100);
    if (mutated) fuzz::mutate(text, rng, tokens);
    auto r = decode_chunk_record(text);
    if (!r.is_ok()) {
      ASSERT_TRUE(r.status().code() == Code::ERR_FORMAT || r.status().code() == Code::ERR_CORRUPT)
          << "iteration " << iter << ": " << r.status().message();
      continue;
    }
    mutated_accepted += mutated ? 1 : 0;
    ASSERT_LE(r->runs.size(), text.size());
    for (uint64_t c = 0; c < std::min<uint64_t>(r->chunks, 64); ++c) (void)place_of(*r, c);
    auto again = decode_chunk_record(encode_chunk_record(*r));
    ASSERT_TRUE(again.is_ok()) << "iteration " << iter << ": " << again.status().message();
    EXPECT_EQ(*again, *r);
  }
  EXPECT_GT(mutated_accepted, 100) << "no mutation reached a successful decode; the fuzz loop is too blunt";
}

uint64_t size_of(const std::string& path) {
  auto text = fs::read_file(path);
  return text ? text->size() : 0;
}

// Chunk c of `s` (chunk size 4096) rewritten.
void touch(std::string& s, uint64_t c, uint64_t seed) {
  std::string fresh = bytes_of(std::min<uint64_t>(4096, s.size() - c * 4096), seed);
  s.replace(c * 4096, fresh.size(), fresh);
}

TEST(L3ChunksPlan, NamesTheHolderOfEveryUnchangedChunkDirectly) {
  std::string a = bytes_of(5 * 4096 + 100, 1);  // 6 chunks, the last short
  Manifest m1 = stream_manifest(a, {.version = 1});
  std::string b = a;
  touch(b, 1, 2);
  touch(b, 5, 3);
  Manifest m2 = stream_manifest(b, {.version = 2});
  auto p2 = plan_incremental(m2, {&m1, nullptr}, 4);
  ASSERT_TRUE(p2.is_ok()) << p2.status().message();
  EXPECT_EQ(p2->changed, (std::vector<uint64_t>{1, 5}));
  EXPECT_EQ(p2->record.stored, 4096u + 100u);
  EXPECT_EQ(p2->record.depth, 1u);
  EXPECT_EQ(p2->record.runs, (std::vector<ChunkRun>{{0, 1, 1, 0}, {1, 1, 2, 0}, {2, 3, 1, 2 * 4096}, {5, 1, 2, 4096}}));

  std::string c = b;
  touch(c, 2, 4);
  Manifest m3 = stream_manifest(c, {.version = 3});
  auto p3 = plan_incremental(m3, {&m2, &p2->record}, 4);
  ASSERT_TRUE(p3.is_ok()) << p3.status().message();
  EXPECT_EQ(p3->record.depth, 2u);
  // Chunk 1 is named in version 2 (where it was written), not through version 2's record.
  EXPECT_EQ(place_of(p3->record, 1).holder, 2u);
  EXPECT_EQ(place_of(p3->record, 0).holder, 1u);
  EXPECT_EQ(place_of(p3->record, 2).holder, 3u);
  EXPECT_EQ(place_of(p3->record, 5).holder, 2u);
  EXPECT_EQ(place_of(p3->record, 5).offset, 4096u);
  EXPECT_EQ(holders_of(p3->record), (std::set<uint64_t>{1, 2}));

  // Full when asked, at the chain's end, on another shape, or when everything changed.
  EXPECT_FALSE(plan_incremental(m3, {&m2, &p2->record}, 1).is_ok());
  EXPECT_FALSE(plan_incremental(m3, {&m2, &p2->record}, 2).is_ok());  // depth 2 reaches full_every 2
  EXPECT_FALSE(plan_incremental(m2, {nullptr, nullptr}, 4).is_ok());
  Manifest other = stream_manifest(a + "x", {.version = 2});
  EXPECT_FALSE(plan_incremental(other, {&m1, nullptr}, 4).is_ok());
  Manifest fresh = stream_manifest(bytes_of(a.size(), 9), {.version = 2});
  EXPECT_FALSE(plan_incremental(fresh, {&m1, nullptr}, 4).is_ok());
}

class L3Incremental : public TwoRankPrefix {
 protected:
  L3Incremental() : TwoRankPrefix("l3chunks") {}
};

TEST_F(L3Incremental, ReadsBackBitExactFromTheVersionsItNames) {
  std::string s[2] = {bytes_of(10 * 4096, 1), bytes_of(3 * 4096 + 7, 2)};
  std::vector<std::array<std::string, 2>> written;
  for (uint64_t v = 1; v <= 5; ++v) {
    if (v > 1) {
      touch(s[0], v, 100 + v);
      touch(s[1], v % 4, 200 + v);
    }
    write(v, s, 3);
    written.push_back({s[0], s[1]});
  }
  // full_every 3: 1 full, 2 and 3 incremental, 4 full (the chain reached 3), 5 incremental.
  for (uint64_t v : {1, 4}) EXPECT_FALSE(fs::exists(chunks_path(l_, v, 0))) << v;
  for (uint64_t v : {2, 3, 5}) EXPECT_TRUE(fs::exists(chunks_path(l_, v, 0))) << v;
  EXPECT_EQ(size_of(data_path(l_, 3, 0)), 4096u);  // only its changed chunk
  for (uint64_t v = 1; v <= 5; ++v)
    for (uint32_t r = 0; r < 2; ++r) {
      Status st = read_back(v, r, written[v - 1][r]);
      EXPECT_TRUE(st.is_ok()) << st.message();
    }
  auto named = holders_named_by(l_, 3);
  ASSERT_TRUE(named.is_ok());
  EXPECT_EQ(*named, (std::set<uint64_t>{1, 2}));
}

// What write_rank says it wrote is what went into the rank's data file: the whole stream for a full
// version, only the changed chunks for an incremental one (the history's l3_bytes_written sums it).
TEST_F(L3Incremental, WriteRankCountsTheBytesItPutInTheDataFile) {
  std::string s = bytes_of(8 * 4096 + 100, 1);
  WriteOptions o;
  o.full_every = 4;
  auto write_one = [&](uint64_t v, uint64_t* written) {
    Manifest m = stream_manifest(s, {.version = v, .rank = 0, .nranks = 1});
    *written = 12345;  // overwritten on success
    Status st = write_rank(l_, m, reinterpret_cast<const uint8_t*>(s.data()), {}, &o, written);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_TRUE(commit(l_, v, 1, "").is_ok());
  };
  uint64_t written = 0;
  write_one(1, &written);
  EXPECT_EQ(written, s.size());  // full
  touch(s, 2, 7);                // one chunk changed
  touch(s, 8, 9);                // and the short last one
  write_one(2, &written);
  ASSERT_TRUE(fs::exists(chunks_path(l_, 2, 0)));
  EXPECT_EQ(written, 4096u + 100u);
  EXPECT_EQ(size_of(data_path(l_, 2, 0)), written);
  // Compressed (another layout: full): the compressed bytes.
  WriteOptions z;
  z.zstd_level = 1;
  const std::string plain(s.size(), 'x');
  Manifest m3 = stream_manifest(plain, {.version = 3, .rank = 0, .nranks = 1});
  ASSERT_TRUE(write_rank(l_, m3, reinterpret_cast<const uint8_t*>(plain.data()), {}, &z, &written).is_ok());
  auto where = decode_where(*fs::read_file(where_path(l_, 3, 0)));
  ASSERT_TRUE(where.is_ok());
  EXPECT_EQ(written, where->stored);
  EXPECT_LT(written, plain.size() / 10);
}

TEST_F(L3Incremental, AMissingOrDamagedHolderMakesItUnreadable) {
  std::string s[2] = {bytes_of(4 * 4096, 1), bytes_of(4 * 4096, 2)};
  write(1, s, 4);
  touch(s[0], 0, 5);
  touch(s[1], 0, 6);
  write(2, s, 4);
  ASSERT_TRUE(read_back(2, 0, s[0]).is_ok());
  // A chunk of version 1 damaged: version 2 fails verification at that chunk.
  {
    std::string d = *fs::read_file(data_path(l_, 1, 1));
    d[2 * 4096 + 3] ^= 1;
    ASSERT_TRUE(fs::write_file_atomic(data_path(l_, 1, 1), d, false).is_ok());
    Status st = read_back(2, 1, s[1]);
    EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << st.message();
  }
  // Version 1's file gone: ERR_CORRUPT naming it.
  ASSERT_TRUE(fs::remove_file(data_path(l_, 1, 0)).is_ok());
  Status st = read_back(2, 0, s[0]);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << st.message();
  EXPECT_NE(st.message().find("version 1"), std::string::npos) << st.message();
  // Its own file truncated.
  ASSERT_TRUE(fs::write_file_atomic(data_path(l_, 2, 1), "x", false).is_ok());
  EXPECT_EQ(read_back(2, 1, s[1]).code(), Code::ERR_CORRUPT);
}

TEST_F(L3Incremental, PruningKeepsWhatAKeptVersionNames) {
  std::string s[2] = {bytes_of(4 * 4096, 1), bytes_of(4 * 4096, 2)};
  write(1, s, 10);
  for (uint64_t v = 2; v <= 4; ++v) {
    touch(s[0], v % 4, v);
    write(v, s, 10);
  }
  // keep 1: version 4 names 1 (chunk 0 and 1 untouched since), 2 (chunk 2) and 3 (chunk 3).
  ASSERT_TRUE(prune(l_, 1).is_ok());
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_TRUE(read_commit(l_, v).is_ok()) << v;
  ASSERT_TRUE(read_back(4, 0, s[0]).is_ok());
  // A version another committed one names is refused by remove_version; its dependant first, then it.
  Status st = remove_version(l_, 1);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
  EXPECT_TRUE(read_commit(l_, 1).is_ok());
  // A full version 5: now nothing names 1..4, and keep 1 removes them.
  write(5, std::array<std::string, 2>{bytes_of(4 * 4096, 7), bytes_of(4 * 4096, 8)}.data(), 10);
  ASSERT_TRUE(prune(l_, 1).is_ok());
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_FALSE(fs::exists(l_.l3_version_dir(v))) << v;
  EXPECT_TRUE(read_commit(l_, 5).is_ok());
}

TEST_F(L3Incremental, AVersionBeingWrittenKeepsWhatItNames) {
  std::string s[2] = {bytes_of(4 * 4096, 1), bytes_of(4 * 4096, 2)};
  write(1, s, 4);
  touch(s[0], 1, 3);
  WriteOptions o;
  o.full_every = 4;
  Manifest m = stream_manifest(s[0], {.version = 2, .rank = 0, .nranks = 2});
  ASSERT_TRUE(write_rank(l_, m, reinterpret_cast<const uint8_t*>(s[0].data()), {}, &o).is_ok());
  ASSERT_TRUE(fs::exists(chunks_path(l_, 2, 0)));
  // Version 2 is not committed yet (rank 1 still writing): removing version 1 meets its record after
  // taking COMMIT away, and puts COMMIT back.
  Status st = remove_version(l_, 1);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
  EXPECT_TRUE(read_commit(l_, 1).is_ok()) << "COMMIT put back";
  // The writer's side: a record naming a version whose COMMIT is gone is refused before the manifest.
  ASSERT_TRUE(fs::remove_file(commit_path(l_, 1)).is_ok());
  {
    Manifest m3 = m;
    m3.version = 3;
    RankWriter w;
    ASSERT_TRUE(w.open(l_, m3, RankPlacement{}, nullptr).is_ok());
    ASSERT_TRUE(w.write(0, reinterpret_cast<const uint8_t*>(s[0].data()), 4096).is_ok());
    ChunkRecord r{.version = 3, .chunks = 4, .chunk_size = 4096, .depth = 1, .stored = 4096,
                  .runs = {{0, 1, 3, 0}, {1, 3, 1, 4096}}};
    w.record_chunks(r);
    auto finished = w.finish();
    ASSERT_TRUE(finished.is_ok()) << finished.status().message();
    EXPECT_EQ(*finished, RankWriter::Finished::base_removed);
    EXPECT_FALSE(fs::exists(manifest_path(l_, 3, 0)));
  }
  // With version 1 uncommitted, a new attempt at version 2 writes it full and drops the old record.
  ASSERT_TRUE(write_rank(l_, m, reinterpret_cast<const uint8_t*>(s[0].data()), {}, &o).is_ok());
  EXPECT_FALSE(fs::exists(chunks_path(l_, 2, 0)));
  EXPECT_EQ(size_of(data_path(l_, 2, 0)), s[0].size());
  ASSERT_TRUE(read_back(2, 0, s[0]).is_ok());
}

}  // namespace
}  // namespace cairn::l3
