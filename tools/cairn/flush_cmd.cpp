// `cairn flush [VERSION] [PREFIX] [--config FILE]`: SCR's scavenge for a job that ended. Writes the
// newest version (or VERSION) that is complete in the L1 cache visible from here -- every rank's record
// present and its slot verified -- to L3 in the library's own format (rank files, manifests, then
// COMMIT last), unless L3 already holds it.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "inventory.hpp"
#include "base/state_file.hpp"

namespace cairn::tool {
namespace {

struct FlushOptions {
  std::vector<std::string> args;  // [VERSION] [PREFIX]
  std::string config_path;
};

uint64_t newest_committed(const Inventory& inv) {
  for (const auto& [ver, v] : inv.versions)
    if (v.l3.committed) return ver;
  return 0;
}

std::string missing_ranks(const VersionInfo& v) {
  std::vector<uint32_t> missing;
  for (uint32_t r = 0; r < v.nranks(); ++r)
    if (!v.l1_copy(r)) missing.push_back(r);
  return rank_ranges(missing);
}

// Flushes one version; prints what it did. True on success.
bool flush_one(const Inventory& inv, const VersionInfo& v) {
  std::string nodes;
  for (const auto& n : v.l1_nodes()) nodes += (nodes.empty() ? "" : ", ") + n;
  printf("cairn flush: version %llu (%u ranks, %s) from the L1 cache on %s\n",
         static_cast<unsigned long long>(v.version), v.nranks(), format_bytes(v.total_bytes()).c_str(), nodes.c_str());
  fflush(stdout);
  int64_t t0 = now_unix_ns();
  Status st;
  {
    Progress progress("flush", v.total_bytes());
    st = flush_to_l3(inv.layout, v, &progress);
  }
  if (!st.is_ok()) {
    print_error("flush", "version " + std::to_string(v.version) + " not flushed: " + st.message());
    return false;
  }
  double secs = static_cast<double>(now_unix_ns() - t0) / 1e9;
  printf("cairn flush: version %llu committed in %s (%s in %s, %s)\n", static_cast<unsigned long long>(v.version),
         inv.layout.l3_version_dir(v.version).c_str(), format_bytes(v.total_bytes()).c_str(),
         format_duration(secs).c_str(), format_rate(v.total_bytes(), secs).c_str());
  return true;
}

int run_flush(const FlushOptions& o) {
  std::string prefix;
  uint64_t only = 0;
  if (o.args.size() == 2) {
    if (!parse_version_arg(o.args[0], &only)) {
      print_error("flush", "'" + o.args[0] + "' is not a version (a number from 1, or v00000042)");
      return kExitUsage;
    }
    prefix = o.args[1];
  } else if (o.args.size() == 1 && !parse_version_arg(o.args[0], &only)) {
    prefix = o.args[0];
  }
  auto ctx = load_tool_context("flush", o.config_path, prefix);
  if (!ctx) {
    print_error("flush", ctx.status().message());
    return kExitUsage;
  }
  Inventory inv = scan_inventory(ctx->layout);
  const std::string where = "the L1 cache visible here (" + inv.layout.cache_job + ")";
  if (auto state = state_file::read_state(inv.layout.state_file());
      state && state->has_value() && (*state)->phase != "finalized" && !(*state)->phase.empty())
    print_error("flush", "warning: the job state says phase '" + (*state)->phase +
                             "': if the job is still running, this flush may race with it");

  if (only) {
    auto it = inv.versions.find(only);
    if (it == inv.versions.end()) {
      print_error("flush", "nothing to flush: no version " + std::to_string(only) + " in " + where);
      return kExitNothing;
    }
    const VersionInfo& v = it->second;
    if (v.l3.committed) {
      printf("cairn flush: version %llu is already committed in %s; nothing to do\n",
             static_cast<unsigned long long>(only), v.l3.dir.c_str());
      return kExitOk;
    }
    if (!v.l1_complete()) {
      print_error("flush", "version " + std::to_string(only) + " is not complete in " + where + ": " +
                               std::to_string(v.l1_ranks()) + " of " + std::to_string(v.nranks()) +
                               " ranks, missing rank(s) " + missing_ranks(v));
      return kExitFailure;
    }
    return flush_one(inv, v) ? kExitOk : kExitFailure;
  }

  uint64_t committed = newest_committed(inv);
  bool failed = false;
  for (const auto& [ver, v] : inv.versions) {
    if (!v.l1_complete()) continue;
    if (ver <= committed) {
      if (v.l3.committed)
        printf(
            "cairn flush: version %llu, the newest %sversion complete in L1, is already committed in %s; "
            "nothing to do\n",
            static_cast<unsigned long long>(ver), failed ? "good " : "", v.l3.dir.c_str());
      else
        printf("cairn flush: L3 already holds version %llu, newer than version %llu in L1; nothing to do\n",
               static_cast<unsigned long long>(committed), static_cast<unsigned long long>(ver));
      return failed ? kExitFailure : kExitOk;
    }
    if (flush_one(inv, v)) return failed ? kExitFailure : kExitOk;
    failed = true;  // a damaged newest version: try the one before it
  }
  if (failed) return kExitFailure;
  print_error("flush", "nothing to flush: no version is complete in " + where +
                           (inv.versions.empty() ? " and there are no checkpoints in " + inv.layout.prefix : ""));
  return kExitNothing;
}

}  // namespace

Command add_flush_command(CLI::App& root) {
  auto o = std::make_shared<FlushOptions>();
  CLI::App* app = root.add_subcommand("flush", "Write the newest version complete in the L1 cache to L3 (scavenge).");
  app->add_option("args", o->args,
                  "VERSION (a number, or v00000042) and/or PREFIX; one word that is not a version is the prefix")
      ->expected(0, 2)
      ->type_name("[VERSION] [PREFIX]");
  app->add_option("--config", o->config_path, "Config file (TOML); default: the file CAIRN_CONFIG names")
      ->type_name("FILE");
  app->footer(
      "Every rank's L1 record must be in the cache directories visible from this machine and its slot must\n"
      "verify; the rank files and manifests are written, then COMMIT. If the newest such version is\n"
      "damaged, the one before it is tried. A version already committed is left alone.\n"
      "Exit status: 0 flushed or already in L3, 1 failed (damaged, incomplete or an I/O error),\n"
      "2 bad options or configuration, 3 nothing to flush.");
  set_usage(app, "cairn flush [VERSION] [PREFIX] [--config FILE]");
  Command cmd;
  cmd.app = app;
  cmd.run = [o](const Invocation&) { return run_flush(*o); };
  return cmd;
}

}  // namespace cairn::tool
