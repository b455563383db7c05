// A version whose stream is partly in its L1 slot and partly in files: the file API's routed files are
// the version's L1 copy where the application wrote them (<rank dir>/v<N>.files/<name>), never copied
// into the slot. A view maps the slot's memory part and every file into one contiguous read-only range,
// so that everything that reads a version's stream (the seal's checksums, L2, the flushers, verification)
// reads it from where it lies, with no copy.
//
// Layout of such a stream (docs/format.md, "The file API's versions"): the memory regions packed from
// offset 0, then each file at the next multiple of the page size; the bytes between a region's end and
// the next page are zero (the slot's tail is cleared by the snapshot, a file's last page reads as zeros
// past its end).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn {

// The page-aligned offset at which a file region may start after `offset`.
uint64_t file_region_offset(uint64_t offset);

class VersionView {
 public:
  // `slot_path`: the slot file, whose first `memory_bytes` bytes are the memory regions (the rest of the
  // page is zero); `files`: (path, offset, size) of each file region; total: the stream's length.
  struct File {
    std::string path;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  static Result<std::shared_ptr<VersionView>> map(const std::string& slot_path, uint64_t memory_bytes,
                                                  const std::vector<File>& files, uint64_t total);
  // The view of a version as its manifest describes it: memory regions in `slot_path`, file regions in
  // `files_dir`/<name>. ERR_CORRUPT when a file is shorter than its region.
  static Result<std::shared_ptr<VersionView>> of(const Manifest& m, const std::string& slot_path,
                                                 const std::string& files_dir);

  VersionView(const VersionView&) = delete;
  VersionView& operator=(const VersionView&) = delete;
  ~VersionView();

  const uint8_t* data() const { return base_; }
  uint64_t size() const { return total_; }

 private:
  VersionView() = default;
  uint8_t* base_ = nullptr;
  uint64_t total_ = 0, mapped_ = 0;
};

// Whether a version has file regions (and so needs a view to be read as one stream).
bool has_files(const Manifest& m);

}  // namespace cairn
