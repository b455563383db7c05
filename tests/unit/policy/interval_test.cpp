#include "policy/interval.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "base/config.hpp"
#include "policy/exit_policy.hpp"

namespace cairn::policy {
namespace {

constexpr double kMinute = 60, kHour = 3600, kDay = 86400;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Daly's eq. 37 rewritten (sqrt(2δM)·sqrt(δ/2M) = δ): Young − 2δ/3 + (δ/9)·sqrt(δ/2M). Independent of
// the form the library evaluates.
double daly_by_identity(double delta, double mtbf) {
  return std::sqrt(2 * delta * mtbf) - 2 * delta / 3 + delta / 9 * std::sqrt(delta / (2 * mtbf));
}

double value(const Result<double>& r) {
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r.value() : kNaN;
}

// ---- Young and Daly against the published examples -------------------------------------------

// Daly 2006, Figs. 3-5: δ = 5 min, R = 10 min, Ts = 500 h; the model predicts τopt = 117 min for
// M = 24 h, 57 min for M = 6 h and 9.1 min for M = 15 min.
TEST(IntervalDaly, PublishedExamples) {
  const double delta = 5 * kMinute;
  struct Case {
    double mtbf, published_minutes, rounding;
  } cases[] = {{24 * kHour, 117, 1}, {6 * kHour, 57, 1}, {15 * kMinute, 9.1, 0.1}};
  for (const auto& c : cases) {
    double tau = value(daly_interval(delta, c.mtbf));
    EXPECT_NEAR(tau, daly_by_identity(delta, c.mtbf), 1e-9 * tau) << "M = " << c.mtbf;
    EXPECT_NEAR(std::round(tau / kMinute / c.rounding) * c.rounding, c.published_minutes, 1e-9) << "M = " << c.mtbf;
  }
  EXPECT_NEAR(value(daly_interval(delta, 24 * kHour)), 7001.388888888889, 1e-6);
  EXPECT_NEAR(value(daly_interval(delta, 6 * kHour)), 3402.777777777778, 1e-6);
  EXPECT_NEAR(value(daly_interval(delta, 15 * kMinute)), 548.4551991837, 1e-6);
}

TEST(IntervalYoung, PublishedExamples) {
  const double delta = 5 * kMinute;
  EXPECT_DOUBLE_EQ(value(young_interval(delta, 24 * kHour)), 7200);  // sqrt(2·300·86400)
  EXPECT_DOUBLE_EQ(value(young_interval(delta, 6 * kHour)), 3600);
  EXPECT_DOUBLE_EQ(value(young_interval(delta, 15 * kMinute)), std::sqrt(540000.0));
}

TEST(IntervalDaly, SeveralCostsAgainstIndependentFormula) {
  for (double mtbf : {24 * kHour, 6 * kHour, 15 * kMinute})
    for (double delta : {1.0, 30.0, kMinute, 5 * kMinute, 20 * kMinute}) {
      if (delta >= 2 * mtbf) continue;
      double tau = value(daly_interval(delta, mtbf));
      EXPECT_NEAR(tau, daly_by_identity(delta, mtbf), 1e-9 * tau) << "δ = " << delta << ", M = " << mtbf;
    }
}

TEST(IntervalDaly, BelowYoungAndCloserForSmallCosts) {
  const double mtbf = 6 * kHour;
  double previous_gap = kInf;
  for (double ratio : {1.9, 1.0, 0.3, 0.1, 1e-2, 1e-3, 1e-4, 1e-6}) {
    double delta = ratio * mtbf;
    double young = value(young_interval(delta, mtbf)), daly = value(daly_interval(delta, mtbf));
    EXPECT_LT(daly, young) << "δ/M = " << ratio;
    double gap = (young - daly) / young;
    EXPECT_LT(gap, previous_gap) << "δ/M = " << ratio;
    previous_gap = gap;
  }
  EXPECT_LT(previous_gap, 1e-3);
}

// Daly's eq. 37 is piecewise: M from δ = 2M on; just below, the series gives 8M/9.
TEST(IntervalDaly, CostOfTwiceTheMtbfGivesTheMtbf) {
  const double mtbf = 15 * kMinute;
  EXPECT_DOUBLE_EQ(value(daly_interval(2 * mtbf, mtbf)), mtbf);
  EXPECT_DOUBLE_EQ(value(daly_interval(5 * mtbf, mtbf)), mtbf);
  EXPECT_NEAR(value(daly_interval(2 * mtbf * (1 - 1e-12), mtbf)), 8 * mtbf / 9, 1e-6 * mtbf);
  // The exact optimum of the model approaches M smoothly.
  EXPECT_GT(value(daly_model_optimum(2 * mtbf, mtbf)), 0.94 * mtbf);
  EXPECT_GT(value(daly_model_optimum(20 * mtbf, mtbf)), 0.99 * mtbf);
  EXPECT_LT(value(daly_model_optimum(20 * mtbf, mtbf)), mtbf);
}

TEST(IntervalDaly, FirstOrderAddsTheRestartCost) {
  EXPECT_DOUBLE_EQ(value(daly_first_order_interval(300, 86400, 0)), value(young_interval(300, 86400)));
  EXPECT_DOUBLE_EQ(value(daly_first_order_interval(300, 86400, 600)), std::sqrt(2.0 * 300 * (86400 + 600)));
}

// Eq. 37 is the series of the exact minimiser of T_w: within 0.3 % up to δ = M/3, 2 % up to δ = M.
TEST(IntervalDaly, HigherOrderTracksTheModelOptimum) {
  const double mtbf = 24 * kHour;
  for (double ratio : {1e-6, 1e-4, 1e-2, 0.1, 1.0 / 3, 1.0}) {
    double exact = value(daly_model_optimum(ratio * mtbf, mtbf));
    double series = value(daly_interval(ratio * mtbf, mtbf));
    double tolerance = ratio <= 1e-2 ? 2e-5 : ratio <= 1.0 / 3 ? 3e-3 : 2e-2;
    EXPECT_NEAR(series / exact, 1, tolerance) << "δ/M = " << ratio;
    EXPECT_LE(series, exact) << "δ/M = " << ratio;
  }
}

// ---- Daly's model of the wall time ----------------------------------------------------------

TEST(IntervalModel, WallTimeFormula) {
  FailureModel m{300, 6 * kHour, 600};
  double tau = 3000, work = 500 * kHour;
  double expected = m.mtbf * std::exp(m.restart_cost / m.mtbf) * (std::exp((tau + m.checkpoint_cost) / m.mtbf) - 1) *
                    work / tau;
  EXPECT_NEAR(value(expected_wall_time(work, tau, m)), expected, 1e-9 * expected);
  EXPECT_NEAR(value(expected_efficiency(tau, m)), work / expected, 1e-12);
  // Far beyond M the time overflows; the efficiency is then 0, not NaN.
  EXPECT_EQ(value(expected_wall_time(work, 1e6 * m.mtbf, m)), kInf);
  EXPECT_EQ(value(expected_efficiency(1e6 * m.mtbf, m)), 0.0);
}

// Daly's per-segment expectation checked by simulation: each attempt at a segment of τ + δ fails at
// an exponential time; a retry first restarts (R), and failures may strike during the restart.
TEST(IntervalModel, SegmentTimeMatchesSimulation) {
  FailureModel m{5 * kMinute, 6 * kHour, 10 * kMinute};
  double tau = value(daly_interval(m.checkpoint_cost, m.mtbf));
  std::mt19937_64 rng(20060101);
  std::exponential_distribution<double> failure(1 / m.mtbf);
  const int segments = 200000;
  double total = 0;
  for (int i = 0; i < segments; ++i) {
    double need = tau + m.checkpoint_cost;
    for (;;) {
      double f = failure(rng);
      if (f >= need) {
        total += need;
        break;
      }
      total += f;
      need = m.restart_cost + tau + m.checkpoint_cost;
    }
  }
  double simulated = total / segments;
  double predicted = value(expected_wall_time(tau, tau, m));  // work of one interval = one segment
  EXPECT_NEAR(simulated / predicted, 1, 0.01);
}

// The efficiency found by a grid search peaks at the model's optimum, and Daly's estimates are
// close to that peak, for the published examples.
TEST(IntervalModel, EfficiencyPeaksAtTheOptimum) {
  for (double mtbf : {24 * kHour, 6 * kHour, 15 * kMinute}) {
    FailureModel m{5 * kMinute, mtbf, 10 * kMinute};
    double best_tau = 0, best = -1;
    for (int i = 0; i <= 40000; ++i) {
      double tau = mtbf * std::pow(10.0, -3 + 3.5 * i / 40000.0);  // 1e-3 M .. 3.16 M
      double e = value(expected_efficiency(tau, m));
      if (e > best) best = e, best_tau = tau;
    }
    double exact = value(daly_model_optimum(m.checkpoint_cost, mtbf));
    EXPECT_NEAR(best_tau / exact, 1, 5e-4) << "M = " << mtbf;
    EXPECT_GE(value(expected_efficiency(exact, m)), best - 1e-12) << "M = " << mtbf;
    double daly = value(daly_interval(m.checkpoint_cost, mtbf));
    EXPECT_GT(value(expected_efficiency(daly, m)), best * (1 - 1e-4)) << "M = " << mtbf;
    double young = value(young_interval(m.checkpoint_cost, mtbf));
    EXPECT_LE(value(expected_efficiency(young, m)), value(expected_efficiency(daly, m))) << "M = " << mtbf;
  }
}

// ---- a fixed amount of work ------------------------------------------------------------------

TEST(IntervalWork, OptimalCountMatchesBruteForce) {
  for (double mtbf : {24 * kHour, 6 * kHour, 15 * kMinute}) {
    FailureModel m{5 * kMinute, mtbf, 10 * kMinute};
    double work = 500 * kHour;
    auto found = optimal_checkpoint_count(work, m);
    ASSERT_TRUE(found.is_ok()) << found.status().message();
    uint64_t best = 0;
    double best_time = kInf;
    for (uint64_t n = 0; n < 10000; ++n) {
      double t = value(expected_time_with_checkpoints(work, n, m));
      if (t < best_time) best_time = t, best = n;
    }
    EXPECT_EQ(found->checkpoints, best) << "M = " << mtbf;
    EXPECT_DOUBLE_EQ(found->expected_time, best_time);
    EXPECT_DOUBLE_EQ(found->segment, work / static_cast<double>(best + 1));
    // Against W/τ: the best segment is the model's optimum interval, to within a percent.
    double tau = value(daly_model_optimum(m.checkpoint_cost, mtbf));
    EXPECT_NEAR(found->segment / tau, 1, 0.01) << "M = " << mtbf;
  }
}

TEST(IntervalWork, ShortWorkNeedsNoCheckpoint) {
  FailureModel m{5 * kMinute, 24 * kHour, 0};
  auto found = optimal_checkpoint_count(10 * kMinute, m);
  ASSERT_TRUE(found.is_ok());
  EXPECT_EQ(found->checkpoints, 0u);
  EXPECT_NEAR(found->expected_time, m.mtbf * std::expm1(600 / m.mtbf), 1e-9);
}

TEST(IntervalWork, ExpectedTimeForCount) {
  FailureModel m{300, 6 * kHour, 600};
  double work = 10 * kHour, s = work / 5;
  double by_hand = m.mtbf * std::exp(m.restart_cost / m.mtbf) *
                   (4 * std::expm1((s + m.checkpoint_cost) / m.mtbf) + std::expm1(s / m.mtbf));
  EXPECT_NEAR(value(expected_time_with_checkpoints(work, 4, m)), by_hand, 1e-9 * by_hand);
  // Without failures in sight (huge M) the time is the work plus the checkpoints.
  FailureModel safe{300, 1e12, 0};
  EXPECT_NEAR(value(expected_time_with_checkpoints(work, 4, safe)), work + 4 * 300, 1e-3);
  // With no checkpoint at all, a long run against a short MTBF takes practically forever.
  EXPECT_EQ(value(expected_time_with_checkpoints(500 * kHour, 0, FailureModel{300, 900, 0})), kInf);
  auto many = optimal_checkpoint_count(500 * kHour, FailureModel{300, 900, 0});
  ASSERT_TRUE(many.is_ok());
  EXPECT_GT(many->checkpoints, 2000u);
  EXPECT_TRUE(std::isfinite(many->expected_time));
}

// ---- several levels ---------------------------------------------------------------------------

// An independent first-order overhead: walk one cycle of checkpoints, give each the highest level
// whose ratio divides its index, and add half a period of each class's lost work per failure.
double overhead_by_walking(const std::vector<LevelCost>& lv, const std::vector<uint64_t>& every, double tau) {
  std::vector<uint64_t> q(lv.size(), 1);
  for (size_t i = 1; i < lv.size(); ++i) q[i] = q[i - 1] * every[i];
  double cycle_cost = 0;
  for (uint64_t j = 1; j <= q.back(); ++j) {
    size_t level = 0;
    for (size_t i = 0; i < lv.size(); ++i)
      if (j % q[i] == 0) level = i;
    cycle_cost += lv[level].checkpoint_cost;
  }
  double h = cycle_cost / (static_cast<double>(q.back()) * tau);
  for (size_t i = 0; i < lv.size(); ++i) h += static_cast<double>(q[i]) * tau / (2 * lv[i].mtbf);
  return h;
}

// The walk's overhead is c/τ + b·τ; two evaluations give c and b, and the best τ gives 2·sqrt(c·b).
double best_overhead_by_walking(const std::vector<LevelCost>& lv, const std::vector<uint64_t>& every) {
  const double t = 1000;
  double h1 = overhead_by_walking(lv, every, 1), ht = overhead_by_walking(lv, every, t);
  double b = (t * ht - h1) / (t * t - 1), c = h1 - b;
  return 2 * std::sqrt(c * b);
}

TEST(IntervalMultilevel, SingleLevelIsDaly) {
  for (double mtbf : {24 * kHour, 6 * kHour, 15 * kMinute}) {
    auto plan = multilevel_plan({{5 * kMinute, mtbf}});
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    ASSERT_EQ(plan->levels.size(), 1u);
    EXPECT_DOUBLE_EQ(plan->base_interval, value(daly_interval(5 * kMinute, mtbf)));
    EXPECT_DOUBLE_EQ(plan->levels[0].period, plan->base_interval);
    EXPECT_EQ(plan->levels[0].every, 1u);
    EXPECT_DOUBLE_EQ(plan->first_order_interval, value(young_interval(5 * kMinute, mtbf)));
    EXPECT_DOUBLE_EQ(plan->efficiency, value(expected_efficiency(plan->base_interval, {5 * kMinute, mtbf, 0})));
    EXPECT_FALSE(plan->at_search_bound);
  }
}

TEST(IntervalMultilevel, CheaperLevelsMoreOften) {
  std::vector<LevelCost> lv = {{2, 6 * kHour}, {20, 2 * kDay}, {5 * kMinute, 7 * kDay}};
  auto plan = multilevel_plan(lv);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->levels.size(), 3u);
  EXPECT_GT(plan->levels[1].every, 1u);
  EXPECT_GT(plan->levels[2].every, 1u);
  EXPECT_LT(plan->levels[0].period, plan->levels[1].period);
  EXPECT_LT(plan->levels[1].period, plan->levels[2].period);
  EXPECT_FALSE(plan->at_search_bound);
  // The chosen ratios are at least as good as any small ones, by the independent overhead.
  std::vector<uint64_t> chosen = {1, plan->levels[1].every, plan->levels[2].every};
  double h = overhead_by_walking(lv, chosen, plan->first_order_interval);
  EXPECT_NEAR(h, plan->first_order_overhead, 1e-9 * h);
  for (uint64_t k2 = 1; k2 <= 40; ++k2)
    for (uint64_t k3 = 1; k3 <= 40; ++k3) {
      std::vector<uint64_t> every = {1, k2, k3};
      EXPECT_GE(best_overhead_by_walking(lv, every), plan->first_order_overhead * (1 - 1e-9))
          << "k2 = " << k2 << ", k3 = " << k3;
    }
  // Multilevel beats taking only the top level, which then has to recover from every failure.
  double all_failures = 1 / (1 / lv[0].mtbf + 1 / lv[1].mtbf + 1 / lv[2].mtbf);
  auto top_only = multilevel_plan({{lv[2].checkpoint_cost, all_failures}});
  ASSERT_TRUE(top_only.is_ok());
  EXPECT_GT(plan->efficiency, top_only->efficiency);
}

TEST(IntervalMultilevel, ACheaperUpperLevelIsAlwaysTaken) {
  auto plan = multilevel_plan({{10, kHour}, {5, kDay}});
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->levels[1].every, 1u);
  EXPECT_DOUBLE_EQ(plan->levels[1].period, plan->levels[0].period);
}

