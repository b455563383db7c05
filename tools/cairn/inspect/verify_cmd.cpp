// `cairn verify [VERSION] [PREFIX] [--level l1|l3|all] [--config FILE] [--json]`: re-reads every
// chunk of every version (or of one) at the chosen levels and checks it against the manifests, as a
// restart would (verify_stream). The exit status says whether everything checked was good.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "inspect/inventory.hpp"
#include "format.hpp"
#include "inspect/level_check.hpp"
#include "progress.hpp"

namespace cairn::tool {
namespace {

struct VerifyOptions {
  std::vector<std::string> args;  // [VERSION] [PREFIX]
  std::string level = "all", config_path;
  bool json = false;
};

struct Row {
  uint64_t version;
  const char* level;
  LevelCheck check;
};

std::string detail(const LevelCheck& c) {
  std::string s = std::to_string(c.ranks_checked) + "/" + std::to_string(c.nranks) + " ranks checked, " +
                  std::to_string(c.chunks) + " chunks, " + format_bytes(c.bytes);
  if (c.state == LevelCheck::State::bad) return c.error;
  if (c.state == LevelCheck::State::incomplete) return c.ranks_checked ? c.error + "; " + s : c.error;
  return s;
}

int run_verify(const VerifyOptions& o) {
  std::string prefix;
  uint64_t only = 0;
  if (o.args.size() == 2) {
    if (!parse_version_arg(o.args[0], &only)) {
      print_error("verify", "'" + o.args[0] + "' is not a version (a number from 1, or v00000042)");
      return kExitUsage;
    }
    prefix = o.args[1];
  } else if (o.args.size() == 1 && !parse_version_arg(o.args[0], &only)) {
    prefix = o.args[0];  // not a version: a prefix (write ./12 for a prefix named 12)
  }
  auto ctx = load_tool_context("verify", o.config_path, prefix);
  if (!ctx) {
    print_error("verify", ctx.status().message());
    return kExitUsage;
  }
  Inventory inv = scan_inventory(ctx->layout);
  bool do_l1 = o.level != "l3", do_l3 = o.level != "l1";

  std::vector<const VersionInfo*> todo;
  for (const auto& [ver, v] : inv.versions)
    if (!only || ver == only) todo.push_back(&v);
  uint64_t total = 0;
  for (const VersionInfo* v : todo) total += (do_l1 ? l1_check_bytes(*v) : 0) + (do_l3 ? l3_check_bytes(*v) : 0);

  std::vector<Row> rows;
  {
    Progress progress("verify", total);
    for (const VersionInfo* v : todo) {
      if (do_l1) rows.push_back({v->version, "L1", check_l1(*v, &progress)});
      if (do_l3) rows.push_back({v->version, "L3", check_l3(inv.layout, *v, &progress)});
    }
  }
  std::erase_if(rows, [](const Row& r) { return r.check.state == LevelCheck::State::absent; });
  int good = 0, bad = 0, incomplete = 0;
  for (const auto& r : rows) {
    if (r.check.state == LevelCheck::State::bad)
      ++bad;
    else if (r.check.state == LevelCheck::State::good)
      ++good;
    else
      ++incomplete;
  }
  bool checked_any = false;
  for (const auto& r : rows) checked_any |= r.check.ranks_checked > 0;
  int status = bad ? kExitFailure : checked_any ? kExitOk : kExitNothing;

  if (o.json) {
    nlohmann::json j;
    j["prefix"] = inv.layout.prefix;
    j["cache"] = inv.layout.cache_job;
    j["level"] = o.level;
    j["results"] = nlohmann::json::array();
    for (const auto& r : rows)
      j["results"].push_back({{"version", r.version},
                              {"level", r.level},
                              {"state", state_name(r.check.state)},
                              {"nranks", r.check.nranks},
                              {"ranks_checked", r.check.ranks_checked},
                              {"ranks_good", r.check.ranks_good},
                              {"chunks", r.check.chunks},
                              {"bytes", r.check.bytes},
                              {"error", r.check.error}});
    j["good"] = good;
    j["bad"] = bad;
    j["incomplete"] = incomplete;
    j["exit_status"] = status;
    printf("%s\n", j.dump(2).c_str());
    return status;
  }
  int width = 1;
  for (const auto& r : rows) width = std::max(width, static_cast<int>(std::to_string(r.version).size()));
  if (rows.empty() || (!checked_any && !bad)) {
    for (const auto& r : rows)
      printf("version %*llu  %s  %-10s  %s\n", width, static_cast<unsigned long long>(r.version), r.level,
             state_name(r.check.state), detail(r.check).c_str());
    std::string what = only ? "version " + std::to_string(only) : std::string("checkpoints");
    std::string where = o.level == "l1"   ? "in the cache " + inv.layout.cache_job
                        : o.level == "l3" ? "in " + inv.layout.prefix
                                          : "in " + inv.layout.prefix + " or in the cache " + inv.layout.cache_job;
    fprintf(stderr, "cairn verify: nothing to verify: no %s %s\n", what.c_str(), where.c_str());
    return status;
  }
  for (const auto& r : rows)
    printf("version %*llu  %s  %-10s  %s\n", width, static_cast<unsigned long long>(r.version), r.level,
           r.check.state == LevelCheck::State::bad ? "BAD" : state_name(r.check.state), detail(r.check).c_str());
  printf("%d good, %d bad, %d incomplete\n", good, bad, incomplete);
  return status;
}

}  // namespace

Command add_verify_command(CLI::App& root) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* app =
      root.add_subcommand("verify", "Re-read every chunk of the checkpoints and check it against the manifests.");
  app->add_option("args", o->args,
                  "VERSION (a number, or v00000042) and/or PREFIX; one word that is not a version is the prefix")
      ->expected(0, 2)
      ->type_name("[VERSION] [PREFIX]");
  app->add_option("--level", o->level, "Levels to check: l1 (the cache), l3 (the prefix) or all")
      ->check(CLI::IsMember({"l1", "l3", "all"}))
      ->type_name("LEVEL");
  add_config_option(app, o->config_path);
  app->add_flag("--json", o->json, "Print JSON");
  app->footer(
      "Per version and level: good, BAD (with the first bad rank and chunk), or incomplete (L1: ranks\n"
      "missing here, the others checked; L3: no COMMIT, not read); an unreadable record or COMMIT is BAD.\n"
      "A progress bar is drawn on stderr when\n"
      "it is a terminal.\n"
      "Exit status: 0 everything checked is good, 1 something is bad, 2 bad options or configuration,\n"
      "3 nothing to verify.");
  set_usage(app, "cairn verify [VERSION] [PREFIX] [--level l1|l3|all] [--json] [--config FILE]");
  return {app, [o](const Invocation&) { return run_verify(*o); }};
}

}  // namespace cairn::tool
