#include "flush/embedded_flusher.hpp"

#include <algorithm>

#include "l3/l3_store.hpp"

namespace cairn::flush {

EmbeddedFlusher::EmbeddedFlusher(Layout layout, std::function<l3::WriteOptions()> options)
    : layout_(std::move(layout)), options_(std::move(options)) {}

EmbeddedFlusher::~EmbeddedFlusher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (FlushTicket t : queue_) {
      auto& e = entries_[t];
      e.state = State::finished;
      e.outcome = make_error(Code::ERR_CANCELLED, "version %llu: flush cancelled (the flusher stopped)",
                             static_cast<unsigned long long>(e.request.version));
    }
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // a write in progress finishes: it reads the slot
}

Result<FlushTicket> EmbeddedFlusher::post(const FlushRequest& request) {
  if (!request.manifest || (!request.data && request.manifest->total_size > 0))
    return make_error(Code::ERR_INVALID_ARG, "flusher post: version %llu has no manifest or data",
                      static_cast<unsigned long long>(request.version));
  FlushTicket t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return make_error(Code::ERR_SEQUENCE, "flusher post: the flusher is stopped");
    t = next_++;
    entries_[t].request = request;
    queue_.push_back(t);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
  return t;
}

Result<std::map<FlushTicket, EmbeddedFlusher::Entry>::iterator> EmbeddedFlusher::find(FlushTicket ticket,
                                                                                      const char* call) {
  auto it = entries_.find(ticket);
  if (it == entries_.end())
    return make_error(Code::ERR_INVALID_ARG, "flusher %s: ticket %llu is unknown or already finished", call,
                      static_cast<unsigned long long>(ticket));
  return it;
}

Status EmbeddedFlusher::test(FlushTicket ticket, bool* done) {
  std::lock_guard<std::mutex> lock(mu_);
  CAIRN_ASSIGN_OR_RETURN(it, find(ticket, "test"));
  *done = it->second.state == State::finished;
  if (!*done) return Status::ok();
  Status outcome = it->second.outcome;
  entries_.erase(it);
  return outcome;
}

Status EmbeddedFlusher::wait(FlushTicket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  CAIRN_ASSIGN_OR_RETURN(it, find(ticket, "wait"));
  cv_.wait(lock, [&] { return it->second.state == State::finished; });
  Status outcome = it->second.outcome;
  entries_.erase(it);
  return outcome;
}

Status EmbeddedFlusher::cancel(FlushTicket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  CAIRN_ASSIGN_OR_RETURN(it, find(ticket, "cancel"));
  if (it->second.state == State::queued) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    it->second.state = State::finished;
    it->second.outcome = make_error(Code::ERR_CANCELLED, "version %llu: flush cancelled",
                                    static_cast<unsigned long long>(it->second.request.version));
  }
  // A write in progress is not interrupted: it reads the slot until it is done.
  cv_.wait(lock, [&] { return it->second.state == State::finished; });
  Status outcome = it->second.outcome;
  entries_.erase(it);
  return outcome;
}

void EmbeddedFlusher::run() {
  for (;;) {
    FlushRequest req;
    FlushTicket t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      t = queue_.front();
      queue_.pop_front();
      auto& e = entries_[t];
      e.state = State::writing;
      req = e.request;
    }
    const l3::WriteOptions opts = options_();
    Status outcome = l3::write_rank(layout_, *req.manifest, req.data, req.after_data, &opts, req.written);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& e = entries_[t];
      e.state = State::finished;
      e.outcome = outcome;
    }
    cv_.notify_all();
  }
}

}  // namespace cairn::flush
