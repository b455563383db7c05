// Wall-clock time as the library reports it (seconds since the epoch, as a double).
#pragma once

#include <chrono>

namespace cairn {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds on a clock that never steps, for timing an interval (not a time of day).
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace cairn
