// A bounded pool of registered memory, cut into equal buffers: an agent's (8 MiB in 128 KiB chunks by
// default) and a migration sink's. A piece on its way from a peer to the file system lives in one buffer
// from the moment it is read (pull) or credited (push) until its bytes are written; so at most
// pool/chunk pieces are in flight, and reading, moving and writing overlap. The pool keeps a free list
// for a caller that hands buffers out itself (the agent); a caller whose free buffers come back through a
// pipe (the migration sink's MovePipe) leaves it alone.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.hpp"
#include "fabric/endpoint.hpp"

namespace cairn::fabric {

class BufferPool {
 public:
  // `bytes` rounded down to whole chunks (at least one). Registered with `access`: by default for fi_read
  // into it and, for push, for the ranks' fi_write into it.
  static Result<std::unique_ptr<BufferPool>> create(Endpoint& ep, uint64_t bytes, uint32_t chunk,
                                                    uint64_t access = kLocalRead | kRemoteWrite);
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  ~BufferPool();

  uint32_t count() const { return count_; }
  uint32_t chunk() const { return chunk_; }
  uint8_t* data(uint32_t i) { return base_ + static_cast<uint64_t>(i) * chunk_; }
  // Where buffer i starts for a remote writer (remote address), and the buffer a remote address names.
  uint64_t remote_addr(uint32_t i) const { return mr_->remote_base() + static_cast<uint64_t>(i) * chunk_; }
  bool buffer_at(uint64_t remote_addr, uint32_t* i) const;
  void* desc() const { return mr_->desc(); }
  uint64_t key() const { return mr_->key(); }
  uint64_t bytes() const { return static_cast<uint64_t>(count_) * chunk_; }

  bool take(uint32_t* i);
  void give(uint32_t i);
  uint32_t free_count() const { return static_cast<uint32_t>(free_.size()); }

 private:
  BufferPool() = default;
  uint8_t* base_ = nullptr;
  uint64_t mapped_ = 0;
  uint32_t count_ = 0, chunk_ = 0;
  std::unique_ptr<MemoryRegion> mr_;
  std::vector<uint32_t> free_;
};

}  // namespace cairn::fabric
