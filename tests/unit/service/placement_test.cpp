// Placement: each policy deciding as documented for scripted sets of applications -- stacking fills one
// checkpoint node before the next, bandwidth follows the free measured bandwidth, interval the least
// checkpoint traffic -- never beyond capacity, and saying why; ranks are cut into blocks of consecutive
// ranks per agent.
#include <gtest/gtest.h>

#include "service/controller/placement.hpp"

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
  for (Policy p : {Policy::stacking, Policy::bandwidth, Policy::interval})
    EXPECT_EQ(*parse_policy(policy_name(p)), p);
  EXPECT_FALSE(parse_policy("random").is_ok());
  EXPECT_NE(parse_policy("spread").status().message().find("stacking, bandwidth or interval"), std::string::npos);
}

constexpr double MB = 1e6;

// A node with measured bandwidth and traffic.
NodeLoad node(uint64_t id, uint32_t cap, uint32_t agents, double bw, double demand) {
  return NodeLoad{id, "n" + std::to_string(id), cap, agents, bw, demand};
}

TEST(Placement, AppDemandIsBytesPerIntervalSharedByItsAgents) {
  EXPECT_DOUBLE_EQ((AppDemand{600 * MB, 60, 2}).per_agent_bps(), 5 * MB);
  EXPECT_EQ((AppDemand{600 * MB, 0, 2}).per_agent_bps(), 0);  // interval not known yet
  EXPECT_EQ((AppDemand{0, 60, 1}).per_agent_bps(), 0);
  EXPECT_DOUBLE_EQ((AppDemand{60 * MB, 6, 0}).per_agent_bps(), 10 * MB);
}

TEST(Placement, BandwidthPicksTheMostFreeBandwidthAndCountsWhatItPlaces) {
  // n1: 100 - 90 = 10 free; n2: 60 - 0 = 60 free; n3: 80 - 10 = 70 free.
  auto nodes3 = std::vector<NodeLoad>{node(1, 4, 3, 100 * MB, 90 * MB), node(2, 4, 0, 60 * MB, 0),
                                      node(3, 4, 1, 80 * MB, 10 * MB)};
  auto p = place_agents(Policy::bandwidth, nodes3, 3, AppDemand{400 * MB, 10, 4});  // 10 MB/s per agent
  // n3 (70 free) -> 60 left, ties n2 (60): fewer agents wins (n2 has 0, n3 2) -> n2 (50) -> n3 (60).
  EXPECT_EQ(managers(p), (std::vector<uint64_t>{3, 2, 3}));
  EXPECT_NE(p[0].why.find("bandwidth: the most free bandwidth, 70.0 MB/s (80.0 MB/s measured, less 10.0 MB/s"),
            std::string::npos) << p[0].why;
  EXPECT_NE(p[0].why.find("next n2, 60.0 MB/s"), std::string::npos) << p[0].why;
  // A node not measured yet counts as the mean of the measured ones.
  p = place_agents(Policy::bandwidth, {node(1, 4, 1, 100 * MB, 50 * MB), node(2, 4, 0, 0, 0)}, 1);
  EXPECT_EQ(managers(p), (std::vector<uint64_t>{2}));
  EXPECT_NE(p[0].why.find("not measured: the mean 100.0 MB/s"), std::string::npos) << p[0].why;
  // None measured: the fewest agents, join order on ties.
  p = place_agents(Policy::bandwidth, nodes({{4, 2}, {4, 1}, {4, 1}}), 3);
  EXPECT_EQ(managers(p), (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_NE(p[0].why.find("no node measured yet"), std::string::npos);
  // Never beyond capacity, even where the bandwidth is.
  EXPECT_EQ(managers(place_agents(Policy::bandwidth, {node(1, 1, 0, 1000 * MB, 0), node(2, 2, 0, 1 * MB, 0)}, 4)),
            (std::vector<uint64_t>{1, 2, 2}));
}

TEST(Placement, IntervalSpreadsTheHeavyApplicationsAndFillsInTheLight) {
  // Three applications arrive one after the other on two nodes of 4: A (1 GB every 10 s, 2 agents),
  // B (100 MB every 10 s, 1 agent), C (2 GB every 100 s, 1 agent).
  std::vector<NodeLoad> n = nodes({{4, 0}, {4, 0}});
  auto place = [&](AppDemand d, uint32_t k) {
    auto p = place_agents(Policy::interval, n, k, d);
    for (const auto& x : p) {
      ++n[x.manager_id - 1].agents;
      n[x.manager_id - 1].demand_bps += d.per_agent_bps();
    }
    return managers(p);
  };
  EXPECT_EQ(place(AppDemand{1000 * MB, 10, 2}, 2), (std::vector<uint64_t>{1, 2}));  // 50 MB/s each: spread
  EXPECT_EQ(place(AppDemand{100 * MB, 10, 1}, 1), (std::vector<uint64_t>{1}));  // equal traffic: fewer agents, join order
  EXPECT_EQ(place(AppDemand{2000 * MB, 100, 1}, 1), (std::vector<uint64_t>{2}));  // n2 carries 50 < 60
  EXPECT_DOUBLE_EQ(n[0].demand_bps, 60 * MB);
  EXPECT_DOUBLE_EQ(n[1].demand_bps, 70 * MB);
  // The reason names the traffic, what the agent adds and the runner-up.
  auto p = place_agents(Policy::interval, n, 1, AppDemand{10 * MB, 1, 1});
  EXPECT_EQ(managers(p), (std::vector<uint64_t>{1}));
  EXPECT_EQ(p[0].why, "interval: the least checkpoint traffic, 60.0 MB/s of bytes per interval (n1, agent 3 of 4; "
                      "this agent adds 10.0 MB/s); next n2, 70.0 MB/s");
  // Stacking on the same scripted set ignores the traffic.
  EXPECT_EQ(managers(place_agents(Policy::stacking, n, 3, AppDemand{10 * MB, 1, 1})), (std::vector<uint64_t>{1, 1, 2}));
}

}  // namespace
}  // namespace cairn::service
