#include "policy/exit_policy.hpp"

#include <gtest/gtest.h>
#include <signal.h>

namespace cairn::policy {

TEST(ExitPolicy, EndTimeHonoursHaltSeconds) {
  EXPECT_FALSE(end_time_reached(0, 0, 1e9)) << "0 means no end time";
  EXPECT_FALSE(end_time_reached(1000, 100, 899.9));
  EXPECT_TRUE(end_time_reached(1000, 100, 900));
  EXPECT_TRUE(end_time_reached(1000, 0, 1000));
}

TEST(ExitPolicy, IntervalOffWhenZero) {
  EXPECT_FALSE(interval_due(0, 1e6));
  EXPECT_FALSE(interval_due(10, 9.99));
  EXPECT_TRUE(interval_due(10, 10));
}

TEST(ExitPolicy, ExitRequestCheckpointsFirstThenExits) {
  Observation o;
  o.halt_file = true;
  Decision before = decide(o, /*checkpoint_since_request=*/false);
  EXPECT_TRUE(before.need_checkpoint);
  EXPECT_FALSE(before.should_exit);
  Decision after = decide(o, true);
  EXPECT_FALSE(after.need_checkpoint);
  EXPECT_TRUE(after.should_exit);
}

TEST(ExitPolicy, IntervalAloneNeverExits) {
  Observation o;
  o.interval_due = true;
  Decision d = decide(o, false);
  EXPECT_TRUE(d.need_checkpoint);
  EXPECT_FALSE(d.should_exit);
  EXPECT_EQ(describe(o), "the checkpoint interval");
  EXPECT_EQ(describe(Observation{}), "nothing");
}

TEST(ExitPolicy, CaughtSignalIsRecorded) {
  install_signal_handlers();
  EXPECT_EQ(caught_signal(), 0);
  raise(SIGUSR1);
  EXPECT_EQ(caught_signal(), SIGUSR1);
  restore_signal_handlers();
}

}  // namespace cairn::policy
