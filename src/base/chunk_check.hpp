// The one check of a snapshot stream's bytes against its manifest's chunk hashes: every reader and
// receiver of a stream (the restart's readers, the reshaper's stream, the service agent's verify stage, a
// node move's writer) feeds the bytes of a checksum chunk as they land, while they are still in the CPU
// cache, and learns at the chunk's last byte whether its xxh3 is the manifest's; a stream already in
// memory (verify_stream, the device restart's staging) is checked by whole chunks. A mismatch is
// ERR_CORRUPT "chunk C (bytes A..B, REGIONS) checksum mismatch: arrived with xxh3 X, the manifest says
// Y", the regions named (base/manifest.hpp regions_in) when the manifest describes any.
#pragma once

#include <cstdint>
#include <memory>

#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn {

class ChunkCheck {
 public:
  // For the chunks of `m` (its chunk table already checked: check_chunk_table), which must outlive the
  // check. status() is ERR_NO_MEMORY when begin() or feed() could not make a hash state; every call of
  // theirs then returns it.
  explicit ChunkCheck(const Manifest& m);
  ~ChunkCheck();
  ChunkCheck(const ChunkCheck&) = delete;
  ChunkCheck& operator=(const ChunkCheck&) = delete;
  Status status() const;

  // One chunk whose bytes come in pieces, in order: begin(c), add() each piece, then end(), which
  // compares the digest.
  void begin(uint64_t chunk);
  void add(const uint8_t* bytes, uint64_t len);
  Status end();

  // The stream in order from byte 0 (pieces of any size, across chunk boundaries): each chunk is compared
  // as its last byte arrives. A piece that is not the next byte, or runs past the stream's end, is an
  // error (ERR_INTERNAL, ERR_INVALID_ARG). finish(): every byte arrived (else ERR_INTERNAL).
  Status feed(uint64_t offset, const uint8_t* bytes, uint64_t len);
  Status finish() const;
  uint64_t position() const { return fed_; }

  // Whole chunks at any place of the stream, in any order (a node move's pieces): bytes [offset, offset +
  // len) must start on a chunk and end on one or at the stream's end (else ERR_INVALID_ARG); each chunk
  // is compared as end() does. Independent of feed()'s position and of a chunk begun with begin(), and
  // safe to call from several threads at once.
  Status whole(uint64_t offset, const uint8_t* bytes, uint64_t len) const;

  // A chunk's digest computed elsewhere (xxh3_copy, which hashes as it copies), compared as end() does.
  Status compare(uint64_t chunk, uint64_t got) const;

 private:
  Status mismatch(uint64_t chunk, uint64_t got) const;
  const Manifest& m_;
  struct State;
  std::unique_ptr<State> state_;
  uint64_t chunk_ = 0;
  uint64_t fed_ = 0;  // feed(): bytes of the stream verified or in the open chunk
};

}  // namespace cairn
