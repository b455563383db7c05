// The one pull engine: a stream of remote ranges read, in order, into the buffers of a bounded pool
// (buffer_pool.hpp), one piece per buffer, through the endpoint's RmaQueue. Its two users differ only in
// their sink:
//   - a service agent reads a rank's registered slot (one range) and hands each piece, in stream order,
//     to its chunk sink: verify, compress, the L3 writer (service/agent/);
//   - a migration's sink reads the files of a node's cache (a range each) and hands each piece to the
//     cache writer, which checks and writes pieces in any order (service/migrate/, cache/node_move.hpp).
// Whoever drives it keeps the free buffers (a pool's free list, a pipe's) and lends one per piece through
// issue()'s `take`, which may also refuse for its own reasons (a bandwidth limit); poll() hands each piece
// to the caller's sink when all its reads are through, or at its first failed one.
//
// The stream's reads are the queue's transfers tagged `tag_base + buffer`; the caller's other transfers
// on the same queue (an agent's restore writes) keep to tags owns() refuses. One thread, as the queue.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "base/status.hpp"
#include "fabric/buffer_pool.hpp"
#include "fabric/rma_queue.hpp"

namespace cairn::fabric {

class PullStream {
 public:
  struct Range {
    uint64_t peer = 0, addr = 0, key = 0;  // the peer's registered memory: fi_addr, remote address, key
    uint64_t len = 0;
  };
  struct Piece {
    size_t range = 0;     // index into the stream's ranges
    uint64_t offset = 0;  // within its range
    uint64_t len = 0;
    uint32_t buffer = 0;
  };

  PullStream(RmaQueue& rma, BufferPool& pool, uint64_t tag_base = 0) : rma_(rma), pool_(pool), tag_base_(tag_base) {}
  PullStream(const PullStream&) = delete;
  PullStream& operator=(const PullStream&) = delete;

  // A new stream, read in pieces of at most `piece_len` bytes (at most the pool's chunk; a piece never
  // crosses a range's end), each in RMA reads of at most `rma_len` (0: one read per piece). The previous
  // stream must be over: no read of it in flight.
  void start(std::vector<Range> ranges, uint64_t piece_len, uint64_t rma_len = 0);
  // Queue reads of the next pieces, in stream order, into the buffers `take(len)` lends (std::nullopt:
  // none now), then post what the provider takes. A failed post: its error, and its piece is reported
  // failed by a later completed().
  Status issue(const std::function<std::optional<uint32_t>(uint64_t len)>& take);
  // Take up to 64 of the queue's completions (this also makes progress for the provider) and hand each
  // piece that ended to `sink`, with its outcome (ok, or its first failed read's error); the buffer is the
  // caller's again either way. Completions that are not this stream's go to *others (dropped with a log
  // line when null). The number of completions taken, or the queue's error.
  using Sink = std::function<void(const Piece&, const Status&)>;
  Result<int> poll(const Sink& sink, std::vector<RmaQueue::Done>* others = nullptr);
  // Whether a completion of the queue is one of this stream's reads.
  bool owns(const RmaQueue::Done& d) const {
    return d.tag >= tag_base_ && d.tag - tag_base_ <= UINT32_MAX && reading_.count(static_cast<uint32_t>(d.tag - tag_base_));
  }
  // The piece that completion ended (owns(d) must hold); its buffer is the caller's again either way.
  Piece completed(const RmaQueue::Done& d);
  // Give up: the reads the provider never got are forgotten, and their buffers returned. Reads already
  // posted still complete (reading() > 0 until they did); their buffers come back through completed().
  std::vector<uint32_t> abandon();

  bool all_issued() const { return next_range_ >= ranges_.size(); }
  size_t reading() const { return reading_.size(); }  // pieces whose reads did not all complete yet
  uint64_t issued_bytes() const { return issued_; }

 private:
  RmaQueue& rma_;
  BufferPool& pool_;
  uint64_t tag_base_ = 0;
  std::vector<Range> ranges_;
  uint64_t piece_len_ = 0, rma_len_ = 0;
  size_t next_range_ = 0;
  uint64_t next_offset_ = 0, issued_ = 0;
  std::map<uint32_t, Piece> reading_;  // by buffer
};

}  // namespace cairn::fabric
