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
  bool device = false;              // src is device (GPU) memory: only a device snapshotter copies it
  void* device_context = nullptr;   // its CUDA context (device/driver.hpp)
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
  double fault_wait_seconds = 0;  // cow: the fault handler's time on them (from reading each to letting it go)
  // cow tracking writes: the first writes to protected memory whose bytes were in the slot already, from
  // the previous snapshot's begin() to this one's -- each waited only for its un-protection -- and the
  // handler's time on them.
  uint64_t unprotect_faults = 0;
  double unprotect_wait_seconds = 0;
  // cow tracking writes: blocks of this snapshot un-protected as soon as they were copied (by the copier
  // or the fault handler), noted written before a write (CowOptions::unprotect_ahead).
  uint64_t unprotected_ahead = 0;
  // cow tracking writes since the previous snapshot (written_known): the bytes of the chunks noted
  // written between that snapshot's begin() and this one's, those un-protected ahead included -- how
  // much of its state the application rewrites between two checkpoints.
  bool written_known = false;
  uint64_t written_bytes = 0;
  // cow: writes that the copier served because the fault handler thread had not read them from the
  // descriptor within kLateSeconds (a handler queued behind the copier), from the previous snapshot's
  // completion to this one's. Each is counted in faults or unprotect_faults too.
  uint64_t late_faults = 0;
  std::vector<SnapshotFallback> fallbacks;  // cow: regions that could not be write-protected
  uint64_t device_bytes = 0;       // device: bytes copied from device memory
  double device_copy_seconds = 0;  // device: from begin() to the last device byte in the slot
  // Checksums already computed while the bytes landed (device pieces are hashed as they arrive), for
  // the stream described by set_chunking(): chunk_known[i] says chunk_hashes[i] holds chunk i's xxh3.
  // Empty when nothing was hashed ahead; the seal hashes the rest.
  std::vector<uint64_t> chunk_hashes;
  std::vector<uint8_t> chunk_known;
  // copy: every byte copied and every chunk hashed in one pass (no previous stream told), the hashes in
  // chunk_hashes; and, on the first such copy of a snapshotter (of 1 MiB or more), what hashing alone cost
  // per byte (0 otherwise), for l1_incremental = auto.
  bool hashed_copy = false;
  double hash_ns_per_byte = 0;
  // copy with set_previous(): bytes of the regions left in place, their chunks' hashes unchanged.
  // cow with write tracking: bytes of the chunks not written since the slot's snapshot, left in place.
  uint64_t unchanged_bytes = 0;
  // cow with write tracking (tracks_writes()): which snapshot of this snapshotter the slot now holds
  // (0: none), to hand back with set_previous() when the slot is written again; and, when the slot's
  // previous stream was known, chunk_changed[i] = 1 for every chunk that may differ from it (0: the
  // chunk's bytes are the slot's previous ones, its hash is chunk_hashes[i]). Empty: unknown.
  uint64_t generation = 0;
  std::vector<uint8_t> chunk_changed;
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
  // The application may free, move or reuse [base, base + len) once this returns (cairn_unprotect, a
  // region protected again elsewhere): wait_copied(), and stop watching that memory for writes.
  virtual void forget(const void* base, uint64_t len) {
    (void)base;
    (void)len;
    wait_copied();
  }
  // The next begin()'s slot holds a stream of stream_len bytes checksummed in chunks of chunk_size:
  // a snapshotter that can hash chunks while they land reports them (SnapshotReport::chunk_hashes).
  // chunk_size 0: the slot holds more than the regions (files): hash nothing ahead.
  virtual void set_chunking(uint32_t chunk_size, uint64_t stream_len) {
    (void)chunk_size;
    (void)stream_len;
  }
  // The next begin()'s slot already holds a stream, chunked as set_chunking() says, whose chunk i hashed
  // to previous[i] (empty: unknown). A snapshotter that can compare hashes first copies only the chunks
  // that differ, and reports every chunk's hash. A snapshotter that tracks writes (tracks_writes())
  // copies only the chunks written since its snapshot `generation` (SnapshotReport::generation), which
  // the slot holds, without reading the others. Used once: begin() forgets it.
  virtual void set_previous(std::vector<uint64_t> previous, uint64_t generation = 0) {
    (void)previous;
    (void)generation;
  }
  // Whether this snapshotter learns from the write-protection which chunks were written between two
  // snapshots (cow): then set_previous() costs nothing to use, where a copy must hash every chunk.
  virtual bool tracks_writes() const { return false; }
};

// The plain one: memcpy on the blocking path; with set_previous(), for memory regions that tile the stream
// from byte 0, each chunk hashed first and copied only when its hash differs.
std::unique_ptr<Snapshotter> make_copy_snapshotter();

}  // namespace cairn
