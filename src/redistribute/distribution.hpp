// Distributions: how a protected region is spread over the ranks of a communicator. Pure arithmetic,
// no MPI. The kind values and parameters are stored in the manifest (RegionEntry.distribution and
// dist_params, docs/format.md) and equal cairn_dist_kind in cairn.h; they never change meaning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::redistribute {

enum class Kind : uint32_t {
  private_ = 0,      // per-rank data; no layout over another rank count exists
  replicated = 1,    // the same global_count elements on every rank; stored once (rank 0's copy)
  block = 2,         // 1-D, global_count elements in contiguous pieces; the first G % P ranks hold one more
  block_cyclic = 3,  // 1-D, blocks of block_size elements, block j on rank j % P, stored in order of j
  block_rows = 4,    // rows x cols row-major, rows split like `block`; a rank stores its rows row-major
  block_cols = 5,    // rows x cols row-major, columns split like `block`; a rank stores rows x its cols
};

// "private", "replicated", "block", "block_cyclic", "block_rows", "block_cols"; "unknown" otherwise.
const char* kind_name(Kind kind);

struct Distribution {
  Kind kind = Kind::private_;
  uint64_t global_count = 0;  // elements of the global array (2-D kinds: rows * cols; private: 0)
  uint64_t block_size = 0;    // block_cyclic only; 0 for the others
  uint64_t rows = 0, cols = 0;  // block_rows / block_cols only; 0 for the others
  bool operator==(const Distribution&) const = default;

  // The manifest's dist_params: block {G}; block_cyclic {G, b}; block_rows/block_cols {rows, cols};
  // private/replicated {} (a replicated region's size is its count in the manifest).
  std::vector<uint64_t> to_params() const;
  // Inverse of to_params. region_count is the region's element count in the manifest (every rank
  // stores it); it is only used for replicated, whose global_count it becomes. Errors: ERR_FORMAT for
  // a kind this reader does not know (a newer writer), ERR_INVALID_ARG for a wrong number of
  // parameters or bad values (as make()).
  static Result<Distribution> from_params(uint32_t kind, const std::vector<uint64_t>& params,
                                          uint64_t region_count);
};

// Build a validated distribution. Fields a kind does not use are ignored and stored as 0; for the 2-D
// kinds global_count becomes rows * cols. Errors (ERR_INVALID_ARG, naming the field): an unknown kind,
// block_cyclic with block_size 0, rows * cols overflowing 64 bits.
Result<Distribution> make(Kind kind, uint64_t global_count, uint64_t block_size, uint64_t rows,
                          uint64_t cols);
inline Result<Distribution> make_private() { return make(Kind::private_, 0, 0, 0, 0); }
inline Result<Distribution> make_replicated(uint64_t count) { return make(Kind::replicated, count, 0, 0, 0); }
inline Result<Distribution> make_block(uint64_t global_count) { return make(Kind::block, global_count, 0, 0, 0); }
inline Result<Distribution> make_block_cyclic(uint64_t global_count, uint64_t block_size) {
  return make(Kind::block_cyclic, global_count, block_size, 0, 0);
}
inline Result<Distribution> make_block_rows(uint64_t rows, uint64_t cols) { return make(Kind::block_rows, 0, 0, rows, cols); }
inline Result<Distribution> make_block_cols(uint64_t rows, uint64_t cols) { return make(Kind::block_cols, 0, 0, rows, cols); }

// OK if `d` is what make() would build from its own fields (a struct filled by hand is checked here).
Status validate(const Distribution& d);

// "block(G=100)", "block_cyclic(G=100, b=7)", "block_rows(10x20)", ... for messages.
std::string describe(const Distribution& d);

// Whether data of this kind can move to another rank count (every kind but private).
inline bool has_global_layout(Kind kind) { return kind != Kind::private_; }

// Elements of the global array: global_count (2-D kinds: rows * cols). private: 0 (undefined).
uint64_t global_elements(const Distribution& d);

// Elements rank `rank` of `nranks` stores. Preconditions: d valid, 1 <= nranks, 0 <= rank < nranks.
// replicated: global_count. private: undefined, returns 0 -- the rank's own count is authoritative.
uint64_t local_count(const Distribution& d, int nranks, int rank);

// Check a rank's count against the distribution before it is protected: ERR_SIZE_MISMATCH naming both
// counts and describe(d) if they differ; ERR_INVALID_ARG for nranks < 1 or rank out of range. private
// always passes.
Status check_local_count(const Distribution& d, int nranks, int rank, uint64_t count);

// The contiguous piece of n items that `rank` of `nranks` holds under `block`: the first n % nranks
// ranks hold n / nranks + 1 items, the others n / nranks.
struct Piece {
  uint64_t start = 0;  // first global item
  uint64_t count = 0;
  uint64_t end() const { return start + count; }
};
Piece block_piece(uint64_t n, int nranks, int rank);
// The rank whose block piece holds item `index` (< n). O(1).
int block_owner(uint64_t n, int nranks, uint64_t index);

// block_cyclic: number of blocks ceil(G / b), and the blocks rank `rank` of `nranks` owns.
uint64_t cyclic_block_count(uint64_t global_count, uint64_t block_size);
uint64_t cyclic_blocks_of(uint64_t nblocks, int nranks, int rank);

}  // namespace cairn::redistribute