TEST(IntervalMultilevel, RareTopFailuresGiveLargeRatios) {
  auto plan = multilevel_plan({{1, kHour}, {300, 52 * 7 * kDay}});
  ASSERT_TRUE(plan.is_ok());
  // Continuous optimum of the ratio: sqrt(C2·M2 / (C1·M1)) minus corrections, in the hundreds.
  EXPECT_GT(plan->levels[1].every, 100u);
  EXPECT_FALSE(plan->at_search_bound);
}

TEST(IntervalMultilevel, BadInputs) {
  EXPECT_EQ(multilevel_plan({}).status().code(), Code::ERR_INVALID_ARG);
  EXPECT_EQ(multilevel_plan(std::vector<LevelCost>(9, {1, kHour})).status().code(), Code::ERR_INVALID_ARG);
  auto zero = multilevel_plan({{1, kHour}, {0, kDay}});
  EXPECT_EQ(zero.status().code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(zero.status().message().find("level 2 checkpoint cost"), std::string::npos) << zero.status().message();
  EXPECT_FALSE(multilevel_plan({{1, kInf}}).is_ok());
  EXPECT_FALSE(multilevel_plan({{kNaN, kHour}}).is_ok());
}

// ---- bad inputs ----------------------------------------------------------------------------------

TEST(IntervalInputs, BadValuesAreErrorsNamingTheQuantity) {
  for (double bad : {0.0, -1.0, kInf, kNaN}) {
    auto r = young_interval(bad, kHour);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Code::ERR_INVALID_ARG);
    EXPECT_NE(r.status().message().find("checkpoint cost"), std::string::npos) << r.status().message();
    auto m = daly_interval(60, bad);
    ASSERT_FALSE(m.is_ok());
    EXPECT_NE(m.status().message().find("MTBF"), std::string::npos) << m.status().message();
    EXPECT_FALSE(daly_model_optimum(bad, kHour).is_ok());
    EXPECT_FALSE(expected_wall_time(bad, 60, {60, kHour, 0}).is_ok());
    EXPECT_FALSE(expected_efficiency(bad, {60, kHour, 0}).is_ok());
    EXPECT_FALSE(optimal_checkpoint_count(bad, {60, kHour, 0}).is_ok());
    EXPECT_FALSE(expected_time_with_checkpoints(bad, 3, {60, kHour, 0}).is_ok());
  }
  EXPECT_TRUE(daly_first_order_interval(60, kHour, 0).is_ok());
  auto r = daly_first_order_interval(60, kHour, -1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("restart cost"), std::string::npos) << r.status().message();
  EXPECT_FALSE(expected_efficiency(60, {60, kHour, kNaN}).is_ok());
}

