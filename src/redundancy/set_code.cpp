#include "redundancy/set_code.hpp"

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "redundancy/gf_reference.hpp"

namespace cairn::redundancy {

namespace {

// ISA-L takes lengths as int; longer buffers are processed in pieces of this size.
constexpr size_t kMaxKernelLen = size_t{1} << 30;
constexpr int kMaxMembers = 255;

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
int mod(int a, int n) { return ((a % n) + n) % n; }

const char* scheme_label(Redundancy r) {
  switch (r) {
    case Redundancy::single: return "single";
    case Redundancy::partner: return "partner";
    case Redundancy::xor_set: return "xor";
    case Redundancy::rs: return "rs";
  }
  return "?";
}

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using ScratchBytes = std::unique_ptr<uint8_t[], FreeDeleter>;
ScratchBytes scratch(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kSetCodeAlign, round_up(bytes + 1, kSetCodeAlign)));
  if (p == nullptr) throw std::bad_alloc();
  return ScratchBytes(p);
}

// Bytes [off, off + seg) of a member's zero-padded data (only `len` bytes exist) into dst.
void copy_padded(uint8_t* dst, const uint8_t* data, size_t len, size_t off, size_t seg) {
  size_t have = len > off ? std::min(seg, len - off) : 0;
  if (have > 0) std::memcpy(dst, data + off, have);
  std::memset(dst + have, 0, seg - have);
}

// Portable XOR, 8 bytes at a time through memcpy (alignment-free; compilers vectorise it).
void xor_words(size_t len, int k, const uint8_t* const* src, uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t acc, w;
    std::memcpy(&acc, src[0] + i, 8);
    for (int j = 1; j < k; j++) {
      std::memcpy(&w, src[j] + i, 8);
      acc ^= w;
    }
    std::memcpy(out + i, &acc, 8);
  }
  for (; i < len; i++) {
    uint8_t acc = src[0][i];
    for (int j = 1; j < k; j++) acc ^= src[j][i];
    out[i] = acc;
  }
}

bool aligned32(const void* p) { return reinterpret_cast<uintptr_t>(p) % 32 == 0; }

// ISA-L xor_gen where it may run (>= 2 sources, all vectors 32-byte aligned), else xor_words.
void xor_fast(size_t len, int k, const uint8_t* const* src, uint8_t* out) {
  if (k == 1) {
    if (out != src[0]) std::memmove(out, src[0], len);
    return;
  }
  bool ok = aligned32(out);
  for (int j = 0; j < k && ok; j++) ok = aligned32(src[j]);
  if (!ok) return xor_words(len, k, src, out);
  std::array<void*, kMaxMembers + 1> v;
  for (size_t off = 0; off < len; off += kMaxKernelLen) {
    size_t piece = std::min(kMaxKernelLen, len - off);  // a multiple of 32: alignment is kept
    for (int j = 0; j < k; j++) v[j] = const_cast<uint8_t*>(src[j]) + off;
    v[k] = out + off;
    xor_gen(k + 1, static_cast<int>(piece), v.data());
  }
}

// ISA-L ec_encode_data over any length: rows outputs from k sources and expanded tables.
void ec_encode_long(size_t len, int k, int rows, const uint8_t* tables, const uint8_t* const* src,
                    uint8_t* const* out) {
  std::array<uint8_t*, kMaxMembers> s, o;
  for (size_t off = 0; off < len; off += kMaxKernelLen) {
    size_t piece = std::min(kMaxKernelLen, len - off);
    for (int j = 0; j < k; j++) s[j] = const_cast<uint8_t*>(src[j]) + off;
    for (int r = 0; r < rows; r++) o[r] = out[r] + off;
    ec_encode_data(static_cast<int>(piece), k, rows, const_cast<uint8_t*>(tables), s.data(), o.data());
  }
}

std::string member_list(const std::vector<bool>& lost) {
  std::string s;
  for (size_t x = 0; x < lost.size(); x++)
    if (lost[x]) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "{" + s + "}";
}

}  // namespace

