#include "service/agent/rate_limit.hpp"

#include <algorithm>

namespace cairn::service {

RateLimit::RateLimit(double bytes_per_s, uint64_t burst, uint64_t slack)
    : rate_(bytes_per_s), burst_(static_cast<double>(burst)), slack_(static_cast<double>(slack)) {}

double RateLimit::earned(double now) const {
  if (start_ < 0) return 0;
  return std::min((now - start_) * rate_, taken_ + burst_);
}

bool RateLimit::take(double now, uint64_t bytes) {
  if (start_ < 0) start_ = now;
  double e = (now - start_) * rate_;
  if (e - taken_ > burst_) {  // idle long enough to have earned more than a burst: start over with one
    taken_ = 0;
    start_ = now - burst_ / rate_;
    e = burst_;
  }
  if (taken_ + static_cast<double>(bytes) > e + slack_ + 0.5) return false;  // half a byte: the clock's rounding
  taken_ += static_cast<double>(bytes);
  return true;
}

double RateLimit::wait_s(double now, uint64_t bytes) const {
  double short_by = taken_ + static_cast<double>(bytes) - slack_ - earned(now);
  return short_by > 0 ? short_by / rate_ : 0;
}

}  // namespace cairn::service
