// The restart's plan (restore/plan): which version from which level, from the inventory alone. No MPI, no files.
#include <gtest/gtest.h>

#include <map>

#include "restore/plan.hpp"

namespace cairn::restore {
namespace {

constexpr uint64_t kHeld = kHasL1 | kProtected;  // a rank that holds the version and finished its redundancy

// An inventory as gather_inventory makes it: per rank its versions and their flags; L3's committed
// versions; the candidates (L3's and every version some rank holds) less the rejected ones.
RestartInventory inventory(const std::vector<std::map<uint64_t, uint64_t>>& ranks, std::vector<uint64_t> l3 = {},
                           std::vector<uint64_t> rejected = {}) {
  RestartInventory inv;
  const size_t stride = 2 * static_cast<size_t>(kMaxInventory);
  inv.all.assign(ranks.size() * stride, 0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    size_t i = 0;
    for (const auto& [v, flags] : ranks[r]) {
      inv.all[r * stride + i] = v;
      inv.all[r * stride + i + 1] = flags;
      i += 2;
      if (flags & kHasL1) inv.candidates.insert(v);
    }
  }
  inv.l3 = std::move(l3);
  inv.candidates.insert(inv.l3.begin(), inv.l3.end());
  for (uint64_t v : rejected) inv.candidates.erase(v);
  return inv;
}

// n ranks, each holding `versions` with `flags`, except those listed in `lost` for the first version.
std::vector<std::map<uint64_t, uint64_t>> holding(int n, std::vector<uint64_t> versions, std::vector<int> lost = {},
                                                  uint64_t flags = kHeld) {
  std::vector<std::map<uint64_t, uint64_t>> ranks(static_cast<size_t>(n));
  for (auto& r : ranks)
    for (uint64_t v : versions) r[v] = flags;
  for (int r : lost) ranks[static_cast<size_t>(r)].erase(versions.front());
  return ranks;
}

redundancy::SetPlacement sets(std::vector<std::vector<int>> members, int m = 1) {
  redundancy::SetPlacement p;
  p.enabled = true;
  p.m = m;
  int nranks = 0;
  for (const auto& mem : members) nranks += static_cast<int>(mem.size());
  p.set_of_rank.assign(static_cast<size_t>(nranks), -1);
  for (size_t s = 0; s < members.size(); ++s)
    for (int r : members[s]) p.set_of_rank[static_cast<size_t>(r)] = static_cast<int>(s);
  p.members = std::move(members);
  return p;
}

RestorePlan plan(int nranks, const RestartInventory& inv, const redundancy::SetPlacement& placement,
                 Redundancy scheme) {
  return plan_restore({nranks, inv, placement, scheme});
}

const redundancy::SetPlacement kNoL2;  // placement off

TEST(RestorePlan, EveryRankHoldsL1) {
  auto inv = inventory(holding(4, {7, 6}), {6});
  auto p = plan(4, inv, sets({{0, 2}, {1, 3}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.version, 7u);
  EXPECT_EQ(p.level, RestoreLevel::l1);
  EXPECT_EQ(p.flags, std::vector<uint64_t>(4, kHeld));
  EXPECT_FALSE(p.in_l3);
  EXPECT_EQ(p.label_root, 0);
  EXPECT_TRUE(p.lost_per_set.empty());
  EXPECT_TRUE(p.passed_over.empty());
}

TEST(RestorePlan, XorRebuildsOneLossPerSet) {
  auto inv = inventory(holding(6, {7}, {2, 1}), {7});
  auto p = plan(6, inv, sets({{0, 2, 4}, {1, 3, 5}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.level, RestoreLevel::l2);
  EXPECT_TRUE(p.in_l3);
  EXPECT_EQ(p.lost_per_set, (std::vector<std::vector<int>>{{2}, {1}}));
  EXPECT_EQ(p.flags[2], 0u);
  EXPECT_EQ(p.label_root, 0);
}

TEST(RestorePlan, PartnerRebuildsLossesThatAreNotNeighbours) {
  // Member x's copy lives on x+1: 0 and 2 lost leaves both copies.
  auto inv = inventory(holding(4, {7}, {0, 2}));
  auto p = plan(4, inv, sets({{0, 1, 2, 3}}), Redundancy::partner);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.level, RestoreLevel::l2);
  EXPECT_EQ(p.lost_per_set, (std::vector<std::vector<int>>{{0, 2}}));
  EXPECT_EQ(p.label_root, 1);  // the lowest rank that holds the version
}

TEST(RestorePlan, RsRebuildsUpToItsParity) {
  auto inv = inventory(holding(6, {7}, {0, 1}));
  auto p = plan(6, inv, sets({{0, 1, 2, 3, 4, 5}}, 2), Redundancy::rs);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.level, RestoreLevel::l2);
  EXPECT_EQ(p.lost_per_set, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(p.label_root, 2);
}

TEST(RestorePlan, BeyondToleranceFromL3) {
  auto inv = inventory(holding(6, {7}, {0, 2}), {7});
  auto p = plan(6, inv, sets({{0, 2, 4}, {1, 3, 5}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.version, 7u);
  EXPECT_EQ(p.level, RestoreLevel::l3);
  EXPECT_TRUE(p.in_l3);
  EXPECT_EQ(p.label_root, 0);
  EXPECT_TRUE(p.lost_per_set.empty());
  EXPECT_EQ(p.flags[0], 0u);
  EXPECT_EQ(p.flags[1], kHeld);
}

TEST(RestorePlan, BeyondToleranceAndNotInL3FallsToTheOlderVersion) {
  auto inv = inventory(holding(6, {7, 6}, {0, 2}));
  auto p = plan(6, inv, sets({{0, 2, 4}, {1, 3, 5}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.version, 6u);
  EXPECT_EQ(p.level, RestoreLevel::l1);
  ASSERT_EQ(p.passed_over.size(), 1u);
  EXPECT_EQ(p.passed_over[0],
            "version 7: L1 on 4 of 6 ranks (missing: 0,2); L2 cannot rebuild set 0 (xor tolerates fewer losses); "
            "not in L3");
}

TEST(RestorePlan, PartnerNeighboursLostAreBeyondIt) {
  auto inv = inventory(holding(4, {7, 6}, {1, 2}), {6});
  auto p = plan(4, inv, sets({{0, 1, 2, 3}}), Redundancy::partner);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.version, 6u);
  EXPECT_EQ(p.level, RestoreLevel::l1);  // every rank holds 6: L1 before L3
  EXPECT_TRUE(p.in_l3);
  ASSERT_EQ(p.passed_over.size(), 1u);
  EXPECT_NE(p.passed_over[0].find("L2 cannot rebuild set 0 (partner tolerates fewer losses)"), std::string::npos)
      << p.passed_over[0];
}

TEST(RestorePlan, AnUnprotectedSurvivorRefusesL2) {
  auto ranks = holding(6, {7}, {2});
  ranks[4][7] = kHasL1;  // rank 4 holds 7 but never finished its redundancy
  auto inv = inventory(ranks, {7});
  auto p = plan(6, inv, sets({{0, 2, 4}, {1, 3, 5}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.level, RestoreLevel::l3);
  // Not in L3: passed over, saying who never finished.
  auto none = plan(6, inventory(ranks), sets({{0, 2, 4}, {1, 3, 5}}), Redundancy::xor_set);
  EXPECT_FALSE(none.chosen());
  ASSERT_EQ(none.passed_over.size(), 1u);
  EXPECT_EQ(none.passed_over[0],
            "version 7: L1 on 5 of 6 ranks (missing: 2); L2 incomplete (rank 4 never finished its redundancy); "
            "not in L3");
}

TEST(RestorePlan, AnUnprotectedMemberOfASetWithoutLossesDoesNotMatter) {
  auto ranks = holding(6, {7}, {2});
  ranks[5][7] = kHasL1;  // set 1 lost nothing: its redundancy is not needed
  auto p = plan(6, inventory(ranks), sets({{0, 2, 4}, {1, 3, 5}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.level, RestoreLevel::l2);
  EXPECT_EQ(p.lost_per_set, (std::vector<std::vector<int>>{{2}, {}}));
}

TEST(RestorePlan, L3OnlyWithoutAnyCache) {
  auto inv = inventory(holding(4, {}), {3, 2});
  auto p = plan(4, inv, sets({{0, 1}, {2, 3}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.version, 3u);
  EXPECT_EQ(p.level, RestoreLevel::l3);
  EXPECT_EQ(p.flags, std::vector<uint64_t>(4, 0));
  EXPECT_EQ(p.label_root, 0);
  EXPECT_TRUE(p.passed_over.empty());
}

TEST(RestorePlan, RejectedVersionsAreNotChosen) {
  auto inv = inventory(holding(4, {8, 7, 6}), {8}, {8, 7});
  auto p = plan(4, inv, sets({{0, 1}, {2, 3}}), Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.version, 6u);
  EXPECT_EQ(p.level, RestoreLevel::l1);
  EXPECT_TRUE(p.passed_over.empty());  // rejected before the plan: not passed over by it
}

TEST(RestorePlan, PlacementOffHasNoL2) {
  auto inv = inventory(holding(4, {7, 6}, {3}), {6});
  auto p = plan(4, inv, kNoL2, Redundancy::xor_set);
  ASSERT_TRUE(p.chosen());
  EXPECT_EQ(p.version, 6u);
  EXPECT_EQ(p.level, RestoreLevel::l1);
  ASSERT_EQ(p.passed_over.size(), 1u);
  EXPECT_EQ(p.passed_over[0], "version 7: L1 on 3 of 4 ranks (missing: 3); L2 off; not in L3");
  // The same losses with 7 in L3: L3, not L2.
  auto in_l3 = plan(4, inventory(holding(4, {7}, {3}), {7}), kNoL2, Redundancy::xor_set);
  EXPECT_EQ(in_l3.level, RestoreLevel::l3);
}

TEST(RestorePlan, EmptyInventoryChoosesNothing) {
  auto p = plan(4, inventory(holding(4, {})), sets({{0, 1}, {2, 3}}), Redundancy::xor_set);
  EXPECT_FALSE(p.chosen());
  EXPECT_EQ(p.version, 0u);
  EXPECT_EQ(p.level, RestoreLevel::none);
  EXPECT_TRUE(p.passed_over.empty());
}

TEST(RestorePlan, NothingPlannableNamesEveryVersionPassedOver) {
  // 7: set 0 lost both its members; 6: held by rank 2 alone.
  auto ranks = holding(4, {7}, {0, 1});
  ranks[2][6] = kHeld;
  auto none = plan(4, inventory(ranks), sets({{0, 1}, {2, 3}}), Redundancy::xor_set);
  EXPECT_FALSE(none.chosen());
  ASSERT_EQ(none.passed_over.size(), 2u);
  EXPECT_EQ(none.passed_over[0].rfind("version 7: ", 0), 0u);
  EXPECT_EQ(none.passed_over[1],
            "version 6: L1 on 1 of 4 ranks (missing: 0,1,3); L2 cannot rebuild set 0 (xor tolerates fewer losses); "
            "not in L3");
}

TEST(RestoreL2Check, MessagesFollowTheCallersText) {
  auto placement = sets({{0, 1, 2}, {3, 4, 5}});
  std::vector<uint64_t> flags(6, kHeld);
  std::vector<std::vector<int>> lost;
  std::vector<int> good{1, 1, 1, 1, 0, 1};
  EXPECT_TRUE(l2_can_rebuild(placement, Redundancy::xor_set, good, flags, "L1 text", &lost).is_ok());
  EXPECT_EQ(lost, (std::vector<std::vector<int>>{{}, {4}}));
  good = {1, 1, 1, 0, 0, 1};
  Status st = l2_can_rebuild(placement, Redundancy::xor_set, good, flags, "L1 text", &lost);
  EXPECT_EQ(st.code(), Code::ERR_UNRECOVERABLE);
  EXPECT_EQ(st.message(), "L1 text; L2 cannot rebuild set 1 (xor tolerates fewer losses)");
  flags[5] = kHasL1;
  st = l2_can_rebuild(placement, Redundancy::xor_set, good, flags, "", nullptr);
  EXPECT_EQ(st.message(), "; L2 incomplete (rank 5 never finished its redundancy)");
}

// The restart on another rank count from L2: which sets rebuild, and who hosts the lost members.
struct OldJob {
  std::vector<bool> good;
  std::vector<int> set_of;
  std::map<int, OldSet> sets;
};

// p_old ranks in consecutive sets of `size` members of `scheme` (parity m), every rank reported by a survivor.
OldJob old_job(int p_old, int size, Redundancy scheme, int m, const std::vector<int>& lost) {
  OldJob j;
  j.good.assign(static_cast<size_t>(p_old), true);
  for (int k : lost) j.good[static_cast<size_t>(k)] = false;
  j.set_of.assign(static_cast<size_t>(p_old), -1);
  for (int first = 0; first < p_old; first += size) {
    OldSet s{scheme, m, {}, {}};
    for (int k = first; k < first + size && k < p_old; ++k) {
      s.members.push_back(k);
      s.lens.push_back(1000);
      j.set_of[static_cast<size_t>(k)] = first;
    }
    j.sets[first] = s;
  }
  return j;
}

TEST(ReshapeL2Plan, NothingLostRebuildsNothing) {
  OldJob j = old_job(4, 2, Redundancy::xor_set, 1, {});
  ReshapeL2Plan p = plan_reshape_l2(j.good, j.set_of, j.sets, {0, 1, 2, 0}, 3);
  EXPECT_EQ(p.reason, "");
  EXPECT_TRUE(p.to_rebuild.empty());
  EXPECT_EQ(p.host_of_old, (std::vector<int>{0, 1, 2, 0}));
}

TEST(ReshapeL2Plan, LostMembersGoToRanksHostingNoOtherMemberOfTheirSet) {
  // 4 old ranks in xor pairs {0,1} {2,3} onto 3 ranks; old 1 and 3 are lost. Survivors: old 0 on rank 0,
  // old 2 on rank 1. Round-robin over the sets: old 1 skips rank 0 (its set's old 0) and takes 1; old 3
  // skips nothing at 2.
  OldJob j = old_job(4, 2, Redundancy::xor_set, 1, {1, 3});
  ReshapeL2Plan p = plan_reshape_l2(j.good, j.set_of, j.sets, {0, -1, 1, -1}, 3);
  EXPECT_EQ(p.reason, "");
  EXPECT_EQ(p.to_rebuild, (std::vector<int>{0, 2}));
  EXPECT_EQ(p.host_of_old, (std::vector<int>{0, 1, 1, 2}));
  // The same with rank 1 hosting old 0: old 1 goes to rank 0.
  p = plan_reshape_l2(j.good, j.set_of, j.sets, {1, -1, 0, -1}, 3);
  EXPECT_EQ(p.host_of_old[1], 0);
  EXPECT_NE(p.host_of_old[3], p.host_of_old[2]);
  // Two ranks: every set fits, each lost member beside its survivor's host.
  p = plan_reshape_l2(j.good, j.set_of, j.sets, {0, -1, 1, -1}, 2);
  EXPECT_EQ(p.reason, "");
  EXPECT_EQ(p.host_of_old, (std::vector<int>{0, 1, 1, 0}));
}

TEST(ReshapeL2Plan, ASurvivorThatFailedItsCheckIsRebuiltToo) {
  // rs sets of 4 with m = 2: old 1 lost, then old 2 (its host's check failed) as well: the set rebuilds both.
  OldJob j = old_job(4, 4, Redundancy::rs, 2, {1});
  ReshapeL2Plan first = plan_reshape_l2(j.good, j.set_of, j.sets, {0, -1, 1, 2}, 4);
  EXPECT_EQ(first.reason, "");
  EXPECT_EQ(first.host_of_old, (std::vector<int>{0, 3, 1, 2}));
  j.good[2] = false;
  ReshapeL2Plan again = plan_reshape_l2(j.good, j.set_of, j.sets, {0, -1, 1, 2}, 4);
  EXPECT_EQ(again.reason, "");
  EXPECT_EQ(again.to_rebuild, (std::vector<int>{0}));
  // old 1 and old 2 on the two ranks that host neither survivor (0 and 2 host old 0 and old 3)
  EXPECT_EQ(again.host_of_old, (std::vector<int>{0, 1, 3, 2}));
}

TEST(ReshapeL2Plan, EachWayItCannotSaysWhy) {
  OldJob xor_pair = old_job(4, 2, Redundancy::xor_set, 1, {0, 1});
  EXPECT_EQ(plan_reshape_l2(xor_pair.good, xor_pair.set_of, xor_pair.sets, {-1, -1, 0, 1}, 3).reason,
            "set of old ranks 0.. lost more members than xor tolerates");
  OldJob quad = old_job(4, 4, Redundancy::xor_set, 1, {3});
  ReshapeL2Plan p = plan_reshape_l2(quad.good, quad.set_of, quad.sets, {0, 1, 2, -1}, 3);
  EXPECT_EQ(p.reason, "a set of 4 members cannot be rebuilt by 3 ranks");
  EXPECT_TRUE(p.to_rebuild.empty());
  OldJob unreported = old_job(4, 2, Redundancy::partner, 1, {2, 3});
  unreported.sets.erase(2);  // no survivor reported the set {2,3}
  unreported.set_of[2] = unreported.set_of[3] = -1;
  EXPECT_EQ(plan_reshape_l2(unreported.good, unreported.set_of, unreported.sets, {0, 1, -1, -1}, 2).reason,
            "old rank 2 is lost and no survivor of its set reports it");
  OldJob foreign = old_job(4, 2, Redundancy::xor_set, 1, {1});
  foreign.sets[0].members = {0, 7};  // a set record naming an old rank the version does not have
  EXPECT_EQ(plan_reshape_l2(foreign.good, foreign.set_of, foreign.sets, {0, -1, 1, 2}, 3).reason,
            "the set of old ranks 0.. names old rank 7, and the version has 4");
}

std::vector<std::pair<int, uint64_t>> sources(const L2CopyPlan& p) {
  std::vector<std::pair<int, uint64_t>> out;
  for (const auto& c : p.sources) out.push_back({c.holder, c.offset});
  return out;
}
using Sources = std::vector<std::pair<int, uint64_t>>;

TEST(L2CopyPlan, LostRanksReadFromTheCopyASurvivorKeeps) {
  // xor pairs {0,1} {2,3}, old 1 and 3 lost: each is its pair's parity, a copy in old 0's and old 2's data.
  OldJob j = old_job(4, 2, Redundancy::xor_set, 1, {1, 3});
  std::vector<bool> prot(4, true);
  L2CopyPlan p = plan_l2_copies(j.good, prot, j.set_of, j.sets);
  EXPECT_EQ(p.reason, "");
  EXPECT_EQ(sources(p), (Sources{{-1, 0}, {0, 0}, {-1, 0}, {2, 0}}));
  // A partner ring of four: old 2's copy is old 3's.
  OldJob ring = old_job(4, 4, Redundancy::partner, 1, {2});
  p = plan_l2_copies(ring.good, prot, ring.set_of, ring.sets);
  EXPECT_EQ(sources(p), (Sources{{-1, 0}, {-1, 0}, {3, 0}, {-1, 0}}));
  // rs of three with two parity rows: row 0 is a copy, kept by the member before.
  OldJob rs3 = old_job(3, 3, Redundancy::rs, 2, {1});
  p = plan_l2_copies(rs3.good, std::vector<bool>(3, true), rs3.set_of, rs3.sets);
  EXPECT_EQ(sources(p), (Sources{{-1, 0}, {0, 0}, {-1, 0}}));
  // Nothing lost: every old rank from its own slot, protected or not.
  OldJob whole = old_job(4, 2, Redundancy::xor_set, 1, {});
  p = plan_l2_copies(whole.good, std::vector<bool>(4, false), whole.set_of, whole.sets);
  EXPECT_EQ(p.reason, "");
  EXPECT_EQ(sources(p), (Sources(4, {-1, 0})));
}

TEST(L2CopyPlan, WhereNoCopyQualifiesItSaysWhy) {
  std::vector<bool> prot(4, true);
  // xor of four keeps no copy: its members are decoded.
  OldJob quad = old_job(4, 4, Redundancy::xor_set, 1, {3});
  L2CopyPlan p = plan_l2_copies(quad.good, prot, quad.set_of, quad.sets);
  EXPECT_EQ(p.reason, "no member of the set of old rank 3 keeps a copy of its data (xor of 4: it must be decoded)");
  EXPECT_EQ(sources(p), (Sources(4, {-1, 0})));
  // The holder's version was not protected: its redundancy data may be incomplete.
  OldJob pair = old_job(4, 2, Redundancy::partner, 1, {1});
  prot[0] = false;
  EXPECT_EQ(plan_l2_copies(pair.good, prot, pair.set_of, pair.sets).reason,
            "the members that keep a copy of old rank 1's data are lost or their version was not protected");
  // Both members of a pair lost; a set no survivor reported; a record that does not name the rank.
  OldJob both = old_job(4, 2, Redundancy::partner, 1, {0, 1});
  EXPECT_EQ(plan_l2_copies(both.good, std::vector<bool>(4, true), both.set_of, both.sets).reason,
            "the members that keep a copy of old rank 0's data are lost or their version was not protected");
  OldJob unreported = old_job(4, 2, Redundancy::partner, 1, {2, 3});
  unreported.sets.erase(2);
  unreported.set_of[2] = unreported.set_of[3] = -1;
  EXPECT_EQ(plan_l2_copies(unreported.good, std::vector<bool>(4, true), unreported.set_of, unreported.sets).reason,
            "old rank 2 is lost and no survivor of its set reports it");
  OldJob foreign = old_job(4, 2, Redundancy::xor_set, 1, {1});
  foreign.sets[0].members = {0, 7};
  EXPECT_EQ(plan_l2_copies(foreign.good, std::vector<bool>(4, true), foreign.set_of, foreign.sets).reason,
            "the set record of old rank 1 does not describe its set");
}

}  // namespace
}  // namespace cairn::restore
