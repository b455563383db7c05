// The writing side of an agent, on a thread of its own: it takes one transfer's chunks in stream
// order and runs them through the application's chain of stages (stage_chain.hpp): verify checks every
// checksum chunk's xxh3 against the manifest as its last byte arrives, write stores the bytes with
// l3::RankWriter (the embedded flusher's writer: the same files, names and order; compressed when the
// chain compresses and the application asks), plugins see the verified bytes; once every chunk passed,
// each stage finishes in chain order (write: fsync, where-record, manifest last). A chunk's buffer is
// handed back as soon as every stage has it, so the pool refills while the file system writes.
//
// Used from the agent's loop thread, in the lifecycle of the flushers and the pipe: begin(), chunk() in
// stream order and end() post, cancel() gives a transfer up; the outcomes and the freed buffers come back
// through test(), which does not wait, or wait(), which does. The agent's loop waits in poll(2) on
// event_fd() beside its sockets and the fabric, and then takes them with test(). Between the two threads
// is the one bounded pipe (base/pipe.hpp): items down, events up.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/pipe.hpp"
#include "base/status.hpp"
#include "l3/l3_store.hpp"
#include "service/agent/stage_chain.hpp"

namespace cairn::service {

class ChunkSink {
 public:
  struct Event {
    enum Kind { buffer_free, finished, failed } kind = buffer_free;
    uint64_t transfer = 0;
    uint32_t buffer = 0;
    Status status;  // failed: why (a checksum, the file system)
  };

  ChunkSink();
  ChunkSink(const ChunkSink&) = delete;
  ChunkSink& operator=(const ChunkSink&) = delete;
  ~ChunkSink();
  Status start(Chain chain);
  int event_fd() const { return pipe_.back_fd(); }

  void begin(uint64_t transfer, StageVersion version);
  // Stream bytes [offset, offset + len) in pool buffer `buffer`, the next ones in stream order.
  void chunk(uint64_t transfer, uint64_t offset, const uint8_t* data, uint32_t len, uint32_t buffer);
  // Every chunk was given: finish the files.
  void end(uint64_t transfer);
  // Give up: queued chunks come back as freed buffers unwritten, partial files are removed.
  void cancel(uint64_t transfer);
  // What happened since the last call (freed buffers, transfers finished or failed), oldest first:
  // test() does not wait; wait() waits for at least one event.
  std::vector<Event> test();
  std::vector<Event> wait();

 private:
  struct Item {
    enum Kind { begin, chunk, end, cancel } kind = chunk;
    uint64_t transfer = 0;
    uint64_t offset = 0;
    const uint8_t* data = nullptr;
    uint32_t len = 0, buffer = 0;
    std::unique_ptr<StageVersion> version;  // begin
  };
  void run();
  void handle(Item& it);
  void fail(const Status& why);

  Pipe<Item, Event> pipe_;
  std::thread thread_;

  Chain chain_;
  // The transfer being written (thread-owned): its version and its stages, begun.
  uint64_t current_ = 0;
  bool failed_ = false;
  std::unique_ptr<StageVersion> version_;
  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace cairn::service
