// Plain byte-wise GF(2^8) arithmetic: the reference that the ISA-L paths of the L2 codecs are tested
// against (ISA-L's own habit: every optimised kernel has a `_base` twin). Slow on purpose: no tables
// beyond what the definition needs, no SIMD, no ISA-L. Same field as ISA-L: polynomial
// x^8 + x^4 + x^3 + x^2 + 1 (0x11d), so every result equals ISA-L's byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::redundancy::gf_ref {

// a * b in GF(2^8), by shift-and-add (Russian peasant) with reduction by 0x11d.
uint8_t mul(uint8_t a, uint8_t b);
// The multiplicative inverse; inv(0) is 0 (as ISA-L's gf_inv).
uint8_t inv(uint8_t a);

// The (rows x k) Cauchy generator matrix of ISA-L's gf_gen_cauchy1_matrix: identity on the first k
// rows, then a[i][j] = inv(i ^ j) for i = k..rows-1. `a` has rows * k bytes. rows <= 256.
void gen_cauchy1_matrix(uint8_t* a, int rows, int k);

// out = in^-1 for an (n x n) matrix, by Gauss-Jordan elimination. `in` is left unchanged.
// Returns false when the matrix is singular (out is then unspecified).
bool invert_matrix(const uint8_t* in, uint8_t* out, int n);

// out[r][i] = sum_j coeffs[r * k + j] * data[j][i] for r < rows, i < len (ISA-L's ec_encode_data
// with the plain coefficient matrix instead of expanded tables).
void encode_data(size_t len, int k, int rows, const uint8_t* coeffs, const uint8_t* const* data,
                 uint8_t* const* out);

// out[i] = data[0][i] ^ ... ^ data[srcs-1][i] (srcs >= 1); out may not alias a source.
void xor_gen(size_t len, int srcs, const uint8_t* const* data, uint8_t* out);

}  // namespace cairn::redundancy::gf_ref