// ---- text ------------------------------------------------------------------------------------------

TEST(IntervalText, ParseDuration) {
  std::map<std::string, double> good = {{"24h", 86400}, {"15m", 900}, {"15min", 900}, {"90s", 90},
                                        {"90", 90},     {"250ms", 0.25}, {"1.5h", 5400}, {"2d", 172800},
                                        {"1w", 604800}, {" 5m ", 300},   {"0", 0},       {"2H", 7200},
                                        {"5h30m", 19800}};  // compound, as halt's (base/units.hpp)
  for (const auto& [text, seconds] : good) {
    auto d = parse_duration(text);
    ASSERT_TRUE(d.is_ok()) << text << ": " << d.status().message();
    EXPECT_DOUBLE_EQ(d.value(), seconds) << text;
  }
  for (const char* text : {"", "h", "5x", "-5s", "inf", "nan", "1e400", "5 hours", "5h30"}) {
    auto d = parse_duration(text);
    EXPECT_FALSE(d.is_ok()) << text;
    EXPECT_EQ(d.status().code(), Code::ERR_INVALID_ARG) << text;
  }
  EXPECT_NE(parse_duration("5x").status().message().find("'5x' is not a duration"), std::string::npos);
}

TEST(IntervalText, ParseLevels) {
  auto lv = parse_levels("2s:6h, 20s:2d,5m:1w");
  ASSERT_TRUE(lv.is_ok()) << lv.status().message();
  ASSERT_EQ(lv->size(), 3u);
  EXPECT_DOUBLE_EQ((*lv)[0].checkpoint_cost, 2);
  EXPECT_DOUBLE_EQ((*lv)[0].mtbf, 6 * kHour);
  EXPECT_DOUBLE_EQ((*lv)[2].checkpoint_cost, 300);
  EXPECT_DOUBLE_EQ((*lv)[2].mtbf, 7 * kDay);
  for (const char* text : {"", "2s", "2s:6h:1", "0:6h", "2s:0", "2s:6h,", "a:b", "1:1,1:1,1:1,1:1,1:1,1:1,1:1,1:1,1:1"})
    EXPECT_FALSE(parse_levels(text).is_ok()) << text;
  auto bad = parse_levels("2s:6h,20s");
  EXPECT_NE(bad.status().message().find("level 2 ('20s'): expected COST:MTBF"), std::string::npos)
      << bad.status().message();
}

