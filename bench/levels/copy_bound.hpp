// The machine's bound on what saving bytes before a writer may overwrite them costs the writer
// (--snapshot, issue 24's `app_lost_incremental_10pct`). A snapshot must hold each byte's value at the
// checkpoint, and the tenth writer rewrites every word of its tenth in its first pass after it: each of
// those bytes is read and written once more (into the slot) before its write goes on, inside that pass.
// The copy moves as many bytes as the writer's own pass does (read and write each), so that pass, with
// the copy, moves twice its bytes, and cannot end sooner than twice the fastest copy of them on every CPU
// the rank has (no writer, no cairn): the loss is at least max(0, 2 x copy - pass).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench.hpp"

namespace cairn::bench {

struct CopyBound {
  double ms = 0;           // the faster method's median, the slowest rank's
  uint64_t bytes = 0;      // the bytes of the ranges
  int threads = 0;         // threads copying at once
  std::string method;      // "memcpy" or "process_vm_readv"
  double memcpy_ms = 0, readv_ms = 0;
};

// `ranges` ([offset, end) of `state`, sorted) copied into a mapping like a slot's (made at slot_path)
// by `threads` threads at once, each every threads-th 2 MiB piece, by memcpy and by process_vm_readv;
// median of `reps` after one untimed copy per method. Collective over the job's ranks.
CopyBound measure_copy_bound(uint8_t* state, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, int threads,
                             int reps, const std::string& slot_path);

// The CPUs this thread may run on (at least 1).
int cpus_here();

// Beside an upper-bound target (`t`: ratio = loss_ms / base_ms against max_ratio), the bound:
// `copy_bound_ms` and its parts; `loss_bound_ms` = max(0, 2 x copy_bound_ms - pass_ms), pass_ms being the
// writer's pass alone; `loss_bound_ratio` (÷ base_ms: the least ratio this machine allows) and
// `ratio_vs_bound` (loss_bound_ms ÷ loss_ms: 1 where the loss is the bound); `excused_by_copy_bound`
// where the target is missed, the bound misses it too, and the loss is within 1 / 0.8 of the bound.
void add_copy_bound(json& t, const CopyBound& b, double pass_ms, double loss_ms, double base_ms);

}  // namespace cairn::bench
