#include "format.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "base/layout.hpp"

namespace cairn::tool {

int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double x = static_cast<double>(bytes);
  int u = 0;
  while (x >= 1024 && u < 5) x /= 1024, ++u;
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f %s", x, units[u]);
  return buf;
}

std::string format_duration(double s) {
  char buf[32];
  if (s < 0) s = 0;
  if (s < 1)
    snprintf(buf, sizeof buf, "%.0f ms", s * 1e3);
  else if (s < 120)
    snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 7200)
    snprintf(buf, sizeof buf, "%.0f min", s / 60);
  else if (s < 172800)
    snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  else
    snprintf(buf, sizeof buf, "%.1f d", s / 86400);
  return buf;
}

std::string format_utc(int64_t unix_ns) {
  time_t t = static_cast<time_t>(unix_ns / 1000000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string format_rate(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  double r = static_cast<double>(bytes) / seconds;
  char buf[32];
  if (r >= 1e9)
    snprintf(buf, sizeof buf, "%.2f GB/s", r / 1e9);
  else if (r >= 1e6)
    snprintf(buf, sizeof buf, "%.1f MB/s", r / 1e6);
  else
    snprintf(buf, sizeof buf, "%.1f kB/s", r / 1e3);
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

bool parse_version_arg(const std::string& text, uint64_t* version) {
  if (Layout::parse_l3_version_name(text, version)) return true;
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *version = std::stoull(text);
  return *version > 0;
}

std::string rank_ranges(std::vector<uint32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace cairn::tool
