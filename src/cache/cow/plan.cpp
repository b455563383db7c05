#include "cache/cow/plan.hpp"

#include <algorithm>

#include "cache/cow/mappings.hpp"

namespace cairn::cow {

Result<SnapshotPlan> plan_snapshot(const std::vector<SnapshotRegion>& regions, uint64_t page, uint64_t eager_below) {
  SnapshotPlan plan;
  std::vector<ProtectedRange> wanted;
  for (size_t i = 0; i < regions.size(); ++i) {
    const SnapshotRegion& r = regions[i];
    auto src = reinterpret_cast<uint64_t>(r.src);
    uint64_t start = (src + page - 1) & ~(page - 1), end = (src + r.size) & ~(page - 1);
    if (r.size == 0) continue;
    if (end <= start || end - start < std::max(eager_below, page)) {
      plan.eager.push_back({i, 0, r.size});
      continue;
    }
    wanted.push_back({i, start, end});
  }
  if (wanted.empty()) return plan;

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const ProtectedRange& w : wanted) {
    auto src = reinterpret_cast<uint64_t>(regions[w.region].src);
    ranges.emplace_back(src, src + regions[w.region].size);
  }
  CAIRN_ASSIGN_OR_RETURN(maps, mappings_in(ranges));
  std::sort(wanted.begin(), wanted.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  uint64_t covered_to = 0;
  size_t covered_by = 0;
  for (const ProtectedRange& w : wanted) {
    const SnapshotRegion& r = regions[w.region];
    auto src = reinterpret_cast<uint64_t>(r.src);
    if (!readable(maps, src, src + r.size))
      return make_error(Code::ERR_INVALID_ARG, "region '%s' (%p, %llu bytes) is not entirely mapped, readable memory",
                        r.name.c_str(), r.src, static_cast<unsigned long long>(r.size));
    std::string why = unprotectable_reason(maps, w.start, w.end);
    if (why.empty() && w.start < covered_to) why = "shares pages with region '" + regions[covered_by].name + "'";
    if (!why.empty()) {
      plan.eager.push_back({w.region, 0, r.size});
      plan.fallbacks.push_back({r.name, why});
      continue;
    }
    if (w.start > src) plan.eager.push_back({w.region, 0, w.start - src});
    if (src + r.size > w.end) plan.eager.push_back({w.region, w.end - src, src + r.size - w.end});
    plan.protect.push_back(w);
    covered_to = w.end;
    covered_by = w.region;
  }
  return plan;
}

}  // namespace cairn::cow
