#include "l3/cache_to_l3.hpp"

#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"

namespace cairn::l3 {
namespace {

// Every rank 0..n-1 of one version of an n-rank job, in order.
Status check_whole(uint64_t version, const std::vector<CachedRank>& ranks) {
  const uint32_t n = static_cast<uint32_t>(ranks.size());
  if (n == 0)
    return make_error(Code::ERR_NO_CHECKPOINT, "version %llu: no rank's L1 record given",
                      static_cast<unsigned long long>(version));
  for (uint32_t r = 0; r < n; ++r) {
    const Manifest& m = ranks[r].record.manifest;
    if (m.version != version || m.rank != r || m.nranks != n)
      return make_error(Code::ERR_NO_CHECKPOINT,
                        "version %llu is not whole in L1: entry %u is the record of version %llu, rank %u of %u",
                        static_cast<unsigned long long>(version), r, static_cast<unsigned long long>(m.version), m.rank,
                        m.nranks);
  }
  return Status::ok();
}

// "node1/r2": the rank directory as the tools name it.
std::string short_name(const std::string& rank_dir) {
  size_t last = rank_dir.rfind('/');
  size_t before = last == std::string::npos || last == 0 ? std::string::npos : rank_dir.rfind('/', last - 1);
  return before == std::string::npos ? rank_dir : rank_dir.substr(before + 1);
}

}  // namespace

Status flush_from_cache(const Layout& layout, uint64_t version, const std::vector<CachedRank>& ranks,
                        const std::function<void(uint64_t bytes)>& progress) {
  CAIRN_TRY(check_whole(version, ranks));
  if (fs::exists(commit_path(layout, version)) && read_commit(layout, version).is_ok())
    return make_error(Code::ERR_INVALID_ARG, "version %llu is already committed in %s",
                      static_cast<unsigned long long>(version), layout.prefix.c_str());
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    const CachedRank& c = ranks[r];
    const std::string who = "rank " + std::to_string(r) + " (" + short_name(c.rank_dir) + ", slot " + std::to_string(c.record.slot) + ")";
    auto slot = map_verified_slot(c.rank_dir, c.record);
    if (!slot) return slot.status().prefixed(who);
    // One file per rank (the reader reads every layout); a .where record left by an earlier attempt in
    // another layout would send the reader elsewhere.
    CAIRN_TRY(fs::remove_file(where_path(layout, version, r)).prefixed(who));
    CAIRN_TRY(write_rank(layout, c.record.manifest, (*slot)->data()).prefixed(who));
    // The job drops a record before it overwrites the slot: a record still in place after the write
    // means the bytes written are the ones just checked.
    CacheStore store;
    Status opened = store.open(c.rank_dir, kMaxL1Slots);
    auto again = opened.is_ok() ? store.read_record(version) : Result<L1Record>(opened);
    if (!again || again->slot != c.record.slot || !(again->manifest == c.record.manifest))
      return make_error(Code::ERR_CORRUPT,
                        "%s: the record of version %llu changed while it was being flushed (is the job still running?)",
                        who.c_str(), static_cast<unsigned long long>(version));
    if (progress) progress(c.record.manifest.total_size);
  }
  return commit(layout, version, static_cast<uint32_t>(ranks.size()), ranks[0].record.manifest.label).prefixed("COMMIT");
}

}  // namespace cairn::l3
