#include "cache/cow/write_tracker.hpp"

#include <algorithm>

namespace cairn::cow {

void WriteTracker::start(std::vector<Watched> ranges, uint32_t chunk_size, uint64_t len, uint64_t generation,
                         uint64_t block) {
  ranges_ = std::move(ranges);
  chunk_size_ = chunk_size;
  len_ = len;
  since_ = generation;
  on_ = chunk_size > 0 && len > 0;
  written_.clear();
  whole_.clear();
  block_ = block;
  first_block_.assign(1, 0);
  for (const auto& w : ranges_)
    first_block_.push_back(first_block_.back() + (block ? (w.end - (w.start & ~(block - 1)) + block - 1) / block : 0));
  block_written_.assign(first_block_.back(), 0);
  block_before_.assign(first_block_.back(), 0);
  ahead_gen_.assign(first_block_.back(), 0);
  ahead_run_.assign(first_block_.back(), 0);
  if (!on_) return;
  const uint64_t n = (len + chunk_size - 1) / chunk_size;
  written_.assign(n, 0);
  std::vector<uint64_t> covered(n, 0);
  for (const auto& w : ranges_) {
    const uint64_t end = std::min(w.stream_off + (w.end - w.start), len);
    for (uint64_t c = w.stream_off / chunk_size; c < n && c * chunk_size < end; ++c)
      covered[c] += std::min((c + 1) * chunk_size, end) - std::max(c * chunk_size, w.stream_off);
  }
  whole_.assign(n, 0);
  for (uint64_t c = 0; c < n; ++c) whole_[c] = covered[c] == chunk_len(c);
}

void WriteTracker::note(size_t r, uint64_t a, uint64_t b, uint64_t generation) {
  if (!on_ || r >= ranges_.size() || b <= a) return;
  const Watched& w = ranges_[r];
  const uint64_t s0 = w.stream_off + (a - w.start), s1 = w.stream_off + (b - w.start);
  for (uint64_t c = s0 / chunk_size_; c <= (s1 - 1) / chunk_size_ && c < written_.size(); ++c) written_[c] = generation;
  note_blocks(r, a, b, generation, false);
}

void WriteTracker::note_ahead(size_t r, uint64_t a, uint64_t b, uint64_t generation) {
  if (!on_ || r >= ranges_.size() || b <= a) return;
  note(r, a, b, generation);
  note_blocks(r, a, b, generation, true);
}

void WriteTracker::note_blocks(size_t r, uint64_t a, uint64_t b, uint64_t generation, bool ahead) {
  if (block_ == 0) return;
  const uint64_t base = ranges_[r].start & ~(block_ - 1);
  for (uint64_t i = first_block_[r] + (a - base) / block_; i <= first_block_[r] + (b - 1 - base) / block_ && i < first_block_[r + 1]; ++i) {
    if (ahead) {
      if (ahead_gen_[i] != generation) ahead_run_[i] = ahead_gen_[i] + 1 == generation ? ahead_run_[i] + 1 : 1;
      ahead_gen_[i] = generation;
      continue;
    }
    if (block_written_[i] != generation) block_before_[i] = block_written_[i];
    block_written_[i] = generation;
  }
}

void WriteTracker::chunk_span(size_t r, uint64_t addr, uint64_t page, uint64_t* u0, uint64_t* u1) const {
  const Watched& w = ranges_[r];
  const uint64_t lo = (w.stream_off + (addr - w.start)) / chunk_size_ * chunk_size_, hi = lo + chunk_size_;
  const uint64_t a = lo > w.stream_off ? w.start + (lo - w.stream_off) : w.start;
  const uint64_t b = hi - w.stream_off < w.end - w.start ? w.start + (hi - w.stream_off) : w.end;
  *u0 = a & ~(page - 1);
  *u1 = std::min((b + page - 1) & ~(page - 1), w.end);
}

std::vector<uint8_t> WriteTracker::changed_since(uint64_t held, uint64_t now) const {
  if (!on_ || held < since_ || held == 0 || held >= now) return {};
  std::vector<uint8_t> out(written_.size());
  for (size_t c = 0; c < out.size(); ++c) out[c] = !whole_[c] || written_[c] >= held;
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> WriteTracker::written_in(uint64_t generation) const {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  for (uint64_t c = 0; c < written_.size();) {
    if (written_[c] != generation) {
      ++c;
      continue;
    }
    uint64_t e = c + 1;
    while (e < written_.size() && written_[e] == generation) ++e;
    runs.emplace_back(c, e);
    c = e;
  }
  return runs;
}

}  // namespace cairn::cow
