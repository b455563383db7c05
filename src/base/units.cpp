#include "base/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cairn::units {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A decimal number "123" or "1.25" at the front of `s`: its integer digits and fraction digits (as text,
// so that no precision is lost); false when `s` does not start with a digit.
struct Decimal {
  std::string_view whole, fraction, exponent;  // exponent: "e3", "E-2" (durations only)
};
bool take_decimal(std::string_view* s, Decimal* d, bool exponent = false) {
  size_t i = 0;
  while (i < s->size() && std::isdigit(static_cast<unsigned char>((*s)[i]))) ++i;
  if (i == 0) return false;
  d->whole = s->substr(0, i);
  d->fraction = {};
  if (i < s->size() && (*s)[i] == '.') {
    size_t j = i + 1;
    while (j < s->size() && std::isdigit(static_cast<unsigned char>((*s)[j]))) ++j;
    if (j == i + 1) return false;  // "1." is not a number
    d->fraction = s->substr(i + 1, j - i - 1);
    i = j;
  }
  d->exponent = {};
  if (exponent && i < s->size() && ((*s)[i] == 'e' || (*s)[i] == 'E')) {
    size_t j = i + 1;
    if (j < s->size() && ((*s)[j] == '+' || (*s)[j] == '-')) ++j;
    size_t k = j;
    while (k < s->size() && k - j < 3 && std::isdigit(static_cast<unsigned char>((*s)[k]))) ++k;
    if (k == j) return false;  // "1e" is not a number
    d->exponent = s->substr(i, k - i);
    i = k;
  }
  s->remove_prefix(i);
  return true;
}

// Letters at the front of `s`, lower-cased.
std::string take_unit(std::string_view* s) {
  while (!s->empty() && is_space(s->front())) s->remove_prefix(1);
  size_t i = 0;
  while (i < s->size() && std::isalpha(static_cast<unsigned char>((*s)[i]))) ++i;
  std::string u = lower(s->substr(0, i));
  s->remove_prefix(i);
  while (!s->empty() && is_space(s->front())) s->remove_prefix(1);
  return u;
}

double to_double(const Decimal& d) {
  std::string t(d.whole);
  if (!d.fraction.empty()) t += "." + std::string(d.fraction);
  t += std::string(d.exponent);
  return std::strtod(t.c_str(), nullptr);
}

}  // namespace

Result<uint64_t> parse_size(std::string_view raw, uint64_t max) {
  auto bad = [&] {
    return make_error(Code::ERR_INVALID_ARG, "'%.*s' is not a size (%s; e.g. 4096, 64K, 1M, 2G)",
                      static_cast<int>(raw.size()), raw.data(), kSizeSyntax);
  };
  std::string_view s = trim(raw);
  Decimal d;
  if (!take_decimal(&s, &d)) return bad();
  std::string unit = take_unit(&s);
  if (!s.empty()) return bad();
  int shift = unit.empty() || unit == "b"                        ? 0
              : unit == "k" || unit == "kb" || unit == "kib" ? 10
              : unit == "m" || unit == "mb" || unit == "mib" ? 20
              : unit == "g" || unit == "gb" || unit == "gib" ? 30
              : unit == "t" || unit == "tb" || unit == "tib" ? 40
                                                             : -1;
  if (shift < 0) return bad();
  auto too_big = [&] {
    return make_error(Code::ERR_INVALID_ARG, "'%.*s' is too large a size (at most %s)", static_cast<int>(raw.size()),
                      raw.data(), format_size(max).c_str());
  };
  // whole << shift, plus fraction * 2^shift / 10^digits, exactly, in 128 bits.
  unsigned __int128 whole = 0;
  for (char c : d.whole) {
    whole = whole * 10 + static_cast<unsigned>(c - '0');
    if (whole > (static_cast<unsigned __int128>(1) << 80)) return too_big();
  }
  unsigned __int128 bytes = whole << shift;
  std::string_view frac = d.fraction;
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  if (!frac.empty()) {
    if (frac.size() > 18) return bad();
    unsigned __int128 num = 0, den = 1;
    for (char c : frac) num = num * 10 + static_cast<unsigned>(c - '0'), den *= 10;
    num <<= shift;
    if (num % den != 0)
      return make_error(Code::ERR_INVALID_ARG, "'%.*s' is not a whole number of bytes", static_cast<int>(raw.size()),
                        raw.data());
    bytes += num / den;
  }
  if (bytes > max) return too_big();
  return static_cast<uint64_t>(bytes);
}

Result<double> parse_duration(std::string_view raw) {
  auto bad = [&] {
    return make_error(Code::ERR_INVALID_ARG, "'%.*s' is not a duration (%s)", static_cast<int>(raw.size()), raw.data(),
                      kDurationSyntax);
  };
  std::string_view s = trim(raw);
  if (s.empty()) return bad();
  double total = 0;
  int parts = 0;
  while (!s.empty()) {
    Decimal d;
    if (!take_decimal(&s, &d, /*exponent=*/true)) return bad();
    std::string unit = take_unit(&s);
    double scale = unit == "ms"                                          ? 1e-3
                   : unit.empty() || unit == "s" || unit == "sec"        ? 1
                   : unit == "m" || unit == "min"                        ? 60
                   : unit == "h"                                         ? 3600
                   : unit == "d"                                         ? 86400
                   : unit == "w"                                         ? 604800
                                                                         : -1;
    if (scale < 0) return bad();
    if (unit.empty() && (parts > 0 || !s.empty())) return bad();  // "1h30" is ambiguous
    total += to_double(d) * scale;
    ++parts;
  }
  if (!std::isfinite(total) || total > 1e15)
    return make_error(Code::ERR_INVALID_ARG, "'%.*s' is too long a duration", static_cast<int>(raw.size()), raw.data());
  return total;
}

Result<int64_t> parse_whole_seconds(std::string_view text) {
  auto d = parse_duration(text);
  if (!d) return d.status();
  if (*d != std::floor(*d))
    return make_error(Code::ERR_INVALID_ARG, "'%.*s' is not a whole number of seconds", static_cast<int>(text.size()),
                      text.data());
  return static_cast<int64_t>(*d);
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"T", "G", "M", "K"};
  for (int i = 0; i < 4; ++i) {
    const int shift = 40 - 10 * i;
    if (bytes != 0 && bytes % (uint64_t{1} << shift) == 0) return std::to_string(bytes >> shift) + units[i];
  }
  return std::to_string(bytes);
}

std::string format_duration(double seconds) {
  char buf[64];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds != std::floor(seconds)) {
    double ms = seconds * 1000;
    if (ms == std::floor(ms) && ms < 1e12) {
      snprintf(buf, sizeof buf, "%.0fms", ms);
      return buf;
    }
    snprintf(buf, sizeof buf, "%.17gs", seconds);
    return buf;
  }
  if (seconds == 0) return "0s";
  auto s = static_cast<uint64_t>(seconds);
  std::string out;
  const std::pair<uint64_t, const char*> parts[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
  for (const auto& [len, name] : parts)
    if (s >= len) {
      out += std::to_string(s / len) + name;
      s %= len;
    }
  return out;
}

}  // namespace cairn::units
