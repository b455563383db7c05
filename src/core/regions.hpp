// The application's protected regions: the table that cairn_protect, cairn_protect_distributed,
// cairn_set_resize and cairn_unprotect edit, which regions live in device memory, the manifest entries a
// version describes them by, and whether they fit a version a restart reads into them. No MPI: the rank
// and the rank count come in as arguments. Runtime owns one and adds what needs its other parts (the
// device classification, the snapshotter's wait, the slot preparation).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "base/manifest.hpp"
#include "base/status.hpp"
#include "base/stream_reader.hpp"
#include "cache/snapshot.hpp"
#include "cairn/cairn.h"
#include "redistribute/distribution.hpp"
#include "redistribute/exec/region_table.hpp"

namespace cairn {

class ProtectedRegions {
 public:
  // cairn_protect's checks of its arguments; returns the element size of `type`. ERR_INVALID_ARG naming
  // the region otherwise.
  static Result<uint32_t> check(const char* name, void* ptr, size_t count, int type);
  // cairn_protect_distributed's checks, for rank `rank` of `nranks`: the distribution `d` describes, its
  // count for this rank against `count`. ERR_INVALID_ARG or ERR_SIZE_MISMATCH otherwise.
  static Result<redistribute::Distribution> check_distribution(const char* name, size_t count,
                                                               const cairn_distribution* d, int rank, int nranks);
  // cairn_local_count: the elements rank `rank` of `nranks` holds of a distributed region.
  static Status local_count(const cairn_distribution* d, int rank, int nranks, size_t* count);

  bool contains(const std::string& name) const { return table_.count(name) != 0; }
  // Enters `name` as a private region, or replaces its memory (its resize callback stays); `device`: ptr
  // is device memory of CUDA context `context`. Arguments as check() passed them.
  void put(const char* name, void* ptr, size_t count, int type, uint32_t elem, bool device, void* context);
  // The region `name` (entered by put) takes distribution `dist`.
  void distribute(const char* name, const redistribute::Distribution& dist);
  // cairn_set_resize; ERR_UNKNOWN_REGION when `name` is not protected.
  Status set_resize(const char* name, cairn_resize_fn fn, void* user);
  // cairn_unprotect's check: ERR_UNKNOWN_REGION when `name` is not protected.
  Status check_unprotect(const char* name) const;
  void erase(const std::string& name);

  // The memory regions as manifest entries, back to back in name order, appended to `out`; returns
  // their bytes.
  uint64_t memory_entries(std::vector<RegionEntry>* out) const;
  // What the snapshotter copies for `entries` (from memory_entries): each region's memory, host or device.
  std::vector<SnapshotRegion> sources(const std::vector<RegionEntry>& entries) const;

  // Whether the regions protected now are exactly the memory regions of version manifest `m` of rank
  // `rank` of `nranks`, by name and size (when not, the full search says what does not match, before
  // anything is written).
  bool fit(const Manifest& m, int rank, int nranks) const;
  // The regions as extents of the version's stream (memory regions only), sorted by offset. Every
  // region of `m` must be protected (match).
  std::vector<StreamExtent> extents(const Manifest& m) const;

  // The table itself, for the restart and reshape executors (redistribute/exec/region_table.hpp).
  RegionTable& table() { return table_; }
  const RegionTable& table() const { return table_; }
  // The regions in device memory: name -> CUDA context.
  const std::map<std::string, void*>& on_device() const { return device_; }

 private:
  RegionTable table_;
  std::map<std::string, void*> device_;
};

}  // namespace cairn
