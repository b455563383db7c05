#include "wire/codec.hpp"

#include <cmath>
#include <cstring>

namespace cairn::wire {

void Writer::f64(double v) {
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof bits);
  u64(bits);
}

void Writer::bytes(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  out_ += s;
}

void Writer::strings(const std::vector<std::string>& v) {
  u32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) bytes(s);
}

void Writer::u64s(const std::vector<uint64_t>& v) {
  u32(static_cast<uint32_t>(v.size()));
  for (uint64_t x : v) u64(x);
}

uint64_t Reader::get(int n) {
  if (!take(static_cast<size_t>(n))) return 0;
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[i - n]) << (8 * i);
  return v;
}

double Reader::f64() {
  uint64_t bits = u64();
  double v = 0;
  memcpy(&v, &bits, sizeof v);
  if (!std::isfinite(v)) {  // no field of the protocol carries a NaN or an infinity
    failed_ = true;
    return 0;
  }
  return v;
}

std::string Reader::bytes(size_t max) {
  uint32_t n = u32();
  if (failed_ || n > max || n > left_) {
    failed_ = true;
    return {};
  }
  std::string s(reinterpret_cast<const char*>(p_), n);
  take(n);
  return s;
}

std::vector<std::string> Reader::strings(size_t max_count, size_t max_len) {
  uint32_t n = u32();
  std::vector<std::string> v;
  if (failed_ || n > max_count) {
    failed_ = true;
    return v;
  }
  for (uint32_t i = 0; i < n && !failed_; ++i) v.push_back(bytes(max_len));
  return v;
}

std::vector<uint64_t> Reader::u64s(size_t max_count) {
  uint32_t n = u32();
  std::vector<uint64_t> v;
  if (failed_ || n > max_count || static_cast<uint64_t>(n) * 8 > left_) {
    failed_ = true;
    return v;
  }
  v.reserve(n);
  for (uint32_t i = 0; i < n; ++i) v.push_back(u64());
  return v;
}

}  // namespace cairn::wire
