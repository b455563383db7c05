// The end of `cairn run`: the scavenge (the newest version complete in the surviving caches flushed to
// L3) and the summary of the attempts (docs/launcher.md).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/fsutil.hpp"
#include "inspect/inventory.hpp"
#include "launch/launcher.hpp"
#include "l3/cache_to_l3.hpp"
#include "launch/process.hpp"
#include "redundancy/cache_rebuild.hpp"
#include "launch/run_job.hpp"
#include "format.hpp"
#include "maintain/flush_to_l3.hpp"

namespace cairn::tool {
namespace {


std::string describe_attempt(const Attempt& a) {
  std::string out = "attempt " + std::to_string(a.number) + ": ";
  if (!a.state) {
    out += describe_wait_status(a.wait_status) + "; the job wrote no state file";
  } else {
    const state_file::State& s = *a.state;
    if (s.phase == "unrecoverable")
      out += "found checkpoints but none it could restart from";
    else if (s.restart_level.empty() || s.restart_level == "none" || s.restart_version == 0)
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
  if (!a.hosts_text.empty()) out += "; " + a.hosts_text;
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
std::string scavenge(const RunContext& ctx) {
  // In cluster mode the caches are on the hosts: a step per host brings them here first.
  return ctx.cluster.active ? scavenge_hosts(ctx) : scavenge_caches(ctx);
}

std::string scavenge_caches(const RunContext& ctx) {
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
      std::string said = "version " + std::to_string(ver) + ", the newest complete in cache, is " +
                         (ver == committed ? "already committed in L3" : "older than L3's newest") +
                         "; nothing to flush";
      fprintf(stderr, "cairn run: scavenge: %s\n", said.c_str());
      return said;
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
    std::string said = "flushed version " + std::to_string(ver) + " to L3" +
                       (whole ? "" : " (ranks " + rebuilt + " rebuilt from L2)") + ": committed in " +
                       ctx.layout.l3_version_dir(ver) + " (" + format_bytes(v.total_bytes()) + " in " +
                       format_duration(secs) + ")";
    fprintf(stderr, "cairn run: scavenge: %s\n", said.c_str());
    return said;
  }
  std::string said = "no version newer than L3's newest (" + std::to_string(committed) +
                     ") is complete in the surviving caches or can be rebuilt from L2";
  fprintf(stderr, "cairn run: scavenge: %s\n", said.c_str());
  return said;
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

void write_summary_json(const RunContext& ctx, const std::vector<Attempt>& attempts, int exit_status,
                        const std::string& last_words, const std::string& scavenge_text) {
  nlohmann::json list = nlohmann::json::array();
  int failures = 0;
  double lost = 0;
  for (const auto& a : attempts) {
    const bool failed = attempt_failed(a);
    if (failed) ++failures, lost += a.wall_seconds;
    nlohmann::json j{{"number", a.number},
                     {"failed", failed},
                     {"ended", describe_wait_status(a.wait_status)},
                     {"wall_seconds", a.wall_seconds},
                     {"killed", a.reached ? nlohmann::json(a.killed_text) : nlohmann::json()},
                     {"at_checkpoint", a.reached ? nlohmann::json(a.at_checkpoint) : nlohmann::json()},
                     {"stalled", a.stalled ? nlohmann::json(a.stalled_text) : nlohmann::json()},
                     {"migrated", a.migrated_text.empty() ? nlohmann::json() : nlohmann::json(a.migrated_text)},
                     {"description", describe_attempt(a)}};
    if (a.state) {
      const state_file::State& s = *a.state;
      const bool restarted = !(s.restart_level.empty() || s.restart_level == "none" || s.restart_version == 0);
      j["restart"] = restarted ? nlohmann::json{{"version", s.restart_version},
                                                {"level", s.restart_level},
                                                {"after_seconds", a.restarted_after >= 0 ? nlohmann::json(a.restarted_after)
                                                                                         : nlohmann::json()}}
                               : nlohmann::json();
      j["newest"] = {{"version", s.version}, {"l1", s.l1}, {"l2", s.l2}, {"l3", s.l3}};
    } else {
      j["restart"] = nullptr;
      j["newest"] = nullptr;
    }
    list.push_back(j);
  }
  nlohmann::json out{{"launcher", launcher_name(ctx.spec.launcher)},
                     {"prefix", ctx.layout.prefix},
                     {"attempts", list},
                     {"failed_attempts", failures},
                     {"time_lost_seconds", lost},
                     {"stopped_because", last_words.empty() ? nlohmann::json() : nlohmann::json(last_words)},
                     {"scavenge", scavenge_text.empty() ? nlohmann::json() : nlohmann::json(scavenge_text)},
                     {"exit_status", exit_status}};
  const std::string text = out.dump(2) + "\n";
  if (ctx.options.json_path == "-") {
    fputs(text.c_str(), stdout);
    fflush(stdout);
    return;
  }
  Status st = fs::write_file_atomic(ctx.options.json_path, text, false);
  if (!st.is_ok()) fprintf(stderr, "cairn run: --json: %s\n", st.message().c_str());
}

}  // namespace cairn::tool