Result<SetCode> SetCode::make(Redundancy scheme, int n, int m) {
  if (scheme == Redundancy::single)
    return make_error(Code::ERR_CONFIG,
                      "redundancy set: scheme 'single' stores no redundancy data (use partner, xor or rs)");
  if (n < 2)
    return make_error(Code::ERR_CONFIG,
                      "redundancy set: %s needs at least 2 members (failure groups) per set, got %d",
                      scheme_label(scheme), n);
  if (n > kMaxMembers)
    return make_error(Code::ERR_CONFIG,
                      "redundancy set: %s allows at most %d members per set (GF(2^8) codes), got %d",
                      scheme_label(scheme), kMaxMembers, n);
  if (scheme == Redundancy::rs && (m < 1 || m >= n))
    return make_error(Code::ERR_CONFIG,
                      "redundancy set: rs parity must be in 1..%d for a set of %d members "
                      "(at least one data shard per stripe), got %d",
                      n - 1, n, m);
  SetCode code;
  code.scheme_ = scheme;
  code.n_ = n;
  code.m_ = scheme == Redundancy::rs ? m : 1;
  if (scheme == Redundancy::partner) return code;

  int k = code.k(), mm = code.m_;
  code.encode_matrix_.assign(static_cast<size_t>(n) * k, 0);
  if (scheme == Redundancy::rs) {
    gf_gen_cauchy1_matrix(code.encode_matrix_.data(), n, k);
  } else {
    // xor as a matrix: identity over one all-ones row, so recovery planning is the same as rs.
    for (int i = 0; i < k; i++) code.encode_matrix_[i * k + i] = 1;
    std::fill(code.encode_matrix_.begin() + static_cast<size_t>(k) * k, code.encode_matrix_.end(), 1);
  }
  code.gftbls_.resize(32 * static_cast<size_t>(k) * mm);
  ec_init_tables(k, mm, &code.encode_matrix_[static_cast<size_t>(k) * k], code.gftbls_.data());
  return code;
}

SetCode SetCode::reference() const {
  SetCode ref = *this;
  ref.reference_ = true;
  ref.gftbls_.clear();  // the reference multiplies by the plain coefficients
  if (scheme_ == Redundancy::rs) gf_ref::gen_cauchy1_matrix(ref.encode_matrix_.data(), n_, k());
  return ref;
}

size_t SetCode::segment_len(size_t max_len) const {
  if (scheme_ == Redundancy::partner) return round_up(max_len, 64);
  size_t k = static_cast<size_t>(this->k());
  return round_up((max_len + k - 1) / k, 64);
}

size_t SetCode::redundancy_len(size_t max_len) const {
  return static_cast<size_t>(m_) * segment_len(max_len);
}

bool SetCode::recoverable(const std::vector<bool>& lost) const {
  if (lost.size() != static_cast<size_t>(n_)) return false;
  if (scheme_ == Redundancy::partner) {
    for (int x = 0; x < n_; x++)
      if (lost[x] && lost[(x + 1) % n_]) return false;  // x's copy lived on x+1
    return true;
  }
  return std::count(lost.begin(), lost.end(), true) <= m_;
}

int SetCode::shard_owner(int stripe, int shard) const {
  int k = this->k();
  return shard < k ? mod(stripe + 1 + shard, n_) : mod(stripe - (shard - k), n_);
}

int SetCode::shard_of(int stripe, int member) const {
  int d = mod(member - stripe - 1, n_);
  return d < k() ? d : k() + (n_ - 1 - d);
}

void SetCode::combine(const uint8_t* coeffs, const uint8_t* tables, size_t len,
                      const uint8_t* const* src, uint8_t* out) const {
  if (reference_) {
    if (scheme_ == Redundancy::xor_set) return gf_ref::xor_gen(len, k(), src, out);
    return gf_ref::encode_data(len, k(), 1, coeffs, src, &out);
  }
  if (scheme_ == Redundancy::xor_set) return xor_fast(len, k(), src, out);
  ec_encode_long(len, k(), 1, tables, src, &out);
}

void SetCode::encode_stripe(size_t len, const uint8_t* const* data, uint8_t* const* parity) const {
  if (scheme_ == Redundancy::partner) {
    if (parity[0] != data[0]) std::memmove(parity[0], data[0], len);
    return;
  }
  if (scheme_ == Redundancy::rs) {
    // All m rows in one pass over the data, as raw ec_encode_data would do it.
    const uint8_t* rows = &encode_matrix_[static_cast<size_t>(k()) * k()];
    if (reference_) return gf_ref::encode_data(len, k(), m_, rows, data, parity);
    return ec_encode_long(len, k(), m_, gftbls_.data(), data, parity);
  }
  combine(nullptr, nullptr, len, data, parity[0]);
}

void SetCode::encode_parity_row(int p, size_t len, const uint8_t* const* data, uint8_t* out) const {
  size_t k = static_cast<size_t>(this->k());
  combine(&encode_matrix_[(k + p) * k], reference_ ? nullptr : &gftbls_[32 * k * p], len, data, out);
}

