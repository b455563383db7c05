#include "policy/failure_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace cairn::policy {
namespace {

std::vector<ScheduledFailure> draw(uint64_t seed, double mtbf, FailureMix mix, double horizon, int nodes = 4, int ranks = 8) {
  auto r = draw_failures(seed, mtbf, mix, horizon, nodes, ranks);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r.value() : std::vector<ScheduledFailure>{};
}

TEST(FailureSchedule, SameSeedSameScheduleOtherSeedOther) {
  FailureMix mix{2, 1, 1};
  auto a = draw(7, 60, mix, 3600), b = draw(7, 60, mix, 3600), c = draw(8, 60, mix, 3600);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(FailureSchedule, ShorterHorizonIsAPrefix) {
  // Policies that run for different times meet the same failures, in the same order.
  FailureMix mix{1, 1, 1};
  auto longer = draw(3, 10, mix, 1000), shorter = draw(3, 10, mix, 200);
  ASSERT_LT(shorter.size(), longer.size());
  for (size_t i = 0; i < shorter.size(); ++i) EXPECT_EQ(shorter[i], longer[i]);
  EXPECT_LT(shorter.back().at, 200);
  EXPECT_GE(longer[shorter.size()].at, 200);
}

TEST(FailureSchedule, GapsAreExponentialWithTheMeanAndKindsFollowTheMix) {
  FailureMix mix{2, 1, 1};
  auto f = draw(11, 5, mix, 5 * 20000, 3, 6);
  ASSERT_GT(f.size(), 15000u);
  double sum = 0, sq = 0, prev = 0;
  int kinds[3] = {0, 0, 0}, nodes[3] = {0, 0, 0};
  for (const auto& x : f) {
    double gap = x.at - prev;
    prev = x.at;
    sum += gap, sq += gap * gap;
    ++kinds[static_cast<int>(x.kind)];
    if (x.kind == FailureKind::node) {
      ASSERT_LT(x.target, 3);
      ++nodes[x.target];
    }
    if (x.kind == FailureKind::rank) {
      ASSERT_LT(x.target, 6);
    }
    if (x.kind == FailureKind::job) {
      EXPECT_EQ(x.target, 0);
    }
  }
  const double n = static_cast<double>(f.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 5, 0.15);  // exponential: sd = mean
  EXPECT_NEAR(sd, 5, 0.25);
  EXPECT_NEAR(kinds[0] / n, 0.5, 0.02);
  EXPECT_NEAR(kinds[1] / n, 0.25, 0.02);
  EXPECT_NEAR(kinds[2] / n, 0.25, 0.02);
  for (int c : nodes) EXPECT_NEAR(c / static_cast<double>(kinds[0]), 1.0 / 3, 0.03);
}

TEST(FailureSchedule, OnlyTheKindsWithWeight) {
  auto f = draw(5, 1, FailureMix{0, 1, 0}, 500);
  ASSERT_FALSE(f.empty());
  for (const auto& x : f) EXPECT_EQ(x.kind, FailureKind::rank);
}

TEST(FailureSchedule, FormatParsesBackEqual) {
  auto f = draw(9, 7, FailureMix{1, 1, 1}, 300);
  ASSERT_FALSE(f.empty());
  auto back = parse_failures(format_failures(f), 4, 8);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back.value(), f);
  auto one = parse_failures(" 1.5:node:1, 2:job ,2:rank:3");
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  ASSERT_EQ(one->size(), 3u);
  EXPECT_EQ((*one)[1].kind, FailureKind::job);
  EXPECT_EQ((*one)[2].target, 3);
}

TEST(FailureSchedule, BadInputIsRefusedWithAReason) {
  for (const char* bad : {"", "x:node:1", "-1:node:1", "1:disk:1", "1:node", "1:node:-2", "2:node:1,1:node:1",
                          "1:job:3", "1:rank:1:2", "nan:job"}) {
    auto r = parse_failures(bad);
    EXPECT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::ERR_INVALID_ARG) << bad;
  }
  auto range = parse_failures("1:node:4", 4, 8);
  ASSERT_FALSE(range.is_ok());
  EXPECT_NE(range.status().message().find("node 4 does not exist"), std::string::npos) << range.status().message();
  EXPECT_FALSE(parse_failures("1:rank:8", 4, 8).is_ok());
  for (const char* bad : {"", "node", "node:-1", "node:1,node:2", "disk:1", "node:0,rank:0"}) EXPECT_FALSE(parse_failure_mix(bad).is_ok()) << bad;
  auto mix = parse_failure_mix("rank:1, job:0.5");
  ASSERT_TRUE(mix.is_ok());
  EXPECT_EQ(mix->node, 0);
  EXPECT_EQ(mix->rank, 1);
  EXPECT_EQ(mix->job, 0.5);
  EXPECT_FALSE(draw_failures(1, 0, FailureMix{}, 10, 1, 1).is_ok());
  EXPECT_FALSE(draw_failures(1, 1, FailureMix{}, std::numeric_limits<double>::infinity(), 1, 1).is_ok());
  EXPECT_FALSE(draw_failures(1, 1, FailureMix{}, 10, 0, 1).is_ok());
  EXPECT_FALSE(draw_failures(1, 1, FailureMix{0, 0, 0}, 10, 1, 1).is_ok());
}

}  // namespace
}  // namespace cairn::policy
