// Rebuilding lost ranks of one version from the L2 files that survive in the node-local caches, in one
// process and without MPI: what `cairn run`'s scavenge does when a node's cache is gone at the end of a
// run (as SCR's scavenge rebuilds before it flushes). The same set records (v<N>.set), redundancy data
// (slot-<i>.red) and codec (SetCode::decode_all) as the job's own L2 rebuild, read from the files.
//
// For every lost rank, its set is found in a surviving member's set record. Every other member of that
// set must either survive with the version whole at L1 and protected (v<N>.protected), or be lost too,
// within what the set's code tolerates. Survivors' streams are verified against their manifests before
// use; each rebuilt stream is verified against the manifest its set record holds, then written as an L1
// copy of the version (slot 0 and the record) into a rank directory of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "cache/cache_store.hpp"

namespace cairn::redundancy {

// A rank whose L1 copy of the version is at hand: its rank directory and its record there.
struct CachedCopy {
  uint32_t rank = 0;
  std::string rank_dir;
  L1Record record;
};

// Rebuilds version `version` of every rank in `lost` (job ranks) from the L2 files of the ranks in `held`
// and writes each into `out_dir`/r<rank> (created; a copy already there is replaced). Returns the rebuilt
// copies, in the order of `lost`. ERR_UNRECOVERABLE, naming the rank and why, when a lost rank is in no
// surviving set record, when its set lost more members than the code tolerates, or when a survivor of the
// set is not protected; ERR_CORRUPT when a survivor's stream or redundancy data, or a rebuilt stream, does
// not match its manifest. Nothing is written unless every lost rank was rebuilt.
Result<std::vector<CachedCopy>> rebuild_lost_ranks(uint64_t version, const std::vector<CachedCopy>& held,
                                                   const std::vector<uint32_t>& lost, const std::string& out_dir);

}  // namespace cairn::redundancy
