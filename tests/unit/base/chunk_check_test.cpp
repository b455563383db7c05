// base/chunk_check: the one check of a stream's bytes against its manifest's chunk hashes.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "base/chunk_check.hpp"
#include "base/xxh.hpp"

namespace cairn {
namespace {

Manifest manifest_of(const std::vector<uint8_t>& bytes, uint32_t chunk) {
  Manifest m;
  m.total_size = bytes.size();
  m.chunk_size = chunk;
  m.chunk_hashes = chunk_hashes(bytes.data(), bytes.size(), chunk);
  return m;
}

std::vector<uint8_t> stream(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
  return b;
}

TEST(ChunkCheck, FeedsAcrossChunkBoundariesInAnyPieces) {
  auto bytes = stream(10000);  // chunks of 4096: two whole, one of 1808
  Manifest m = manifest_of(bytes, 4096);
  for (uint64_t piece : {1ull, 100ull, 4096ull, 5000ull, 10000ull}) {
    ChunkCheck check(m);
    for (uint64_t off = 0; off < bytes.size(); off += piece)
      ASSERT_TRUE(check.feed(off, bytes.data() + off, std::min<uint64_t>(piece, bytes.size() - off)).is_ok()) << piece;
    EXPECT_TRUE(check.finish().is_ok());
    EXPECT_EQ(check.position(), bytes.size());
  }
}

TEST(ChunkCheck, NamesTheChunkThatDiffers) {
  auto bytes = stream(10000);
  Manifest m = manifest_of(bytes, 4096);
  bytes[5000] ^= 1;  // chunk 1
  ChunkCheck check(m);
  Status st = check.feed(0, bytes.data(), 4096);
  EXPECT_TRUE(st.is_ok());
  st = check.feed(4096, bytes.data() + 4096, 5904);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT);
  EXPECT_NE(st.message().find("chunk 1 (bytes 4096..8191) checksum mismatch: arrived with xxh3 "), std::string::npos)
      << st.message();
}

TEST(ChunkCheck, ByChunkWithBeginAddEnd) {
  auto bytes = stream(9000);
  Manifest m = manifest_of(bytes, 4096);
  ChunkCheck check(m);
  check.begin(2);  // the last, short chunk: bytes 8192..8999
  check.add(bytes.data() + 8192, 400);
  check.add(bytes.data() + 8592, 408);
  EXPECT_TRUE(check.end().is_ok());
  check.begin(0);
  check.add(bytes.data() + 1, 4096);  // the wrong bytes
  Status st = check.end();
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT);
  EXPECT_NE(st.message().find("chunk 0 (bytes 0..4095)"), std::string::npos) << st.message();
}

TEST(ChunkCheck, RefusesBytesOutOfOrderOrPastTheEndAndCountsWhatIsMissing) {
  auto bytes = stream(5000);
  Manifest m = manifest_of(bytes, 4096);
  ChunkCheck check(m);
  EXPECT_EQ(check.feed(100, bytes.data() + 100, 10).code(), Code::ERR_INTERNAL);
  ASSERT_TRUE(check.feed(0, bytes.data(), 4096).is_ok());
  Status missing = check.finish();
  EXPECT_EQ(missing.code(), Code::ERR_INTERNAL);
  EXPECT_NE(missing.message().find("4096 of 5000 bytes arrived"), std::string::npos) << missing.message();
  std::vector<uint8_t> more(2000);
  EXPECT_EQ(check.feed(4096, more.data(), more.size()).code(), Code::ERR_INVALID_ARG);
}

TEST(ChunkCheck, WholeChunksInAnyOrderAndOnlyWholeOnes) {
  auto bytes = stream(10000);  // chunks of 4096: 0, 1 and the short 2
  Manifest m = manifest_of(bytes, 4096);
  ChunkCheck check(m);
  EXPECT_TRUE(check.whole(8192, bytes.data() + 8192, 1808).is_ok());  // the last first
  EXPECT_TRUE(check.whole(0, bytes.data(), 8192).is_ok());           // two at once
  EXPECT_EQ(check.position(), 0u) << "whole() moved feed()'s position";
  // Not whole chunks, or past the end: refused before any hashing.
  EXPECT_EQ(check.whole(100, bytes.data() + 100, 4096).code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(check.whole(0, bytes.data(), 5000).code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(check.whole(8192, bytes.data() + 8192, 4096).code(), Code::ERR_INVALID_ARG);
  bytes[4100] ^= 1;  // chunk 1
  Status st = check.whole(0, bytes.data(), 8192);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT);
  EXPECT_NE(st.message().find("chunk 1 (bytes 4096..8191) checksum mismatch"), std::string::npos) << st.message();
}

TEST(ChunkCheck, NamesTheRegionsOfTheChunkWhenTheManifestHasAny) {
  auto bytes = stream(10000);
  Manifest m = manifest_of(bytes, 4096);
  m.regions = {{"grid", RegionKind::memory, 0, 8, 500, 0, 4000, 0, {}},
               {"out/a.h5", RegionKind::file, 0, 1, 100, 4090, 100, 0, {}}};
  bytes[4100] ^= 1;  // chunk 1: the file's tail
  ChunkCheck check(m);
  Status st = check.whole(0, bytes.data(), bytes.size());
  EXPECT_NE(st.message().find("chunk 1 (bytes 4096..8191, file 'out/a.h5') checksum mismatch: arrived with xxh3 "),
            std::string::npos) << st.message();
  bytes[4100] ^= 1;
  bytes[9999] ^= 1;  // chunk 2: no region's byte
  check.begin(2);
  check.add(bytes.data() + 8192, 1808);
  st = check.end();
  EXPECT_NE(st.message().find("chunk 2 (bytes 8192..9999, no region) checksum mismatch"), std::string::npos)
      << st.message();
}

TEST(ChunkCheck, WholeChunksFromSeveralThreadsAtOnce) {  // as the device restart's hashing threads
  auto bytes = stream(64 * 4096 + 5);
  const Manifest m = manifest_of(bytes, 4096);
  const ChunkCheck check(m);
  bytes[37 * 4096 + 9] ^= 1;
  std::vector<Status> got(4, Status::ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)  // each a quarter: 16 chunks, the last one with the short tail
    threads.emplace_back([&, t] {
      const uint64_t a = t * 16 * 4096, b = t == 3 ? bytes.size() : a + 16 * 4096;
      got[t] = check.whole(a, bytes.data() + a, b - a);
    });
  for (auto& th : threads) th.join();
  EXPECT_TRUE(got[0].is_ok() && got[1].is_ok() && got[3].is_ok());
  EXPECT_EQ(got[2].code(), Code::ERR_CORRUPT);
  EXPECT_NE(got[2].message().find("chunk 37 (bytes 151552..155647) checksum mismatch"), std::string::npos)
      << got[2].message();
}

}  // namespace
}  // namespace cairn
