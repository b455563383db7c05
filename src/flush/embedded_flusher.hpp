// The embedded flusher: a thread of this process writes each posted version from its L1 slot to the
// prefix with l3::write_rank, one version at a time, in the order posted. The first implementation of
// the flusher contract (pipeline/flusher.hpp); the service's agents are the second.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "l3/l3_placement.hpp"
#include "pipeline/flusher.hpp"

namespace cairn::flush {

// The contract the flushers implement (pipeline/flusher.hpp).
using pipeline::Flusher;
using pipeline::FlushRequest;
using pipeline::FlushTicket;
using pipeline::RestoreTarget;

class EmbeddedFlusher final : public Flusher {
 public:
  // `options` is asked for the L3 write options when a request is written (they change as versions
  // finish: which offset counters may be cleaned).
  EmbeddedFlusher(Layout layout, std::function<l3::WriteOptions()> options);
  ~EmbeddedFlusher() override;

  const char* name() const override { return "embedded"; }
  Result<FlushTicket> post(const FlushRequest& request) override;
  Status test(FlushTicket ticket, bool* done) override;
  Status wait(FlushTicket ticket) override;
  Status cancel(FlushTicket ticket) override;

 private:
  enum class State { queued, writing, finished };
  struct Entry {
    FlushRequest request;
    State state = State::queued;
    Status outcome;
  };
  void run();
  Result<std::map<FlushTicket, Entry>::iterator> find(FlushTicket ticket, const char* call);

  Layout layout_;
  std::function<l3::WriteOptions()> options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<FlushTicket, Entry> entries_;
  std::deque<FlushTicket> queue_;
  FlushTicket next_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cairn::flush
