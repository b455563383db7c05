// `cairn flush [VERSION] [PREFIX] [--json] [--config FILE]`: SCR's scavenge for a job that ended. Writes the
// newest version (or VERSION) that is complete in the L1 cache visible from here -- every rank's record
// present and its slot verified -- to L3 in the library's own format (rank files, manifests, then
// COMMIT last), unless L3 already holds it.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "inspect/inventory.hpp"
#include "base/state_file.hpp"
#include "format.hpp"
#include "maintain/flush_to_l3.hpp"
#include "progress.hpp"

namespace cairn::tool {
namespace {

struct FlushOptions {
  std::vector<std::string> args;  // [VERSION] [PREFIX]
  std::string config_path;
  bool json = false;
};

// What flush says: its lines for people on stdout, or with --json on stderr and, with what it flushed,
// in one JSON document on stdout at the end.
struct FlushReport {
  bool json = false;
  nlohmann::json flushed = nlohmann::json::array(), failed = nlohmann::json::array(),
                 notes = nlohmann::json::array();
  FILE* text() const { return json ? stderr : stdout; }
  void note(const std::string& line) {
    fprintf(text(), "cairn flush: %s\n", line.c_str());
    notes.push_back(line);
  }
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

// Flushes one version; says what it did. True on success.
bool flush_one(const Inventory& inv, const VersionInfo& v, FlushReport& report) {
  std::string nodes;
  for (const auto& n : v.l1_nodes()) nodes += (nodes.empty() ? "" : ", ") + n;
  fprintf(report.text(), "cairn flush: version %llu (%u ranks, %s) from the L1 cache on %s\n",
          static_cast<unsigned long long>(v.version), v.nranks(), format_bytes(v.total_bytes()).c_str(), nodes.c_str());
  fflush(report.text());
  int64_t t0 = now_unix_ns();
  Status st;
  {
    Progress progress("flush", v.total_bytes());
    st = flush_to_l3(inv.layout, v, &progress);
  }
  if (!st.is_ok()) {
    print_error("flush", "version " + std::to_string(v.version) + " not flushed: " + st.message());
    report.failed.push_back({{"version", v.version}, {"error", st.message()}});
    return false;
  }
  double secs = static_cast<double>(now_unix_ns() - t0) / 1e9;
  fprintf(report.text(), "cairn flush: version %llu committed in %s (%s in %s, %s)\n",
          static_cast<unsigned long long>(v.version), inv.layout.l3_version_dir(v.version).c_str(),
          format_bytes(v.total_bytes()).c_str(), format_duration(secs).c_str(),
          format_rate(v.total_bytes(), secs).c_str());
  report.flushed.push_back({{"version", v.version},
                            {"dir", inv.layout.l3_version_dir(v.version)},
                            {"bytes", v.total_bytes()},
                            {"seconds", secs}});
  return true;
}

int flush(const Inventory& inv, uint64_t only, FlushReport& report) {
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
      report.note("version " + std::to_string(only) + " is already committed in " + v.l3.dir + "; nothing to do");
      return kExitOk;
    }
    if (!v.l1_complete()) {
      print_error("flush", "version " + std::to_string(only) + " is not complete in " + where + ": " +
                               std::to_string(v.l1_ranks()) + " of " + std::to_string(v.nranks()) +
                               " ranks, missing rank(s) " + missing_ranks(v));
      report.failed.push_back({{"version", only}, {"error", "not complete in " + where}});
      return kExitFailure;
    }
    return flush_one(inv, v, report) ? kExitOk : kExitFailure;
  }

  uint64_t committed = newest_committed(inv);
  bool failed = false;
  for (const auto& [ver, v] : inv.versions) {
    if (!v.l1_complete()) continue;
    if (ver <= committed) {
      if (v.l3.committed)
        report.note("version " + std::to_string(ver) + ", the newest " + (failed ? "good " : "") +
                    "version complete in L1, is already committed in " + v.l3.dir + "; nothing to do");
      else
        report.note("L3 already holds version " + std::to_string(committed) + ", newer than version " +
                    std::to_string(ver) + " in L1; nothing to do");
      return failed ? kExitFailure : kExitOk;
    }
    if (flush_one(inv, v, report)) return failed ? kExitFailure : kExitOk;
    failed = true;  // a damaged newest version: try the one before it
  }
  if (failed) return kExitFailure;
  print_error("flush", "nothing to flush: no version is complete in " + where +
                           (inv.versions.empty() ? " and there are no checkpoints in " + inv.layout.prefix : ""));
  return kExitNothing;
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
  FlushReport report;
  report.json = o.json;
  const int status = flush(inv, only, report);
  if (o.json)
    printf("%s\n", nlohmann::json{{"prefix", inv.layout.prefix},
                                   {"cache", inv.layout.cache_job},
                                   {"flushed", report.flushed},
                                   {"failed", report.failed},
                                   {"notes", report.notes},
                                   {"exit_status", status}}
                        .dump(2)
                        .c_str());
  return status;
}

}  // namespace

Command add_flush_command(CLI::App& root) {
  auto o = std::make_shared<FlushOptions>();
  CLI::App* app = root.add_subcommand("flush", "Write the newest version complete in the L1 cache to L3 (scavenge).");
  app->add_option("args", o->args,
                  "VERSION (a number, or v00000042) and/or PREFIX; one word that is not a version is the prefix")
      ->expected(0, 2)
      ->type_name("[VERSION] [PREFIX]");
  add_config_option(app, o->config_path);
  app->add_flag("--json", o->json, "Print JSON: the versions flushed and failed, notes, exit status");
  app->footer(
      "Every rank's L1 record must be in the cache directories visible from this machine and its slot must\n"
      "verify; the rank files and manifests are written, then COMMIT. If the newest such version is\n"
      "damaged, the one before it is tried. A version already committed is left alone.\n"
      "Exit status: 0 flushed or already in L3, 1 failed (damaged, incomplete or an I/O error),\n"
      "2 bad options or configuration, 3 nothing to flush.");
  set_usage(app, "cairn flush [VERSION] [PREFIX] [--json] [--config FILE]");
  return {app, [o](const Invocation&) { return run_flush(*o); }};
}

}  // namespace cairn::tool
