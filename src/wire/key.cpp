#include <sys/random.h>

#include <algorithm>
#include <cerrno>

#include "wire/message.hpp"

namespace cairn::wire {

bool same_key(const AppKey& a, const AppKey& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

bool same_secret(const std::string& a, const std::string& b) {
  uint8_t diff = a.size() == b.size() ? 0 : 1;
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    diff |= static_cast<uint8_t>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

Result<AppKey> random_key() {
  AppKey k{};
  size_t got = 0;
  while (got < k.size()) {
    ssize_t n = getrandom(k.data() + got, k.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return posix_error("getrandom", "(application key)", errno);
    got += static_cast<size_t>(n);
  }
  return k;
}

std::string key_hex(const AppKey& k) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : k) out += digits[b >> 4], out += digits[b & 15];
  return out;
}

Result<AppKey> parse_key_hex(const std::string& text) {
  AppKey k{};
  auto nibble = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (text.size() != 2 * k.size()) return make_error(Code::ERR_FORMAT, "a key is 32 hex digits, got %zu characters", text.size());
  for (size_t i = 0; i < k.size(); ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return make_error(Code::ERR_FORMAT, "a key is 32 lower-case hex digits");
    k[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return k;
}

const char* mode_name(TransferMode m) { return m == TransferMode::push ? "push" : "pull"; }

}  // namespace cairn::wire
