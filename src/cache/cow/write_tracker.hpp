// The bookkeeping of the copy-on-write snapshotter's write tracking (cow_snapshot.hpp, "Write
// tracking"): which chunks of the stream, and which blocks of the address space, were written after
// which snapshot began, and what that means for the next one -- the chunks that changed, the pages to
// copy, the pages to protect again. No system calls: the snapshotter feeds it the writes its fault
// handler sees.
//
// Generations are the snapshotter's snapshots, counted from 1. A write noted in generation g happened
// after snapshot g's begin() (and before g + 1's). Chunk c then differs from snapshot h's bytes only if a
// write to it was noted in a generation >= h; that is exact for every h >= the generation the tracking
// started with, as long as every page of the watched ranges stayed protected until its first write.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cairn::cow {

// A protected range of memory and where its first byte sits in the stream.
struct Watched {
  uint64_t start = 0, end = 0;  // page aligned
  uint64_t stream_off = 0;
  bool operator==(const Watched& o) const { return start == o.start && end == o.end && stream_off == o.stream_off; }
};

class WriteTracker {
 public:
  // Starts over with `ranges` (disjoint) of a stream of `len` bytes in chunks of `chunk_size`, at
  // snapshot `generation`: nothing is known to have been written before it. `block` (a power of two of
  // at least a page; 0: none): the writes are also kept per block of the address space, so that a chunk
  // that straddles a written block and one not written is copied only where it was written
  // (unwritten_pages).
  void start(std::vector<Watched> ranges, uint32_t chunk_size, uint64_t len, uint64_t generation, uint64_t block = 0);
  void stop() { on_ = false; }
  bool on() const { return on_; }
  // Whether the tracking can go on for a snapshot of these ranges and this stream.
  bool same_layout(const std::vector<Watched>& ranges, uint32_t chunk_size, uint64_t len) const {
    return on_ && ranges == ranges_ && chunk_size == chunk_size_ && len == len_;
  }
  const std::vector<Watched>& ranges() const { return ranges_; }
  uint64_t chunks() const { return written_.size(); }
  uint64_t blocks() const { return first_block_.empty() ? 0 : first_block_.back(); }  // of every range (start's `block`)
  uint64_t chunk_len(uint64_t c) const { return c + 1 < chunks() ? chunk_size_ : len_ - c * chunk_size_; }

  // A write to [a, b) of ranges()[r] (addresses) in generation `generation`: every chunk and block it
  // touches. Never allocates (the fault handler calls it while the writer waits).
  void note(size_t r, uint64_t a, uint64_t b, uint64_t generation);
  // Whether a write to the block (start's `block`) that `addr` of ranges()[r] lies in was noted in
  // `generation` or later (true without a block size).
  bool block_noted(size_t r, uint64_t addr, uint64_t generation) const {
    if (!on_ || block_ == 0 || r >= ranges_.size()) return true;
    const uint64_t base = ranges_[r].start & ~(block_ - 1);
    return block_written_[first_block_[r] + (addr - base) / block_] >= generation;
  }
  // f(r, a, b) for each block (start's `block`) a write to which was noted in `generation`: [a, b), the
  // block's addresses within ranges()[r], in order. Nothing without a block size.
  template <class F>
  void blocks_written_in(uint64_t generation, F f) const {
    if (!on_ || block_ == 0) return;
    for (size_t r = 0; r < ranges_.size(); ++r) {
      const Watched& w = ranges_[r];
      const uint64_t base = w.start & ~(block_ - 1);
      for (uint64_t i = first_block_[r]; i < first_block_[r + 1]; ++i) {
        if (block_written_[i] != generation) continue;
        const uint64_t a = base + (i - first_block_[r]) * block_;
        f(r, a > w.start ? a : w.start, a + block_ < w.end ? a + block_ : w.end);
      }
    }
  }
  // The pages of ranges()[r] that hold bytes of the chunk `addr` lies in: [*u0, *u1), page aligned.
  void chunk_span(size_t r, uint64_t addr, uint64_t page, uint64_t* u0, uint64_t* u1) const;

