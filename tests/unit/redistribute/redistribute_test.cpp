// Distributions and N -> M plans (src/redistribute/): every (N, M) pair up to 16 for every kind and
// odd sizes, checked by simulation and against a plain element-by-element reference plan; parameter
// encoding; refusals; large rank counts and extreme sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "redistribute/distribution.hpp"
#include "redistribute/plan.hpp"

namespace cairn::redistribute {
namespace {

Distribution must(Result<Distribution> r) {
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : Distribution{};
}

std::vector<Transfer> must(Result<std::vector<Transfer>> r) {
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : std::vector<Transfer>{};
}

std::string str(const Transfer& t) {
  return "{" + std::to_string(t.src) + "->" + std::to_string(t.dst) + " @" + std::to_string(t.src_offset) +
         "->@" + std::to_string(t.dst_offset) + " x" + std::to_string(t.count) + "}";
}
std::string str(const std::vector<Transfer>& v) {
  std::string s;
  for (const Transfer& t : v) s += str(t) + " ";
  return s;
}

// ---- the reference: layouts written straight from the definitions ---------------------------------

// For each rank of p, the global element indices of its local storage, in storage order.
std::vector<std::vector<uint64_t>> reference_layout(const Distribution& d, int p) {
  std::vector<std::vector<uint64_t>> local(p);
  // Sizes of `n` items split like block: the first n % p ranks get one more.
  auto block_sizes = [p](uint64_t n) {
    std::vector<uint64_t> s(p, n / p);
    for (uint64_t r = 0; r < n % p; ++r) ++s[r];
    return s;
  };
  switch (d.kind) {
    case Kind::private_: break;
    case Kind::replicated:
      for (int r = 0; r < p; ++r)
        for (uint64_t g = 0; g < d.global_count; ++g) local[r].push_back(g);
      break;
    case Kind::block: {
      uint64_t g = 0;
      auto s = block_sizes(d.global_count);
      for (int r = 0; r < p; ++r)
        for (uint64_t i = 0; i < s[r]; ++i) local[r].push_back(g++);
      break;
    }
    case Kind::block_cyclic:
      for (uint64_t j = 0; j * d.block_size < d.global_count; ++j)
        for (uint64_t g = j * d.block_size; g < std::min(d.global_count, (j + 1) * d.block_size); ++g)
          local[j % p].push_back(g);
      break;
    case Kind::block_rows: {
      uint64_t row = 0;
      auto s = block_sizes(d.rows);
      for (int r = 0; r < p; ++r)
        for (uint64_t i = 0; i < s[r]; ++i, ++row)
          for (uint64_t c = 0; c < d.cols; ++c) local[r].push_back(row * d.cols + c);
      break;
    }
    case Kind::block_cols: {
      uint64_t col0 = 0;
      auto s = block_sizes(d.cols);
      for (int r = 0; r < p; ++r) {
        for (uint64_t i = 0; i < d.rows; ++i)
          for (uint64_t c = col0; c < col0 + s[r]; ++c) local[r].push_back(i * d.cols + c);
        col0 += s[r];
      }
      break;
    }
  }
  return local;
}

bool by_src(const Transfer& a, const Transfer& b) {
  return std::tie(a.src, a.src_offset) < std::tie(b.src, b.src_offset);
}
bool by_dst(const Transfer& a, const Transfer& b) {
  return std::tie(a.dst, a.dst_offset) < std::tie(b.dst, b.dst_offset);
}
bool by_dst_src(const Transfer& a, const Transfer& b) {
  return std::tie(a.dst, a.src, a.src_offset) < std::tie(b.dst, b.src, b.src_offset);
}

// Merge, in the given order, transfers that continue each other on both sides.
std::vector<Transfer> merged(const std::vector<Transfer>& in) {
  std::vector<Transfer> out;
  for (const Transfer& t : in) {
    if (!out.empty() && out.back().src == t.src && out.back().dst == t.dst &&
        out.back().src_offset + out.back().count == t.src_offset &&
        out.back().dst_offset + out.back().count == t.dst_offset)
      out.back().count += t.count;
    else
      out.push_back(t);
  }
  return out;
}

// One element at a time: each new element comes from the old owner of its global index (replicated:
// rank 0's stored copy); then per dst sorted by (src, src_offset) and merged maximally.
std::vector<Transfer> reference_plan(const Distribution& d, int p_old, int p_new) {
  const auto old_layout = reference_layout(d, p_old), new_layout = reference_layout(d, p_new);
  const uint64_t n = global_elements(d);
  std::vector<std::pair<int, uint64_t>> owner(n, {-1, 0});
  for (int r = 0; r < p_old; ++r)
    for (uint64_t o = 0; o < old_layout[r].size(); ++o)
      if (owner[old_layout[r][o]].first < 0) owner[old_layout[r][o]] = {r, o};
  std::vector<Transfer> all;
  for (int dst = 0; dst < p_new; ++dst) {
    std::vector<Transfer> mine;
    for (uint64_t o = 0; o < new_layout[dst].size(); ++o) {
      const auto [src, so] = owner[new_layout[dst][o]];
      mine.push_back({src, dst, so, o, 1});
    }
    std::sort(mine.begin(), mine.end(), by_src);
    for (const Transfer& t : merged(mine)) all.push_back(t);
  }
  return all;
}

// ---- the full check of one (distribution, N, M) -------------------------------------------------

void check_plan(const Distribution& d, int p_old, int p_new) {
  SCOPED_TRACE(describe(d) + " " + std::to_string(p_old) + " -> " + std::to_string(p_new));
  const auto old_layout = reference_layout(d, p_old), new_layout = reference_layout(d, p_new);

  // local_count agrees with the definition and sums to the global size.
  for (int p : {p_old, p_new}) {
    const auto& layout = p == p_old ? old_layout : new_layout;
    uint64_t sum = 0;
    for (int r = 0; r < p; ++r) {
      ASSERT_EQ(local_count(d, p, r), layout[r].size()) << "rank " << r << " of " << p;
      EXPECT_TRUE(check_local_count(d, p, r, layout[r].size()).is_ok());
      sum += local_count(d, p, r);
    }
    EXPECT_EQ(sum, d.kind == Kind::replicated ? p * global_elements(d) : global_elements(d));
  }

  const std::vector<Transfer> full = must(plan(d, p_old, p_new));
  ASSERT_EQ(full, reference_plan(d, p_old, p_new)) << "plan:      " << str(full);

  // Simulate: old ranks hold their global indices; apply the plan; new ranks hold exactly theirs.
  std::vector<std::vector<uint64_t>> fresh(p_new), writes(p_new);
  for (int r = 0; r < p_new; ++r) {
    fresh[r].assign(local_count(d, p_new, r), UINT64_MAX);
    writes[r].assign(fresh[r].size(), 0);
  }
  for (const Transfer& t : full) {
    ASSERT_GT(t.count, 0u) << str(t);
    ASSERT_TRUE(t.src >= 0 && t.src < p_old && t.dst >= 0 && t.dst < p_new) << str(t);
    ASSERT_LE(t.src_offset + t.count, old_layout[t.src].size()) << str(t);
    ASSERT_LE(t.dst_offset + t.count, fresh[t.dst].size()) << str(t);
    for (uint64_t i = 0; i < t.count; ++i) {
      fresh[t.dst][t.dst_offset + i] = old_layout[t.src][t.src_offset + i];
      ++writes[t.dst][t.dst_offset + i];
    }
  }
  for (int r = 0; r < p_new; ++r) {
    EXPECT_EQ(fresh[r], new_layout[r]) << "new rank " << r;
    for (uint64_t o = 0; o < writes[r].size(); ++o) ASSERT_EQ(writes[r][o], 1u) << "new rank " << r << " @" << o;
  }

  // One rank's parts: sorted, only that rank's, and together exactly the whole plan.
  std::vector<Transfer> from_dst, from_src;
  for (int dst = 0; dst < p_new; ++dst) {
    const auto part = must(plan_for_dst(d, p_old, p_new, dst));
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end(), by_src)) << str(part);
    for (const Transfer& t : part) EXPECT_EQ(t.dst, dst);
    from_dst.insert(from_dst.end(), part.begin(), part.end());
  }
  EXPECT_EQ(from_dst, full);
  for (int src = 0; src < p_old; ++src) {
    const auto part = must(plan_for_src(d, p_old, p_new, src));
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end(), by_dst)) << str(part);
    for (const Transfer& t : part) EXPECT_EQ(t.src, src);
    from_src.insert(from_src.end(), part.begin(), part.end());
  }
  std::sort(from_src.begin(), from_src.end(), by_dst_src);
  EXPECT_EQ(from_src, full) << "from src: " << str(from_src);

  EXPECT_EQ(bytes_moved(full, 8) + bytes_staying(full, 8), bytes_total(full, 8));
  const uint64_t received = d.kind == Kind::replicated ? p_new * global_elements(d) : global_elements(d);
  EXPECT_EQ(bytes_total(full, 8), 8 * received);
}

