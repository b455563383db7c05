// A copy that checksums what it copies in the same pass: XXH3-64 (seed 0, the default secret: the hash of
// every chunk table) of each chunk, computed from the bytes as they are loaded for the copy. The restart's
// hash-then-copy read each 4 KiB step twice (once from memory for the hash, once from the cache for the
// copy) and took about 1.4 times a bare memcpy; this takes about one (docs/performance.md, "The L1
// restart: one pass").
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn {

// Copies `count` chunks of `len` bytes each, src + i*len to dst + i*len, and sets digests[i] to the
// XXH3_64bits of chunk i, bit for bit (tests/unit/base/xxh3_copy_test.cpp). Four chunks are hashed side by
// side, a 64-byte stripe of each in turn, so that four streams of loads are in flight, as a large memcpy
// keeps them. `streaming`: the stores go past the CPU caches (non-temporal) where a chunk's destination is
// 32-byte aligned; call streaming_fence() (copy_streaming.hpp) after the last copy. The fused pass needs
// x86-64 with AVX2 (checked once, at run time) and chunks over 240 bytes; otherwise each chunk is hashed
// with XXH3_64bits and then copied.
void xxh3_copy(uint8_t* dst, const uint8_t* src, uint64_t len, size_t count, uint64_t* digests, bool streaming);

// The digests alone: digests[i] = XXH3_64bits of the `len` bytes at src + i*len, four chunks side by side as
// in xxh3_copy (the library's XXH3 hashes one stream at a time).
void xxh3_hash(const uint8_t* src, uint64_t len, size_t count, uint64_t* digests);

// Whether xxh3_copy takes the fused pass on this CPU (for the tests and the log).
bool xxh3_copy_fused();

}  // namespace cairn
