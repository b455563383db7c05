// `cairn index [PREFIX] [--current VERSION | --drop VERSION | --add VERSION] [--json] [--config FILE]`:
// SCR's scr_index. Lists the versions a restart may use, and records the user's choice in the prefix's
// version index (base/version_index.hpp): restart from a chosen older version without deleting the newer
// ones (--current), never restart from a version (--drop), accept a version copied into the prefix by
// hand once every chunk of it verified (--add). The files stay; the library's restart reads the index.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/version_index.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "inspect/inventory.hpp"
#include "format.hpp"
#include "inspect/level_check.hpp"

namespace cairn::tool {
namespace {

struct IndexOptions {
  std::string prefix, config_path, current, drop, add;
  bool json = false;
};

// Whether a restart could start from v as far as the files say (no data read): complete in L1 here or
// committed in L3, and not damaged.
bool restartable(const VersionInfo& v) {
  const LevelVerdict d1 = l1_verdict(v), d3 = l3_verdict(v);
  return d1.state == LevelVerdict::State::complete || d3.state == LevelVerdict::State::complete;
}

// The newest version a restart would take now: restartable and not passed over.
uint64_t restart_choice(const Inventory& inv, const VersionIndex& index, uint64_t restart_version) {
  for (const auto& [ver, v] : inv.versions)
    if (!restart_passes_over(index, ver, restart_version) && restartable(v)) return ver;
  return 0;
}

std::string marks(const VersionIndex& index, uint64_t ver, uint64_t chosen) {
  std::string m;
  auto add = [&](const char* w) { m += (m.empty() ? "" : ", ") + std::string(w); };
  if (ver == chosen) add("restart");
  if (ver == index.current) add("current");
  if (index.skip.count(ver)) add("skipped");
  if (index.added.count(ver)) add("added");
  return m.empty() ? "-" : m;
}

int list(const Inventory& inv, const VersionIndex& index, const Config& cfg, bool json) {
  const uint64_t chosen = restart_choice(inv, index, cfg.restart_version);
  if (json) {
    nlohmann::json versions = nlohmann::json::array();
    for (const auto& [ver, v] : inv.versions) {
      const LevelVerdict d1 = l1_verdict(v), d3 = l3_verdict(v);
      versions.push_back({{"version", ver},
                          {"label", v.label()},
                          {"l1", verdict_name(d1, false)},
                          {"l3", verdict_name(d3, true)},
                          {"restartable", restartable(v)},
                          {"skipped", index.skip.count(ver) > 0},
                          {"current", ver == index.current},
                          {"added", index.added.count(ver) > 0}});
    }
    printf("%s\n", nlohmann::json{{"prefix", inv.layout.prefix},
                                  {"index", inv.layout.index_file()},
                                  {"current", index.current ? nlohmann::json(index.current) : nlohmann::json()},
                                  {"restart_version", cfg.restart_version},
                                  {"restart_from", chosen ? nlohmann::json(chosen) : nlohmann::json()},
                                  {"versions", versions}}
                       .dump(2)
                       .c_str());
    return kExitOk;
  }
  if (inv.versions.empty()) {
    fprintf(stderr, "cairn index: no checkpoints in %s or in the cache %s\n", inv.layout.prefix.c_str(),
            inv.layout.cache_job.c_str());
    return kExitOk;
  }
  printf("%8s  %-16s  %-10s  %-10s  %s\n", "version", "label", "L1", "L3", "index");
  for (const auto& [ver, v] : inv.versions) {
    std::string label = v.label().empty() ? "-" : v.label();
    printf("%8llu  %-16s  %-10s  %-10s  %s\n", static_cast<unsigned long long>(ver), label.c_str(),
           verdict_name(l1_verdict(v), false), verdict_name(l3_verdict(v), true), marks(index, ver, chosen).c_str());
  }
  if (chosen)
    printf("\na restart takes version %llu%s\n", static_cast<unsigned long long>(chosen),
           cfg.restart_version ? (" (restart_version = " + std::to_string(cfg.restart_version) + ")").c_str() : "");
  else
    printf("\nno version here can be restarted from%s\n", index.skip.empty() ? "" : " (some are skipped)");
  return kExitOk;
}

int run_index(const IndexOptions& o) {
  const int actions = !o.current.empty() + !o.drop.empty() + !o.add.empty();
  if (actions > 1) {
    print_error("index", "give one of --current, --drop and --add");
    return kExitUsage;
  }
  uint64_t version = 0;
  const std::string& arg = !o.current.empty() ? o.current : !o.drop.empty() ? o.drop : o.add;
  if (actions && !parse_version_arg(arg, &version)) {
    print_error("index", "'" + arg + "' is not a version (a number from 1, or v00000042)");
    return kExitUsage;
  }
  auto ctx = load_tool_context("index", o.config_path, o.prefix);
  if (!ctx) {
    print_error("index", ctx.status().message());
    return kExitUsage;
  }
  const Layout& layout = ctx->layout;
  auto read = read_index(layout.index_file());
  if (!read) {
    print_error("index", read.status().message() + " (remove it to let a restart use every version)");
    return kExitFailure;
  }
  VersionIndex index = *read;
  Inventory inv = scan_inventory(layout);
  if (!actions) return list(inv, index, ctx->config, o.json);

  auto it = inv.versions.find(version);
  if (it == inv.versions.end()) {
    print_error("index", "no version " + std::to_string(version) + " in " + layout.prefix + " or in the cache " +
                             layout.cache_job + " (see 'cairn index')");
    return kExitNothing;
  }
  const VersionInfo& v = it->second;
  if (!job_not_running(layout))
    print_error("index", "warning: the job state says the job has not finished: the choice applies to its next "
                         "restart");
  std::string said;
  if (!o.current.empty()) {
    if (!restartable(v)) {
      print_error("index", "version " + std::to_string(version) + " cannot be restarted from (L1 " +
                               verdict_name(l1_verdict(v), false) + ", L3 " + verdict_name(l3_verdict(v), true) +
                               "): choose another (cairn index)");
      return kExitFailure;
    }
    // Every version newer than it, as the prefix holds them now, is passed over; what the restarted job
    // writes later (numbered above them) is not.
    index.current = version;
    index.skip.erase(version);
    for (const auto& [ver, other] : inv.versions)
      if (ver > version) index.skip.insert(ver);
    said = "a restart now takes version " + std::to_string(version) + "; newer versions stay and are skipped";
  } else if (!o.drop.empty()) {
    index.skip.insert(version);
    if (index.current == version) index.current = 0;
    said = "version " + std::to_string(version) + " is skipped by every restart (its files stay)";
  } else {
    // --add: a version copied in by hand is accepted only once every chunk of it verified.
    LevelCheck c = check_l3(layout, v, nullptr);
    if (c.state != LevelCheck::State::good) {
      index.skip.insert(version);
      index.added.erase(version);
      Status st = write_index(layout.index_file(), index);
      print_error("index", "version " + std::to_string(version) + " is not accepted: L3 " + state_name(c.state) +
                               (c.error.empty() ? "" : ": " + c.error) +
                               (st.is_ok() ? "; a restart skips it" : "; " + st.message()));
      return kExitFailure;
    }
    index.skip.erase(version);
    index.added.insert(version);
    said = "version " + std::to_string(version) + " verified (" + std::to_string(c.ranks_good) + " ranks, " +
           std::to_string(c.chunks) + " chunks, " + format_bytes(c.bytes) + ") and accepted";
  }
  Status st = write_index(layout.index_file(), index);
  if (!st.is_ok()) {
    print_error("index", st.message());
    return kExitFailure;
  }
  const uint64_t chosen = restart_choice(inv, index, ctx->config.restart_version);
  if (o.json) {
    printf("%s\n", nlohmann::json{{"index", layout.index_file()},
                                  {"current", index.current ? nlohmann::json(index.current) : nlohmann::json()},
                                  {"skip", format_version_ranges(index.skip)},
                                  {"added", format_version_ranges(index.added)},
                                  {"restart_from", chosen ? nlohmann::json(chosen) : nlohmann::json()},
                                  {"said", said}}
                       .dump(2)
                       .c_str());
  } else {
    printf("cairn index: %s\n", said.c_str());
  }
  return kExitOk;
}

}  // namespace

Command add_index_command(CLI::App& root) {
  auto o = std::make_shared<IndexOptions>();
  CLI::App* app = root.add_subcommand("index", "Choose the version a restart takes (SCR's scr_index).");
  add_prefix_arg(app, o->prefix);
  app->add_option("--current", o->current,
                  "Restart from VERSION: every newer version stays on disk and is skipped by restarts")
      ->type_name("VERSION");
  app->add_option("--drop", o->drop, "Never restart from VERSION (its files stay; cairn clean may remove it)")
      ->type_name("VERSION");
  app->add_option("--add", o->add,
                  "Accept VERSION, a v<NNNNNNNN> directory copied into the prefix by hand, once every chunk of it "
                  "verifies (else it is skipped)")
      ->type_name("VERSION");
  add_config_option(app, o->config_path);
  app->add_flag("--json", o->json, "Print JSON");
  app->footer(
      "Without an option: every version, its state in L1 and L3, and the index's marks (restart: the\n"
      "version a restart takes now; current, skipped, added). The choice is kept in <prefix>/.cairn/index\n"
      "and read by every later restart; the knob restart_version makes the same choice for one launch.\n"
      "Exit status: 0 done, 1 refused (a version that cannot be restarted from, or fails verification),\n"
      "2 bad options or configuration, 3 no such version.");
  set_usage(app, "cairn index [PREFIX] [--current VERSION | --drop VERSION | --add VERSION] [--json] [--config FILE]");
  return {app, [o](const Invocation&) { return run_index(*o); }};
}

}  // namespace cairn::tool