void SetCode::update_parity_row(int p, int j, size_t len, const uint8_t* delta, uint8_t* out) const {
  const size_t k = static_cast<size_t>(this->k());
  if (scheme_ == Redundancy::xor_set) {
    const uint8_t* src[2] = {out, delta};
    if (reference_) return gf_ref::xor_gen(len, 2, src, out);
    return xor_fast(len, 2, src, out);
  }
  if (reference_) {
    const uint8_t c = encode_matrix_[(k + static_cast<size_t>(p)) * k + static_cast<size_t>(j)];
    for (size_t i = 0; i < len; ++i) out[i] ^= gf_ref::mul(c, delta[i]);
    return;
  }
  // ISA-L's update: one source's tables within the row's (32 bytes per source).
  auto* tables = const_cast<uint8_t*>(&gftbls_[32 * k * static_cast<size_t>(p)]);
  for (size_t off = 0; off < len; off += kMaxKernelLen) {
    const size_t piece = std::min(kMaxKernelLen, len - off);
    uint8_t* o = out + off;
    ec_encode_data_update(static_cast<int>(piece), static_cast<int>(k), 1, j, tables,
                          const_cast<uint8_t*>(delta) + off, &o);
  }
}

bool SetCode::parity_row_is_copy(int p) const {
  const size_t k = static_cast<size_t>(this->k());
  return k == 1 && p >= 0 && p < m_ && encode_matrix_[(k + static_cast<size_t>(p)) * k] == 1;
}

std::vector<SetCode::CopyAt> SetCode::copies_of(int member, size_t max_len) const {
  if (scheme_ == Redundancy::partner) return {{mod(member + 1, n_), 0}};
  std::vector<CopyAt> out;
  for (int p = 0; p < m_; ++p)  // the one data shard of stripe member - 1 is member's whole data
    if (parity_row_is_copy(p)) out.push_back({mod(member - 1 - p, n_), static_cast<size_t>(p) * segment_len(max_len)});
  return out;
}

Result<SetCode::StripeRecovery> SetCode::plan_recovery(const std::vector<bool>& lost_shards) const {
  int k = this->k();
  StripeRecovery plan;
  for (int s = 0; s < n_; s++) {
    if (lost_shards[s])
      plan.targets.push_back(s);
    else if (static_cast<int>(plan.sources.size()) < k)
      plan.sources.push_back(s);
  }
  if (static_cast<int>(plan.targets.size()) > m_)
    return make_error(Code::ERR_UNRECOVERABLE, "stripe lost %zu shards, %s tolerates %d",
                      plan.targets.size(), scheme_label(scheme_), m_);
  if (plan.targets.empty()) return plan;

  // The surviving rows B of the encode matrix map data to sources (src = B d), so d = B^-1 src.
  std::vector<uint8_t> b(static_cast<size_t>(k) * k), b_inv(b.size());
  for (int j = 0; j < k; j++)
    std::memcpy(&b[j * k], &encode_matrix_[static_cast<size_t>(plan.sources[j]) * k], k);
  bool invertible = reference_ ? gf_ref::invert_matrix(b.data(), b_inv.data(), k)
                               : gf_invert_matrix(b.data(), b_inv.data(), k) == 0;
  if (!invertible)  // cannot happen for Cauchy or xor matrices; a broken matrix is a bug
    return make_error(Code::ERR_INTERNAL, "%s recovery matrix is singular", scheme_label(scheme_));

  uint8_t (*mul)(uint8_t, uint8_t) = reference_ ? gf_ref::mul : gf_mul;
  plan.coeffs.resize(plan.targets.size() * k);
  for (size_t t = 0; t < plan.targets.size(); t++) {
    int s = plan.targets[t];
    uint8_t* row = &plan.coeffs[t * k];
    if (s < k) {
      std::memcpy(row, &b_inv[static_cast<size_t>(s) * k], k);
    } else {  // a parity shard: its encode row applied to d = B^-1 src
      for (int j = 0; j < k; j++) {
        uint8_t c = 0;
        for (int i = 0; i < k; i++) c ^= mul(encode_matrix_[static_cast<size_t>(s) * k + i], b_inv[i * k + j]);
        row[j] = c;
      }
    }
  }
  if (!reference_) {
    plan.tables.resize(32 * static_cast<size_t>(k) * plan.targets.size());
    ec_init_tables(k, static_cast<int>(plan.targets.size()), plan.coeffs.data(), plan.tables.data());
  }
  return plan;
}

void SetCode::recover_shard(const StripeRecovery& plan, int t, size_t len,
                            const uint8_t* const* sources, uint8_t* out) const {
  size_t k = static_cast<size_t>(this->k());
  combine(&plan.coeffs[t * k], reference_ ? nullptr : &plan.tables[32 * k * t], len, sources, out);
}

