// `cairn flush` and `cairn run`'s scavenge at the end: a version from the L1 cache visible here to L3.
#pragma once

#include "base/layout.hpp"
#include "base/status.hpp"
#include "inspect/inventory.hpp"
#include "progress.hpp"

namespace cairn::tool {

// Writes version v from the L1 cache visible here to L3: the library's out-of-process flush
// (l3/cache_to_l3.hpp, l3::flush_from_cache, with its checks) over every rank's readable record.
// Errors: ERR_NO_CHECKPOINT (v is not complete in L1 here), and those of flush_from_cache.
Status flush_to_l3(const Layout& layout, const VersionInfo& v, Progress* progress);

}  // namespace cairn::tool
