#include "base/chunk_check.hpp"

#include <algorithm>
#include <string>

#include "base/xxh.hpp"

namespace cairn {
namespace {
using ull = unsigned long long;
}

struct ChunkCheck::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

ChunkCheck::ChunkCheck(const Manifest& m) : m_(m) {}

ChunkCheck::~ChunkCheck() = default;

Status ChunkCheck::status() const {
  if (!state_ || state_->s) return Status::ok();
  return make_error(Code::ERR_NO_MEMORY, "xxh3: cannot create a hash state");
}

void ChunkCheck::begin(uint64_t chunk) {
  chunk_ = chunk;
  if (!state_) state_ = std::make_unique<State>();  // the first chunk: whole() never needs one
  if (state_->s) XXH3_64bits_reset(state_->s);
}

void ChunkCheck::add(const uint8_t* bytes, uint64_t len) {
  if (state_ && state_->s) XXH3_64bits_update(state_->s, bytes, static_cast<size_t>(len));
}

Status ChunkCheck::end() {
  if (!state_) return make_error(Code::ERR_INTERNAL, "chunk check: end() without begin()");
  CAIRN_TRY(status());
  return compare(chunk_, XXH3_64bits_digest(state_->s));
}

Status ChunkCheck::compare(uint64_t chunk, uint64_t got) const {
  if (chunk < m_.chunk_hashes.size() && got == m_.chunk_hashes[chunk]) return Status::ok();
  return mismatch(chunk, got);
}

Status ChunkCheck::mismatch(uint64_t chunk, uint64_t got) const {
  const uint64_t a = chunk * m_.chunk_size, b = std::min<uint64_t>(a + m_.chunk_size, m_.total_size);
  const std::string where = m_.regions.empty() ? std::string() : ", " + regions_in(m_.regions, a, b);
  return make_error(Code::ERR_CORRUPT,
                    "chunk %llu (bytes %llu..%llu%s) checksum mismatch: arrived with xxh3 %016llx, the manifest says %016llx",
                    static_cast<ull>(chunk), static_cast<ull>(a), static_cast<ull>(b ? b - 1 : 0), where.c_str(),
                    static_cast<ull>(got), static_cast<ull>(chunk < m_.chunk_hashes.size() ? m_.chunk_hashes[chunk] : 0));
}

Status ChunkCheck::feed(uint64_t offset, const uint8_t* bytes, uint64_t len) {
  if (offset != fed_)
    return make_error(Code::ERR_INTERNAL, "chunk at byte %llu arrived out of order (expected byte %llu)",
                      static_cast<ull>(offset), static_cast<ull>(fed_));
  if (fed_ + len > m_.total_size)
    return make_error(Code::ERR_INVALID_ARG, "bytes past the stream's end (%llu)", static_cast<ull>(m_.total_size));
  const uint64_t csize = m_.chunk_size;
  if (csize == 0) return make_error(Code::ERR_CORRUPT, "the manifest's chunk size is 0");
  for (uint64_t pos = 0; pos < len;) {
    if (fed_ % csize == 0) begin(fed_ / csize);
    CAIRN_TRY(status());
    const uint64_t take = std::min<uint64_t>(len - pos, csize - fed_ % csize);
    add(bytes + pos, take);
    pos += take;
    fed_ += take;
    if (fed_ % csize == 0 || fed_ == m_.total_size) CAIRN_TRY(end());
  }
  return Status::ok();
}

Status ChunkCheck::whole(uint64_t offset, const uint8_t* bytes, uint64_t len) const {
  const uint64_t csize = m_.chunk_size;
  if (csize == 0) return make_error(Code::ERR_CORRUPT, "the manifest's chunk size is 0");
  if (offset > m_.total_size || len > m_.total_size - offset || offset % csize != 0 ||
      (len % csize != 0 && offset + len != m_.total_size))
    return make_error(Code::ERR_INVALID_ARG, "bytes %llu..+%llu of a %llu-byte stream are not whole chunks of %llu",
                      static_cast<ull>(offset), static_cast<ull>(len), static_cast<ull>(m_.total_size),
                      static_cast<ull>(csize));
  // Hashed as chunk_hashes hashes a stream: four whole chunks side by side, a short last one alone.
  const std::vector<uint64_t> got = chunk_hashes(bytes, len, static_cast<uint32_t>(csize));
  const uint64_t first = offset / csize;
  for (uint64_t i = 0; i < got.size(); ++i) CAIRN_TRY(compare(first + i, got[i]));
  return Status::ok();
}

Status ChunkCheck::finish() const {
  if (fed_ == m_.total_size) return Status::ok();
  return make_error(Code::ERR_INTERNAL, "%llu of %llu bytes arrived", static_cast<ull>(fed_), static_cast<ull>(m_.total_size));
}

}  // namespace cairn