TEST(IntervalText, FormatDuration) {
  EXPECT_EQ(format_duration(42.5), "42.5 s");
  EXPECT_EQ(format_duration(7001.3889), "116.7 min");
  EXPECT_EQ(format_duration(7200), "2 h");
  EXPECT_EQ(format_duration(3.5 * kDay), "3.5 d");
  EXPECT_EQ(format_duration(kInf), "inf");
}

// ---- interval = "auto" --------------------------------------------------------------------------

TEST(IntervalAuto, CostAverageIsAMovingMean) {
  CheckpointCostAverage avg;
  EXPECT_EQ(avg.value(), 0.0);
  avg.add(2);
  avg.add(4);
  EXPECT_DOUBLE_EQ(avg.value(), 3);
  avg.add(-1);
  avg.add(kNaN);
  EXPECT_EQ(avg.samples(), 2u) << "bad samples are ignored";
  for (int i = 0; i < CheckpointCostAverage::kWindow; ++i) avg.add(10);
  EXPECT_DOUBLE_EQ(avg.value(), 10) << "only the last kWindow count";
  avg.add(2);
  EXPECT_DOUBLE_EQ(avg.value(), (10.0 * (CheckpointCostAverage::kWindow - 1) + 2) / CheckpointCostAverage::kWindow);
}

