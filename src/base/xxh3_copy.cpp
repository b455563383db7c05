// XXH3-64's long-input loop (inputs over 240 bytes), written from the algorithm's specification so that
// each 64-byte stripe is stored to the destination while it is in registers. The steps and constants are
// XXH3's: eight 64-bit accumulators; per stripe, for each 8-byte lane i, acc[i ^ 1] += lane and
// acc[i] += lo32(lane ^ key) * hi32(lane ^ key), the keys taken from the secret 8 bytes further on per
// stripe; after each block of 16 stripes the accumulators are scrambled with the secret's last 64 bytes;
// the last stripe of the input is accumulated with the secret at 192 - 64 - 7; the accumulators are merged
// with the secret from byte 11 and len * PRIME64_1, then avalanched.
#include "base/xxh3_copy.hpp"

#include <cstring>

#include "base/xxh.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cairn {
namespace {

void hash_then_copy_each(uint8_t* dst, const uint8_t* src, uint64_t len, size_t count, uint64_t* digests) {
  for (size_t k = 0; k < count; ++k) {
    digests[k] = XXH3_64bits(src + k * len, static_cast<size_t>(len));
    memcpy(dst + k * len, src + k * len, static_cast<size_t>(len));
  }
}

#if defined(__x86_64__)

constexpr uint64_t kPrime32_1 = 0x9E3779B1u, kPrime32_2 = 0x85EBCA77u, kPrime32_3 = 0xC2B2AE3Du;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull, kPrime64_2 = 0xC2B2AE3D27D4EB4Full,
                   kPrime64_3 = 0x165667B19E3779F9ull, kPrime64_4 = 0x85EBCA77C2B2AE63ull,
                   kPrime64_5 = 0x27D4EB2F165667C5ull;
constexpr size_t kSecretSize = 192, kStripe = 64, kStripesPerBlock = (kSecretSize - kStripe) / 8;
constexpr size_t kBlock = kStripe * kStripesPerBlock, kLastStripeKey = kSecretSize - kStripe - 7, kMergeKey = 11;
constexpr size_t kMaxSide = 4;  // chunks hashed side by side
// At the start of each block of 16 stripes, every chunk's next block is asked for (prefetched). The
// hardware prefetchers stop at every 4 KiB page and run only a few lines ahead; four streams a mebibyte
// apart then leave the loop waiting on memory. On a 2-vCPU AMD EPYC guest, 256 MiB in 1 MiB chunks took
// 22-24 ms to hash and copy (14.5 to hash alone) without the requests, 14-15 (9-11) with them, where a
// memcpy of the same took 16; docs/performance.md, "Hashing while copying: the next block asked for".
constexpr size_t kPrefetchAhead = 1024;

// XXH3's default secret.
alignas(64) constexpr uint8_t kSecret[kSecretSize] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

uint64_t read64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
uint64_t mul128_fold64(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}
uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  return h ^ (h >> 32);
}

enum class Store { none, cached, streaming };

// One stripe into the accumulators, the stripe stored to dst on the way.
template <Store S>
__attribute__((target("avx2"), always_inline)) inline void accumulate(__m256i acc[2], const uint8_t* in,
                                                                      const uint8_t* key, uint8_t* dst) {
  for (int i = 0; i < 2; ++i) {
    const __m256i data = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32 * i));
    if constexpr (S == Store::streaming) _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32 * i), data);
    if constexpr (S == Store::cached) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * i), data);
    const __m256i data_key = _mm256_xor_si256(data, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + 32 * i)));
    const __m256i product = _mm256_mul_epu32(data_key, _mm256_srli_epi64(data_key, 32));
    const __m256i swapped = _mm256_shuffle_epi32(data, _MM_SHUFFLE(1, 0, 3, 2));  // lane i feeds acc[i ^ 1]
    acc[i] = _mm256_add_epi64(product, _mm256_add_epi64(acc[i], swapped));
  }
}

__attribute__((target("avx2"), always_inline)) inline void scramble(__m256i acc[2]) {
  const __m256i prime = _mm256_set1_epi32(static_cast<int>(kPrime32_1));
  const uint8_t* key = kSecret + kSecretSize - kStripe;
  for (int i = 0; i < 2; ++i) {
    __m256i a = _mm256_xor_si256(acc[i], _mm256_srli_epi64(acc[i], 47));
    a = _mm256_xor_si256(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + 32 * i)));
    const __m256i high = _mm256_shuffle_epi32(a, _MM_SHUFFLE(0, 3, 0, 1));
    acc[i] = _mm256_add_epi64(_mm256_mul_epu32(a, prime), _mm256_slli_epi64(_mm256_mul_epu32(high, prime), 32));
  }
}

