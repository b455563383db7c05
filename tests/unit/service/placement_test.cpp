// Placement: stacking fills one checkpoint node before the next, never beyond capacity, and says why;
// ranks are cut into blocks of consecutive ranks per agent.
#include <gtest/gtest.h>

#include "service/placement.hpp"

namespace cairn::service {
namespace {

std::vector<NodeLoad> nodes(std::vector<std::pair<uint32_t, uint32_t>> cap_load) {
  std::vector<NodeLoad> out;
  uint64_t id = 1;
  for (auto [cap, load] : cap_load) out.push_back(NodeLoad{id, "n" + std::to_string(id), cap, load}), ++id;
  return out;
}

std::vector<uint64_t> managers(const std::vector<AgentPlace>& p) {
  std::vector<uint64_t> out;
  for (const auto& x : p) out.push_back(x.manager_id);
  return out;
}

TEST(Placement, StackingFillsTheFirstNodeFirst) {
  auto p = place_agents(Policy::stacking, nodes({{4, 0}, {4, 0}}), 3);
  EXPECT_EQ(managers(p), (std::vector<uint64_t>{1, 1, 1}));
  EXPECT_NE(p[0].why.find("stacking"), std::string::npos);
  EXPECT_NE(p[2].why.find("agent 3 of 4"), std::string::npos);
}

TEST(Placement, StackingSpillsOverInJoinOrderAndStopsWhenFull) {
  EXPECT_EQ(managers(place_agents(Policy::stacking, nodes({{2, 1}, {3, 0}, {4, 0}}), 5)),
            (std::vector<uint64_t>{1, 2, 2, 2, 3}));
  EXPECT_EQ(managers(place_agents(Policy::stacking, nodes({{1, 1}, {2, 1}}), 5)), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(place_agents(Policy::stacking, {}, 2).empty());
  EXPECT_TRUE(place_agents(Policy::stacking, nodes({{0, 0}}), 1).empty());
  // A node above its capacity (it shrank) takes nothing more.
  EXPECT_EQ(managers(place_agents(Policy::stacking, nodes({{1, 3}, {1, 0}}), 1)), (std::vector<uint64_t>{2}));
}

TEST(Placement, AgentsPerApplication) {
  EXPECT_EQ(agents_for(1, 8, 64), 1u);
  EXPECT_EQ(agents_for(4, 8, 64), 4u);
  EXPECT_EQ(agents_for(16, 8, 64), 8u);  // at most one per rank
  EXPECT_EQ(agents_for(16, 64, 4), 4u);  // the controller's limit
  EXPECT_EQ(agents_for(0, 8, 64), 1u);
}

TEST(Placement, RanksAreCutIntoBlocks) {
  std::vector<uint32_t> got;
  for (uint32_t r = 0; r < 8; ++r) got.push_back(slot_of_rank(r, 8, 2));
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  got.clear();
  for (uint32_t r = 0; r < 5; ++r) got.push_back(slot_of_rank(r, 5, 3));
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 0, 1, 1, 2}));
  for (uint32_t n = 1; n < 40; ++n)
    for (uint32_t k = 1; k <= n; ++k) {
      std::vector<int> per(k, 0);
      for (uint32_t r = 0; r < n; ++r) {
        uint32_t s = slot_of_rank(r, n, k);
        ASSERT_LT(s, k);
        ++per[s];
      }
      for (int c : per) EXPECT_GE(c, 1) << n << " ranks, " << k << " agents: every agent gets a rank";
    }
}

TEST(Placement, PolicyNames) {
  EXPECT_EQ(*parse_policy("stacking"), Policy::stacking);
  EXPECT_FALSE(parse_policy("bandwidth").is_ok());
  EXPECT_STREQ(policy_name(Policy::stacking), "stacking");
}

}  // namespace
}  // namespace cairn::service
