#include "fabric/buffer_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

namespace cairn::fabric {

Result<std::unique_ptr<BufferPool>> BufferPool::create(Endpoint& ep, uint64_t bytes, uint32_t chunk,
                                                       uint64_t access) {
  if (chunk == 0) return make_error(Code::ERR_INVALID_ARG, "buffer pool with chunk size 0");
  std::unique_ptr<BufferPool> p(new BufferPool());
  p->chunk_ = chunk;
  p->count_ = static_cast<uint32_t>(std::max<uint64_t>(1, bytes / chunk));
  p->mapped_ = static_cast<uint64_t>(p->count_) * chunk;
  // Populated now: providers that pin memory (FI_MR_ALLOCATED) need the pages to exist.
  void* m = mmap(nullptr, p->mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (m == MAP_FAILED) return posix_error("mmap", "(buffer pool)", errno);
  p->base_ = static_cast<uint8_t*>(m);
  CAIRN_ASSIGN_OR_RETURN(mr, ep.register_memory(p->base_, p->mapped_, access));
  p->mr_ = std::move(mr);
  for (uint32_t i = p->count_; i > 0; --i) p->free_.push_back(i - 1);
  return p;
}

BufferPool::~BufferPool() {
  mr_.reset();
  if (base_) munmap(base_, mapped_);
}

bool BufferPool::buffer_at(uint64_t remote, uint32_t* i) const {
  uint64_t base = mr_->remote_base();
  if (remote < base || (remote - base) % chunk_ != 0) return false;
  uint64_t idx = (remote - base) / chunk_;
  if (idx >= count_) return false;
  *i = static_cast<uint32_t>(idx);
  return true;
}

bool BufferPool::take(uint32_t* i) {
  if (free_.empty()) return false;
  *i = free_.back();
  free_.pop_back();
  return true;
}

void BufferPool::give(uint32_t i) { free_.push_back(i); }

}  // namespace cairn::fabric
