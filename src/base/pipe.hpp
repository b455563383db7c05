// The one bounded pipe between two threads, wherever bytes move through a set of buffers: a filler sends
// pieces (each naming a buffer it filled, or a control item) down to a drainer thread, and the drainer
// hands things back up (the buffers it is done with, outcomes) to the filler. The buffers bound the memory
// in flight; the pipe only carries their names. Used by the chunk sink of the service's agents (pieces of
// a rank's version down, freed buffers and each transfer's outcome up: service/agent/chunk_sink.hpp) and
// by the moves of a node's cache (pieces of its files down, freed buffers up: cache/node_move.hpp).
//
// The lifecycle has the shape of the flushers' (pipeline/flusher.hpp) and the service link's: on the
// filler's side post() an item, test() for what came back without waiting or wait() for it, cancel() to
// stop both sides (the first reason is kept; the drainer may cancel too), close() when everything was
// posted; on the drainer's side take() and hand_back(). back_fd() is readable whenever something was
// handed back or the pipe was cancelled, for a filler that waits in poll(). Every call is thread-safe.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "base/fsutil.hpp"
#include "base/status.hpp"

namespace cairn {

template <class Down, class Up>
class Pipe {
 public:
  Pipe() {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd >= 0) back_event_ = fs::Fd(fd);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  // ---- the filler's side ----
  void post(Down d) {
    std::lock_guard<std::mutex> lock(mu_);
    down_.push_back(std::move(d));
    peak_ = std::max(peak_, down_.size());
    cv_down_.notify_one();
  }
  // Everything was posted: take() returns nullopt once the drainer has taken it all.
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_down_.notify_all();
  }
  // What the drainer handed back since the last call, oldest first; test() does not wait, wait() waits
  // for at least one thing unless the pipe is cancelled.
  std::vector<Up> test() { return take_back(false); }
  std::vector<Up> wait() { return take_back(true); }
  // Take out the items still waiting for the drainer that `which` accepts (the filler changed its mind
  // about them), in the order they were sent.
  template <class Pred>
  std::vector<Down> withdraw(Pred which) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Down> out;
    for (auto it = down_.begin(); it != down_.end();) {
      if (which(*it)) {
        out.push_back(std::move(*it));
        it = down_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  int back_fd() const { return back_event_.get(); }

  // ---- the drainer's side ----
  // The next item, waiting for one: nullopt once the pipe is closed and empty, or cancelled.
  std::optional<Down> take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_down_.wait(lock, [&] { return !down_.empty() || closed_ || cancelled_; });
    if (cancelled_ || down_.empty()) return std::nullopt;
    Down d = std::move(down_.front());
    down_.pop_front();
    return d;
  }
  void hand_back(Up u) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      up_.push_back(std::move(u));
      cv_up_.notify_one();
    }
    signal();
  }

  // ---- both ----
  void cancel(Status why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!cancelled_) error_ = std::move(why);
      cancelled_ = true;
      cv_down_.notify_all();
      cv_up_.notify_all();
    }
    signal();
  }
  // ok unless cancelled; then the first reason.
  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_ ? error_ : Status::ok();
  }
  bool cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  // The most items that ever waited for the drainer at once.
  size_t peak() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }

 private:
  std::vector<Up> take_back(bool wait) {
    clear_event();
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) cv_up_.wait(lock, [&] { return !up_.empty() || cancelled_; });
    std::vector<Up> out(std::make_move_iterator(up_.begin()), std::make_move_iterator(up_.end()));
    up_.clear();
    return out;
  }
  void signal() {
    uint64_t one = 1;
    if (back_event_.valid()) (void)!::write(back_event_.get(), &one, sizeof one);
  }
  void clear_event() {
    uint64_t n = 0;
    if (back_event_.valid()) (void)!::read(back_event_.get(), &n, sizeof n);
  }

  std::mutex mu_;
  std::condition_variable cv_down_, cv_up_;
  std::deque<Down> down_;
  std::deque<Up> up_;
  bool closed_ = false, cancelled_ = false;
  Status error_ = Status::ok();
  size_t peak_ = 0;
  fs::Fd back_event_;
};

}  // namespace cairn
