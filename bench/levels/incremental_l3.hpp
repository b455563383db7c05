// cairn-bench --incremental: the L3 part of incremental versions (issue 24; docs/format.md, "L3"). One
// rank's state of --size bytes, in this process: a full version written with l3::write_rank, then 10 % of
// its chunks rewritten (every tenth) and the next version written incremental (full_every > 1); each
// beside the raw write of the same bytes (pwrite + fsync), and the restart's read and verification of the
// incremental version (from its own file and the full one's) beside the full version's. The figures: L3
// bytes of the incremental version / the full one's (target <= 0.15) and its restart speed / the full
// one's (target >= 0.8).
#pragma once

#include <string>

#include "options.hpp"

namespace cairn::bench {

// The common options (options.hpp) with this mode's defaults: one rank of 256 MiB, 3 repetitions.
struct IncrementalOptions : CommonOptions {
  IncrementalOptions() { ranks = 1, size_text = "256M", reps = 3; }
};

int run_incremental(const IncrementalOptions& o);

}  // namespace cairn::bench
