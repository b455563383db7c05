// The geometry of a set's exchange and the spans of changed bytes it moves: what the encode (set_exchange.cpp)
// and the forecast of its bytes (forecast_encode) both derive from the agreed inputs, without communication.
// Internal to the exchange.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_code.hpp"

namespace cairn::redundancy::spans {

inline constexpr size_t kMaxPiece = size_t{1} << 30;  // MPI counts are int

inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
// Bytes a member with `len` bytes really has in [off, off + piece).
inline size_t have(size_t len, size_t off, size_t piece) { return len > off ? std::min(piece, len - off) : 0; }

// What the encode, the rebuild and the forecast derive from the agreed inputs (me: this member, set by
// the exchange's agreement).
struct Geometry {
  int n = 0, me = 0, k = 0, m = 0;
  size_t seg = 0;     // segment length
  size_t piece = 0;   // bytes of a segment per step
  size_t pieces = 0;  // steps per segment
  int depth = kExchangeMinSteps;  // steps in flight (exchange_depth)
};

// The set-wide part of the geometry, from the agreed inputs alone (lens not empty, chunk > 0); leaves `me`.
void shape(const SetCode& code, const std::vector<size_t>& lens, size_t chunk, Geometry* geo);

// The span of bytes [pos, pos + len) of member x that changed, relative to pos (all of it without
// `changed`; empty when nothing in it changed).
std::pair<size_t, size_t> changed_span(const ChangedChunks* changed, const std::vector<size_t>& lens, int x, size_t pos,
                                       size_t len);
// A span widened to 64-byte bounds within a piece of len bytes (the codec's unit), empty stays empty.
std::pair<size_t, size_t> widen(std::pair<size_t, size_t> s, size_t len);
// The span of the piece at off of `stripe` where any of its k data sources changed by any of `lists`,
// widened to 64 bytes; empty when none did.
std::pair<size_t, size_t> stripe_span(const SetCode& code, const Geometry& g, const std::vector<size_t>& lens, int stripe,
                                      size_t off, size_t len, std::initializer_list<const ChangedChunks*> lists);
// What the plain encode recomputes of the parity piece at off of `stripe`: the stripe_span of `changed`,
// all of it without; every source sends its bytes of it.
std::pair<size_t, size_t> parity_span(const SetCode& code, const Geometry& g, const std::vector<size_t>& lens,
                                      const ChangedChunks* changed, int stripe, size_t off, size_t len);
// What source j of `stripe` sends of the piece at off in a delta update: its own span changed since B
// (`since`), widened to 64 bytes.
std::pair<size_t, size_t> delta_span(const SetCode& code, const Geometry& g, const std::vector<size_t>& lens,
                                     const ChangedChunks& since, int stripe, int j, size_t off, size_t len);

}  // namespace cairn::redundancy::spans
