// The writing side of an agent, on a thread of its own: it takes one transfer's chunks in stream
// order, checks every checksum chunk's xxh3 against the manifest as its last byte arrives, writes the
// bytes with l3::RankWriter (the embedded flusher's writer: the same files, names and order), and once
// every chunk passed, finishes the rank's files (fsync, where-record, manifest last). A chunk's buffer
// is handed back as soon as its bytes are written, so the pool refills while the file system writes.
//
// Used from the agent's loop thread: begin(), chunk() in stream order, end() or abort(); the outcomes
// and the freed buffers come back through take_events(), signalled on event_fd().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/fsutil.hpp"
#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"
#include "pfs/l3_store.hpp"

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
  Status start();
  int event_fd() const { return event_.get(); }

  void begin(uint64_t transfer, const Layout& layout, const Manifest& m, const l3::RankPlacement& place,
             const l3::WriteOptions& opts);
  // Stream bytes [offset, offset + len) in pool buffer `buffer`, the next ones in stream order.
  void chunk(uint64_t transfer, uint64_t offset, const uint8_t* data, uint32_t len, uint32_t buffer);
  // Every chunk was given: finish the files.
  void end(uint64_t transfer);
  // Give up: queued chunks come back as freed buffers unwritten, partial files are removed.
  void abort(uint64_t transfer);
  std::vector<Event> take_events();

 private:
  struct Item {
    enum Kind { begin, chunk, end, abort } kind = chunk;
    uint64_t transfer = 0;
    uint64_t offset = 0;
    const uint8_t* data = nullptr;
    uint32_t len = 0, buffer = 0;
    Layout layout;
    Manifest manifest;
    l3::RankPlacement place;
    l3::WriteOptions opts;
  };
  void run();
  void enqueue(Item it);
  void handle(Item& it);
  Status verify_and_write(const Item& it);
  void emit(Event e);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::vector<Event> events_;
  bool stop_ = false;
  fs::Fd event_;
  std::thread thread_;

  // The transfer being written (thread-owned).
  uint64_t current_ = 0;
  bool failed_ = false;
  Manifest manifest_;
  std::unique_ptr<l3::RankWriter> writer_;
  struct HashState;
  std::unique_ptr<HashState> hash_;
  uint64_t hashed_ = 0;  // stream bytes hashed so far
};

}  // namespace cairn::service
