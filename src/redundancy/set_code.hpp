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

#include "base/redundancy_scheme.hpp"
#include "base/status.hpp"

namespace cairn::redundancy {

// Alignment that lets the fastest kernels run (ISA-L xor_gen needs 32-byte aligned vectors); any
// alignment is correct, buffers aligned to this are faster for xor.
inline constexpr size_t kSetCodeAlign = 64;

class SetCode {
 public:
  // n: members in the set (2..255, GF(2^8) has 256 elements); m: parity (rs: 1..n-1; xor and
  // partner ignore m and use 1, so one config value can be passed for every scheme).
  // ERR_CONFIG naming the bad parameter otherwise (also for scheme `single`, which has no set).
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

  // --- the same code computed by the byte-wise reference (gf_reference.hpp): no ISA-L anywhere,
  // matrices included. Tests compare both paths byte for byte; results are identical by contract.
  SetCode reference() const;
  bool uses_reference() const { return reference_; }

  // --- stripe geometry (xor/rs): stripe g has shards 0..k-1 (data) and k..n-1 (parity row s-k).
  // The member holding shard `shard` of stripe `stripe`; the shard `member` holds in `stripe`
  // (every member holds exactly one shard of every stripe).
  int shard_owner(int stripe, int shard) const;
  int shard_of(int stripe, int member) const;

  // --- raw kernels on buffers of `len` bytes (any alignment, see kSetCodeAlign) ---------------
  // k data buffers -> m parity buffers, every row in one pass (the codec alone, for cairn-bench to
  // hold against raw ec_encode_data on the same k, m, data). partner: parity[0] = data[0].
  void encode_stripe(size_t len, const uint8_t* const* data, uint8_t* const* parity) const;
  // Parity row p (0..m-1) only: what one parity holder computes in the MPI exchange. xor/rs.
  void encode_parity_row(int p, size_t len, const uint8_t* const* data, uint8_t* out) const;
  // out ^= (row p's coefficient of data shard j) * delta, over len bytes: parity row p brought up to date
  // where data shard j changed by delta (its new bytes XOR its old ones). The code is linear, so the
  // parity of the new data is the old parity plus every changed shard's delta times its coefficient.
  // xor/rs; out and delta must not overlap.
  void update_parity_row(int p, int j, size_t len, const uint8_t* delta, uint8_t* out) const;
  // Whether parity row p is a copy of the one data shard (k = 1 and its coefficient 1: xor, and rs with
  // one parity, of two members), so that the exchange can land it in place.
  bool parity_row_is_copy(int p) const;

  // Where a byte-identical copy of `member`'s whole data lies in another member's redundancy data (of
  // redundancy_len(max_len) bytes): partner, member + 1's at offset 0; xor and rs where a stripe has one
  // data shard (k = 1) and parity row p is a copy of it, member (member - 1 - p)'s at p * segment_len.
  // Empty where the code keeps no plain copy (a restart must then decode). Members mod n.
  struct CopyAt {
    int holder = -1;
    size_t offset = 0;
  };
  std::vector<CopyAt> copies_of(int member, size_t max_len) const;

  // How one stripe's lost shards are rebuilt from k surviving ones (ISA-L's decode: invert the
  // k x k submatrix of the surviving rows; a lost parity row is its encode row times that inverse).
  struct StripeRecovery {
    std::vector<int> sources;     // the k shards read: the first k survivors in shard order
    std::vector<int> targets;     // the lost shards, ascending
    std::vector<uint8_t> coeffs;  // targets.size() x k: target t = sum_j coeffs[t*k+j] * source j
    std::vector<uint8_t> tables;  // ISA-L expanded tables of coeffs, 32 * k bytes per target
  };
  // lost_shards: n flags indexed by shard. xor/rs only. ERR_UNRECOVERABLE if more than m are lost.
  Result<StripeRecovery> plan_recovery(const std::vector<bool>& lost_shards) const;
  // Target t of `plan` (an index into plan.targets) from sources[j] = bytes of plan.sources[j].
  void recover_shard(const StripeRecovery& plan, int t, size_t len, const uint8_t* const* sources,
                     uint8_t* out) const;

 private:
  // out = sum_j coeffs[j] * src[j] over k sources (xor: the coefficients are all 1; plain XOR).
  void combine(const uint8_t* coeffs, const uint8_t* tables, size_t len,
               const uint8_t* const* src, uint8_t* out) const;

  Redundancy scheme_ = Redundancy::single;
  int n_ = 0, m_ = 0;
  bool reference_ = false;
  std::vector<uint8_t> encode_matrix_;  // (k + m) x k: identity over Cauchy (rs) or all-ones (xor)
  std::vector<uint8_t> gftbls_;         // ISA-L expanded tables for the m parity rows
};

}  // namespace cairn::redundancy