void SetCode::encode_all(const std::vector<const uint8_t*>& data, const std::vector<size_t>& len,
                         size_t max_len, const std::vector<uint8_t*>& red) const {
  size_t seg = segment_len(max_len);
  if (seg == 0) return;
  if (scheme_ == Redundancy::partner) {
    for (int x = 0; x < n_; x++) {
      int left = mod(x - 1, n_);
      copy_padded(red[x], data[left], len[left], 0, seg);
    }
    return;
  }
  int k = this->k();
  ScratchBytes pad = scratch(static_cast<size_t>(k) * seg);
  std::vector<const uint8_t*> src(k);
  std::vector<uint8_t*> par(m_);
  for (int g = 0; g < n_; g++) {
    for (int j = 0; j < k; j++) {
      int y = shard_owner(g, j);
      size_t off = static_cast<size_t>(j) * seg;
      if (off + seg <= len[y]) {
        src[j] = data[y] + off;  // wholly inside the snapshot: read in place
      } else {
        copy_padded(pad.get() + off, data[y], len[y], off, seg);
        src[j] = pad.get() + off;
      }
    }
    for (int p = 0; p < m_; p++) par[p] = red[shard_owner(g, k + p)] + static_cast<size_t>(p) * seg;
    encode_stripe(seg, src.data(), par.data());
  }
}

Status SetCode::decode_all(const std::vector<bool>& lost, const std::vector<uint8_t*>& data,
                           const std::vector<size_t>& len, size_t max_len,
                           const std::vector<uint8_t*>& red) const {
  size_t n = static_cast<size_t>(n_);
  if (lost.size() != n || data.size() != n || len.size() != n || red.size() != n)
    return make_error(Code::ERR_INVALID_ARG, "decode: the set has %d members, got %zu/%zu/%zu/%zu entries",
                      n_, lost.size(), data.size(), len.size(), red.size());
  for (size_t x = 0; x < n; x++)
    if (len[x] > max_len)
      return make_error(Code::ERR_INVALID_ARG, "decode: member %zu has %zu bytes, more than max_len %zu",
                        x, len[x], max_len);
  if (!recoverable(lost))
    return make_error(Code::ERR_UNRECOVERABLE, "decode: lost members %s of %d are beyond what %s tolerates",
                      member_list(lost).c_str(), n_, scheme_label(scheme_));
  size_t seg = segment_len(max_len);
  if (seg == 0) return Status::ok();

  if (scheme_ == Redundancy::partner) {
    for (int x = 0; x < n_; x++) {
      if (!lost[x]) continue;
      int left = mod(x - 1, n_), right = mod(x + 1, n_);
      if (len[x] > 0) std::memcpy(data[x], red[right], len[x]);
      copy_padded(red[x], data[left], len[left], 0, seg);
    }
    return Status::ok();
  }

  int k = this->k();
  ScratchBytes pad = scratch(static_cast<size_t>(k + 1) * seg);
  uint8_t* out_pad = pad.get() + static_cast<size_t>(k) * seg;
  std::vector<const uint8_t*> src(k);
  std::vector<bool> lost_shards(n);
  for (int g = 0; g < n_; g++) {
    for (int s = 0; s < n_; s++) lost_shards[s] = lost[shard_owner(g, s)];
    auto plan = plan_recovery(lost_shards);
    if (!plan) return plan.status().prefixed("decode");
    if (plan->targets.empty()) continue;
    for (int j = 0; j < k; j++) {
      int s = plan->sources[j], y = shard_owner(g, s);
      size_t off = static_cast<size_t>(s < k ? s : s - k) * seg;
      if (s >= k || off + seg <= len[y]) {
        src[j] = (s >= k ? red[y] : data[y]) + off;
      } else {
        copy_padded(pad.get() + static_cast<size_t>(j) * seg, data[y], len[y], off, seg);
        src[j] = pad.get() + static_cast<size_t>(j) * seg;
      }
    }
    for (size_t t = 0; t < plan->targets.size(); t++) {
      int s = plan->targets[t], x = shard_owner(g, s);
      size_t off = static_cast<size_t>(s < k ? s : s - k) * seg;
      if (s >= k || off + seg <= len[x]) {
        recover_shard(*plan, static_cast<int>(t), seg, src.data(), (s >= k ? red[x] : data[x]) + off);
      } else if (off < len[x]) {  // the snapshot ends inside this segment: keep only its bytes
        recover_shard(*plan, static_cast<int>(t), seg, src.data(), out_pad);
        std::memcpy(data[x] + off, out_pad, len[x] - off);
      }
    }
  }
  return Status::ok();
}

}  // namespace cairn::redundancy
