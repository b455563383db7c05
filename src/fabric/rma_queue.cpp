#include "fabric/rma_queue.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace cairn::fabric {

RmaQueue::RmaQueue(Endpoint& ep, size_t max_in_flight) : ep_(ep), max_in_flight_(std::max<size_t>(max_in_flight, 1)) {}

std::unique_ptr<RmaQueue::Op> RmaQueue::take_op() {
  if (free_.empty()) return std::make_unique<Op>();
  std::unique_ptr<Op> p = std::move(free_.back());
  free_.pop_back();
  return p;
}

void RmaQueue::add(const Transfer& t) {
  if (t.len == 0) {
    ended_.push_back({t.tag, Status::ok()});
    return;
  }
  const uint64_t id = next_++;
  Open& o = open_[id];
  o.t = t;
  const uint64_t most = t.max_op ? t.max_op : t.len;
  for (uint64_t off = 0; off < t.len; off += most) {
    std::unique_ptr<Op> p = take_op();
    p->transfer = id;
    p->offset = off;
    p->len = std::min(most, t.len - off);
    unposted_.push_back(std::move(p));
    ++o.ops_left;
  }
}

void RmaQueue::op_ended(Op* p, const Status& st, std::vector<Done>* done) {
  auto it = open_.find(p->transfer);
  if (it == open_.end()) return;  // cannot happen: a transfer is open until its last operation ended
  Open& o = it->second;
  --o.ops_left;
  if (!st.is_ok() && !o.reported) {
    o.reported = true;
    done->push_back({o.t.tag, st});
  }
  if (o.ops_left == 0) {
    if (!o.reported) done->push_back({o.t.tag, Status::ok()});
    open_.erase(it);
  }
}

Status RmaQueue::post() {
  while (!unposted_.empty() && in_flight_ < max_in_flight_) {
    Op* p = unposted_.front().get();
    auto it = open_.find(p->transfer);
    if (it == open_.end() || it->second.reported) {  // its transfer failed: never posted
      std::vector<Done> none;
      op_ended(p, Status::ok(), &none);
      free_.push_back(std::move(unposted_.front()));
      unposted_.pop_front();
      continue;
    }
    const Transfer& t = it->second.t;
    bool posted = false;
    Status st = t.kind == Kind::read
                    ? ep_.read(t.local + p->offset, p->len, t.desc, t.peer, t.remote_addr + p->offset, t.key, p, &posted)
                    : ep_.write(t.local + p->offset, p->len, t.desc, t.peer, t.remote_addr + p->offset, t.key, p,
                                &posted);
    if (!st.is_ok()) {
      op_ended(p, st, &ended_);
      free_.push_back(std::move(unposted_.front()));
      unposted_.pop_front();
      return st;
    }
    if (!posted) return Status::ok();  // the provider's queue is full: completions first
    ++it->second.posted;
    ++in_flight_;
    (void)unposted_.front().release();  // the provider holds it until its completion
    unposted_.pop_front();
  }
  return Status::ok();
}

Result<int> RmaQueue::poll(std::vector<Done>* done) {
  if (!ended_.empty()) {
    done->insert(done->end(), ended_.begin(), ended_.end());
    ended_.clear();
  }
  Completion c[64];
  CAIRN_ASSIGN_OR_RETURN(n, ep_.poll(c, 64));
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Op> p(static_cast<Op*>(c[i].op));
    --in_flight_;
    op_ended(p.get(), c[i].status, done);
    free_.push_back(std::move(p));
  }
  return n;
}

void RmaQueue::drop_unposted(std::vector<uint64_t>* dropped, const std::function<bool(uint64_t tag)>& which) {
  std::deque<std::unique_ptr<Op>> keep;
  for (auto& p : unposted_) {
    auto it = open_.find(p->transfer);
    if (it != open_.end() && it->second.posted == 0 && !it->second.reported && (!which || which(it->second.t.tag))) {
      dropped->push_back(it->second.t.tag);
      it->second.reported = true;  // its other unposted operations are dropped below, silently
    }
    if (it != open_.end() && it->second.reported) {
      if (--it->second.ops_left == 0) open_.erase(it);
      free_.push_back(std::move(p));
    } else {
      keep.push_back(std::move(p));
    }
  }
  unposted_ = std::move(keep);
}

uint64_t RmaQueue::settle(double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<Done> ignored;
  while (in_flight_ > 0 && Clock::now() < until) {
    auto n = poll(&ignored);
    if (!n) break;
    if (*n == 0) usleep(1000);
    ignored.clear();
  }
  return in_flight_;
}

}  // namespace cairn::fabric
