// A snapshot slot: a file in the node-local cache directory, mapped shared into the process.
// Slots are created once, pre-faulted (MAP_POPULATE) and reused by later versions, so the blocking
// copy of a checkpoint writes to pages that already exist (a fresh tmpfs page costs several times a reused
// one: docs/performance.md). Being a file, a slot outlives the process: a rank that crashes restarts from it
// on the same node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.hpp"

namespace cairn {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  ~MappedFile();

  // Between two pieces of a prefault (kPrefaultPiece bytes each): true goes on, false stops the work
  // with a status saying so, and what was done stays done (the file keeps the pages it got; a later call
  // goes on from there). It may block: a preparation that gives way to something dearer waits there.
  using PieceGate = std::function<bool()>;
  // Map `path` read-write with at least `size` bytes, creating or growing the file as needed.
  // The file's existing bytes are kept. prefault: populate every page now; with a gate, in pieces.
  static Result<MappedFile> open_rw(const std::string& path, uint64_t size, bool prefault,
                                    const PieceGate& gate = {});
  // Map an existing file read-only (its whole length). populate: set up every page table entry now
  // (MAP_POPULATE), which for a file about to be read whole costs less than a fault per page.
  static Result<MappedFile> open_ro(const std::string& path, bool populate = false);
  // Private anonymous memory of `size` bytes (at least one page), for staging a stream read from a
  // file: nothing is zero-filled here (the kernel supplies zero pages as they are first written, huge
  // pages where transparent huge pages allow it), so a reader pays for each page once. path() is empty.
  // populate: every page faulted in now instead (MADV_POPULATE_WRITE, else one write per page), for a
  // caller with time to spare before the bytes arrive; memory the kernel cannot give fails here.
  static Result<MappedFile> anonymous(uint64_t size, bool populate = false);

  // Grow (never shrink) the mapping to hold `size` bytes. gate: as for open_rw.
  Status reserve(uint64_t size, bool prefault, const PieceGate& gate = {});
  // Read one byte of every 4 KiB page of the mapping from this thread, a piece (kPrefaultPiece) at a
  // time, the pieces touched before skipped: on a guest with shadow paging the process's first access to
  // each page costs a host fault even after the kernel populated it, and the first copy into the slot
  // would pay it (docs/performance.md, "The first checkpoints: the slot's pages touched in the
  // preparation"). Loads only: the file may hold a version. Before each piece `gate` as above, and
  // `go_on`: false ends the touching at once with success (someone waits for the file; touching again
  // later goes on where it stopped). A reserve() that grows the mapping starts the touching anew.
  Status touch(const PieceGate& gate, const std::function<bool()>& go_on);
  static constexpr uint64_t kPrefaultPiece = 16ull << 20;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  void reset();

 private:
  std::string path_;
  int fd_ = -1;
  bool writable_ = false;
  uint8_t* data_ = nullptr;
  uint64_t touched_ = 0;  // bytes from the start touched by touch()
  uint64_t size_ = 0;
};

}  // namespace cairn
