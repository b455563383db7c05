// The end of `cairn run`: the scavenge (the newest version complete in the surviving caches flushed to
// L3) and the summary of the attempts (docs/launcher.md).
#include <cstdio>

#include "base/fsutil.hpp"
#include "inventory.hpp"
#include "launcher.hpp"
#include "pfs/cache_to_l3.hpp"
#include "process.hpp"
#include "redundancy/cache_rebuild.hpp"
#include "run_job.hpp"

namespace cairn::tool {
namespace {


std::string describe_attempt(const Attempt& a) {
  std::string out = "attempt " + std::to_string(a.number) + ": ";
  if (!a.state) {
    out += describe_wait_status(a.wait_status) + "; the job wrote no state file";
  } else {
    const state_file::State& s = *a.state;
    if (s.restart_level.empty() || s.restart_level == "none" || s.restart_version == 0)
      out += "started without a restart";
    else
      out += "restarted from version " + std::to_string(s.restart_version) + " at " + s.restart_level;
    if (a.restarted_after >= 0) out += " (" + format_duration(a.restarted_after) + " after the launch)";
    out += "; " + describe_wait_status(a.wait_status);
    out += "; newest version " + std::to_string(s.version) + " (L1 " + std::to_string(s.l1) + ", L2 " +
           std::to_string(s.l2) + ", L3 " + std::to_string(s.l3) + ")";
  }
  if (a.reached) out += "; killed " + a.killed_text + " at checkpoint " + std::to_string(a.at_checkpoint);
  if (a.failure) out += "; failure: lost " + a.failure_text;
  if (a.stalled) out += "; " + a.stalled_text;
  if (!a.migrated_text.empty()) out += "; exited to migrate: " + a.migrated_text;
  return out;
}

// A version some of whose ranks lost their L1 copy (their node's cache is gone): the lost ranks rebuilt
// from the survivors' L2 files into `scratch` (redundancy/cache_rebuild.hpp), then every rank flushed
// with the code of `cairn flush`. *rebuilt names the rebuilt ranks.
Status flush_with_l2(const Layout& layout, const VersionInfo& v, const std::string& scratch, std::string* rebuilt) {
  std::vector<redundancy::CachedCopy> held;
  std::vector<uint32_t> lost;
  for (uint32_t r = 0; r < v.nranks(); ++r) {
    if (const L1Copy* c = v.l1_copy(r); c && c->manifest.nranks == v.nranks())
      held.push_back({r, c->rank_dir, L1Record{c->slot, c->manifest}});
    else
      lost.push_back(r);
  }
  *rebuilt = rank_ranges(lost);
  CAIRN_ASSIGN_OR_RETURN(copies, redundancy::rebuild_lost_ranks(v.version, held, lost, scratch));
  std::vector<l3::CachedRank> ranks(v.nranks());
  for (const auto& c : held) ranks[c.rank] = {c.rank_dir, c.record};
  for (const auto& c : copies) ranks[c.rank] = {c.rank_dir, c.record};
  return l3::flush_from_cache(layout, v.version, ranks);
}

}  // namespace

// SCR's scavenge: writes the newest version complete in the caches that survive to L3 unless L3
// already holds it (or a newer one), with the code of `cairn flush` (flush_to_l3). A version whose
// ranks lost their copy with their node's cache is rebuilt from L2 first, as SCR's scavenge does. A
// version that cannot be flushed or rebuilt makes it try the one before.
void scavenge(const RunContext& ctx) {
  Inventory inv = scan_inventory(ctx.layout);
  uint64_t committed = 0;
  for (const auto& [ver, v] : inv.versions)
    if (v.l3.committed) {
      committed = ver;
      break;
    }
  const std::string scratch = ctx.layout.control + "/scavenge";  // rebuilt ranks, removed after the flush
  for (const auto& [ver, v] : inv.versions) {
    const bool whole = v.l1_complete();
    if (!whole && (v.sets.empty() || v.nranks() == 0)) continue;  // not in L1 everywhere and no L2 to rebuild it
    if (ver <= committed) {
      if (!whole) continue;
      fprintf(stderr, "cairn run: scavenge: version %llu, the newest complete in cache, is %s; nothing to flush\n",
              static_cast<unsigned long long>(ver),
              ver == committed ? "already committed in L3" : "older than L3's newest");
      return;
    }
    int64_t t0 = now_unix_ns();
    std::string rebuilt;
    Status st = whole ? flush_to_l3(ctx.layout, v, nullptr) : flush_with_l2(ctx.layout, v, scratch, &rebuilt);
    if (!whole) (void)fs::remove_tree(scratch);
    if (!st.is_ok()) {
      fprintf(stderr, "cairn run: scavenge: version %llu not flushed%s: %s\n", static_cast<unsigned long long>(ver),
              whole ? "" : (" (ranks " + rebuilt + " lost their cache; rebuilding them from L2 failed)").c_str(),
              st.message().c_str());
      continue;
    }
    double secs = static_cast<double>(now_unix_ns() - t0) / 1e9;
    fprintf(stderr, "cairn run: scavenge: flushed version %llu to L3%s: committed in %s (%s in %s)\n",
            static_cast<unsigned long long>(ver), whole ? "" : (" (ranks " + rebuilt + " rebuilt from L2)").c_str(),
            ctx.layout.l3_version_dir(ver).c_str(), format_bytes(v.total_bytes()).c_str(), format_duration(secs).c_str());
    return;
  }
  fprintf(stderr,
          "cairn run: scavenge: no version newer than L3's newest (%llu) is complete in the surviving caches or "
          "can be rebuilt from L2\n",
          static_cast<unsigned long long>(committed));
}

void print_summary(const RunContext& ctx, const std::vector<Attempt>& attempts) {
  int failures = 0;
  double lost = 0;
  for (const auto& a : attempts)
    if (attempt_failed(a)) ++failures, lost += a.wall_seconds;
  fprintf(stderr,
          "cairn run: summary (%s): %zu %s, %d failed; time lost %.1f s (whole wall time of the failed attempts)\n",
          launcher_name(ctx.spec.launcher), attempts.size(), attempts.size() == 1 ? "attempt" : "attempts", failures,
          lost);
  for (const auto& a : attempts) fprintf(stderr, "cairn run: %s\n", describe_attempt(a).c_str());
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (it->state) {
      fprintf(stderr, "cairn run: newest version per level (state file of attempt %d): L1 %llu, L2 %llu, L3 %llu\n",
              it->number, static_cast<unsigned long long>(it->state->l1),
              static_cast<unsigned long long>(it->state->l2), static_cast<unsigned long long>(it->state->l3));
      break;
    }
}

}  // namespace cairn::tool
