#include "fabric/pull_stream.hpp"

#include <algorithm>

#include "base/log.hpp"

namespace cairn::fabric {

void PullStream::start(std::vector<Range> ranges, uint64_t piece_len, uint64_t rma_len) {
  ranges_ = std::move(ranges);
  piece_len_ = std::clamp<uint64_t>(piece_len, 1, pool_.chunk());
  rma_len_ = rma_len;
  next_range_ = 0;
  next_offset_ = 0;
  issued_ = 0;
  reading_.clear();
}

Status PullStream::issue(const std::function<std::optional<uint32_t>(uint64_t len)>& take) {
  while (next_range_ < ranges_.size()) {
    const Range& r = ranges_[next_range_];
    if (next_offset_ >= r.len) {
      ++next_range_;
      next_offset_ = 0;
      continue;
    }
    const uint64_t len = std::min(piece_len_, r.len - next_offset_);
    std::optional<uint32_t> b = take(len);
    if (!b) break;
    reading_[*b] = Piece{next_range_, next_offset_, len, *b};
    RmaQueue::Transfer t;
    t.local = pool_.data(*b);
    t.len = len;
    t.desc = pool_.desc();
    t.peer = r.peer;
    t.remote_addr = r.addr + next_offset_;
    t.key = r.key;
    t.max_op = rma_len_;
    t.tag = tag_base_ + *b;
    rma_.add(t);
    next_offset_ += len;
    issued_ += len;
  }
  return rma_.post();
}

PullStream::Piece PullStream::completed(const RmaQueue::Done& d) {
  auto it = reading_.find(static_cast<uint32_t>(d.tag - tag_base_));
  Piece p = it->second;
  reading_.erase(it);
  return p;
}

Result<int> PullStream::poll(const Sink& sink, std::vector<RmaQueue::Done>* others) {
  std::vector<RmaQueue::Done> done;
  auto n = rma_.poll(&done);
  if (!n) return n.status();
  for (const auto& d : done) {
    if (owns(d)) {
      sink(completed(d), d.status);
    } else if (others) {
      others->push_back(d);
    } else {
      LOG_ERROR("a completion (tag %llu) that is no read of this stream", static_cast<unsigned long long>(d.tag));
    }
  }
  return n;
}

std::vector<uint32_t> PullStream::abandon() {
  std::vector<uint64_t> dropped;
  rma_.drop_unposted(&dropped, [&](uint64_t tag) { return owns(RmaQueue::Done{tag, Status::ok()}); });
  std::vector<uint32_t> freed;
  for (uint64_t tag : dropped) {
    const uint32_t b = static_cast<uint32_t>(tag - tag_base_);
    reading_.erase(b);
    freed.push_back(b);
  }
  next_range_ = ranges_.size();  // nothing more is issued
  return freed;
}

}  // namespace cairn::fabric