TEST(IntervalAuto, DalyOfTheMeasuredCost) {
  EXPECT_DOUBLE_EQ(auto_interval(300, 24 * kHour, 0), value(daly_interval(300, 24 * kHour)));
  EXPECT_NEAR(auto_interval(300, 24 * kHour, 0), 7001.388888888889, 1e-6);
  EXPECT_DOUBLE_EQ(auto_interval(300, 24 * kHour, 120), value(daly_interval(300, 24 * kHour)))
      << "interval_seconds only until a cost is measured";
  // Before a measurement: interval_seconds, else M/10.
  EXPECT_DOUBLE_EQ(auto_interval(0, 24 * kHour, 600), 600);
  EXPECT_DOUBLE_EQ(auto_interval(0, 24 * kHour, 0), 8640);
  // Tiny costs count as kMinMeasuredCost; no MTBF: no interval.
  EXPECT_DOUBLE_EQ(auto_interval(1e-9, kHour, 0), value(daly_interval(kMinMeasuredCost, kHour)));
  EXPECT_EQ(auto_interval(300, 0, 600), 0.0);
  EXPECT_EQ(auto_interval(300, kNaN, 600), 0.0);
  EXPECT_DOUBLE_EQ(auto_interval(10 * kHour, kHour, 0), kHour) << "δ >= 2M: the MTBF itself";
}

