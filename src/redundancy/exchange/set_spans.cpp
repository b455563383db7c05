#include "redundancy/exchange/set_spans.hpp"

#include <algorithm>
#include <cstdint>

namespace cairn::redundancy {

namespace spans {

void shape(const SetCode& code, const std::vector<size_t>& lens, size_t chunk, Geometry* geo) {
  geo->n = code.n(), geo->m = code.m(), geo->k = code.k();
  const size_t max_len = *std::max_element(lens.begin(), lens.end());
  geo->seg = code.segment_len(max_len);
  geo->piece = std::min({round_up(chunk, 64), kMaxPiece, std::max<size_t>(geo->seg, 64)});
  geo->pieces = (geo->seg + geo->piece - 1) / geo->piece;
  const size_t per_step = (code.scheme() == Redundancy::partner ? 1 : static_cast<size_t>(std::max(geo->k, 1))) * geo->piece;
  geo->depth = exchange_depth(per_step);
}

std::pair<size_t, size_t> changed_span(const ChangedChunks* changed, const std::vector<size_t>& lens, int x, size_t pos,
                                       size_t len) {
  if (changed == nullptr) return {0, len};
  return changed->span(x, lens[static_cast<size_t>(x)], pos, len);
}

std::pair<size_t, size_t> widen(std::pair<size_t, size_t> s, size_t len) {
  if (s.first >= s.second) return {0, 0};
  return {s.first / 64 * 64, std::min(len, round_up(s.second, 64))};
}

std::pair<size_t, size_t> stripe_span(const SetCode& code, const Geometry& g, const std::vector<size_t>& lens, int stripe,
                                      size_t off, size_t len, std::initializer_list<const ChangedChunks*> lists) {
  size_t first = len, second = 0;
  for (int j = 0; j < g.k; j++) {
    const int y = code.shard_owner(stripe, j);
    for (const ChangedChunks* c : lists) {
      const auto s = c->span(y, lens[static_cast<size_t>(y)], static_cast<size_t>(j) * g.seg + off, len);
      if (s.first < s.second) first = std::min(first, s.first), second = std::max(second, s.second);
    }
  }
  return widen({first, second}, len);
}

std::pair<size_t, size_t> parity_span(const SetCode& code, const Geometry& g, const std::vector<size_t>& lens,
                                      const ChangedChunks* changed, int stripe, size_t off, size_t len) {
  return changed == nullptr ? std::make_pair(size_t{0}, len) : stripe_span(code, g, lens, stripe, off, len, {changed});
}

std::pair<size_t, size_t> delta_span(const SetCode& code, const Geometry& g, const std::vector<size_t>& lens,
                                     const ChangedChunks& since, int stripe, int j, size_t off, size_t len) {
  const int y = code.shard_owner(stripe, j);
  return widen(since.span(y, lens[static_cast<size_t>(y)], static_cast<size_t>(j) * g.seg + off, len), len);
}

}  // namespace spans

using spans::Geometry;
using spans::have;
using spans::shape;

std::pair<size_t, size_t> ChangedChunks::span(int x, size_t lens_x, size_t pos, size_t len) const {
  if (len == 0 || pos >= lens_x) return {0, 0};  // padding: zero before and now
  const size_t end = std::min(pos + len, lens_x);
  if (chunk_size == 0 || static_cast<size_t>(x) >= chunks.size()) return {0, end - pos};
  const std::vector<uint8_t>& c = chunks[static_cast<size_t>(x)];
  auto is_changed = [&](size_t i) { return i >= c.size() || c[i] != 0; };
  size_t first = pos / chunk_size, last = (end - 1) / chunk_size;
  while (first <= last && !is_changed(first)) ++first;
  if (first > last) return {0, 0};
  while (!is_changed(last)) --last;
  return {std::max(first * chunk_size, pos) - pos, std::min((last + 1) * chunk_size, end) - pos};
}

EncodeForecast forecast_encode(const SetCode& code, const std::vector<size_t>& lens, size_t chunk,
                               const ChangedChunks* changed, const ChangedChunks& since) {
  EncodeForecast f;
  if (lens.size() != static_cast<size_t>(code.n()) || chunk == 0 || code.scheme() == Redundancy::partner || code.k() < 2)
    return f;
  Geometry g;
  shape(code, lens, chunk, &g);
  // Every parity piece (stripe, row, offset) has one holder, which receives each source j's bytes of a span:
  // plainly the span where any of the k sources changed (encode_coded), by delta j's own span (encode_delta).
  for (int stripe = 0; stripe < g.n; ++stripe)
    for (size_t off = 0; off < g.seg; off += g.piece) {
      const size_t len = std::min(g.piece, g.seg - off);
      const auto plain = spans::parity_span(code, g, lens, changed, stripe, off, len);
      for (int j = 0; j < g.k; ++j) {
        const size_t ly = lens[static_cast<size_t>(code.shard_owner(stripe, j))], pos = static_cast<size_t>(j) * g.seg + off;
        const auto d = spans::delta_span(code, g, lens, since, stripe, j, off, len);
        f.plain += static_cast<uint64_t>(g.m) * have(ly, pos + plain.first, plain.second - plain.first);
        f.delta += static_cast<uint64_t>(g.m) * have(ly, pos + d.first, d.second - d.first);
      }
    }
  return f;
}

bool delta_update_pays(const SetCode& code, const EncodeForecast& f) {
  if (code.scheme() == Redundancy::partner) return true;
  return code.k() > 1 && static_cast<double>(f.delta) <= kDeltaShare * static_cast<double>(f.plain);
}

}  // namespace cairn::redundancy
