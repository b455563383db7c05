#include "redundancy/gf_reference.hpp"

#include <utility>
#include <vector>

namespace cairn::redundancy::gf_ref {

uint8_t mul(uint8_t a, uint8_t b) {
  unsigned product = 0, x = a;
  for (unsigned y = b; y != 0; y >>= 1) {
    if (y & 1) product ^= x;
    x <<= 1;
    if (x & 0x100) x ^= 0x11d;  // reduce as soon as the degree reaches 8
  }
  return static_cast<uint8_t>(product);
}

uint8_t inv(uint8_t a) {
  if (a == 0) return 0;
  // a^254 = a^-1 in GF(2^8) (the multiplicative group has order 255); square-and-multiply.
  uint8_t result = 1, base = a;
  for (unsigned e = 254; e != 0; e >>= 1) {
    if (e & 1) result = mul(result, base);
    base = mul(base, base);
  }
  return result;
}

void gen_cauchy1_matrix(uint8_t* a, int rows, int k) {
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++) a[i * k + j] = (i == j) ? 1 : 0;
  for (int i = k; i < rows; i++)
    for (int j = 0; j < k; j++) a[i * k + j] = inv(static_cast<uint8_t>(i ^ j));
}

bool invert_matrix(const uint8_t* in, uint8_t* out, int n) {
  // Work on [A | I] and reduce A to I; the right half becomes A^-1. The inverse is unique, so any
  // pivot order gives ISA-L's gf_invert_matrix result exactly.
  std::vector<uint8_t> a(in, in + static_cast<size_t>(n) * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) out[i * n + j] = (i == j) ? 1 : 0;
  for (int col = 0; col < n; col++) {
    int pivot = col;
    while (pivot < n && a[pivot * n + col] == 0) pivot++;
    if (pivot == n) return false;
    if (pivot != col) {
      for (int j = 0; j < n; j++) {
        std::swap(a[pivot * n + j], a[col * n + j]);
        std::swap(out[pivot * n + j], out[col * n + j]);
      }
    }
    uint8_t scale = inv(a[col * n + col]);
    for (int j = 0; j < n; j++) {
      a[col * n + j] = mul(a[col * n + j], scale);
      out[col * n + j] = mul(out[col * n + j], scale);
    }
    for (int row = 0; row < n; row++) {
      uint8_t factor = a[row * n + col];
      if (row == col || factor == 0) continue;
      for (int j = 0; j < n; j++) {
        a[row * n + j] ^= mul(factor, a[col * n + j]);
        out[row * n + j] ^= mul(factor, out[col * n + j]);
      }
    }
  }
  return true;
}

void encode_data(size_t len, int k, int rows, const uint8_t* coeffs, const uint8_t* const* data,
                 uint8_t* const* out) {
  for (int r = 0; r < rows; r++) {
    for (size_t i = 0; i < len; i++) {
      uint8_t s = 0;
      for (int j = 0; j < k; j++) s ^= mul(coeffs[r * k + j], data[j][i]);
      out[r][i] = s;
    }
  }
}

void xor_gen(size_t len, int srcs, const uint8_t* const* data, uint8_t* out) {
  for (size_t i = 0; i < len; i++) {
    uint8_t s = 0;
    for (int j = 0; j < srcs; j++) s ^= data[j][i];
    out[i] = s;
  }
}

}  // namespace cairn::redundancy::gf_ref
