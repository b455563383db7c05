// Between two attempts of `cairn run`: the killed nodes' caches deleted, the --between-attempts hook,
// and whether the job may go on with fewer ranks (docs/launcher.md).
#include <cstdio>
#include <optional>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "base/manifest.hpp"
#include "cache/cache_store.hpp"
#include "inspect/inventory.hpp"
#include "redundancy/cache_rebuild.hpp"
#include "l3/l3_store.hpp"
#include "launch/process.hpp"
#include "launch/run_job.hpp"
#include "format.hpp"

namespace cairn::tool {

void delete_killed_caches(const RunContext& ctx) {
  for (int node : ctx.options.kill_nodes) {
    const std::string& name = ctx.spec.node_names[static_cast<size_t>(node)];
    std::string dir = ctx.layout.node_cache(name);
    Status st = fs::remove_tree(dir);
    if (!st) fprintf(stderr, "cairn run: warning: deleting the cache of %s: %s\n", name.c_str(), st.message().c_str());
    else if (log::level() >= log::Level::info)
      fprintf(stderr, "cairn run: deleted the cache of %s (%s)\n", name.c_str(), dir.c_str());
  }
}

// Runs the --between-attempts command; true when it succeeded.
bool run_between_attempts(const RunContext& ctx, int finished_attempt) {
  std::string killed;
  for (int node : ctx.options.kill_nodes)
    killed += (killed.empty() ? "" : ",") + ctx.spec.node_names[static_cast<size_t>(node)];
  EnvAssignments env = {{"CAIRN_PREFIX", ctx.layout.prefix},
                        {"CAIRN_CACHE_JOB", ctx.layout.cache_job},
                        {"CAIRN_ATTEMPT", std::to_string(finished_attempt)},
                        {"CAIRN_KILLED_NODES", killed}};
  auto child = spawn({"/bin/sh", "-c", ctx.options.between_attempts}, env, /*own_group=*/false);
  if (!child) {
    fprintf(stderr, "cairn run: --between-attempts: %s\n", child.status().message().c_str());
    return false;
  }
  int status = wait_for(*child);
  if (exit_code_of(status) != 0) {
    fprintf(stderr, "cairn run: the --between-attempts command failed (%s); not relaunching\n",
            describe_wait_status(status).c_str());
    return false;
  }
  return true;
}

void rebuild_moved_ranks(const RunContext& ctx, const std::map<int, std::string>& moved) {
  Inventory inv = scan_inventory(ctx.layout);
  std::string why = "no version in the caches has L2 data for them";
  for (const auto& [ver, v] : inv.versions) {
    if (v.sets.empty() || v.nranks() == 0) continue;  // no L2 for this version
    std::vector<redundancy::CachedCopy> held;
    std::map<std::string, std::vector<uint32_t>> lost_on;  // new node -> its moved ranks
    bool usable = true;
    for (uint32_t r = 0; r < v.nranks() && usable; ++r) {
      auto m = moved.find(static_cast<int>(r));
      const L1Copy* c = v.l1_copy(r);
      if (m != moved.end()) lost_on[m->second].push_back(r);
      else if (c) held.push_back({r, c->rank_dir, L1Record{c->slot, c->manifest}});
      else usable = false;  // a rank that did not move lacks it: not this version
    }
    if (!usable || lost_on.empty()) continue;
    std::string done;
    Status st = Status::ok();
    for (const auto& [node, ranks] : lost_on) {
      auto copies = redundancy::rebuild_lost_ranks(ver, held, ranks, ctx.layout.node_cache(node));
      if (!copies) {
        st = copies.status();
        break;
      }
      done += (done.empty() ? "" : ", ") + rank_ranges(ranks) + " on " + node;
    }
    if (st.is_ok()) {
      fprintf(stderr, "cairn run: rebuilt version %llu of the moved ranks from L2 into their new caches (ranks %s)\n",
              static_cast<unsigned long long>(ver), done.c_str());
      return;
    }
    if (why.rfind("version ", 0) != 0) why = "version " + std::to_string(ver) + ": " + st.message();  // the newest's
  }
  fprintf(stderr, "cairn run: warning: the moved ranks were not rebuilt from L2 (%s); the job restarts from what it finds\n",
          why.c_str());
}

// Without a spare the job goes on with fewer ranks, which only works when every region of its newest
// version has a global layout (not private). Looks at rank 0's manifest of the newest version, in the
// surviving caches or in the prefix; an empty string means the job may shrink.
std::string why_job_cannot_shrink(const RunContext& ctx) {
  uint64_t newest = 0;
  std::optional<Manifest> manifest;  // rank 0's of the newest version, when readable
  auto consider = [&](uint64_t v, Result<Manifest> m) {
    if (v <= newest) return;
    newest = v;
    manifest = m ? std::optional<Manifest>(std::move(m).value()) : std::nullopt;
  };
  auto nodes = fs::list_dir(ctx.layout.cache_job);
  for (const auto& node : nodes ? *nodes : std::vector<std::string>{}) {
    CacheStore r0;
    const std::string dir = rank_dir(ctx.layout, node, 0);
    if (!fs::exists(dir) || !r0.open(dir, kMaxL1Slots).is_ok()) continue;
    for (uint64_t v : r0.versions()) {
      auto rec = r0.read_record(v);
      consider(v, rec ? Result<Manifest>(std::move(rec->manifest)) : Result<Manifest>(rec.status()));
    }
  }
  auto committed = l3::list_committed(ctx.layout);
  if (!committed.empty() && committed.front().version > newest)
    consider(committed.front().version, l3::read_manifest(ctx.layout, committed.front().version, 0));
  if (!newest || !manifest) return "";  // unreadable here: let the library decide, it reports clearly
  for (const auto& e : manifest->regions) {
    if (e.kind == RegionKind::file) return "file '" + e.name + "' of version " + std::to_string(newest) + " is per-rank";
    if (e.distribution == 0)
      return "region '" + e.name + "' of version " + std::to_string(newest) + " is private (per-rank data)";
  }
  return "";
}

}  // namespace cairn::tool
