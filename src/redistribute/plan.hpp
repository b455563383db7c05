// N -> M plans: which piece of which old rank's local storage goes where in which new rank's local
// storage, when a distributed region moves from p_old ranks to p_new ranks (restart on another rank
// count, or live redistribution). Pure arithmetic, no MPI; the runtime turns a plan into reads and
// messages.
//
// Every plan moves each destination element exactly once, from the old rank that owned that global
// element, and its transfers are maximal: two pieces with the same (src, dst) whose source and
// destination ranges are both adjacent are one transfer. So block -> block is one transfer per
// overlapping pair of pieces, and an unchanged rank count is one transfer per rank (src == dst).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "redistribute/distribution.hpp"

namespace cairn::redistribute {

struct Transfer {
  int src = 0;              // old rank (of p_old)
  int dst = 0;              // new rank (of p_new)
  uint64_t src_offset = 0;  // in elements, in src's local storage
  uint64_t dst_offset = 0;  // in elements, in dst's local storage
  uint64_t count = 0;       // elements; never 0
  bool operator==(const Transfer&) const = default;
};

// The whole plan, sorted by (dst, src, src_offset). Its size grows with p_new (and with rows for
// block_cols, and with the block count for block_cyclic); a rank needs only plan_for_dst/plan_for_src.
// Errors: ERR_INVALID_ARG for p_old or p_new < 1 or an invalid `d` (see validate());
// ERR_NOT_SUPPORTED for private ("private data cannot change rank count"; the caller adds the region
// name) -- also when p_old == p_new, where a private region needs no plan (each rank keeps its own).
// replicated: every dst gets the whole array from src 0 (the one copy stored), one transfer each.
Result<std::vector<Transfer>> plan(const Distribution& d, int p_old, int p_new);

// What new rank `dst` receives, sorted by (src, src_offset). Costs O(transfers returned): block and
// block_rows O(overlapping sources); block_cols O(rows x overlapping sources) unless whole rows move;
// block_cyclic O(blocks dst owns). Errors: as plan(), and ERR_INVALID_ARG for dst out of range.
Result<std::vector<Transfer>> plan_for_dst(const Distribution& d, int p_old, int p_new, int dst);

// What old rank `src` sends, sorted by (dst, dst_offset). Same costs and errors. replicated: src 0
// sends to every new rank (p_new transfers), the others send nothing.
Result<std::vector<Transfer>> plan_for_src(const Distribution& d, int p_old, int p_new, int src);

// Bytes of all transfers; of those with src != dst (across ranks); of those with src == dst (rank r
// keeps a piece it already has: no message needed when old rank r and new rank r are one process).
// bytes_total = bytes_moved + bytes_staying. Saturate at UINT64_MAX.
uint64_t bytes_total(const std::vector<Transfer>& plan, uint64_t elem_size);
uint64_t bytes_moved(const std::vector<Transfer>& plan, uint64_t elem_size);
uint64_t bytes_staying(const std::vector<Transfer>& plan, uint64_t elem_size);

}  // namespace cairn::redistribute
