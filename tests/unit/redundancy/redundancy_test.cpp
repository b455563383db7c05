// The L2 codecs without MPI: GF(2^8) reference against ISA-L, parameter checks, geometry, and every
// erasure pattern of every scheme decoded bit-exact (or refused when beyond tolerance).
#include <gtest/gtest.h>
#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "redundancy/gf_reference.hpp"
#include "redundancy/set_code.hpp"

namespace cairn::redundancy {
namespace {

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// A buffer at a chosen distance from 64-byte alignment, so both the aligned (ISA-L xor_gen) and the
// unaligned kernels are exercised.
struct Buffer {
  Buffer(size_t n, size_t misalign) : raw(n + 128), p(raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64 + misalign) {}
  std::vector<uint8_t> raw;
  uint8_t* p;
};

// --- GF(2^8) reference against ISA-L ---------------------------------------------------------------

TEST(GfReference, MulAndInvMatchIsal) {
  for (int a = 0; a < 256; a++) {
    for (int b = 0; b < 256; b++)
      ASSERT_EQ(gf_ref::mul(a, b), gf_mul(a, b)) << a << " * " << b;
    ASSERT_EQ(gf_ref::inv(a), gf_inv(a)) << a;
    if (a != 0) {
      ASSERT_EQ(gf_ref::mul(a, gf_ref::inv(a)), 1);
    }
  }
}

TEST(GfReference, CauchyMatrixMatchesIsal) {
  for (int rows : {2, 3, 5, 8, 20, 255}) {
    for (int k = 1; k < rows; k++) {
      std::vector<uint8_t> isal(rows * k), ref(rows * k);
      gf_gen_cauchy1_matrix(isal.data(), rows, k);
      gf_ref::gen_cauchy1_matrix(ref.data(), rows, k);
      ASSERT_EQ(isal, ref) << rows << "x" << k;
    }
  }
}

TEST(GfReference, InvertMatrixMatchesIsal) {
  std::mt19937 rng(7);
  int singular = 0;
  for (int trial = 0; trial < 300; trial++) {
    int n = 1 + trial % 12;
    std::vector<uint8_t> a = random_bytes(rng, n * n), a_isal = a, inv_isal(n * n), inv_ref(n * n);
    if (trial % 5 == 0 && n > 1) std::memcpy(&a[n], &a[0], n), a_isal = a;  // a repeated row
    bool ok_ref = gf_ref::invert_matrix(a.data(), inv_ref.data(), n);
    bool ok_isal = gf_invert_matrix(a_isal.data(), inv_isal.data(), n) == 0;
    ASSERT_EQ(ok_ref, ok_isal) << "trial " << trial;
    if (!ok_ref) {
      singular++;
      continue;
    }
    ASSERT_EQ(inv_ref, inv_isal) << "trial " << trial;
  }
  EXPECT_GT(singular, 0);  // the repeated-row matrices were recognised
}

TEST(GfReference, EncodeDataMatchesIsal) {
  std::mt19937 rng(11);
  for (int k : {1, 2, 5, 13}) {
    for (int rows : {1, 2, 4}) {
      for (size_t len : {size_t{0}, size_t{1}, size_t{15}, size_t{31}, size_t{64}, size_t{1000}, size_t{4099}}) {
        std::vector<uint8_t> coeffs = random_bytes(rng, rows * k), tables(32 * k * rows);
        ec_init_tables(k, rows, coeffs.data(), tables.data());
        std::vector<std::vector<uint8_t>> data, out_isal, out_ref;
        std::vector<uint8_t*> dp, oi, orf;
        for (int j = 0; j < k; j++) data.push_back(random_bytes(rng, len + 1)), dp.push_back(data.back().data());
        for (int r = 0; r < rows; r++) {
          out_isal.emplace_back(len + 1), out_ref.emplace_back(len + 1);
          oi.push_back(out_isal.back().data()), orf.push_back(out_ref.back().data());
        }
        if (len > 0) ec_encode_data(static_cast<int>(len), k, rows, tables.data(), dp.data(), oi.data());
        gf_ref::encode_data(len, k, rows, coeffs.data(), dp.data(), orf.data());
        ASSERT_EQ(out_isal, out_ref) << "k=" << k << " rows=" << rows << " len=" << len;
      }
    }
  }
}

TEST(GfReference, XorMatchesIsal) {
  std::mt19937 rng(13);
  for (int srcs : {2, 3, 7}) {
    for (size_t len : {size_t{32}, size_t{64}, size_t{200}, size_t{4096}}) {
      std::vector<Buffer> bufs;
      for (int j = 0; j <= srcs; j++) bufs.emplace_back(len, 0);
      std::vector<void*> v;
      std::vector<const uint8_t*> src;
      for (int j = 0; j < srcs; j++) {
        auto r = random_bytes(rng, len);
        std::memcpy(bufs[j].p, r.data(), len);
        v.push_back(bufs[j].p), src.push_back(bufs[j].p);
      }
      v.push_back(bufs[srcs].p);
      ASSERT_EQ(xor_gen(srcs + 1, static_cast<int>(len), v.data()), 0);
      std::vector<uint8_t> ref(len);
      gf_ref::xor_gen(len, srcs, src.data(), ref.data());
      ASSERT_EQ(0, std::memcmp(ref.data(), bufs[srcs].p, len));
    }
  }
}

// --- parameters and geometry -------------------------------------------------------------------------

TEST(SetCode, RejectsBadParameters) {
  struct Bad {
    Redundancy scheme;
    int n, m;
    const char* says;
  };
  for (const Bad& b : {Bad{Redundancy::single, 4, 1, "single"}, Bad{Redundancy::xor_set, 1, 1, "at least 2"},
                       Bad{Redundancy::partner, 0, 1, "at least 2"}, Bad{Redundancy::rs, -3, 1, "at least 2"},
                       Bad{Redundancy::rs, 256, 2, "at most 255"}, Bad{Redundancy::xor_set, 300, 1, "at most 255"},
                       Bad{Redundancy::rs, 4, 0, "parity must be in 1..3"}, Bad{Redundancy::rs, 4, 4, "parity"},
                       Bad{Redundancy::rs, 2, 2, "1..1"}, Bad{Redundancy::rs, 5, -1, "parity"}}) {
    auto code = SetCode::make(b.scheme, b.n, b.m);
    ASSERT_FALSE(code.is_ok()) << b.n << " " << b.m;
    EXPECT_EQ(code.status().code(), Code::ERR_CONFIG);
    EXPECT_NE(code.status().message().find(b.says), std::string::npos) << code.status().message();
  }
  // m is not used by xor and partner, so one config value can be passed for every scheme.
  EXPECT_EQ(SetCode::make(Redundancy::xor_set, 4, 2)->m(), 1);
  EXPECT_EQ(SetCode::make(Redundancy::partner, 2, 0)->m(), 1);
  EXPECT_TRUE(SetCode::make(Redundancy::rs, 255, 254).is_ok());
}

TEST(SetCode, SegmentLengths) {
  auto rs = SetCode::make(Redundancy::rs, 5, 2).value();  // k = 3
  EXPECT_EQ(rs.segment_len(0), 0u);
  EXPECT_EQ(rs.redundancy_len(0), 0u);
  EXPECT_EQ(rs.segment_len(1), 64u);
  EXPECT_EQ(rs.segment_len(192), 64u);
  EXPECT_EQ(rs.segment_len(193), 128u);
  EXPECT_EQ(rs.redundancy_len(193), 256u);
  auto partner = SetCode::make(Redundancy::partner, 3, 0).value();
  EXPECT_EQ(partner.segment_len(0), 0u);
  EXPECT_EQ(partner.segment_len(65), 128u);
  EXPECT_EQ(partner.redundancy_len(65), 128u);
  auto x = SetCode::make(Redundancy::xor_set, 2, 1).value();  // k = 1
  EXPECT_EQ(x.segment_len(100), 128u);
}

TEST(SetCode, EveryStripeSpreadsOverAllMembers) {
  for (int n : {2, 3, 5, 8}) {
    for (int m = 1; m < n; m++) {
      auto code = SetCode::make(Redundancy::rs, n, m).value();
      for (int g = 0; g < n; g++) {
        std::vector<bool> seen(n);
        for (int s = 0; s < n; s++) {
          int x = code.shard_owner(g, s);
          ASSERT_FALSE(seen[x]);
          seen[x] = true;
          ASSERT_EQ(code.shard_of(g, x), s);
        }
      }
      // Member x's parity slot p holds row p of stripe x + p (the header's contract).
      for (int x = 0; x < n; x++)
        for (int p = 0; p < m; p++) ASSERT_EQ(code.shard_owner((x + p) % n, code.k() + p), x);
    }
  }
}

// Which parity rows are a copy of their one data shard, so that the exchange may land them in place.
TEST(SetCode, ParityRowsThatAreCopies) {
  auto code = [](Redundancy s, int n, int m) { return SetCode::make(s, n, m).value(); };
  EXPECT_TRUE(code(Redundancy::xor_set, 2, 1).parity_row_is_copy(0));
  EXPECT_TRUE(code(Redundancy::rs, 2, 1).parity_row_is_copy(0));
  EXPECT_TRUE(code(Redundancy::rs, 3, 2).parity_row_is_copy(0));
  EXPECT_FALSE(code(Redundancy::rs, 3, 2).parity_row_is_copy(1));
  EXPECT_FALSE(code(Redundancy::xor_set, 3, 1).parity_row_is_copy(0));  // k = 2
  EXPECT_FALSE(code(Redundancy::rs, 6, 2).parity_row_is_copy(0));
  EXPECT_FALSE(code(Redundancy::xor_set, 2, 1).parity_row_is_copy(1));  // no such row
  // What is called a copy is one: the row's encode of one shard gives the shard.
  for (auto c : {code(Redundancy::xor_set, 2, 1), code(Redundancy::rs, 2, 1), code(Redundancy::rs, 3, 2),
                 code(Redundancy::xor_set, 2, 1).reference(), code(Redundancy::rs, 3, 2).reference()})
    for (int p = 0; p < c.m(); ++p) {
      if (!c.parity_row_is_copy(p)) continue;
      std::vector<uint8_t> in(4096), out(4096, 0);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
      const uint8_t* src[1] = {in.data()};
      c.encode_parity_row(p, in.size(), src, out.data());
      EXPECT_EQ(out, in) << "row " << p;
    }
}

// Which codes keep a plain copy of a member's data, and in whose redundancy data (check_all_patterns
// checks the bytes for every scheme below).
TEST(SetCode, CopiesOfAMember) {
  auto code = [](Redundancy s, int n, int m) { return SetCode::make(s, n, m).value(); };
  auto holders = [](const std::vector<SetCode::CopyAt>& v) {
    std::vector<std::pair<int, size_t>> out;
    for (const auto& c : v) out.push_back({c.holder, c.offset});
    return out;
  };
  using P = std::vector<std::pair<int, size_t>>;
  EXPECT_EQ(holders(code(Redundancy::partner, 4, 1).copies_of(3, 1000)), (P{{0, 0}}));  // the ring's next
  EXPECT_EQ(holders(code(Redundancy::xor_set, 2, 1).copies_of(0, 1000)), (P{{1, 0}}));
  EXPECT_EQ(holders(code(Redundancy::rs, 2, 1).copies_of(1, 1000)), (P{{0, 0}}));
  EXPECT_EQ(holders(code(Redundancy::rs, 3, 2).copies_of(0, 1000)), (P{{2, 0}}));  // row 1 is no copy
  EXPECT_TRUE(code(Redundancy::xor_set, 3, 1).copies_of(0, 1000).empty());         // k = 2: a decode
  EXPECT_TRUE(code(Redundancy::rs, 6, 2).copies_of(5, 1000).empty());
}

TEST(SetCode, EncodeStripeIsTheRawCodec) {
  std::mt19937 rng(3);
  size_t len = 1000;
  for (int n : {3, 6}) {
    for (int m = 1; m < n && m <= 3; m++) {
      auto code = SetCode::make(Redundancy::rs, n, m).value();
      int k = code.k();
      std::vector<std::vector<uint8_t>> data, par(m, std::vector<uint8_t>(len)), raw(m, std::vector<uint8_t>(len));
      std::vector<const uint8_t*> dp;
      std::vector<uint8_t*> pp, rp, dpm;
      for (int j = 0; j < k; j++) data.push_back(random_bytes(rng, len));
      for (auto& d : data) dp.push_back(d.data()), dpm.push_back(d.data());
      for (int p = 0; p < m; p++) pp.push_back(par[p].data()), rp.push_back(raw[p].data());
      code.encode_stripe(len, dp.data(), pp.data());
      // Raw ISA-L with the same Cauchy matrix, as cairn-bench compares.
      std::vector<uint8_t> a(n * k), tables(32 * k * m);
      gf_gen_cauchy1_matrix(a.data(), n, k);
      ec_init_tables(k, m, &a[k * k], tables.data());
      ec_encode_data(static_cast<int>(len), k, m, tables.data(), dpm.data(), rp.data());
      ASSERT_EQ(par, raw);
      for (int p = 0; p < m; p++) {  // one row at a time gives the same rows
        std::vector<uint8_t> row(len);
        code.encode_parity_row(p, len, dp.data(), row.data());
        ASSERT_EQ(row, raw[p]);
      }
    }
  }
}

// The parity of changed data is the old parity plus each changed shard's delta times its coefficient: a
// row updated shard by shard equals the row encoded from the new data, for xor and rs, with ISA-L and the
// reference, at lengths short of the kernels' vectors and off their alignment.
TEST(SetCode, ParityRowsUpdateFromDeltas) {
  std::mt19937 rng(11);
  for (auto [scheme, n, m] : std::vector<std::tuple<Redundancy, int, int>>{
           {Redundancy::xor_set, 3, 1}, {Redundancy::xor_set, 5, 1}, {Redundancy::rs, 4, 2}, {Redundancy::rs, 6, 3}})
    for (bool reference : {false, true})
      for (size_t len : {size_t{1}, size_t{31}, size_t{64}, size_t{1000}, size_t{4099}}) {
        SCOPED_TRACE(std::to_string(static_cast<int>(scheme)) + " n=" + std::to_string(n) + " len=" + std::to_string(len) +
                     (reference ? " reference" : ""));
        auto made = SetCode::make(scheme, n, m).value();
        const SetCode code = reference ? made.reference() : made;
        const int k = code.k();
        std::vector<std::vector<uint8_t>> before, after;
        for (int j = 0; j < k; j++) {
          before.push_back(random_bytes(rng, len + 1));
          after.push_back(before.back());
          if (j != 1)  // shard 1 stays: its delta is zeros and is left out
            for (size_t i = j; i < len; i += 3) after.back()[i] = static_cast<uint8_t>(rng());
        }
        std::vector<const uint8_t*> b, a;
        for (int j = 0; j < k; j++) b.push_back(before[j].data()), a.push_back(after[j].data());
        for (int p = 0; p < m; p++) {
          std::vector<uint8_t> row(len + 1), want(len);
          code.encode_parity_row(p, len, b.data(), row.data() + 1);  // off alignment
          code.encode_parity_row(p, len, a.data(), want.data());
          for (int j = 0; j < k; j++) {
            if (j == 1) continue;
            std::vector<uint8_t> delta(len + 1);
            for (size_t i = 0; i < len; i++) delta[i + 1] = before[j][i] ^ after[j][i];
            code.update_parity_row(p, j, len, delta.data() + 1, row.data() + 1);
          }
          ASSERT_EQ(std::vector<uint8_t>(row.begin() + 1, row.end()), want) << "row " << p;
        }
      }
}

// --- every erasure pattern ---------------------------------------------------------------------------

struct Scheme {
  Redundancy r;
  int n, m;
};
std::string scheme_name(const Scheme& s) {
  const char* names[] = {"single", "partner", "xor", "rs"};
  return std::string(names[static_cast<int>(s.r)]) + "_n" + std::to_string(s.n) +
         (s.r == Redundancy::rs ? "_m" + std::to_string(s.m) : "");
}

void PrintTo(const Scheme& s, std::ostream* os) { *os << scheme_name(s); }

bool tolerated(const Scheme& s, const std::vector<bool>& lost) {
  int count = static_cast<int>(std::count(lost.begin(), lost.end(), true));
  if (s.r == Redundancy::xor_set) return count <= 1;
  if (s.r == Redundancy::rs) return count <= s.m;
  for (int x = 0; x < s.n; x++)
    if (lost[x] && lost[(x + 1) % s.n]) return false;
  return true;
}

class RedundancyErasure : public ::testing::TestWithParam<Scheme> {};

// One set of snapshots: encode with ISA-L and with the reference (must agree), then for every subset
// of lost members wipe their data and redundancy, decode with both paths, compare with the originals.
void check_all_patterns(const Scheme& s, const std::vector<size_t>& len, size_t misalign, std::mt19937& rng) {
  auto code = SetCode::make(s.r, s.n, s.m).value();
  SetCode ref = code.reference();
  ASSERT_TRUE(ref.uses_reference());
  size_t max_len = *std::max_element(len.begin(), len.end());
  size_t red_len = code.redundancy_len(max_len);
  std::vector<std::vector<uint8_t>> data(s.n), red(s.n), red_ref(s.n);
  std::vector<const uint8_t*> dp(s.n);
  std::vector<uint8_t*> rp(s.n), rrp(s.n);
  std::vector<Buffer> rbufs;
  for (int x = 0; x < s.n; x++) rbufs.emplace_back(red_len, misalign);
  for (int x = 0; x < s.n; x++) {
    data[x] = random_bytes(rng, len[x]);
    dp[x] = data[x].data();
    red_ref[x].assign(red_len, 0xEE);
    rp[x] = rbufs[x].p, rrp[x] = red_ref[x].data();
    std::memset(rp[x], 0xDD, red_len);
  }
  code.encode_all(dp, len, max_len, rp);
  ref.encode_all(dp, len, max_len, rrp);
  for (int x = 0; x < s.n; x++) {
    red[x].assign(rp[x], rp[x] + red_len);
    ASSERT_EQ(red[x], red_ref[x]) << "member " << x << ": ISA-L and reference encodes differ";
  }
  if (s.r == Redundancy::partner && max_len > 0)  // member x keeps x-1's data, zero-padded
    for (int x = 0; x < s.n; x++) {
      int left = (x + s.n - 1) % s.n;
      ASSERT_TRUE(std::equal(data[left].begin(), data[left].end(), red[x].begin()));
      ASSERT_TRUE(std::all_of(red[x].begin() + len[left], red[x].end(), [](uint8_t b) { return b == 0; }));
    }
  // Every copy the code names is the member's data, byte for byte, where it says.
  for (int x = 0; x < s.n; x++)
    for (const auto& at : code.copies_of(x, max_len)) {
      ASSERT_GE(at.holder, 0);
      ASSERT_LT(at.holder, s.n);
      ASSERT_NE(at.holder, x);
      ASSERT_LE(at.offset + len[x], red_len);
      ASSERT_TRUE(std::equal(data[x].begin(), data[x].end(), red[at.holder].begin() + static_cast<long>(at.offset)))
          << "member " << x << "'s copy at " << at.holder << "+" << at.offset;
    }

  for (unsigned mask = 0; mask < (1u << s.n); mask++) {
    std::vector<bool> lost(s.n);
    for (int x = 0; x < s.n; x++) lost[x] = (mask >> x) & 1;
    bool ok = tolerated(s, lost);
    ASSERT_EQ(code.recoverable(lost), ok) << "mask " << mask;
    for (const SetCode* c : {&code, &ref}) {
      std::vector<std::vector<uint8_t>> d = data, r = red;
      std::vector<uint8_t*> dm(s.n), rm(s.n);
      for (int x = 0; x < s.n; x++) {
        if (lost[x]) std::fill(d[x].begin(), d[x].end(), 0xA5), std::fill(r[x].begin(), r[x].end(), 0x5A);
        dm[x] = d[x].data(), rm[x] = r[x].data();
      }
      Status st = c->decode_all(lost, dm, len, max_len, rm);
      if (!ok) {
        ASSERT_EQ(st.code(), Code::ERR_UNRECOVERABLE) << "mask " << mask;
        ASSERT_NE(st.message().find("lost members"), std::string::npos) << st.message();
        continue;
      }
      ASSERT_TRUE(st.is_ok()) << st.message();
      ASSERT_EQ(d, data) << "mask " << mask << (c == &ref ? " (reference)" : " (ISA-L)");
      ASSERT_EQ(r, red) << "mask " << mask << (c == &ref ? " (reference)" : " (ISA-L)");
    }
  }
}

TEST_P(RedundancyErasure, EveryPatternDecodesBitExact) {
  const Scheme& s = GetParam();
  std::mt19937 rng(1000 + s.n * 10 + s.m + static_cast<int>(s.r) * 100);
  // Unequal and odd lengths, with an empty member.
  std::vector<size_t> len(s.n);
  for (int x = 0; x < s.n; x++) len[x] = rng() % 3000 + (x % 2);
  len[s.n / 2] = 0;
  check_all_patterns(s, len, 0, rng);
  // A member exactly at a segment boundary, unaligned redundancy buffers.
  for (int x = 0; x < s.n; x++) len[x] = rng() % 700;
  len[0] = 64 * 3 * 5;
  check_all_patterns(s, len, 3, rng);
  // Nothing at all: max_len 0 must work.
  check_all_patterns(s, std::vector<size_t>(s.n, 0), 0, rng);
  // Tiny: every member shorter than one segment.
  for (int x = 0; x < s.n; x++) len[x] = x;
  check_all_patterns(s, len, 0, rng);
}

std::vector<Scheme> all_schemes() {
  std::vector<Scheme> v;
  for (int n : {2, 3, 4, 5, 8}) {
    v.push_back({Redundancy::partner, n, 1});
    v.push_back({Redundancy::xor_set, n, 1});
    for (int m = 1; m <= std::min(3, n - 1); m++) v.push_back({Redundancy::rs, n, m});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, RedundancyErasure, ::testing::ValuesIn(all_schemes()),
                         [](const auto& info) { return scheme_name(info.param); });

TEST(SetCode, DecodeRejectsBadShapes) {
  auto code = SetCode::make(Redundancy::xor_set, 3, 1).value();
  std::vector<uint8_t> a(10), b(10), c(10), r(3 * 64);
  std::vector<uint8_t*> d{a.data(), b.data(), c.data()}, red{r.data(), r.data() + 64, r.data() + 128};
  Status st = code.decode_all({true, false}, d, {10, 10, 10}, 10, red);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG);
  st = code.decode_all({true, false, false}, d, {10, 11, 10}, 10, red);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("max_len"), std::string::npos);
}

}  // namespace
}  // namespace cairn::redundancy
