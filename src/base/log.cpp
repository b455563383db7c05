#include "base/log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace cairn::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::warn)};
std::atomic<int> g_rank{-1};
const char* const kNames[] = {"error", "warn", "info", "debug"};
std::string g_tag = "cairn";
bool g_timestamps = false;

// "2026-11-24 23:55:01.123 " (local time), or "" when timestamps are off.
std::string stamp() {
  if (!g_timestamps) return "";
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  localtime_r(&ts.tv_sec, &t);
  char buf[48];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &t);
  snprintf(buf + n, sizeof buf - n, ".%03ld ", ts.tv_nsec / 1000000);
  return buf;
}
}  // namespace

void set_tag(const std::string& tag) { g_tag = tag; }
void set_timestamps(bool on) { g_timestamps = on; }

void set_level(Level l) { g_level = static_cast<int>(l); }
Level level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }
void set_rank(int rank) { g_rank = rank; }

bool parse_level(const std::string& text, Level* out) {
  for (int i = 0; i < 4; ++i)
    if (text == kNames[i]) {
      *out = static_cast<Level>(i);
      return true;
    }
  return false;
}

void write(Level l, const char* fmt, ...) {
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int rank = g_rank;
  std::string when = stamp();
  if (rank >= 0)
    fprintf(stderr, "%s%s[%d] %s: %s\n", when.c_str(), g_tag.c_str(), rank, kNames[static_cast<int>(l)], msg);
  else
    fprintf(stderr, "%s%s %s: %s\n", when.c_str(), g_tag.c_str(), kNames[static_cast<int>(l)], msg);
}

}  // namespace cairn::log
