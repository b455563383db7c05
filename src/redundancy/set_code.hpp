// L2 redundancy across failure groups: the pure codec (no MPI) and its geometry.
//
// A redundancy *set* is n members (ranks on n distinct failure groups). Every member has a snapshot of
// at most `max_len` bytes (shorter ones are zero-padded, virtually). Schemes:
//   partner : member x stores a full copy of member (x-1) mod n (a ring). Tolerates any loss in which
//             no two ring neighbours are lost together.
//   xor     : m = 1 parity; RS-style geometry below with plain XOR as the code. Tolerates 1 loss.
//   rs      : m = rs_parity parity shards per stripe (ISA-L Cauchy Reed-Solomon). Tolerates m losses.
// Geometry for xor/rs (k = n - m data shards per stripe, n stripes "groups" g = 0..n-1):
//   each member's padded data is split into k segments of seg_len = ceil(max_len / k) (rounded up to 64);
//   stripe g has data shard j (0..k-1) = segment j of member (g + 1 + j) mod n, and
//   parity shard p (0..m-1) held by member (g - p) mod n.
//   So every member stores m parity segments: its parity slot p holds parity row p of stripe (x + p) mod n.
//   The n shards of a stripe sit on n distinct members, so any m lost members are recoverable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/config.hpp"
#include "core/status.hpp"

namespace cairn::redundancy {

class SetCode {
 public:
  // n: members in the set (>= 2); m: parity (xor: 1; rs: 1..n-1; partner: ignored, 1).
  static Result<SetCode> make(Redundancy scheme, int n, int m);

  Redundancy scheme() const { return scheme_; }
  int n() const { return n_; }
  int m() const { return m_; }
  int k() const { return n_ - m_; }

  // Segment length for a given max_len (partner: max_len rounded up to 64).
  size_t segment_len(size_t max_len) const;
  // Bytes of redundancy data each member stores (partner: one copy; xor/rs: m * segment_len).
  size_t redundancy_len(size_t max_len) const;
  // Whether the data of every member can be rebuilt when lost[x] members are gone.
  bool recoverable(const std::vector<bool>& lost) const;

  // --- pure reference computation of a whole set in one address space (tests, tools) -----------
  // data[x] has len[x] <= max_len bytes. red[x] receives redundancy_len(max_len) bytes for member x.
  void encode_all(const std::vector<const uint8_t*>& data, const std::vector<size_t>& len,
                  size_t max_len, const std::vector<uint8_t*>& red) const;
  // Rebuild, for every lost member, its data (len[x] bytes into data[x]) and its redundancy
  // (red[x]). Survivors' data/red must be present. ERR_UNRECOVERABLE if !recoverable(lost).
  Status decode_all(const std::vector<bool>& lost, const std::vector<uint8_t*>& data,
                    const std::vector<size_t>& len, size_t max_len,
                    const std::vector<uint8_t*>& red) const;

 private:
  Redundancy scheme_ = Redundancy::single;
  int n_ = 0, m_ = 0;
  std::vector<uint8_t> encode_matrix_;  // (k + m) x k, ISA-L Cauchy
  std::vector<uint8_t> gftbls_;         // ISA-L expanded tables for the m parity rows
};

}  // namespace cairn::redundancy