  // Un-protecting ahead (CowOptions::unprotect_ahead): f(r, a, b) for each block ([a, b): its addresses
  // within ranges()[r]) noted in each of the two generations before `generation` -- one the application
  // writes between every two snapshots, which snapshot `generation` may un-protect as soon as it has
  // copied it, noting it written (note_ahead) instead of waiting for the write -- except one un-protected
  // ahead in each of the last `streak` generations: its writes are seen again in this one, so that a
  // block the application has left is copied at most `streak` more times. Nothing for a streak of 0.
  template <class F>
  void blocks_to_unprotect_ahead(uint64_t generation, uint32_t streak, F f) const {
    if (!on_ || block_ == 0 || streak == 0 || generation < 3) return;
    for (size_t r = 0; r < ranges_.size(); ++r) {
      const Watched& w = ranges_[r];
      const uint64_t base = w.start & ~(block_ - 1);
      for (uint64_t i = first_block_[r]; i < first_block_[r + 1]; ++i) {
        if (block_written_[i] != generation - 1 || block_before_[i] != generation - 2) continue;
        if (ahead_gen_[i] == generation - 1 && ahead_run_[i] >= streak) continue;
        const uint64_t a = base + (i - first_block_[r]) * block_;
        f(r, a > w.start ? a : w.start, a + block_ < w.end ? a + block_ : w.end);
      }
    }
  }
  // A block un-protected ahead: [a, b) of ranges()[r] noted in `generation` as by note(), and counted
  // in the block's streak of generations un-protected ahead.
  void note_ahead(size_t r, uint64_t a, uint64_t b, uint64_t generation);
  // f(p0, p1) for the runs of pages [p0, p1) (addresses, page aligned) of [a, b) within ranges()[r] that
  // hold a byte of a chunk noted in `generation` or later, in order.
  template <class F>
  void noted_runs(size_t r, uint64_t a, uint64_t b, uint64_t generation, uint64_t page, F f) const {
    if (!on_ || r >= ranges_.size() || b <= a) return;
    const Watched& w = ranges_[r];
    uint64_t run0 = 0, run1 = 0;  // the run so far (run1 == 0: none)
    for (uint64_t x = a; x < b;) {
      const uint64_t c = (w.stream_off + (x - w.start)) / chunk_size_;
      const uint64_t ce = w.start + ((c + 1) * chunk_size_ - w.stream_off), e = ce < b ? ce : b;
      if (c < written_.size() && written_[c] >= generation) {
        const uint64_t p0 = x & ~(page - 1), p1 = (e + page - 1) & ~(page - 1);
        if (run1 != 0 && p0 <= run1) {
          run1 = p1;
        } else {
          if (run1 != 0) f(run0, run1);
          run0 = p0;
          run1 = p1;
        }
      }
      x = e;
    }
    if (run1 != 0) f(run0, run1);
  }

  // For a slot holding snapshot `held`, taken now as snapshot `now`: 1 for each chunk that may differ
  // (written since, or not wholly inside the ranges: those are copied in begin() every time). Empty when
  // the tracking cannot say (off, `held` before it started or not before `now`).
  std::vector<uint8_t> changed_since(uint64_t held, uint64_t now) const;
  // Runs [first, end) of chunks written in generation `generation` (their pages lost their protection).
  std::vector<std::pair<uint64_t, uint64_t>> written_in(uint64_t generation) const;

  // f(r, p0, p1) for the pages [p0, p1) (counted from ranges()[r].start) with a byte of chunks [c0, c1)
  // that lie in blocks (start's `block`) no write reached in generation `held` or later: a slot that
  // holds snapshot `held` holds their bytes, whether or not their chunks changed elsewhere. Nothing
  // without a block size, or for a `held` that changed_since() cannot answer.
  template <class F>
  void unwritten_pages(uint64_t c0, uint64_t c1, uint64_t held, uint64_t page, F f) const {
    if (!on_ || block_ == 0 || held < since_ || held == 0) return;
    pages_of(c0, c1, page, false, [&](size_t r, uint64_t p0, uint64_t p1) {
      const Watched& w = ranges_[r];
      const uint64_t base = w.start & ~(block_ - 1), end = w.start + p1 * page;
      uint64_t run = 0, a = w.start + p0 * page;  // run: where the unwritten blocks so far began (0: none)
      for (; a < end; a = std::min(end, (a & ~(block_ - 1)) + block_)) {
        const bool unwritten = block_written_[first_block_[r] + (a - base) / block_] < held;
        if (unwritten && !run) run = a;
        if (!unwritten && run) {
          f(r, (run - w.start) / page, (a - w.start) / page);
          run = 0;
        }
      }
      if (run) f(r, (run - w.start) / page, (end - w.start) / page);
    });
  }

  // f(r, p0, p1) for the pages [p0, p1) (counted from ranges()[r].start) holding bytes of chunks
  // [c0, c1): the pages wholly inside them, or (inside = false) every page with a byte of theirs.
  template <class F>
  void pages_of(uint64_t c0, uint64_t c1, uint64_t page, bool inside, F f) const {
    const uint64_t s0 = c0 * chunk_size_, s1 = c1 * chunk_size_ < len_ ? c1 * chunk_size_ : len_;
    for (size_t r = 0; r < ranges_.size(); ++r) {
      const Watched& w = ranges_[r];
      const uint64_t a = s0 > w.stream_off ? s0 : w.stream_off;
      const uint64_t wend = w.stream_off + (w.end - w.start), b = s1 < wend ? s1 : wend;
      if (a >= b) continue;
      const uint64_t lo = a - w.stream_off, hi = b - w.stream_off;
      const uint64_t p0 = inside ? (lo + page - 1) / page : lo / page;
      const uint64_t p1 = inside ? hi / page : (hi + page - 1) / page;
      if (p1 > p0) f(r, p0, p1);
    }
  }

 private:
  bool on_ = false;
  std::vector<Watched> ranges_;
  uint32_t chunk_size_ = 0;
  uint64_t len_ = 0, since_ = 0;
  std::vector<uint64_t> written_;  // per chunk: the last generation a write to it was noted in (0: none)
  std::vector<uint8_t> whole_;     // per chunk: every byte of it lies in the ranges
  // Per block of each range (range r's are [first_block_[r], first_block_[r + 1]), counted from the
  // block its start lies in): the last generation a write to it was noted in (0: none).
  uint64_t block_ = 0;
  std::vector<uint64_t> first_block_, block_written_;
  // Per block: the generation it was noted in before block_written_'s (0: none), and the last one it was
  // un-protected ahead in with how many generations in a row up to it.
  std::vector<uint64_t> block_before_, ahead_gen_;
  std::vector<uint32_t> ahead_run_;
  void note_blocks(size_t r, uint64_t a, uint64_t b, uint64_t generation, bool ahead);
};

}  // namespace cairn::cow
