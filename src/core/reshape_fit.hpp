// What a reshaping restart needs to know about this process's regions before it reads anything
// (reshape.cpp, reshape_stream.cpp). Internal to the runtime.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/manifest.hpp"
#include "core/runtime.hpp"
#include "redistribute/distribution.hpp"

namespace cairn {

// A region of a version, with its distribution, as the new layout needs it.
struct ReshapeWant {
  const RegionEntry* entry;  // in the version's region table
  redist::Distribution dist;
};

// 1 if this process's regions already are what the new layout (rank `rank` of `p_new`) needs for the
// version whose region table is `table`: every region protected, same element size, its new count
// (no resize), no private region, and no protected region missing from the version. Then the version's
// bytes may be read straight into the regions; the general path would accept them as they are.
// `wants` gets the table's regions in table order (pointing into `table`).
int regions_fit(const std::map<std::string, Region>& regions, const Manifest& table, int p_new, int rank,
                std::vector<ReshapeWant>* wants);

// The region of `want` in old rank k's manifest `m` (of p_old ranks), checked: same element size, and
// the count its distribution gives old rank k. ERR_CORRUPT naming the region and the old rank otherwise.
Result<const RegionEntry*> held_region(const Manifest& m, const ReshapeWant& want, int p_old, int k);

// After a reshaping restart that filled the regions itself: every region takes the distribution the
// version recorded for it.
void adopt_distributions(std::map<std::string, Region>& regions, const std::vector<ReshapeWant>& wants);

// 1 if the streamed L1 path (Runtime::reshaped_from_l1_streamed) suits this rank: chunks small enough
// to buffer a few per host, and few enough messages for it to send and receive (a block_cyclic region
// with small blocks has a piece per block; the general path's one datatype per peer serves it better).
int streamable(const Manifest& table, const std::vector<ReshapeWant>& wants, int p_old, int p_new, int rank,
               const std::vector<int>& host_of_old);

}  // namespace cairn
