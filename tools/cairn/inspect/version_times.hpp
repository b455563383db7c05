// When a version reached each level, from its files' times alone (`cairn watch`, `plot`, where there is no
// job history).
#pragma once

#include <cstdint>

#include "inspect/inventory.hpp"

namespace cairn::tool {

// When a version reached each level, from the times its files carry (used where there is no job
// history, history_summary.hpp): the manifests' created_unix_ns, the mtimes of the L1 records, protected
// markers and COMMIT, and the birth time of the L3 data files. 0 where unknown. Approximate: see
// docs/tools.md.
struct VersionTimes {
  int64_t created_ns = 0;   // earliest created_unix_ns of a rank's manifest: the checkpoint began
  int64_t l1_ns = 0;        // last L1 record written (every visible rank sealed)
  int64_t l2_ns = 0;        // last protected marker written
  int64_t l3_start_ns = 0;  // first L3 data file created, else l2_ns, else l1_ns
  int64_t l3_ns = 0;        // COMMIT written
  uint64_t bytes = 0;       // snapshot bytes over the ranks whose manifest is known
  double l1_seconds() const { return span(created_ns, l1_ns); }
  double l2_seconds() const { return span(l1_ns, l2_ns); }
  double l3_seconds() const { return span(l3_start_ns, l3_ns); }
  // File times have the file system's granularity (a few ms on tmpfs): a shorter span is not a
  // measurement, and reads as 0 (unknown).
  static constexpr double kMinSeconds = 0.01;
  static double span(int64_t a, int64_t b) {
    double s = a && b > a ? static_cast<double>(b - a) / 1e9 : 0;
    return s >= kMinSeconds ? s : 0;
  }
};
VersionTimes version_times(const VersionInfo& v);

}  // namespace cairn::tool
