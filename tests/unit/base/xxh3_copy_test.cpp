// The fused hash-and-copy gives XXH3_64bits of every chunk and a bit-exact copy, for every length around
// XXH3's block and stripe boundaries, every group size, misaligned sources and destinations, cached and
// streaming stores; the hash alone (xxh3_hash) gives the same digests and writes nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/copy_streaming.hpp"
#include "base/xxh.hpp"
#include "base/xxh3_copy.hpp"

namespace cairn {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937_64 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(g());
  return v;
}

// count chunks of len bytes from src + src_off to dst + dst_off: digests and bytes as XXH3 and memcpy give.
void expect_like_the_library(const std::vector<uint8_t>& src, uint64_t len, size_t count, size_t src_off,
                             size_t dst_off, bool streaming) {
  std::vector<uint8_t> dst(dst_off + len * count + 64, 0xEE);
  std::vector<uint64_t> digests(count, 0);
  xxh3_copy(dst.data() + dst_off, src.data() + src_off, len, count, digests.data(), streaming);
  streaming_fence();
  for (size_t k = 0; k < count; ++k)
    ASSERT_EQ(digests[k], XXH3_64bits(src.data() + src_off + k * len, len))
        << "len " << len << " count " << count << " chunk " << k << " src+" << src_off << " dst+" << dst_off;
  ASSERT_EQ(memcmp(dst.data() + dst_off, src.data() + src_off, len * count), 0) << "len " << len << " count " << count;
  for (size_t i = 0; i < dst_off; ++i) ASSERT_EQ(dst[i], 0xEE) << "a store before the destination";
  for (size_t i = dst_off + len * count; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "a store past the destination";
}

TEST(Xxh3Copy, EveryLengthAroundTheStripesAndBlocks) {
  const auto src = random_bytes(6 * 5000 + 64, 1);
  // From the shortest input of XXH3's long loop (241) to past four blocks of 1,024 bytes, each length.
  for (uint64_t len = 1; len <= 4200; ++len) expect_like_the_library(src, len, 1 + len % 6, len % 7, len % 5, len % 2);
}

TEST(Xxh3Copy, LargeChunksInEveryGroupSizeAndAlignment) {
  const uint64_t len = 1 << 20;
  const auto src = random_bytes(7 * len + 64, 2);
  for (size_t count = 1; count <= 7; ++count)
    for (size_t off : {0, 1, 16, 32, 63})
      for (bool streaming : {false, true}) expect_like_the_library(src, len, count, off % 3, off, streaming);
  // A length that is no multiple of 32: the chunks' destinations are not all aligned alike.
  expect_like_the_library(src, len - 17, 5, 0, 0, true);
}

// The digests of xxh3_hash, chunk by chunk, against the library's; the source untouched.
void expect_hash_like_the_library(const std::vector<uint8_t>& src, uint64_t len, size_t count, size_t off) {
  const std::vector<uint8_t> before = src;
  std::vector<uint64_t> digests(count + 1, 0xABCD);
  xxh3_hash(src.data() + off, len, count, digests.data());
  for (size_t k = 0; k < count; ++k)
    ASSERT_EQ(digests[k], XXH3_64bits(src.data() + off + k * len, len)) << "len " << len << " count " << count << " chunk " << k;
  ASSERT_EQ(digests[count], 0xABCDu) << "a digest written past the last";
  ASSERT_EQ(src, before);
}

TEST(Xxh3Copy, HashAloneGivesTheSameDigests) {
  const auto small = random_bytes(6 * 5000 + 64, 3);
  for (uint64_t len = 1; len <= 4200; len += 1 + len / 50) expect_hash_like_the_library(small, len, 1 + len % 6, len % 7);
  const uint64_t len = 1 << 20;
  const auto large = random_bytes(9 * len + 64, 4);
  for (size_t count : {1, 3, 4, 5, 8, 9})  // groups of four and the rest
    for (size_t off : {0, 1, 33}) expect_hash_like_the_library(large, len, count, off);
}

TEST(Xxh3Copy, NothingToDo) {
  std::vector<uint8_t> src(64, 1), dst(64, 2);
  uint64_t digest = 7;
  xxh3_copy(dst.data(), src.data(), 64, 0, &digest, true);
  EXPECT_EQ(digest, 7u);
  EXPECT_EQ(dst[0], 2);
}

TEST(Xxh3Copy, SaysWhetherItFuses) {
#if defined(__x86_64__)
  EXPECT_EQ(xxh3_copy_fused(), static_cast<bool>(__builtin_cpu_supports("avx2")));
#else
  EXPECT_FALSE(xxh3_copy_fused());
#endif
}

}  // namespace
}  // namespace cairn
