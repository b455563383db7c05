// An agent's bandwidth limit (cairnd manager --agent-bandwidth): a token bucket, a pure object of the
// times it is given, so that tests control the clock.
//
// Bytes are earned at `rate` per second from the first request on. A piece may go when the bytes taken
// with it stay within those earned plus `slack` (one piece: a transfer never stalls on a piece larger
// than what a moment earns). Idle time earns at most `burst` bytes (the agent's buffer pool): after a
// pause the agent may move one pool's worth at once, then the rate holds again.
#pragma once

#include <cstdint>

namespace cairn::service {

class RateLimit {
 public:
  RateLimit(double bytes_per_s, uint64_t burst, uint64_t slack);

  // Whether `bytes` may go at time `now` (seconds, monotonic); if so they are counted.
  bool take(double now, uint64_t bytes);
  // Seconds from `now` until take(now + wait_s, bytes) succeeds: 0 when it would now. The agent sleeps
  // that long at most, so that a throttled transfer resumes on time, not at its next unrelated event.
  double wait_s(double now, uint64_t bytes) const;

 private:
  double earned(double now) const;  // bytes earned since start_, the burst cap applied

  double rate_;
  double burst_, slack_;
  double start_ = -1;  // no request yet
  double taken_ = 0;
};

}  // namespace cairn::service
