// What saving the bytes a writer rewrites costs on this machine at best (--snapshot, beside issue 24's
// `app_lost_incremental_10pct`): those bytes copied as fast as the rank can, with every CPU it may run
// on, no writer and no cairn. A snapshot must hold each byte's value at the checkpoint, so a writer that
// rewrites bytes right after it waits for their copy in some measure; how much depends on how the copy
// and its passes overlap (a block copied just before its write is in the cache for it), so this is the
// copy's own cost beside the loss, not a bound that could excuse a miss.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench.hpp"

namespace cairn::bench {

// The bytes of `ranges` of `state` into `slot`, one range after another, in 2 MiB pieces, by memcpy or
// (`readv`) through process_vm_readv as cairn's copier reads them; with `every` > 1 only the pieces i
// (counted over all ranges) with i % every == first, each at its own place in the slot, so that `every`
// threads share one copy.
void copy_ranges(uint8_t* slot, uint8_t* state, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, bool readv,
                 size_t every = 1, size_t first = 0);

struct CopyBound {
  double ms = 0;           // the faster method's fastest repetition, the slowest rank's
  uint64_t bytes = 0;      // the bytes of the ranges
  int threads = 0;         // threads copying at once
  std::string method;      // "memcpy" or "process_vm_readv"
  double memcpy_ms = 0, readv_ms = 0;
};

// `ranges` ([offset, end) of `state`, sorted) copied into a mapping like a slot's (made at slot_path)
// by `threads` threads at once, each every threads-th 2 MiB piece, by memcpy and by process_vm_readv;
// the fastest of `reps` after one untimed copy per method (the machine at its best). Collective over the
// job's ranks.
CopyBound measure_copy_bound(uint8_t* state, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, int threads,
                             int reps, const std::string& slot_path);

// Beside a target whose loss is `loss_ms` (`t`): `copy_bound_ms`, its parts (`copy_bound`), and
// `copy_share_of_loss` (copy_bound_ms ÷ loss_ms; null where the loss is not above zero).
void add_copy_bound(json& t, const CopyBound& b, double loss_ms);

}  // namespace cairn::bench
