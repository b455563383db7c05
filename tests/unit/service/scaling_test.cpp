// The dynamic agents' rules (service/controller/scaling.hpp): pure functions.
#include <gtest/gtest.h>

#include "service/controller/scaling.hpp"

namespace cairn::service {
namespace {

ScaleInputs in(double mb, double interval, double agent_mbs, uint32_t current, uint32_t nranks = 64,
               uint32_t max = 64) {
  ScaleInputs i;
  i.bytes_per_version = mb * 1e6;
  i.interval_s = interval;
  i.agent_bps = agent_mbs * 1e6;
  i.current = current;
  i.nranks = nranks;
  i.max_per_app = max;
  return i;
}

TEST(ScaleAgents, NothingMeasuredKeepsTheAllotment) {
  EXPECT_EQ(scale_agents(in(0, 1, 10, 3)).agents, 3u);
  EXPECT_EQ(scale_agents(in(100, 0, 10, 3)).agents, 3u);
  auto d = scale_agents(in(100, 1, 0, 3));
  EXPECT_EQ(d.agents, 3u);
  EXPECT_NE(d.why.find("not measured"), std::string::npos);
}

TEST(ScaleAgents, UpToDrainWithinTheFractionOfTheInterval) {
  // 10 MB every 2 s at 2 MB/s per agent, half the interval: 2 MB per agent in time -> 5 agents.
  auto d = scale_agents(in(10, 2, 2, 1));
  EXPECT_EQ(d.agents, 5u);
  EXPECT_NE(d.why.find("up to 5"), std::string::npos) << d.why;
  EXPECT_EQ(scale_agents(in(10.1, 2, 2, 1)).agents, 6u);  // ceil
}

TEST(ScaleAgents, BoundedByRanksAndTheMaximum) {
  auto d = scale_agents(in(1000, 1, 1, 1, 4, 64));
  EXPECT_EQ(d.agents, 4u);
  EXPECT_NE(d.why.find("at the bound"), std::string::npos) << d.why;
  EXPECT_EQ(scale_agents(in(1000, 1, 1, 1, 64, 3)).agents, 3u);
  EXPECT_EQ(scale_agents(in(1000, 1, 1, 9, 4, 64)).agents, 4u);  // above the bound: back to it
}

TEST(ScaleAgents, DownOnlyWithHeadroom) {
  // need(B) = 4 at 8 MB; with 1.5x headroom need = 6: 5 agents stay, 7 go down to 6.
  EXPECT_EQ(scale_agents(in(8, 2, 2, 5)).agents, 5u);
  auto d = scale_agents(in(8, 2, 2, 7));
  EXPECT_EQ(d.agents, 6u);
  EXPECT_NE(d.why.find("down to 6"), std::string::npos) << d.why;
  // Small versions: down to one.
  EXPECT_EQ(scale_agents(in(0.1, 2, 2, 4)).agents, 1u);
  EXPECT_NE(scale_agents(in(8, 2, 2, 5)).why.find("keeps 5"), std::string::npos);
}

TEST(GiveWay, TheSettledApplicationWithTheMostAgentsGivesOne) {
  EXPECT_EQ(pick_donor({}), 0u);
  EXPECT_EQ(pick_donor({{1, 1, true}, {2, 1, true}}), 0u);  // nobody has a second agent
  EXPECT_EQ(pick_donor({{1, 2, true}, {2, 3, true}, {3, 1, true}}), 2u);
  EXPECT_EQ(pick_donor({{1, 2, true}, {2, 3, false}}), 1u);  // a change in flight first settles
  EXPECT_EQ(pick_donor({{1, 2, false}, {2, 4, false}}), 0u);
  EXPECT_EQ(pick_donor({{4, 2, true}, {7, 2, true}, {5, 2, true}}), 7u);  // ties: the one registered last
}

TEST(GiveWay, AScaleUpWaitsForAnApplicationWithoutAgentAndForRoom) {
  EXPECT_EQ(cap_scale_up(2, 5, 10, true, true), 2u);  // someone waits for a first agent: no growth
  EXPECT_EQ(cap_scale_up(2, 5, 1, false, false), 3u);  // only the free places
  EXPECT_EQ(cap_scale_up(2, 5, 0, false, false), 2u);
  EXPECT_EQ(cap_scale_up(2, 5, 0, false, true), 5u);   // a scale-up command may bring a node: the slots wait
  EXPECT_EQ(cap_scale_up(4, 2, 0, true, false), 2u);   // going down is never held
  EXPECT_EQ(cap_scale_up(3, 3, 0, true, false), 3u);
}

}  // namespace
}  // namespace cairn::service
