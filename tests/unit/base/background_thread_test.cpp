// A background thread runs its function under SCHED_BATCH from its first instruction, joins, moves like
// std::thread, and an empty one is not joinable.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <utility>

#include "base/background_thread.hpp"

namespace cairn {
namespace {

TEST(BackgroundThread, RunsItsFunctionAsABatchThreadFromTheStart) {
  const int mine = sched_getscheduler(0);
  std::atomic<int> policy{-1}, runs{0};
  BackgroundThread t([&] {
    policy = sched_getscheduler(0);  // before it could have changed its own policy
    ++runs;
  });
  EXPECT_TRUE(t.joinable());
  t.join();
  EXPECT_FALSE(t.joinable());
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(policy.load(), SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(0), mine) << "the creator's own policy is left alone";
}

TEST(BackgroundThread, MovesAndJoinsOnce) {
  BackgroundThread empty;
  EXPECT_FALSE(empty.joinable());
  empty.join();  // nothing to join: no effect
  std::atomic<int> runs{0};
  BackgroundThread a([&] { ++runs; });
  BackgroundThread b(std::move(a));
  EXPECT_FALSE(a.joinable());
  EXPECT_TRUE(b.joinable());
  BackgroundThread c;
  c = std::move(b);
  EXPECT_FALSE(b.joinable());
  c.join();
  EXPECT_EQ(runs.load(), 1);
}

}  // namespace
}  // namespace cairn
