#include "redistribute/plan.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace cairn::redistribute {
namespace {

Status check_args(const Distribution& d, int p_old, int p_new) {
  CAIRN_TRY(validate(d));
  if (p_old < 1 || p_new < 1)
    return make_error(Code::ERR_INVALID_ARG, "a plan needs at least one rank on each side (%d -> %d)",
                      p_old, p_new);
  if (d.kind == Kind::private_) {
    if (p_old == p_new)
      return make_error(Code::ERR_NOT_SUPPORTED,
                        "private data has no redistribution plan (each rank keeps its own data)");
    return make_error(Code::ERR_NOT_SUPPORTED,
                      "private data cannot change rank count (written by %d ranks, now %d); "
                      "declare it with a distribution (replicated, block, ...) to allow that",
                      p_old, p_new);
  }
  return Status::ok();
}

// Appends t, or extends the last transfer when t continues it on both sides.
void push_merged(std::vector<Transfer>& out, const Transfer& t) {
  if (t.count == 0) return;
  if (!out.empty()) {
    Transfer& last = out.back();
    if (last.src == t.src && last.dst == t.dst && last.src_offset + last.count == t.src_offset &&
        last.dst_offset + last.count == t.dst_offset) {
      last.count += t.count;
      return;
    }
  }
  out.push_back(t);
}

// One rank's side of a plan. `me` is a rank of the layout over p_me ranks; "other" ranks belong to the
// layout over p_other. As the destination side, me = dst (p_me = p_new) and other = src; as the source
// side, the reverse. Pieces are emitted in order of (other, other_offset), which is the sort order
// of both plan_for_dst and plan_for_src.
class Side {
 public:
  Side(const Distribution& d, int p_me, int me, int p_other, bool me_is_dst)
      : d_(d), p_me_(p_me), me_(me), p_other_(p_other), me_is_dst_(me_is_dst) {}

  std::vector<Transfer> build() {
    switch (d_.kind) {
      case Kind::replicated: replicated(); break;
      case Kind::block: block_1d(d_.global_count, 1); break;
      case Kind::block_rows: if (d_.cols > 0) block_1d(d_.rows, d_.cols); break;
      case Kind::block_cols: if (d_.rows > 0) block_cols(); break;
      case Kind::block_cyclic: block_cyclic(); break;
      case Kind::private_: break;  // refused by check_args
    }
    return std::move(out_);
  }

 private:
  void emit(int other, uint64_t me_offset, uint64_t other_offset, uint64_t count) {
    if (me_is_dst_)
      push_merged(out_, {other, me_, other_offset, me_offset, count});
    else
      push_merged(out_, {me_, other, me_offset, other_offset, count});
  }

  // The stored copy is rank 0's; every new rank gets it whole.
  void replicated() {
    if (me_is_dst_) {
      emit(0, 0, 0, d_.global_count);
    } else if (me_ == 0) {
      for (int dst = 0; dst < p_other_; ++dst) emit(dst, 0, 0, d_.global_count);
    }
  }

  // Calls f(other, lo, hi, mine, theirs) for each other rank whose block piece of n items overlaps
  // mine in [lo, hi), in increasing other. O(overlapping ranks).
  template <class F>
  void block_overlaps(uint64_t n, F&& f) {
    const Piece mine = block_piece(n, p_me_, me_);
    if (mine.count == 0) return;
    const int first = block_owner(n, p_other_, mine.start);
    const int last = block_owner(n, p_other_, mine.end() - 1);
    for (int other = first; other <= last; ++other) {
      const Piece theirs = block_piece(n, p_other_, other);
      const uint64_t lo = std::max(mine.start, theirs.start), hi = std::min(mine.end(), theirs.end());
      if (lo < hi) f(other, lo, hi, mine, theirs);
    }
  }

  // block (scale 1) and block_rows (items are rows of `scale` elements, stored contiguously).
  void block_1d(uint64_t n, uint64_t scale) {
    block_overlaps(n, [&](int other, uint64_t lo, uint64_t hi, const Piece& mine, const Piece& theirs) {
      emit(other, (lo - mine.start) * scale, (lo - theirs.start) * scale, (hi - lo) * scale);
    });
  }

