// One-sided transfers posted as the provider's queue allows and reported whole: the one RMA loop of the
// service's agents (the pull of a rank's slot, the writes of a restore into a rank's memory) and of a
// migration's sink (the pull of a node's cache). A transfer names a registered local buffer, a peer's
// remote address and key, and a tag of the caller's; it is cut into operations of at most its `max_op`
// bytes, each one fi_read or fi_write, at most `max_in_flight` of them posted at a time. The queue is told when
// the provider's queue is full (post() again after completions) and reports a transfer once: when all
// its operations completed, or at its first failed one (its later ones are absorbed as they complete).
// The service's push (a rank writing its slot into the agent's credited buffers) uses it too, a transfer
// per chunk; a transfer not posted yet can be taken back (drop_unposted), all or by tag.
//
// The queue owns every local operation of its endpoint: poll() takes the endpoint's completions, and
// every one of them must be one of its operations. One thread at a time, as the endpoint.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "base/status.hpp"
#include "fabric/endpoint.hpp"

namespace cairn::fabric {

class RmaQueue {
 public:
  enum class Kind { read, write };  // read: remote -> local; write: local -> remote
  struct Transfer {
    Kind kind = Kind::read;
    uint8_t* local = nullptr;  // `len` bytes of a registered region (`desc` its descriptor)
    uint64_t len = 0;
    void* desc = nullptr;
    uint64_t peer = 0, remote_addr = 0, key = 0;
    uint64_t max_op = 0;  // bytes of the largest single operation; 0: the whole transfer in one
    uint64_t tag = 0;    // the caller's
  };
  struct Done {
    uint64_t tag = 0;
    Status status;  // ok, or the first failed operation's error
  };

  explicit RmaQueue(Endpoint& ep, size_t max_in_flight = SIZE_MAX);
  RmaQueue(const RmaQueue&) = delete;
  RmaQueue& operator=(const RmaQueue&) = delete;
  // Operations still in flight belong to the provider: settle() first, or close the endpoint before the
  // memory they name goes away.
  ~RmaQueue() = default;

  // Queue a transfer (posted by the next post()). A transfer of 0 bytes is reported done at once.
  void add(const Transfer& t);
  // Post queued operations until none is left, the provider's queue is full or max_in_flight are in flight:
  // ok. A post that fails: that error, and the transfer it belongs to is reported failed by the next
  // poll() (its other operations stay as they are).
  Status post();
  // Take up to 64 of the endpoint's completions (this also makes progress for the provider) and append
  // the transfers that ended to *done; the number of completions taken.
  Result<int> poll(std::vector<Done>* done);
  // Forget the transfers none of whose operations was posted yet (only those whose tag `which` accepts, when
  // given); their tags go to *dropped, and they are never reported.
  void drop_unposted(std::vector<uint64_t>* dropped, const std::function<bool(uint64_t tag)>& which = {});
  // Poll until no operation is in flight or `timeout_s` passed (a transfer given up on must not land in
  // memory that is about to be reused); the operations still in flight.
  uint64_t settle(double timeout_s);

  uint64_t in_flight() const { return in_flight_; }       // operations posted and not completed
  bool idle() const { return in_flight_ == 0 && unposted_.empty() && ended_.empty(); }

 private:
  struct Open {
    Transfer t;
    uint64_t ops_left = 0;  // not completed yet (posted or not)
    uint64_t posted = 0;       // operations posted
    bool reported = false;     // failed and told already: the rest are absorbed
  };
  struct Op : OpContext {
    uint64_t transfer = 0, offset = 0, len = 0;
  };
  std::unique_ptr<Op> take_op();
  void op_ended(Op* p, const Status& st, std::vector<Done>* done);

  Endpoint& ep_;
  size_t max_in_flight_;
  uint64_t next_ = 1;
  std::map<uint64_t, Open> open_;
  std::deque<std::unique_ptr<Op>> unposted_;
  std::vector<std::unique_ptr<Op>> free_;
  std::vector<Done> ended_;  // reported by the next poll(): empty transfers, failed posts
  uint64_t in_flight_ = 0;
};

}  // namespace cairn::fabric
