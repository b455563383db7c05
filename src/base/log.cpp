#include "base/log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace cairn::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::warn)};
std::atomic<int> g_rank{-1};
const char* const kNames[] = {"error", "warn", "info", "debug"};
}  // namespace

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
  if (rank >= 0)
    fprintf(stderr, "cairn[%d] %s: %s\n", rank, kNames[static_cast<int>(l)], msg);
  else
    fprintf(stderr, "cairn %s: %s\n", kNames[static_cast<int>(l)], msg);
}

}  // namespace cairn::log