std::vector<Distribution> all_cases() {
  std::vector<Distribution> cases;
  for (uint64_t g : {0, 1, 2, 5, 13, 16, 17, 31, 64}) cases.push_back(must(make_block(g)));
  for (uint64_t b : {1, 3, 7})
    for (uint64_t g : {0, 1, 5, 13, 22, 50}) cases.push_back(must(make_block_cyclic(g, b)));
  const std::pair<uint64_t, uint64_t> shapes[] = {{0, 5}, {5, 0}, {1, 1}, {1, 13}, {13, 1},
                                                  {7, 3}, {17, 5}, {3, 17}};
  for (auto [r, c] : shapes) {
    cases.push_back(must(make_block_rows(r, c)));
    cases.push_back(must(make_block_cols(r, c)));
  }
  for (uint64_t g : {0, 1, 13}) cases.push_back(must(make_replicated(g)));
  return cases;
}

// ---- tests --------------------------------------------------------------------------------------

TEST(RedistPlan, EveryPairUpTo16EveryKind) {
  const auto cases = all_cases();
  for (const Distribution& d : cases)
    for (int n = 1; n <= 16; ++n)
      for (int m = 1; m <= 16; ++m) {
        check_plan(d, n, m);
        if (HasFatalFailure() || HasFailure()) return;  // one clear failure, not thousands
      }
}

