// `cairn halt [PREFIX] [--checkpoints N] [--before TIME] [--after TIME] [--seconds N] [--immediate]
// [--unset] [--list] [--json]`: sets, updates, removes or shows the halt file <prefix>/.cairn/halt that
// a running job reads at every cairn_need_checkpoint/cairn_should_exit (format: docs/halt.md).
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>

#include "commands.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "base/layout.hpp"
#include "base/state_file.hpp"
#include "policy/halt.hpp"

namespace cairn::tool {
namespace {

struct HaltOptions {
  std::string prefix, config_path;
  std::optional<int64_t> checkpoints;
  std::string before, after, seconds;
  bool immediate = false, unset = false, list = false, json = false;
};

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The halt file now: nullopt when there is none. Warnings about its content go to stderr.
Result<std::optional<policy::ParsedHalt>> read_halt(const std::string& path, bool warn) {
  if (!fs::exists(path)) return std::optional<policy::ParsedHalt>();
  auto text = fs::read_file(path);
  if (!text) return text.status();
  policy::ParsedHalt parsed = policy::parse_halt_file(*text);
  if (warn)
    for (const auto& w : parsed.warnings) fprintf(stderr, "cairn halt: warning: %s: %s\n", path.c_str(), w.c_str());
  return std::optional<policy::ParsedHalt>(std::move(parsed));
}

void print_listing(const std::string& path, const std::optional<policy::ParsedHalt>& halt, bool json) {
  if (json) {
    nlohmann::json j;
    j["path"] = path;
    j["set"] = halt.has_value();
    if (halt) {
      const auto& c = halt->conditions;
      j["plain"] = c.plain();
      nlohmann::json cond = nlohmann::json::object();
      if (c.checkpoints) cond["checkpoints"] = *c.checkpoints;
      if (c.checkpoints_from) cond["checkpoints_from"] = *c.checkpoints_from;
      if (c.before) cond["before"] = *c.before;
      if (c.after) cond["after"] = *c.after;
      if (c.seconds) cond["seconds"] = *c.seconds;
      if (c.immediate) cond["immediate"] = true;
      j["conditions"] = cond;
      j["warnings"] = halt->warnings;
    }
    printf("%s\n", j.dump(2).c_str());
    return;
  }
  if (!halt) {
    printf("no halt set (%s does not exist)\n", path.c_str());
    return;
  }
  const auto& c = halt->conditions;
  printf("halt file %s\n", path.c_str());
  if (c.plain()) printf("  no condition: the job checkpoints at the next chance, then exits\n");
  if (c.checkpoints) {
    uint64_t from = c.checkpoints_from.value_or(0);
    printf("  checkpoints=%lld  exit after version %llu (%lld checkpoints after version %llu)\n",
           static_cast<long long>(*c.checkpoints), static_cast<unsigned long long>(from + *c.checkpoints),
           static_cast<long long>(*c.checkpoints), static_cast<unsigned long long>(from));
  }
  if (c.before)
    printf("  before=%lld  checkpoint and exit before %s (less the halt seconds)\n", static_cast<long long>(*c.before),
           policy::format_time(*c.before).c_str());
  if (c.after)
    printf("  after=%lld  exit after the first checkpoint from %s on\n", static_cast<long long>(*c.after),
           policy::format_time(*c.after).c_str());
  if (c.seconds)
    printf("  seconds=%lld  checkpoint and exit when the job has %lld s left\n", static_cast<long long>(*c.seconds),
           static_cast<long long>(*c.seconds));
  if (c.immediate) printf("  immediate=1  exit at the next cairn_should_exit, without a checkpoint\n");
}

int run_halt(const HaltOptions& o) {
  bool changes = o.checkpoints || !o.before.empty() || !o.after.empty() || !o.seconds.empty() || o.immediate;
  if (o.unset && changes) {
    print_error("halt", "--unset removes the whole halt file; give it without conditions");
    return kExitUsage;
  }

  // Every value is checked before anything is written.
  int64_t now = static_cast<int64_t>(time(nullptr));
  policy::HaltConditions update;
  if (o.checkpoints) {
    if (*o.checkpoints < 1) {
      print_error("halt", "--checkpoints " + std::to_string(*o.checkpoints) +
                              ": give a count >= 1 (--immediate exits without a checkpoint)");
      return kExitUsage;
    }
    update.checkpoints = *o.checkpoints;
  }
  for (auto [text, slot, name] : {std::tuple{&o.before, &update.before, "--before"},
                                  std::tuple{&o.after, &update.after, "--after"}}) {
    if (text->empty()) continue;
    auto t = policy::parse_time_spec(*text, now);
    if (!t) {
      print_error("halt", std::string(name) + ": " + t.status().message());
      return kExitUsage;
    }
    *slot = *t;
  }
  if (!o.seconds.empty()) {
    auto d = policy::parse_duration(o.seconds);
    if (!d || *d < 1) {
      print_error("halt", "--seconds " + o.seconds + ": " +
                              (d ? std::string("give at least 1 second") : d.status().message()));
      return kExitUsage;
    }
    update.seconds = *d;
  }

  auto loaded = load_job_config(o.config_path, "halt");
  if (!loaded) {
    print_error("halt", loaded.status().message());
    return kExitUsage;
  }
  Config cfg = loaded->config;
  if (!o.prefix.empty()) cfg.prefix = o.prefix;
  Layout layout = make_layout(cfg);
  if (!is_directory(layout.prefix)) {
    print_error("halt", "no such directory: " + layout.prefix + " (give the job's prefix)");
    return kExitUsage;
  }
  const std::string path = layout.halt_file();

  auto current = read_halt(path, !o.unset);
  if (!current) {
    print_error("halt", current.status().message());
    return kExitFailure;
  }
  if (o.unset) {
    Status st = fs::remove_file(path);
    if (!st.is_ok()) {
      print_error("halt", st.message());
      return kExitFailure;
    }
    if (!o.json) printf("halt removed (%s)\n", current->has_value() ? path.c_str() : "there was none");
    if (o.list || o.json) print_listing(path, std::nullopt, o.json);
    return kExitOk;
  }
  // --list and --json only show, unless conditions are given too (then they show the result).
  if ((o.list || o.json) && !changes) {
    print_listing(path, *current, o.json);
    return kExitOk;
  }

  // Set or update: the given conditions replace theirs, the others stay. Without any, a plain halt.
  policy::HaltConditions c = *current ? (*current)->conditions : policy::HaltConditions{};
  if (!changes) c = {};
  if (update.checkpoints) {
    auto state = state_file::read_state(layout.state_file());
    uint64_t newest = state && *state ? (*state)->version : 0;
    if (!state) fprintf(stderr, "cairn halt: warning: %s; counting from version 0\n", state.status().message().c_str());
    c.checkpoints = update.checkpoints;
    c.checkpoints_from = newest;
  }
  if (update.before) c.before = update.before;
  if (update.after) c.after = update.after;
  if (update.seconds) c.seconds = update.seconds;
  if (o.immediate) c.immediate = true;
  if (update.before && *update.before <= now)
    fprintf(stderr, "cairn halt: warning: --before %s is not in the future: the job checkpoints and exits now\n",
            policy::format_time(*update.before).c_str());

  Status st = fs::make_dirs(layout.control);
  if (st.is_ok()) st = fs::write_file_atomic(path, policy::format_halt_file(c));
  if (!st.is_ok()) {
    print_error("halt", "cannot write the halt file: " + st.message());
    return kExitFailure;
  }
  print_listing(path, policy::ParsedHalt{c, {}}, o.json);
  return kExitOk;
}

}  // namespace

Command add_halt_command(CLI::App& root) {
  auto o = std::make_shared<HaltOptions>();
  CLI::App* app = root.add_subcommand("halt", "Ask a running job to checkpoint and exit, now or on a condition.");
  add_prefix_arg(app, o->prefix, "The job's L3 directory (default: the configured prefix)");
  add_config_option(app, o->config_path, "Config file (TOML) for the default prefix; default: CAIRN_CONFIG");
  app->add_option("--checkpoints", o->checkpoints,
                  "Exit after N more checkpoints, counted from the newest version in the job's state file")
      ->type_name("N");
  app->add_option("--before", o->before, "Checkpoint and exit before TIME (less halt_seconds)")->type_name("TIME");
  app->add_option("--after", o->after, "Exit after the first checkpoint taken at or after TIME")->type_name("TIME");
  app->add_option("--seconds", o->seconds,
                  "Checkpoint and exit when the job's end time is N seconds away (also 5m, 1h)")
      ->type_name("N");
  app->add_flag("--immediate", o->immediate, "Exit at the next cairn_should_exit, WITHOUT a checkpoint");
  app->add_flag("--unset", o->unset, "Remove the halt file (every condition)");
  app->add_flag("--list", o->list, "Show the conditions set");
  app->add_flag("--json", o->json, "The same as --list, as JSON (shows only, unless conditions are given)");
  app->footer(
      "Without a condition: checkpoint at the next chance, then exit. Given conditions replace their\n"
      "old values and keep the others; the job stops at the first one met. The halt stays until --unset.\n"
      "TIME: Unix seconds (1795456800), ISO 8601 in local time (2026-11-22T18:00) or with a zone\n"
      "(2026-11-22T18:00Z), or relative to now (+2h, +30m, +1h30m). Format and rules: docs/halt.md.\n"
      "Exit status: 0; 1 when the file cannot be read or written; 2 for bad options or a missing prefix.");

  return {app, [o](const Invocation&) { return run_halt(*o); }};
}

}  // namespace cairn::tool
