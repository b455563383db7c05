// Which bytes of a snapshot the copy-on-write snapshotter protects and which it copies in begin():
// each region's whole pages are protected when they are private anonymous memory, not shared with
// another region, and at least `eager_below` bytes; the rest (partial first and last pages, small
// regions, regions that cannot be protected) is copied on the blocking path.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "cache/snapshot.hpp"

namespace cairn::cow {

struct ProtectedRange {
  size_t region = 0;           // index into the regions given to plan_snapshot
  uint64_t start = 0, end = 0;  // page aligned, inside the region
};

struct EagerCopy {
  size_t region = 0;
  uint64_t from = 0, len = 0;  // bytes of the region (offset from its start)
};

struct SnapshotPlan {
  std::vector<ProtectedRange> protect;  // sorted by start, disjoint
  std::vector<EagerCopy> eager;
  std::vector<SnapshotFallback> fallbacks;  // regions not protected at all, for a reason worth saying
};

// ERR_INVALID_ARG when a region (of at least eager_below bytes) is not entirely mapped and readable: a
// copy would crash there.
Result<SnapshotPlan> plan_snapshot(const std::vector<SnapshotRegion>& regions, uint64_t page, uint64_t eager_below);

}  // namespace cairn::cow