// What Runtime::policy_observe does: the ranks' averages and times since the last checkpoint are
// max-reduced, then every rank decides from the same numbers.
TEST(IntervalAuto, RanksDecideAlikeFromTheAgreedCost) {
  const double mtbf = 6 * kHour;
  std::vector<CheckpointCostAverage> ranks(3);
  double samples[3][2] = {{0.5, 0.7}, {1.9, 2.1}, {1.0, 1.0}};
  for (int r = 0; r < 3; ++r)
    for (double s : samples[r]) ranks[r].add(s);
  double agreed = 0;
  for (const auto& r : ranks) agreed = std::max(agreed, r.value());
  EXPECT_DOUBLE_EQ(agreed, 2.0);
  double interval = auto_interval(agreed, mtbf, 0);
  EXPECT_DOUBLE_EQ(interval, value(daly_interval(2.0, mtbf)));
  EXPECT_FALSE(interval_due(interval, interval - 0.01));
  EXPECT_TRUE(interval_due(interval, interval));
}

// ---- the knobs ------------------------------------------------------------------------------------

Result<LoadedConfig> load_with_env(const std::map<std::string, std::string>& vars) {
  std::vector<std::string> names;
  for (const auto& [name, v] : vars) names.push_back(name);
  EnvLookup env = [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  return load_config("", env, names);
}

TEST(IntervalConfig, FixedByDefault) {
  auto r = load_with_env({});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->config.interval, IntervalMode::fixed);
  EXPECT_EQ(r->config.mtbf_seconds, 0.0);
}