  // Columns [lo, hi) of every row; a rank stores rows x (its columns) row-major, so each row is its own
  // piece unless the overlap is the whole width on both sides.
  void block_cols() {
    const uint64_t rows = d_.rows;
    block_overlaps(d_.cols, [&](int other, uint64_t lo, uint64_t hi, const Piece& mine, const Piece& theirs) {
      const uint64_t width = hi - lo;
      if (width == mine.count && width == theirs.count) {
        emit(other, 0, 0, rows * width);
        return;
      }
      const uint64_t me_col = lo - mine.start, other_col = lo - theirs.start;
      for (uint64_t i = 0; i < rows; ++i)
        emit(other, i * mine.count + me_col, i * theirs.count + other_col, width);
    });
  }

  // My k-th block is global block j = me + k * p_me, at my offset k * b, held by other = j % p_other at
  // its offset (j / p_other) * b. Two of my blocks k, k' go to the same other exactly when
  // (k - k') is a multiple of step = p_other / gcd(p_me, p_other); the classes k0 < step are taken in
  // order of their other rank, and within a class offsets grow with k. O(my blocks) without sorting
  // them (only the at most min(step, my blocks) classes are sorted).
  void block_cyclic() {
    const uint64_t b = d_.block_size, g = d_.global_count;
    const uint64_t pm = static_cast<uint64_t>(p_me_), po = static_cast<uint64_t>(p_other_);
    const uint64_t mine = cyclic_blocks_of(cyclic_block_count(g, b), p_me_, me_);
    if (mine == 0) return;
    const uint64_t step = po / std::gcd(pm, po);
    const uint64_t classes = std::min(step, mine);
    std::vector<std::pair<uint64_t, uint64_t>> order;  // (other, k0)
    order.reserve(classes);
    for (uint64_t k0 = 0; k0 < classes; ++k0) order.emplace_back((me_ + k0 * pm) % po, k0);
    std::sort(order.begin(), order.end());
    for (const auto& [other, k0] : order) {
      for (uint64_t k = k0; k < mine; k += step) {
        const uint64_t j = static_cast<uint64_t>(me_) + k * pm;
        emit(static_cast<int>(other), k * b, (j / po) * b, std::min(b, g - j * b));
      }
    }
  }

  const Distribution& d_;
  const int p_me_, me_, p_other_;
  const bool me_is_dst_;
  std::vector<Transfer> out_;
};

uint64_t saturating_bytes(const std::vector<Transfer>& plan, uint64_t elem_size, int which) {
  uint64_t total = 0;
  for (const Transfer& t : plan) {
    if (which == 1 && t.src == t.dst) continue;
    if (which == 2 && t.src != t.dst) continue;
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(t.count, elem_size, &bytes) || __builtin_add_overflow(total, bytes, &total))
      return UINT64_MAX;
  }
  return total;
}

}  // namespace

Result<std::vector<Transfer>> plan_for_dst(const Distribution& d, int p_old, int p_new, int dst) {
  CAIRN_TRY(check_args(d, p_old, p_new));
  if (dst < 0 || dst >= p_new)
    return make_error(Code::ERR_INVALID_ARG, "destination rank %d is out of range (%d ranks)", dst, p_new);
  return Side(d, p_new, dst, p_old, true).build();
}

Result<std::vector<Transfer>> plan_for_src(const Distribution& d, int p_old, int p_new, int src) {
  CAIRN_TRY(check_args(d, p_old, p_new));
  if (src < 0 || src >= p_old)
    return make_error(Code::ERR_INVALID_ARG, "source rank %d is out of range (%d ranks)", src, p_old);
  return Side(d, p_old, src, p_new, false).build();
}

Result<std::vector<Transfer>> plan(const Distribution& d, int p_old, int p_new) {
  CAIRN_TRY(check_args(d, p_old, p_new));
  std::vector<Transfer> all;
  for (int dst = 0; dst < p_new; ++dst) {
    std::vector<Transfer> part = Side(d, p_new, dst, p_old, true).build();
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

uint64_t bytes_total(const std::vector<Transfer>& plan, uint64_t elem_size) {
  return saturating_bytes(plan, elem_size, 0);
}
uint64_t bytes_moved(const std::vector<Transfer>& plan, uint64_t elem_size) {
  return saturating_bytes(plan, elem_size, 1);
}
uint64_t bytes_staying(const std::vector<Transfer>& plan, uint64_t elem_size) {
  return saturating_bytes(plan, elem_size, 2);
}

}  // namespace cairn::redistribute
