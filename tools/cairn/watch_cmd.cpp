// `cairn watch [PREFIX] [--stall SECONDS] [--interval S] [--once] [--json] [--config FILE]`: follows a
// running job through its state file (<prefix>/.cairn/state): the last checkpoint, the newest version
// at each level and, where the files are visible from here, the bandwidth per level. Raises a stall
// alarm (exit status 4) after --stall seconds without a new checkpoint; exits 0 when the job finalizes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "commands.hpp"
#include "common.hpp"
#include "inventory.hpp"
#include "job_state.hpp"

namespace cairn::tool {
namespace {

struct WatchOptions {
  std::string prefix, config_path;
  double stall = 0, interval = 2;
  bool once = false, json = false;
};

// What one look at the job shows.
struct Snapshot {
  JobState state;
  uint64_t checkpoint = 0;        // the newest version complete at L1 (the state's l1)
  int64_t checkpoint_ns = 0;      // when it was taken, as far as known
  std::string checkpoint_source;  // "manifest", "state" (its last update) or "watch" (first seen)
  double bw[3] = {0, 0, 0};       // bytes/s per level for the state's l1, l2, l3 versions; 0 unknown
};

// Bandwidth of version v at `level` (1..3) from its files' times; 0 when they are not visible here.
double level_bandwidth(const Inventory& inv, uint64_t v, int level) {
  auto it = inv.versions.find(v);
  if (!v || it == inv.versions.end()) return 0;
  VersionTimes t = version_times(it->second);
  double s = level == 1 ? t.l1_seconds() : level == 2 ? t.l2_seconds() : t.l3_seconds();
  return s > 0 ? static_cast<double>(t.bytes) / s : 0;
}

std::string bw_text(double bw) { return bw > 0 ? format_rate(static_cast<uint64_t>(bw), 1.0) : "?"; }

nlohmann::json snapshot_json(const Snapshot& s, int64_t now, double stall, bool stalled) {
  nlohmann::json j;
  j["state"] = s.state.values;
  j["phase"] = s.state.phase;
  j["version"] = s.state.version;
  j["finalized"] = s.state.phase == "finalized";
  j["last_checkpoint"] = {{"version", s.checkpoint},
                          {"unix_ns", s.checkpoint_ns},
                          {"age_seconds", s.checkpoint_ns ? static_cast<double>(now - s.checkpoint_ns) / 1e9 : 0.0},
                          {"source", s.checkpoint_source}};
  const uint64_t lv[3] = {s.state.l1, s.state.l2, s.state.l3};
  for (int i = 0; i < 3; ++i)
    j["levels"]["l" + std::to_string(i + 1)] = {
        {"version", lv[i]}, {"bandwidth_bytes_per_s", s.bw[i] > 0 ? nlohmann::json(s.bw[i]) : nlohmann::json()}};
  j["stall_seconds"] = stall;
  j["stalled"] = stalled;
  return j;
}

std::string snapshot_text(const Snapshot& s, int64_t now) {
  char buf[512];
  std::string ago =
      s.checkpoint_ns ? format_duration(static_cast<double>(now - s.checkpoint_ns) / 1e9) + " ago" : "time unknown";
  std::string last =
      s.checkpoint ? "last checkpoint " + std::to_string(s.checkpoint) + " (" + ago + ")" : "no checkpoint yet";
  snprintf(buf, sizeof buf, "%s  %-9s  version %llu  %s  L1 %llu  L2 %llu  L3 %llu  bandwidth L1 %s, L2 %s, L3 %s",
           format_utc(now).c_str(), s.state.phase.empty() ? "?" : s.state.phase.c_str(),
           static_cast<unsigned long long>(s.state.version), last.c_str(), static_cast<unsigned long long>(s.state.l1),
           static_cast<unsigned long long>(s.state.l2), static_cast<unsigned long long>(s.state.l3),
           bw_text(s.bw[0]).c_str(), bw_text(s.bw[1]).c_str(), bw_text(s.bw[2]).c_str());
  return buf;
}

// When the state's newest L1 version was taken: its manifest's created_unix_ns where the files are
// visible; else, on the first look, the state's last update; else the moment this watch saw it.
void find_checkpoint_time(const Inventory& inv, Snapshot* s, int64_t now, const Snapshot* before) {
  s->checkpoint = s->state.l1;
  if (before && before->checkpoint == s->checkpoint) {
    s->checkpoint_ns = before->checkpoint_ns;
    s->checkpoint_source = before->checkpoint_source;
    return;
  }
  s->checkpoint_ns = now;
  s->checkpoint_source = "watch";
  if (!s->checkpoint) return;  // none yet: the stall clock runs from the first look
  auto it = inv.versions.find(s->checkpoint);
  int64_t created = it != inv.versions.end() ? it->second.created_unix_ns() : 0;
  if (created) {
    s->checkpoint_ns = created;
    s->checkpoint_source = "manifest";
  } else if (!before) {
    auto upd = s->state.values.find("updated_unix_ns");
    int64_t u = upd != s->state.values.end() ? std::atoll(upd->second.c_str()) : 0;
    if (u > 0 && u <= now) {
      s->checkpoint_ns = u;
      s->checkpoint_source = "state";
    }
  }
}

// Fills the checkpoint time and the bandwidths from the files, for a snapshot whose versions changed.
void look_at_files(const Layout& layout, Snapshot* s, int64_t now, const Snapshot* before) {
  Inventory inv = scan_inventory(layout);
  find_checkpoint_time(inv, s, now, before);
  s->bw[0] = level_bandwidth(inv, s->state.l1, 1);
  s->bw[1] = level_bandwidth(inv, s->state.l2, 2);
  s->bw[2] = level_bandwidth(inv, s->state.l3, 3);
}

bool same_versions(const JobState& a, const JobState& b) {
  return a.version == b.version && a.l1 == b.l1 && a.l2 == b.l2 && a.l3 == b.l3 && a.phase == b.phase;
}

int run_watch(const WatchOptions& o) {
  if (o.interval <= 0 || o.stall < 0) {
    print_error("watch", "--interval must be positive and --stall not negative");
    return kExitUsage;
  }
  auto ctx = load_tool_context("watch", o.config_path, o.prefix);
  if (!ctx) {
    print_error("watch", ctx.status().message());
    return kExitUsage;
  }
  const Layout& layout = ctx->layout;
  const std::string path = layout.state_file();
  int64_t started = now_unix_ns();
  bool have = false, waiting_said = false;
  Snapshot last;
  for (;;) {
    int64_t now = now_unix_ns();
    auto read = read_job_state(path);
    if (!read) {
      print_error("watch", read.status().message());
      return kExitFailure;
    }
    bool stalled = false;
    if (!read->has_value()) {
      if (o.once) {
        if (o.json)
          printf("%s\n", nlohmann::json{{"state", nullptr}, {"path", path}}.dump().c_str());
        else
          printf("no job state at %s (no job has run with this prefix)\n", path.c_str());
        return kExitNothing;
      }
      if (!waiting_said) {
        fprintf(stderr, "cairn watch: waiting for %s\n", path.c_str());
        waiting_said = true;
      }
      stalled = o.stall > 0 && static_cast<double>(now - started) / 1e9 > o.stall;
      if (stalled) {
        print_error("watch", "STALL: no job state and no checkpoint for " + format_duration(o.stall));
        return kExitStall;
      }
    } else {
      Snapshot s;
      s.state = **read;
      bool changed = !have || !same_versions(s.state, last.state);
      if (changed) {
        look_at_files(layout, &s, now, have ? &last : nullptr);
      } else {
        s = last;
        s.state = **read;
      }
      double idle = static_cast<double>(now - s.checkpoint_ns) / 1e9;
      bool finalized = s.state.phase == "finalized";
      stalled = !finalized && o.stall > 0 && idle > o.stall;
      if (changed || o.once || stalled) {
        if (o.json)
          printf("%s\n", snapshot_json(s, now, o.stall, stalled).dump(o.once ? 2 : -1).c_str());
        else
          printf("%s\n", snapshot_text(s, now).c_str());
        fflush(stdout);
      }
      have = true;
      last = s;
      if (stalled) {
        print_error("watch", "STALL: no new checkpoint for " + format_duration(idle) + " (limit " +
                                 format_duration(o.stall) + "); last: version " + std::to_string(s.checkpoint) +
                                 ", phase " + s.state.phase);
        return kExitStall;
      }
      if (finalized) {
        if (!o.once && !o.json) printf("cairn watch: the job finalized\n");
        return kExitOk;
      }
      if (o.once) return kExitOk;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o.interval));
  }
}

}  // namespace

