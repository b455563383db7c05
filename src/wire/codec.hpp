// Little-endian field codec of the service's wire messages: a Writer that appends fields and a Reader
// that takes them off a payload with every length checked against what is left. A Reader never reads
// out of bounds; the first short or oversized field marks it failed, and every later read is a no-op
// that yields zero, so a decoder reads its fields in order and checks ok() once at the end.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::wire {

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void i32(int32_t v) { put(static_cast<uint32_t>(v), 4); }
  void u64(uint64_t v) { put(v, 8); }
  void f64(double v);
  // A length (u32) and the bytes.
  void bytes(const std::string& s);
  template <size_t N>
  void fixed(const std::array<uint8_t, N>& a) {
    out_.append(reinterpret_cast<const char*>(a.data()), N);
  }
  // A count (u32) and the strings.
  void strings(const std::vector<std::string>& v);
  void u64s(const std::vector<uint64_t>& v);
  std::string take() { return std::move(out_); }
  const std::string& str() const { return out_; }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string out_;
};

class Reader {
 public:
  Reader(const void* data, size_t len) : p_(static_cast<const uint8_t*>(data)), left_(len) {}
  explicit Reader(const std::string& s) : Reader(s.data(), s.size()) {}
  uint8_t u8() { return static_cast<uint8_t>(get(1)); }
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  int32_t i32() { return static_cast<int32_t>(static_cast<uint32_t>(get(4))); }
  uint64_t u64() { return get(8); }
  double f64();
  // At most `max` bytes; longer is a failure (the caller's limit, not the frame's).
  std::string bytes(size_t max);
  template <size_t N>
  std::array<uint8_t, N> fixed() {
    std::array<uint8_t, N> a{};
    if (!take(N)) return a;
    for (size_t i = 0; i < N; ++i) a[i] = p_[i - N];
    return a;
  }
  // At most `max_count` strings of at most `max_len` bytes each.
  std::vector<std::string> strings(size_t max_count, size_t max_len);
  std::vector<uint64_t> u64s(size_t max_count);
  // Every field was there and nothing is left over.
  bool ok() const { return !failed_ && left_ == 0; }
  bool failed() const { return failed_; }

 private:
  bool take(size_t n) {
    if (failed_ || n > left_) {
      failed_ = true;
      return false;
    }
    p_ += n;
    left_ -= n;
    return true;
  }
  uint64_t get(int n);
  const uint8_t* p_;
  size_t left_;
  bool failed_ = false;
};

}  // namespace cairn::wire
