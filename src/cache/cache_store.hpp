// One rank's part of the node-local L1 cache: its snapshot slots and, per version, the record that
// makes the version count at L1 (written last, atomically), the L2 set file and the protected marker.
// Layout in docs/format.md ("L1 cache").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/snapshot_slot.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn {

struct L1Record {
  uint32_t slot = 0;
  Manifest manifest;
};

class CacheStore {
 public:
  // Creates the directory if needed. nslots: cache_versions.
  Status open(const std::string& rank_dir, int nslots);
  const std::string& dir() const { return dir_; }
  int nslots() const { return static_cast<int>(slots_.size()); }

  std::string slot_path(int slot) const;
  std::string red_path(int slot) const;
  std::string record_path(uint64_t v) const;
  std::string set_path(uint64_t v) const;
  std::string protected_path(uint64_t v) const;
  std::string files_dir(uint64_t v) const;  // where restored/routed files of version v live

  // The mapped snapshot slot / redundancy buffer of a slot, grown to at least `size` bytes.
  Result<MappedFile*> slot(int slot, uint64_t size);
  Result<MappedFile*> red(int slot, uint64_t size);

  Status write_record(uint64_t v, const L1Record& rec);
  Result<L1Record> read_record(uint64_t v) const;
  Status write_set(uint64_t v, const std::string& bytes);
  Result<std::string> read_set(uint64_t v) const;
  Status mark_protected(uint64_t v);
  bool is_protected(uint64_t v) const;
  // Forget version v at L1 (record first, so a crash in between leaves no half-valid version).
  Status drop(uint64_t v);

  // Versions with a record file, ascending.
  std::vector<uint64_t> versions() const;
  // The version whose record points at `slot`, or 0.
  uint64_t version_in_slot(int slot) const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<MappedFile>> slots_, reds_;
};

}  // namespace cairn