TEST(RedistPlan, BlockIsOneTransferPerOverlappingPair) {
  const Distribution d = must(make_block(1000));
  for (auto [n, m] : {std::pair{8, 3}, {3, 8}, {7, 7}, {16, 5}}) {
    const auto full = must(plan(d, n, m));
    for (size_t i = 0; i < full.size(); ++i)
      for (size_t j = i + 1; j < full.size(); ++j)
        EXPECT_FALSE(full[i].src == full[j].src && full[i].dst == full[j].dst) << str(full);
    // Pieces are in global order, so overlapping pairs number n + m - 1 when no boundary coincides.
    EXPECT_LE(full.size(), static_cast<size_t>(n + m - 1));
  }
}

TEST(RedistPlan, SameRankCountKeepsEverythingLocal) {
  const Distribution cases[] = {must(make_block(101)), must(make_block_cyclic(101, 3)),
                                must(make_block_rows(11, 7)), must(make_block_cols(11, 7))};
  for (const Distribution& d : cases) {
    const auto full = must(plan(d, 6, 6));
    EXPECT_EQ(full.size(), 6u) << describe(d) << ": " << str(full);
    for (const Transfer& t : full) {
      EXPECT_EQ(t.src, t.dst);
      EXPECT_EQ(t.src_offset, 0u);
      EXPECT_EQ(t.dst_offset, 0u);
    }
    EXPECT_EQ(bytes_moved(full, 4), 0u);
    EXPECT_EQ(bytes_staying(full, 4), 4 * global_elements(d));
  }
}

