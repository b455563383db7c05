// Taking a snapshot: how the protected regions' bytes reach a version's lent L1 slot. The L1 stage of
// the pipeline calls begin() on the application's blocking path and complete() before the version is
// sealed (hashed); nothing reads the slot before complete() returned.
//
//   copy  begin() copies every region into the slot (one memcpy each) and returns; complete() is free.
//   cow   (copy-on-write) begin() write-protects the regions and returns; a background copier fills the
//         slot, and a write by the application to a page not yet copied waits only for that page's
//         copy. complete() waits for the copier.
//
// Contract: after begin() returned, the application may write its regions at once; the slot ends up
// holding the regions' bytes exactly as they were when begin() was called. At most one snapshot is in
// flight: begin() is called again only after complete(). The regions passed to begin() stay mapped until
// complete() returned (unprotecting or resizing a region waits for complete()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn {

// One region of the snapshot: `size` bytes at `src` go to slot[offset, offset + size).
struct SnapshotRegion {
  std::string name;
  const void* src = nullptr;
  uint64_t size = 0;
  uint64_t offset = 0;
};

// A region that the cow snapshotter copied in begin() instead, and why ("shared memory", ...).
struct SnapshotFallback {
  std::string region;
  std::string why;
};

// What the last snapshot cost, for the checkpoint's log line and cairn-bench. Valid after complete().
struct SnapshotReport {
  double blocking_seconds = 0;  // in begin(): what the application waited for
  double copy_seconds = 0;      // from begin() to the last byte in the slot
  uint64_t bytes = 0;
  uint64_t protected_bytes = 0;  // cow: taken by copy-on-write; the rest was copied in begin()
  uint64_t faults = 0;           // cow: writes that waited for their page's copy
  uint64_t fault_bytes = 0;      // cow: bytes copied for them, ahead of the copier
  std::vector<SnapshotFallback> fallbacks;  // cow: regions that could not be write-protected
};

class Snapshotter {
 public:
  virtual ~Snapshotter() = default;
  virtual const char* name() const = 0;  // "copy", "cow"
  virtual Status begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) = 0;
  virtual Status complete() = 0;
  virtual SnapshotReport report() const = 0;
  // Blocks until the snapshot in flight no longer reads or protects the regions (at once for copy): a
  // region may then be unmapped or resized, before complete() too. Any thread.
  virtual void wait_copied() {}
};

// The plain one: memcpy on the blocking path.
std::unique_ptr<Snapshotter> make_copy_snapshotter();

}  // namespace cairn
