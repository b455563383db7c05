// An agent's bandwidth limit (service/agent/rate_limit.hpp): a token bucket on a clock the test drives.
#include <gtest/gtest.h>

#include "service/agent/rate_limit.hpp"

namespace cairn::service {
namespace {

constexpr uint64_t kMB = 1000000;

// Moves `total` bytes in `piece`s as fast as the limit lets, sleeping exactly wait_s when refused; the
// seconds it took.
double move(RateLimit& limit, double start, uint64_t total, uint64_t piece) {
  double now = start;
  for (uint64_t moved = 0; moved < total;) {
    if (limit.take(now, piece)) {
      moved += piece;
      continue;
    }
    double w = limit.wait_s(now, piece);
    EXPECT_GT(w, 0) << "refused, yet no wait at " << now;
    now += w;
  }
  return now - start;
}

TEST(RateLimit, TheFirstPieceGoesAtOnce) {
  RateLimit limit(10.0 * kMB, 1 * kMB, 128 * 1024);
  EXPECT_TRUE(limit.take(100.0, 128 * 1024));
  EXPECT_FALSE(limit.take(100.0, 128 * 1024));
}

TEST(RateLimit, HoldsTheRateOverALongTransfer) {
  // 50 MB at 10 MB/s in 128 KiB pieces: 5 s, less the one piece of slack.
  RateLimit limit(10.0 * kMB, 1 * kMB, 128 * 1024);
  double secs = move(limit, 100.0, 50 * kMB, 128 * 1024);
  EXPECT_NEAR(secs, 5.0, 0.03);
}

TEST(RateLimit, WaitIsExactlyWhatTheNextPieceNeeds) {
  RateLimit limit(1.0 * kMB, 1 * kMB, 100000);
  ASSERT_TRUE(limit.take(0.0, 100000));
  ASSERT_FALSE(limit.take(0.0, 200000));
  double w = limit.wait_s(0.0, 200000);
  EXPECT_NEAR(w, 0.2, 1e-9);
  EXPECT_FALSE(limit.take(w - 0.001, 200000));
  EXPECT_TRUE(limit.take(w, 200000));
  EXPECT_EQ(limit.wait_s(w + 10, 100000), 0.0);  // earned again meanwhile
}

TEST(RateLimit, IdleTimeEarnsOneBurstAtMost) {
  // After 60 s idle at 1 MB/s, 2 MB of burst, no slack: 2 MB go at once, the third only a second later.
  RateLimit limit(1.0 * kMB, 2 * kMB, 0);
  ASSERT_TRUE(limit.take(0.0, 0));
  EXPECT_TRUE(limit.take(60.0, 1 * kMB));
  EXPECT_TRUE(limit.take(60.0, 1 * kMB));
  EXPECT_FALSE(limit.take(60.0, 1 * kMB));
  EXPECT_NEAR(limit.wait_s(60.0, 1 * kMB), 1.0, 1e-9);
  EXPECT_TRUE(limit.take(61.0, 1 * kMB));
}

}  // namespace
}  // namespace cairn::service