TEST(RedistPlan, ReplicatedComesFromRankZero) {
  const Distribution d = must(make_replicated(10));
  const auto full = must(plan(d, 3, 5));
  ASSERT_EQ(full.size(), 5u);
  for (int dst = 0; dst < 5; ++dst) EXPECT_EQ(full[dst], (Transfer{0, dst, 0, 0, 10}));
  EXPECT_EQ(bytes_staying(full, 2), 20u);
  EXPECT_EQ(bytes_moved(full, 2), 80u);
  EXPECT_EQ(must(plan_for_src(d, 3, 5, 0)).size(), 5u);
  EXPECT_TRUE(must(plan_for_src(d, 3, 5, 2)).empty());
}

TEST(RedistPlan, PrivateRefusesWithAClearError) {
  const Distribution d = must(make_private());
  for (auto [n, m] : {std::pair{4, 3}, {2, 2}}) {
    auto all = plan(d, n, m);
    auto dst = plan_for_dst(d, n, m, 0);
    auto src = plan_for_src(d, n, m, 0);
    for (const Status* s : {&all.status(), &dst.status(), &src.status()}) {
      ASSERT_FALSE(s->is_ok());
      EXPECT_EQ(s->code(), Code::ERR_NOT_SUPPORTED);
      EXPECT_NE(s->message().find("private data"), std::string::npos) << s->message();
    }
  }
  EXPECT_NE(plan(d, 4, 3).status().message().find("cannot change rank count"), std::string::npos);
  EXPECT_FALSE(has_global_layout(Kind::private_));
  EXPECT_TRUE(has_global_layout(Kind::block_cols));
}

