// Pinned host memory for device copies: the L1 slot bytes that receive a device region are registered
// with the driver (cuMemHostRegister) the first time a version copies into them, and stay registered
// while the slot's mapping lives, so every later version's copy runs at the bus's speed without paying
// for the registration again. A mapping about to be unmapped is unregistered first (the cache's unmap
// hook, cache/snapshot_slot.hpp). Process-wide and thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "base/status.hpp"
#include "device/driver.hpp"

namespace cairn::device {

class PinnedRanges {
 public:
  // Make [p, p + len) pinned: nothing to do when a registered range holds it; else the page-aligned
  // range is registered (ranges it overlaps are unregistered first). A driver that refuses (memory
  // limits, a file system it cannot pin) is not an error: *pinned = false, and the copy runs from
  // pageable memory, slower; the reason is returned in *why.
  Status ensure(const Driver& driver, CUcontext ctx, const void* p, uint64_t len, bool* pinned, std::string* why);
  // Unregister every range that overlaps [p, p + len).
  void forget(const void* p, uint64_t len);
  bool covers(const void* p, uint64_t len) const;
  size_t count() const;

 private:
  struct Range {
    uintptr_t begin, end;
    const Driver* driver;
    CUcontext ctx;
  };
  void drop_overlapping(uintptr_t begin, uintptr_t end);  // mu_ held
  mutable std::mutex mu_;
  std::vector<Range> ranges_;
};

// The process's ranges; the first call installs the cache's unmap hook.
PinnedRanges& pinned_ranges();

}  // namespace cairn::device
