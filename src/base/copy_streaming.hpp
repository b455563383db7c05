// A copy whose stores go past the CPU caches (non-temporal stores), for the restart's large copies out of
// memory that was just read (a mapped L1 slot, a rebuilt buffer): a plain copy of a piece below the C
// library's own streaming threshold (a share of the last-level cache) first reads every destination line
// into the cache only to overwrite it, a third more memory traffic on a core whose memory bandwidth
// bounds the restart. Such stores are not ordered with the thread's other stores: call streaming_fence()
// after the last copy, before another thread may learn of the bytes. x86-64 only (SSE2, which every
// x86-64 CPU has); elsewhere a plain memcpy and no fence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace cairn {

inline void copy_streaming(uint8_t* dst, const uint8_t* src, uint64_t n) {
#if defined(__x86_64__)
  // The head up to dst's first 16-byte boundary, and the tail under 64 bytes, with memcpy.
  const uint64_t head = std::min<uint64_t>(n, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  memcpy(dst, src, static_cast<size_t>(head));
  uint64_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, static_cast<size_t>(n - i));
#else
  memcpy(dst, src, static_cast<size_t>(n));
#endif
}

inline void streaming_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace cairn