TEST(RedistPlan, BadArgumentsAreErrors) {
  const Distribution d = must(make_block(10));
  EXPECT_EQ(plan(d, 0, 3).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(plan(d, 3, -1).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(plan_for_dst(d, 3, 4, 4).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(plan_for_dst(d, 3, 4, -1).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(plan_for_src(d, 3, 4, 3).status().code(), Code::ERR_INVALID_ARG);
  Distribution bad = must(make_block_cyclic(10, 2));
  bad.block_size = 0;  // filled by hand, never through make()
  auto r = plan(bad, 2, 3);
  EXPECT_EQ(r.status().code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(r.status().message().find("block_size"), std::string::npos) << r.status().message();
  Distribution wrong_total = must(make_block_rows(4, 5));
  wrong_total.global_count = 21;
  EXPECT_EQ(plan_for_dst(wrong_total, 2, 3, 0).status().code(), Code::ERR_INVALID_ARG);
}

TEST(RedistPlan, BytesSaturate) {
  const std::vector<Transfer> p = {{0, 1, 0, 0, UINT64_MAX / 2}, {1, 0, 0, 0, 3}};
  EXPECT_EQ(bytes_total(p, 4), UINT64_MAX);
  EXPECT_EQ(bytes_moved(p, 1), UINT64_MAX / 2 + 3);
  EXPECT_EQ(bytes_staying(p, 4), 0u);
}

TEST(RedistDistribution, ParamsRoundTrip) {
  const auto cases = all_cases();
  for (Distribution d : cases) {
    const auto params = d.to_params();
    const size_t want = d.kind == Kind::block ? 1 : d.kind == Kind::replicated ? 0 : 2;
    EXPECT_EQ(params.size(), want) << describe(d);
    EXPECT_EQ(must(Distribution::from_params(static_cast<uint32_t>(d.kind), params, d.global_count)), d)
        << describe(d);
  }
  const Distribution p = must(make_private());
  EXPECT_TRUE(p.to_params().empty());
  EXPECT_EQ(must(Distribution::from_params(0, {}, 123)), p);
  EXPECT_EQ(must(make_block_cyclic(100, 7)).to_params(), (std::vector<uint64_t>{100, 7}));
  EXPECT_EQ(must(make_block_cols(3, 9)).to_params(), (std::vector<uint64_t>{3, 9}));
  // Only the replicated kind takes its size from the region's count.
  EXPECT_EQ(must(Distribution::from_params(1, {}, 77)).global_count, 77u);
  EXPECT_EQ(must(Distribution::from_params(2, {50}, 77)).global_count, 50u);
}

TEST(RedistDistribution, BadParametersAreErrors) {
  auto zero_b = make_block_cyclic(10, 0);
  EXPECT_EQ(zero_b.status().code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(zero_b.status().message().find("block_size"), std::string::npos);
  auto overflow = make_block_rows(uint64_t(1) << 32, uint64_t(1) << 32);
  EXPECT_EQ(overflow.status().code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(overflow.status().message().find("overflows"), std::string::npos);
  EXPECT_EQ(make_block_cols(UINT64_MAX, 2).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_TRUE(make_block_rows(uint64_t(1) << 32, (uint64_t(1) << 32) - 1).is_ok());
  EXPECT_EQ(make(static_cast<Kind>(9), 1, 1, 1, 1).status().code(), Code::ERR_INVALID_ARG);

  auto newer = Distribution::from_params(6, {1}, 0);
  EXPECT_EQ(newer.status().code(), Code::ERR_FORMAT);
  EXPECT_NE(newer.status().message().find("newer"), std::string::npos);
  EXPECT_EQ(Distribution::from_params(2, {}, 0).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(Distribution::from_params(2, {1, 2}, 0).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(Distribution::from_params(0, {1}, 0).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(Distribution::from_params(3, {10, 0}, 0).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(Distribution::from_params(5, {UINT64_MAX, 3}, 0).status().code(), Code::ERR_INVALID_ARG);

  // Unused fields are ignored by make() and normalised; a hand-filled struct must be consistent.
  EXPECT_EQ(must(make(Kind::block, 10, 99, 7, 7)), must(make_block(10)));
  EXPECT_EQ(must(make(Kind::block_rows, 99, 99, 2, 3)).global_count, 6u);
  Distribution hand = must(make_block(10));
  EXPECT_TRUE(validate(hand).is_ok());
  hand.rows = 1;
  EXPECT_EQ(validate(hand).code(), Code::ERR_INVALID_ARG);
}

TEST(RedistDistribution, LocalCountCheckAndNames) {
  const Distribution d = must(make_block(10));
  EXPECT_TRUE(check_local_count(d, 3, 0, 4).is_ok());
  const Status s = check_local_count(d, 3, 1, 4);
  EXPECT_EQ(s.code(), Code::ERR_SIZE_MISMATCH);
  EXPECT_NE(s.message().find("block(G=10)"), std::string::npos) << s.message();
  EXPECT_EQ(check_local_count(d, 3, 3, 3).code(), Code::ERR_INVALID_ARG);
  EXPECT_TRUE(check_local_count(must(make_private()), 3, 1, 12345).is_ok());
  EXPECT_STREQ(kind_name(Kind::private_), "private");
  EXPECT_STREQ(kind_name(Kind::block_cyclic), "block_cyclic");
  EXPECT_STREQ(kind_name(static_cast<Kind>(42)), "unknown");
  EXPECT_EQ(describe(must(make_block_cyclic(100, 7))), "block_cyclic(G=100, b=7)");
  EXPECT_EQ(describe(must(make_block_cols(3, 4))), "block_cols(3x4)");
}

TEST(RedistDistribution, BlockOwnerMatchesPieces) {
  for (uint64_t n : {1, 2, 7, 16, 33})
    for (int p = 1; p <= 40; ++p)
      for (int r = 0; r < p; ++r) {
        const Piece piece = block_piece(n, p, r);
        for (uint64_t i = piece.start; i < piece.end(); ++i) ASSERT_EQ(block_owner(n, p, i), r);
      }
}

TEST(RedistDistribution, ExtremeSizesSumExactly) {
  const Distribution cases[] = {
      must(make_block(UINT64_MAX)), must(make_block_cyclic(UINT64_MAX, uint64_t(1) << 63)),
      must(make_block_cyclic(UINT64_MAX, 3)), must(make_block_cyclic(UINT64_MAX - 5, UINT64_MAX / 3)),
      must(make_block_rows(UINT64_MAX / 7, 7)), must(make_block_cols(7, UINT64_MAX / 7))};
  for (const Distribution& d : cases)
    for (int p : {1, 2, 3, 7, 1000, 65536}) {
      unsigned __int128 sum = 0;
      for (int r = 0; r < p; ++r) sum += local_count(d, p, r);
      EXPECT_TRUE(sum == global_elements(d)) << describe(d) << " on " << p;
    }
}

// ---- scale: one rank's part must not cost O(P) or O(G) -------------------------------------------

uint64_t covered(const std::vector<Transfer>& v) {
  uint64_t n = 0;
  for (const Transfer& t : v) n += t.count;
  return n;
}

TEST(RedistPlanScale, OneRankOfManyIsCheap) {
  const auto start = std::chrono::steady_clock::now();
  const int p_old = 1'000'000, p_new = 999'983;
  const Distribution block = must(make_block(uint64_t(1) << 50));
  const Distribution rows = must(make_block_rows(uint64_t(1) << 30, 1024));
  for (const Distribution& d : {block, rows})
    for (int r : {0, 1, 4242, p_new - 1}) {
      const auto in = must(plan_for_dst(d, p_old, p_new, r));
      EXPECT_LE(in.size(), 2u) << describe(d);
      EXPECT_EQ(covered(in), local_count(d, p_new, r));
      const auto out = must(plan_for_src(d, p_old, p_new, r));
      EXPECT_LE(out.size(), 2u);
      EXPECT_EQ(covered(out), local_count(d, p_old, r));
    }
  // Shrinking a lot: a new rank gathers from ~p_old / p_new sources, no more.
  const auto gather = must(plan_for_dst(block, 100'000, 10, 3));
  EXPECT_GE(gather.size(), 10'000u);
  EXPECT_LE(gather.size(), 10'001u);
  EXPECT_EQ(covered(gather), local_count(block, 10, 3));

  // block_cyclic: O(blocks owned); an unchanged rank count is one local transfer.
  const Distribution cyc = must(make_block_cyclic(uint64_t(1) << 40, 1 << 20));  // 2^20 blocks
  const auto same = must(plan_for_dst(cyc, 4096, 4096, 17));
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same[0], (Transfer{17, 17, 0, 0, local_count(cyc, 4096, 17)}));
  const auto changed = must(plan_for_dst(cyc, 4096, 4095, 17));
  EXPECT_EQ(covered(changed), local_count(cyc, 4095, 17));
  EXPECT_TRUE(std::is_sorted(changed.begin(), changed.end(), by_src));
  const auto doubled = must(plan_for_src(cyc, 2048, 4096, 5));
  EXPECT_EQ(covered(doubled), local_count(cyc, 2048, 5));
  EXPECT_TRUE(std::is_sorted(doubled.begin(), doubled.end(), by_dst));

  // block_cols: a row per overlapping source; whole rows are one transfer.
  const Distribution cols = must(make_block_cols(1000, 1 << 20));
  const auto pieces = must(plan_for_dst(cols, 1024, 1000, 999));
  EXPECT_LE(pieces.size(), 2u * 1000u);
  EXPECT_EQ(covered(pieces), local_count(cols, 1000, 999));
  EXPECT_EQ(must(plan_for_dst(cols, 1024, 1024, 5)).size(), 1u);

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace cairn::redistribute
