// cairn-bench's "incremental" phase of the levels (--only incremental): what an incremental version
// moves at every level over every rank of a real job, against a full version of the same job, as the
// library itself counts it in the job history (docs/performance.md, "Incremental versions").
#pragma once

#include <cstdint>
#include <functional>

#include "bench.hpp"
#include "session.hpp"

namespace cairn::bench {

// One session per L2 scheme (partner, xor, rs): l1_incremental = on, full_every far away, a version flushed
// at every checkpoint; between checkpoints every rank rewrites every tenth 2 MiB block of `state` (size
// bytes, protected by `protect`). The first version is full at every level; the versions after the
// warm-up (one per slot) are incremental at every level. Per scheme, on rank 0: the bytes copied into L1,
// sent by L2 and written to L3 over every rank, for the full version and the incremental ones (median),
// and their ratio; null with a reason where the history does not say. With partner also the newest
// version's restart from L1, L2 (a node lost) and L3 (every cache lost), against the same restarts of
// sessions whose versions are all full, in the order full, incremental, incremental, full (`restart`: the
// medians in ms and the speed ratios). Collective.
json measure_incremental_job(Session& s, uint8_t* state, uint64_t size, int cache_versions, int reps,
                             const std::function<void()>& protect);

}  // namespace cairn::bench
