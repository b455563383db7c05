// policy::Observer: the readings a rank takes and the decisions from every rank's combined reading.
#include "policy/observer.hpp"

#include <gtest/gtest.h>

#include <string>

namespace cairn::policy {
namespace {
// A combined reading: signal, halt action, end time reached, seconds since the last checkpoint,
// checkpoint cost, migrate.
Observer::Reading reading(double since, double signal = 0, double halt = 0, double migrate = 0, double cost = 0) {
  return {signal, halt, 0.0, since, cost, migrate};
}
}  // namespace

TEST(Observer, LocalReadingCountsFromTheLastCheckpoint) {
  Config cfg;
  Layout layout;
  Observer o;
  o.compute_from(100);
  Observer::Reading r = o.local(cfg, layout, /*rank0=*/false, 0, false, 105);
  EXPECT_EQ(r[3], 5);
  EXPECT_EQ(r[1], 0) << "only rank 0 reads the halt file";
  EXPECT_EQ(r[5], 0) << "only rank 0 looks for the migrate file";
  o.checkpoint_taken(0.5, 110);
  r = o.local(cfg, layout, false, 1, true, 112);
  EXPECT_EQ(r[3], 2);
  EXPECT_DOUBLE_EQ(r[4], 0.5);
}

TEST(Observer, FixedIntervalIsDueAfterItsSeconds) {
  Config cfg;
  cfg.interval_seconds = 10;
  Observer o;
  std::string request;
  Decision d = o.decide(reading(9.9), cfg, false, &request);
  EXPECT_FALSE(d.need_checkpoint);
  d = o.decide(reading(10), cfg, false, &request);
  EXPECT_TRUE(d.need_checkpoint);
  EXPECT_FALSE(d.should_exit);
  EXPECT_TRUE(request.empty());
  EXPECT_FALSE(o.exit_requested());
}

TEST(Observer, SignalAsksForACheckpointThenAnExit) {
  Config cfg;
  Observer o;
  std::string request;
  Decision d = o.decide(reading(1, /*signal=*/1), cfg, false, &request);
  EXPECT_TRUE(d.need_checkpoint);
  EXPECT_FALSE(d.should_exit);
  EXPECT_EQ(request, "a termination signal");
  EXPECT_TRUE(o.exit_requested());
  EXPECT_FALSE(o.exit_for_migration());
  // The request stays, reported once, even when no rank sees the signal any more.
  request.clear();
  d = o.decide(reading(2), cfg, false, &request);
  EXPECT_TRUE(d.need_checkpoint);
  EXPECT_TRUE(request.empty());
  o.checkpoint_taken(0.1, 10);
  d = o.decide(reading(0), cfg, false, &request);
  EXPECT_FALSE(d.need_checkpoint);
  EXPECT_TRUE(d.should_exit);
}

TEST(Observer, MigrationAloneLeavesTheFlushToTheLauncher) {
  Config cfg;
  Observer o;
  std::string request;
  Decision d = o.decide(reading(1, 0, 0, /*migrate=*/1), cfg, false, &request);
  EXPECT_TRUE(d.need_checkpoint);
  EXPECT_EQ(request, "migrate");
  EXPECT_TRUE(o.exit_for_migration());
}

TEST(Observer, HaltExitNowExitsWithoutACheckpoint) {
  Config cfg;
  Observer o;
  std::string request;
  Decision d = o.decide(reading(1, 0, static_cast<int>(HaltAction::exit_now)), cfg, false, &request);
  EXPECT_FALSE(d.need_checkpoint);
  EXPECT_TRUE(d.should_exit);
}

TEST(Observer, AutoIntervalFollowsTheCombinedCost) {
  Config cfg;
  cfg.interval = IntervalMode::automatic;
  cfg.mtbf_seconds = 3600;
  Observer o;
  std::string request;
  const double interval = auto_interval(2.0, cfg.mtbf_seconds, cfg.interval_seconds);
  ASSERT_GT(interval, 0);
  EXPECT_FALSE(o.decide(reading(interval * 0.99, 0, 0, 0, 2.0), cfg, false, &request).need_checkpoint);
  EXPECT_TRUE(o.decide(reading(interval, 0, 0, 0, 2.0), cfg, false, &request).need_checkpoint);
}

TEST(Observer, FailureRatesFromTheKnobs) {
  Config cfg;
  cfg.mtbf_seconds = 8;
  cfg.l3_mtbf_seconds = 32;
  cfg.flush_every = 10;
  cfg.l2_every = 3;
  FailureRates rates = failure_rates(cfg);
  EXPECT_EQ(rates.mtbf, 8.0);
  EXPECT_EQ(rates.l3_mtbf, 32.0);
  EXPECT_EQ(rates.l2_period, 3u);
  EXPECT_EQ(rates.l3_period, 10u);
  // Without level 2 the other failures are those the cache itself recovers (a crash): the last version.
  cfg.redundancy = Redundancy::single;
  cfg.flush_every = 0;
  rates = failure_rates(cfg);
  EXPECT_EQ(rates.l2_period, 1u);
  EXPECT_EQ(rates.l3_period, 1u) << "flush_every = 0 (only at finalize): not a period the model can use";
}

TEST(Observer, AutoIntervalPlansForFailuresOnlyLevel3Recovers) {
  Config cfg;
  cfg.interval = IntervalMode::automatic;
  cfg.mtbf_seconds = 3600;
  cfg.l3_mtbf_seconds = 4 * 3600;
  cfg.flush_every = 10;
  Observer o;
  std::string request;
  const double one_level = auto_interval(2.0, cfg.mtbf_seconds, 0);
  const double interval = auto_interval(2.0, equivalent_mtbf(failure_rates(cfg)), 0);
  ASSERT_LT(interval, 0.6 * one_level);
  EXPECT_FALSE(o.decide(reading(interval * 0.99, 0, 0, 0, 2.0), cfg, false, &request).need_checkpoint);
  EXPECT_TRUE(o.decide(reading(interval, 0, 0, 0, 2.0), cfg, false, &request).need_checkpoint);
}

}  // namespace cairn::policy
