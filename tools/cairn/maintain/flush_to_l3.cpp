#include "maintain/flush_to_l3.hpp"

#include <vector>

#include "l3/cache_to_l3.hpp"

namespace cairn::tool {

Status flush_to_l3(const Layout& layout, const VersionInfo& v, Progress* progress) {
  if (!v.l1_complete())
    return make_error(Code::ERR_NO_CHECKPOINT, "version %llu is not complete in the L1 cache visible here",
                      static_cast<unsigned long long>(v.version));
  std::vector<l3::CachedRank> ranks;
  for (uint32_t r = 0; r < v.nranks(); ++r) {
    const L1Copy* c = v.l1_copy(r);
    ranks.push_back({c->rank_dir, L1Record{c->slot, c->manifest}});
  }
  return l3::flush_from_cache(layout, v.version, ranks, [progress](uint64_t bytes) {
    if (progress) progress->add(bytes);
  });
}

}  // namespace cairn::tool