// `side` (1..kMaxSide) chunks of len > 240 bytes, side by side.
template <Store S>
__attribute__((target("avx2"))) void fused(uint8_t* dst, const uint8_t* src, uint64_t len, size_t side,
                                           uint64_t* digests) {
  alignas(32) static constexpr uint64_t kInit[8] = {kPrime32_3, kPrime64_1, kPrime64_2, kPrime64_3,
                                                    kPrime64_4, kPrime32_2, kPrime64_5, kPrime32_1};
  __m256i acc[kMaxSide][2];
  for (size_t k = 0; k < side; ++k) {
    acc[k][0] = _mm256_load_si256(reinterpret_cast<const __m256i*>(kInit));
    acc[k][1] = _mm256_load_si256(reinterpret_cast<const __m256i*>(kInit + 4));
  }
  const uint64_t blocks = (len - 1) / kBlock;
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t at = b * kBlock;
    if (at + kPrefetchAhead + kBlock <= len)  // only this chunk's own bytes
      for (size_t k = 0; k < side; ++k)
        for (size_t line = 0; line < kBlock; line += kStripe)
          _mm_prefetch(reinterpret_cast<const char*>(src + k * len + at + kPrefetchAhead + line), _MM_HINT_T0);
    for (size_t s = 0; s < kStripesPerBlock; ++s)
      for (size_t k = 0; k < side; ++k)
        accumulate<S>(acc[k], src + k * len + at + s * kStripe, kSecret + s * 8, dst + k * len + at + s * kStripe);
    for (size_t k = 0; k < side; ++k) scramble(acc[k]);
  }
  const uint64_t at = blocks * kBlock, stripes = (len - 1 - at) / kStripe, stored = at + stripes * kStripe;
  for (size_t k = 0; k < side; ++k) {
    const uint8_t* in = src + k * len;
    uint8_t* out = dst + k * len;
    for (uint64_t s = 0; s < stripes; ++s) accumulate<S>(acc[k], in + at + s * kStripe, kSecret + s * 8, out + at + s * kStripe);
    accumulate<Store::none>(acc[k], in + len - kStripe, kSecret + kLastStripeKey, nullptr);
    if constexpr (S != Store::none) memcpy(out + stored, in + stored, static_cast<size_t>(len - stored));  // under one stripe
    alignas(32) uint64_t a[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(a), acc[k][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(a + 4), acc[k][1]);
    uint64_t h = len * kPrime64_1;
    for (int i = 0; i < 4; ++i)
      h += mul128_fold64(a[2 * i] ^ read64(kSecret + kMergeKey + 16 * i), a[2 * i + 1] ^ read64(kSecret + kMergeKey + 16 * i + 8));
    digests[k] = avalanche(h);
  }
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

#endif  // __x86_64__

}  // namespace

bool xxh3_copy_fused() {
#if defined(__x86_64__)
  return has_avx2();
#else
  return false;
#endif
}

void xxh3_copy(uint8_t* dst, const uint8_t* src, uint64_t len, size_t count, uint64_t* digests, bool streaming) {
#if defined(__x86_64__)
  if (len > 240 && has_avx2()) {
    for (size_t k = 0; k < count; k += kMaxSide) {
      const size_t side = count - k < kMaxSide ? count - k : kMaxSide;
      uint8_t* d = dst + k * len;
      bool aligned = true;  // every destination of the group on a 32-byte boundary
      for (size_t j = 0; j < side; ++j) aligned = aligned && (reinterpret_cast<uintptr_t>(d + j * len) & 31) == 0;
      if (streaming && aligned)
        fused<Store::streaming>(d, src + k * len, len, side, digests + k);
      else
        fused<Store::cached>(d, src + k * len, len, side, digests + k);
    }
    return;
  }
#endif
  (void)streaming;
  hash_then_copy_each(dst, src, len, count, digests);
}

void xxh3_hash(const uint8_t* src, uint64_t len, size_t count, uint64_t* digests) {
#if defined(__x86_64__)
  if (len > 240 && has_avx2()) {
    // Nothing is stored: the stores' destination is never written, so the source stands in for it.
    uint8_t* none = const_cast<uint8_t*>(src);
    for (size_t k = 0; k < count; k += kMaxSide)
      fused<Store::none>(none + k * len, src + k * len, len, count - k < kMaxSide ? count - k : kMaxSide, digests + k);
    return;
  }
#endif
  for (size_t k = 0; k < count; ++k) digests[k] = XXH3_64bits(src + k * len, static_cast<size_t>(len));
}

}  // namespace cairn
