// The L1 -> L3 flush done from outside the job: the flusher's out-of-process form (pipeline/flusher.hpp
// is the in-job seam). `cairn flush` and the launcher's scavenge run it for a job that ended; a service
// agent runs it for a job that lives on. It reads each rank's L1 record and slot from the node-local
// cache directories it can see and writes the version to the prefix in the library's own format
// (docs/format.md, "L3"): every rank's data and manifest with l3::write_rank, in the one-file-per-rank
// layout that every reader reads, then COMMIT last. No MPI.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/layout.hpp"
#include "base/status.hpp"
#include "cache/cache_store.hpp"

namespace cairn::l3 {

// One rank's copy of the version in L1, as its record says.
struct CachedRank {
  std::string rank_dir;  // <cache_job>/<node>/r<rank> (cache/cache_store.hpp: rank_dir)
  L1Record record;       // its v<N>.l1: the slot and the rank's manifest
};

// Writes version `version` from L1 to L3. `ranks` holds rank 0..n-1 of the version, in order, each of a
// job of n ranks. Checks, in this order:
// - the version is not committed in L3 already (ERR_INVALID_ARG); an uncommitted directory of it (an
//   earlier flush that failed, or the job's own flush in flight) is written over, not removed: until
//   COMMIT nothing reads it;
// - per rank: its slot is verified chunk by chunk against its manifest (ERR_CORRUPT), the rank's files
//   are written, then its record is read again: the job drops a record before it reuses the slot, so a
//   record gone or changed means the bytes just written may not be the ones checked (ERR_CORRUPT, "is
//   the job still running?") and nothing is committed;
// - COMMIT last, with rank 0's label.
// A failure leaves the version uncommitted (never read). ERR_NO_CHECKPOINT when `ranks` is not a whole
// version; ERR_IO/ERR_NO_SPACE from writing. `progress`, if given, gets each rank's bytes once written.
Status flush_from_cache(const Layout& layout, uint64_t version, const std::vector<CachedRank>& ranks,
                        const std::function<void(uint64_t bytes)>& progress = {});

}  // namespace cairn::l3
