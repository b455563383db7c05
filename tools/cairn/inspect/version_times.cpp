#include "inspect/version_times.hpp"

#include <algorithm>

namespace cairn::tool {

VersionTimes version_times(const VersionInfo& v) {
  VersionTimes t;
  t.bytes = v.total_bytes();
  for (uint32_t r = 0; r < v.nranks(); ++r)
    if (const Manifest* m = v.manifest(r); m && m->created_unix_ns > 0)
      t.created_ns = t.created_ns ? std::min(t.created_ns, m->created_unix_ns) : m->created_unix_ns;
  for (const auto& c : v.l1) {
    t.l1_ns = std::max(t.l1_ns, c.record_mtime_ns);
    t.l2_ns = std::max(t.l2_ns, c.protected_mtime_ns);
  }
  t.l3_ns = v.l3.committed ? v.l3.commit_mtime_ns : 0;
  t.l3_start_ns = v.l3.data_birth_ns ? v.l3.data_birth_ns : t.l2_ns ? t.l2_ns : t.l1_ns;
  return t;
}

}  // namespace cairn::tool