TEST(IntervalConfig, AutoNeedsAnMtbf) {
  auto missing = load_with_env({{"CAIRN_INTERVAL", "auto"}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), Code::ERR_CONFIG);
  EXPECT_NE(missing.status().message().find("mtbf_seconds"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("environment variable CAIRN_INTERVAL"), std::string::npos)
      << missing.status().message();
  auto ok = load_with_env({{"CAIRN_INTERVAL", "AUTO"}, {"CAIRN_MTBF_SECONDS", "86400"}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->config.interval, IntervalMode::automatic);
  EXPECT_EQ(ok->config.mtbf_seconds, 86400.0);
  auto bad = load_with_env({{"CAIRN_INTERVAL", "sometimes"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("fixed|auto"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(load_with_env({{"CAIRN_MTBF_SECONDS", "-5"}}).is_ok());
}

TEST(IntervalAuto, FailuresOnlyLevel3RecoversShortenTheInterval) {
  // Without l3_mtbf, and with level 2 at every version: Daly's one level, as before.
  EXPECT_DOUBLE_EQ(equivalent_mtbf({.mtbf = 8}), 8);
  EXPECT_DOUBLE_EQ(equivalent_mtbf({.mtbf = 8, .l3_mtbf = 0, .l2_period = 1, .l3_period = 10}), 8);
  // The campaign's mix (node:2, rank:1, job:1 at M = 8 s): a quarter of the failures go back to the last
  // of every 10th version, the rest to the last: 1/M_eq = (1/8 - 1/32)·1 + 10/32 = 0.40625.
  const FailureRates campaign{.mtbf = 8, .l3_mtbf = 32, .l2_period = 1, .l3_period = 10};
  EXPECT_DOUBLE_EQ(equivalent_mtbf(campaign), 1 / 0.40625);
  // Which is the first-order optimum of "Several levels" for those ratios: τ = sqrt(A/B), B = 1/(2·M_eq).
  const double cost = 0.0125;
  EXPECT_NEAR(std::sqrt(2 * cost * equivalent_mtbf(campaign)), 0.248, 1e-3);
  EXPECT_LT(auto_interval(cost, equivalent_mtbf(campaign), 0), 0.6 * auto_interval(cost, 8, 0));
  // Every failure one only level 3 recovers (L3 only: flush_every = 1): Daly's again.
  EXPECT_DOUBLE_EQ(equivalent_mtbf({.mtbf = 8, .l3_mtbf = 8, .l2_period = 1, .l3_period = 1}), 8);
  // Level 2 on every 4th version: the other failures go back 4 checkpoints.
  EXPECT_DOUBLE_EQ(equivalent_mtbf({.mtbf = 8, .l3_mtbf = 0, .l2_period = 4, .l3_period = 10}), 2);
  // l3_mtbf below mtbf (refused by the configuration) is not counted; no MTBF, no interval.
  EXPECT_DOUBLE_EQ(equivalent_mtbf({.mtbf = 8, .l3_mtbf = 4, .l2_period = 1, .l3_period = 10}), 8);
  EXPECT_EQ(equivalent_mtbf({.mtbf = 0, .l3_mtbf = 32}), 0.0);
}

TEST(IntervalAuto, Level3FailuresAreAPartOfAll) {
  auto ok = load_with_env({{"CAIRN_INTERVAL", "auto"}, {"CAIRN_MTBF_SECONDS", "8"}, {"CAIRN_L3_MTBF_SECONDS", "32"}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->config.l3_mtbf_seconds, 32.0);
  auto bad = load_with_env({{"CAIRN_INTERVAL", "auto"}, {"CAIRN_MTBF_SECONDS", "8"}, {"CAIRN_L3_MTBF_SECONDS", "4"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("l3_mtbf_seconds = 4 (environment variable CAIRN_L3_MTBF_SECONDS) is less "
                                        "than mtbf_seconds = 8"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace cairn::policy
