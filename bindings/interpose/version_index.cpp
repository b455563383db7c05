#include "version_index.hpp"

#include <cstdio>

namespace cairn::interpose {
namespace {

constexpr std::string_view kHeader = "cairn-interpose 1\n";
constexpr std::string_view kEnd = "end\n";

// A decimal (or octal) number without sign or leading zeros ("0" itself allowed), then `stop`.
bool number(std::string_view b, size_t* i, int base, char stop, uint64_t max, uint64_t* out) {
  size_t start = *i;
  uint64_t v = 0;
  while (*i < b.size() && b[*i] >= '0' && b[*i] < '0' + base) {
    uint64_t d = static_cast<uint64_t>(b[*i] - '0');
    if (v > (max - d) / static_cast<uint64_t>(base)) return false;
    v = v * static_cast<uint64_t>(base) + d;
    ++*i;
  }
  size_t n = *i - start;
  if (n == 0 || (n > 1 && b[start] == '0') || *i >= b.size() || b[*i] != stop) return false;
  ++*i;
  *out = v;
  return true;
}

}  // namespace

std::string encode_index(const std::vector<IndexEntry>& entries) {
  std::string out(kHeader);
  char mode[16];
  for (const auto& e : entries) {
    snprintf(mode, sizeof mode, "%o", e.mode & 07777);
    out += e.name + " " + std::to_string(e.step) + " " + mode + " " + std::to_string(e.size) + " " +
           std::to_string(e.path.size()) + ":" + e.path + "\n";
  }
  out += kEnd;
  return out;
}

std::optional<std::vector<IndexEntry>> decode_index(std::string_view b) {
  if (b.substr(0, kHeader.size()) != kHeader) return std::nullopt;
  std::vector<IndexEntry> out;
  size_t i = kHeader.size();
  while (b.substr(i) != kEnd) {
    IndexEntry e;
    if (i < b.size() && b[i] == '-') {
      e.name = b[i++];
    } else {
      while (i < b.size() && ((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9')) && e.name.size() <= 32)
        e.name += b[i++];
    }
    if (e.name.empty() || e.name.size() > 32 || i >= b.size() || b[i] != ' ') return std::nullopt;
    ++i;
    uint64_t mode = 0, len = 0;
    if (!number(b, &i, 10, ' ', UINT64_MAX, &e.step) || !number(b, &i, 8, ' ', 07777, &mode) ||
        !number(b, &i, 10, ' ', UINT64_MAX, &e.size) || !number(b, &i, 10, ':', 1 << 16, &len))
      return std::nullopt;
    e.mode = static_cast<uint32_t>(mode);
    if (len == 0 || b.size() - i < len + 1 || b[i + len] != '\n') return std::nullopt;
    e.path = std::string(b.substr(i, len));
    if (e.path[0] != '/' || e.path.find('\0') != std::string::npos || e.path.find('\n') != std::string::npos)
      return std::nullopt;
    i += len + 1;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace cairn::interpose
