// The narrow view of the application's regions that the reshape and redistribution executors work on:
// the protected regions by name (pointer, count, element size, distribution, resize callback), the
// streams of old ranks a process holds while data moves, and the checks a reshaping restart makes
// before it reads anything.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/manifest.hpp"
#include "base/status.hpp"
#include "cache/snapshot_slot.hpp"
#include "cairn/cairn.h"
#include "redistribute/distribution.hpp"

namespace cairn {

struct Region {
  std::string name;
  void* ptr = nullptr;
  size_t count = 0;
  int type = 0;
  uint32_t elem_size = 1;
  uint32_t dist_kind = 0;               // cairn_dist_kind; 0 = private
  std::vector<uint64_t> dist_params;    // redistribute::Distribution::to_params()
  cairn_resize_fn resize = nullptr;
  void* resize_user = nullptr;
  uint64_t bytes() const { return static_cast<uint64_t>(count) * elem_size; }
};

using RegionTable = std::map<std::string, Region>;  // by name

// A version's snapshot stream of one old rank, as held by this process during a reshaping restart or
// a live redistribution.
struct HeldStream {
  int old_rank = 0;
  Manifest manifest;
  const uint8_t* data = nullptr;
  std::vector<uint8_t> storage;  // when the bytes live here (live packing)
  std::shared_ptr<MappedFile> map;  // when they live in a rank's L1 slot on this node, or staging memory (L3, L2 rebuild)
  std::string red_path;             // that slot's redundancy data (L2 rebuild across rank counts)
  bool self_placed = false;         // its pieces for the hosting process are already in the regions
};

// A region of a version, with its distribution, as the new layout needs it.
struct ReshapeWant {
  const RegionEntry* entry;  // in the version's region table
  redistribute::Distribution dist;
};

// Whether `regions` are exactly the version's regions (manifest `m`), all memory, by name and size: a
// restart on the same rank count may read the version straight into them.
inline bool regions_hold(const Manifest& m, const RegionTable& regions) {
  if (m.regions.size() != regions.size()) return false;
  for (const auto& e : m.regions) {
    auto it = regions.find(e.name);
    if (e.kind != RegionKind::memory || it == regions.end() || it->second.bytes() != e.size) return false;
  }
  return true;
}

// 1 if this process's regions already are what the new layout (rank `rank` of `p_new`) needs for the
// version whose region table is `table`: every region protected, same element size, its new count
// (no resize), no private region, and no protected region missing from the version. Then the version's
// bytes may be read straight into the regions; the general path would accept them as they are.
// `wants` gets the table's regions in table order (pointing into `table`).
int regions_fit(const RegionTable& regions, const Manifest& table, int p_new, int rank,
                std::vector<ReshapeWant>* wants);

// The region of `want` in old rank k's manifest `m` (of p_old ranks), checked: same element size, and
// the count its distribution gives old rank k. ERR_CORRUPT naming the region and the old rank otherwise.
Result<const RegionEntry*> held_region(const Manifest& m, const ReshapeWant& want, int p_old, int k);

// After a reshaping restart that filled the regions itself: every region takes the distribution the
// version recorded for it.
void adopt_distributions(RegionTable& regions, const std::vector<ReshapeWant>& wants);

// 1 if the streamed L1 path (Reshaper::from_l1_streamed) suits this rank: chunks small enough
// to buffer a few per host, and few enough messages for it to send and receive (a block_cyclic region
// with small blocks has a piece per block; the general path's one datatype per peer serves it better).
int streamable(const Manifest& table, const std::vector<ReshapeWant>& wants, int p_old, int p_new, int rank,
               const std::vector<int>& host_of_old);

// For tests, whose ranks all share one host: true makes the streamed path treat every other rank as on
// another host, so that a mapped stream's pieces for them go through the ring (as pieces that leave a
// host do); false goes back to the host's real neighbours.
void treat_other_ranks_as_remote_for_tests(bool remote);

}  // namespace cairn
