#include "base/layout.hpp"

#include <cstdio>
#include <cstdlib>

#include "base/fsutil.hpp"
#include "base/xxh.hpp"

namespace cairn {

std::string Layout::node_cache(const std::string& node) const { return cache_job + "/" + node; }

std::string Layout::rank_cache(const std::string& node, int rank) const {
  return node_cache(node) + "/r" + std::to_string(rank);
}

std::string Layout::l3_version_name(uint64_t version) {
  char buf[32];
  snprintf(buf, sizeof buf, "v%08llu", static_cast<unsigned long long>(version));
  return buf;
}

bool Layout::parse_l3_version_name(const std::string& name, uint64_t* version) {
  if (name.size() < 9 || name[0] != 'v') return false;
  uint64_t v = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  if (l3_version_name(v) != name) return false;
  *version = v;
  return true;
}

std::string Layout::l3_version_dir(uint64_t version) const {
  return prefix + "/" + l3_version_name(version);
}

bool parse_decimal(std::string_view digits, uint64_t max, uint64_t* out) {
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return false;
  uint64_t x = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (x > (max - d) / 10) return false;
    x = x * 10 + d;
  }
  *out = x;
  return true;
}

std::string job_name(const Config& config) {
  if (!config.job.empty()) return config.job;
  std::string abs = fs::absolute(config.prefix);
  std::string base = abs.substr(abs.find_last_of('/') + 1);
  if (base.empty()) base = "root";
  char hex[16];
  snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(XXH3_64bits(abs.data(), abs.size())));
  return base + "-" + hex;
}

Layout make_layout(const Config& config) {
  Layout l;
  l.prefix = fs::absolute(config.prefix);
  l.control = l.prefix + "/.cairn";
  l.cache_job = fs::absolute(config.cache_dir) + "/cairn-" + job_name(config);
  return l;
}

}  // namespace cairn