Command add_watch_command(CLI::App& root) {
  auto o = std::make_shared<WatchOptions>();
  CLI::App* app =
      root.add_subcommand("watch", "Follow a running job: last checkpoint, levels, bandwidth, stall alarm.");
  app->add_option("prefix", o->prefix, "L3 directory (default: the configured prefix)")->type_name("PREFIX");
  app->add_option("--stall", o->stall, "Alarm and exit 4 after this many seconds without a new checkpoint")
      ->type_name("SECONDS");
  app->add_option("--interval", o->interval, "Seconds between looks at the state file (default 2)")->type_name("S");
  app->add_flag("--once", o->once, "Print the job's state once and exit");
  app->add_flag("--json", o->json, "Print JSON (with --once: one object; else one object per line per change)");
  app->add_option("--config", o->config_path, "Config file (TOML); default: the file CAIRN_CONFIG names")
      ->type_name("FILE");
  app->footer(
      "A new checkpoint is a change of the state's l1 key (a version complete in L1). A line is printed\n"
      "when the state's version, phase or l1/l2/l3 change. Bandwidths come from the files' times when the\n"
      "cache and prefix are visible from here ('?' otherwise).\n"
      "Exit status: 0 the job finalized (or --once printed a job that is not stalled), 1 the state file\n"
      "cannot be read, 2 bad options, 3 --once and no state file, 4 stall alarm.");
  set_usage(app, "cairn watch [PREFIX] [--stall SECONDS] [--interval S] [--once] [--json] [--config FILE]");
  Command cmd;
  cmd.app = app;
  cmd.run = [o](const Invocation&) { return run_watch(*o); };
  return cmd;
}

}  // namespace cairn::tool
