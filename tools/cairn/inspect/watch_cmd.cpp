// `cairn watch [PREFIX] [--stall DURATION] [--interval DURATION] [--once] [--json] [--config FILE]`: follows a
// running job through its state file (<prefix>/.cairn/state) and its history (<prefix>/.cairn/history,
// read as it grows): the last checkpoint, the newest version at each level and when it got there, the
// bandwidth per level (the newest version's and the mean, from the history; else from the files' times
// where they are visible from here), the launches and restarts. Raises a stall alarm (exit status 4)
// after --stall seconds without a new checkpoint; exits 0 when the job finalizes.
#include <fcntl.h>
#include <sys/stat.h>
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
#include "base/fsutil.hpp"
#include "inspect/history_summary.hpp"
#include "inspect/inventory.hpp"
#include "base/state_file.hpp"
#include "cli_units.hpp"
#include "format.hpp"
#include "inspect/version_times.hpp"

namespace cairn::tool {
namespace {

struct WatchOptions {
  std::string prefix, config_path;
  double stall = 0, interval = 2;
  bool once = false, json = false;
};

// The history, read as it grows: each look reads only the bytes appended since the last one.
class HistoryFollower {
 public:
  explicit HistoryFollower(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  bool present() const { return present_; }
  const history::Summary& summary() const { return z_.summary(); }
  // at_end: the bytes after the last newline are a torn line (warned about), not one being written.
  void poll(bool at_end) {
    struct stat st;
    if (::stat(path_.c_str(), &st) != 0) {
      if (present_) reset();
      present_ = false;
      return;
    }
    present_ = true;
    uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size < offset_) reset();  // replaced or truncated: start over
    if (size > offset_) {
      fs::Fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
      std::string more(size - offset_, '\0');
      Status rd = fd.valid() ? fs::pread_all(fd.get(), more.data(), more.size(), offset_, path_)
                             : posix_error("open", path_, errno);
      if (!rd.is_ok()) {
        warn(rd.message());
        return;
      }
      pending_ += more;
      offset_ = size;
    }
    history::Parsed p = history::parse_history(pending_, at_end, next_line_);
    for (const auto& w : p.warnings) warn(w);
    for (const auto& l : p.lines) z_.add(l);
    next_line_ += p.line_count;
    pending_.erase(0, p.consumed);
  }

 private:
  void reset() {
    offset_ = 0;
    next_line_ = 1;
    pending_.clear();
    z_ = history::Summarizer{};
  }
  void warn(const std::string& w) { print_error("watch", "history " + path_ + ": " + w); }

  std::string path_, pending_;
  uint64_t offset_ = 0, next_line_ = 1;
  bool present_ = false;
  history::Summarizer z_;
};

// What one look at the job shows.
struct Snapshot {
  state_file::State state;
  uint64_t checkpoint = 0;        // the newest version complete at L1 (the state's l1)
  int64_t checkpoint_ns = 0;      // when it was taken, as far as known
  std::string checkpoint_source;  // "manifest", "history", "state" (its last update) or "watch" (first seen)
  double bw[3] = {0, 0, 0};       // bytes/s per level, the newest known; 0 unknown
  double mean[3] = {0, 0, 0};     // bytes/s per level over the history; 0 unknown
  uint64_t samples[3] = {0, 0, 0};
  const char* bw_source[3] = {nullptr, nullptr, nullptr};  // "history" or "files"
  int64_t reached_ns[3] = {0, 0, 0};  // when the state's version of the level reached it (history)
  bool have_history = false;
  size_t launches = 0, failures = 0;
  std::vector<std::pair<size_t, history::Restart>> restarts;  // (launch number, restart)
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

nlohmann::json optional_number(double x) { return x > 0 ? nlohmann::json(x) : nlohmann::json(); }

nlohmann::json snapshot_json(const Snapshot& s, const std::string& history_path, int64_t now, double stall,
                             bool stalled) {
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
        {"version", lv[i]},
        {"reached_unix_ns", s.reached_ns[i] ? nlohmann::json(s.reached_ns[i]) : nlohmann::json()},
        {"bandwidth_bytes_per_s", optional_number(s.bw[i])},
        {"mean_bandwidth_bytes_per_s", optional_number(s.mean[i])},
        {"samples", s.samples[i]},
        {"bandwidth_source", s.bw_source[i] ? nlohmann::json(s.bw_source[i]) : nlohmann::json()}};
  nlohmann::json restarts = nlohmann::json::array();
  for (const auto& [launch, r] : s.restarts)
    restarts.push_back({{"launch", launch},
                        {"version", r.version},
                        {"level", history::level_name(r.level)},
                        {"seconds", static_cast<double>(r.end_ns - r.start_ns) / 1e9},
                        {"rejected", r.rejected}});
  j["history"] = {{"path", history_path},
                  {"present", s.have_history},
                  {"launches", s.launches},
                  {"restarts", restarts},
                  {"failures", s.failures}};
  j["stall_seconds"] = stall;
  j["stalled"] = stalled;
  return j;
}

std::string snapshot_text(const Snapshot& s, int64_t now) {
  std::string ago =
      s.checkpoint_ns ? format_duration(static_cast<double>(now - s.checkpoint_ns) / 1e9) + " ago" : "time unknown";
  std::string last =
      s.checkpoint ? "last checkpoint " + std::to_string(s.checkpoint) + " (" + ago + ")" : "no checkpoint yet";
  char head[256];
  snprintf(head, sizeof head, "%s  %-9s  version %llu  %s", format_utc(now).c_str(),
           s.state.phase.empty() ? "?" : s.state.phase.c_str(), static_cast<unsigned long long>(s.state.version),
           last.c_str());
  std::string out = head;
  const uint64_t lv[3] = {s.state.l1, s.state.l2, s.state.l3};
  for (int i = 0; i < 3; ++i) {
    out += "  L" + std::to_string(i + 1) + " " + std::to_string(lv[i]);
    // The level's age where it differs from the last checkpoint's (L3 lags behind when flushes are rare).
    if (s.reached_ns[i] && lv[i] != s.checkpoint)
      out += " (" + format_duration(static_cast<double>(now - s.reached_ns[i]) / 1e9) + " ago)";
  }
  out += "  bandwidth";
  for (int i = 0; i < 3; ++i) {
    out += std::string(i ? ", " : " ") + "L" + std::to_string(i + 1) + " " + bw_text(s.bw[i]);
    if (s.mean[i] > 0) out += " (mean " + bw_text(s.mean[i]) + ")";
  }
  if (s.have_history) {
    out += "  launches " + std::to_string(s.launches) + ", restarts " + std::to_string(s.restarts.size());
    if (!s.restarts.empty()) {
      const history::Restart& r = s.restarts.back().second;
      out += " (last: version " + std::to_string(r.version) + " from " + history::level_name(r.level) +
             (r.rejected ? ", rejected" : "") + ")";
    }
    if (s.failures) out += ", failures " + std::to_string(s.failures);
  }
  return out;
}

// When the state's newest L1 version was taken: its manifest's created_unix_ns where the files are
// visible; else the history's record of it; else, on the first look, the state's last update; else the
// moment this watch saw it.
void find_checkpoint_time(const Inventory& inv, const history::Summary* hs, Snapshot* s, int64_t now,
                          const Snapshot* before) {
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
  int64_t recorded = 0;
  if (hs)
    if (auto v = hs->versions.find(s->checkpoint); v != hs->versions.end() && v->second.level[0].reached)
      recorded = v->second.level[0].start_ns;
  if (created) {
    s->checkpoint_ns = created;
    s->checkpoint_source = "manifest";
  } else if (recorded > 0 && recorded <= now) {
    s->checkpoint_ns = recorded;
    s->checkpoint_source = "history";
  } else if (!before) {
    auto upd = s->state.values.find("updated_unix_ns");
    int64_t u = upd != s->state.values.end() ? std::atoll(upd->second.c_str()) : 0;
    if (u > 0 && u <= now) {
      s->checkpoint_ns = u;
      s->checkpoint_source = "state";
    }
  }
}

// Per level: when the state's version reached it, and the bandwidths: from the history where it has
// them, else from the files' times (only looked at when `inv` is given: the versions changed).
void fill_levels(const Inventory* inv, const history::Summary* hs, Snapshot* s, const Snapshot* before) {
  const uint64_t lv[3] = {s->state.l1, s->state.l2, s->state.l3};
  s->have_history = hs != nullptr;
  if (hs) {
    s->launches = hs->launches.size();
    s->failures = hs->failures.size();
    s->restarts.clear();
    for (size_t i = 0; i < hs->launches.size(); ++i)
      for (const auto& r : hs->launches[i].restarts) s->restarts.emplace_back(i + 1, r);
  }
  for (int i = 0; i < 3; ++i) {
    s->reached_ns[i] = 0;
    s->bw[i] = s->mean[i] = 0;
    s->samples[i] = 0;
    s->bw_source[i] = nullptr;
    if (hs) {
      if (auto v = hs->versions.find(lv[i]); lv[i] && v != hs->versions.end() && v->second.level[i].reached)
        s->reached_ns[i] = v->second.level[i].end_ns;
      history::LevelStats st = history::level_stats(*hs, i + 1);
      if (st.samples) {
        s->bw[i] = st.last;
        s->mean[i] = st.mean;
        s->samples[i] = st.samples;
        s->bw_source[i] = "history";
        continue;
      }
    }
    if (inv) {
      double files = level_bandwidth(*inv, lv[i], i + 1);
      if (files > 0) s->bw[i] = files, s->bw_source[i] = "files";
    } else if (before && before->bw_source[i] && std::string(before->bw_source[i]) == "files") {
      s->bw[i] = before->bw[i];
      s->bw_source[i] = "files";
    }
  }
}

// Fills the checkpoint time and the bandwidths, for a snapshot whose versions changed.
void look_at_files(const Layout& layout, const history::Summary* hs, Snapshot* s, int64_t now, const Snapshot* before) {
  Inventory inv = scan_inventory(layout);
  find_checkpoint_time(inv, hs, s, now, before);
  fill_levels(&inv, hs, s, before);
}

bool same_versions(const state_file::State& a, const state_file::State& b) {
  return a.version == b.version && a.l1 == b.l1 && a.l2 == b.l2 && a.l3 == b.l3 && a.phase == b.phase;
}

int run_watch(const WatchOptions& o) {
  if (o.interval <= 0 || o.stall < 0) {
    print_error("watch", "--interval must be positive and --stall not negative");
    return kExitUsage;
  }
  auto ctx = load_tool_context("watch", o.config_path, o.prefix, /*prefix_must_exist=*/false);
  if (!ctx) {
    print_error("watch", ctx.status().message());
    return kExitUsage;
  }
  const Layout& layout = ctx->layout;
  const std::string path = layout.state_file();
  HistoryFollower hist(history::path(layout));
  int64_t started = now_unix_ns();
  bool have = false, waiting_said = false;
  Snapshot last;
  for (;;) {
    int64_t now = now_unix_ns();
    hist.poll(/*at_end=*/o.once);
    const history::Summary* hs = hist.present() ? &hist.summary() : nullptr;
    auto read = state_file::read_state(path);
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
          fprintf(stderr, "cairn watch: no job state at %s (no job has run with this prefix)\n", path.c_str());
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
        look_at_files(layout, hs, &s, now, have ? &last : nullptr);
      } else {
        s = last;
        s.state = **read;
        fill_levels(nullptr, hs, &s, &last);  // the history may have grown
      }
      double idle = static_cast<double>(now - s.checkpoint_ns) / 1e9;
      bool finalized = s.state.phase == "finalized";
      stalled = !finalized && o.stall > 0 && idle > o.stall;
      if (changed || o.once || stalled) {
        if (o.json)
          printf("%s\n", snapshot_json(s, hist.path(), now, o.stall, stalled).dump(o.once ? 2 : -1).c_str());
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
  add_prefix_arg(app, o->prefix);
  app->add_option("--stall", o->stall, "Alarm and exit 4 after this long without a new checkpoint (90s, 10m, 1h)")
      ->transform(cli::duration_value())
      ->type_name("DURATION");
  app->add_option("--interval", o->interval, "Time between looks at the state file (default 2s)")
      ->transform(cli::duration_value())
      ->type_name("DURATION");
  app->add_flag("--once", o->once, "Print the job's state once and exit");
  app->add_flag("--json", o->json, "Print JSON (with --once: one object; else one object per line per change)");
  add_config_option(app, o->config_path);
  app->footer(
      "A new checkpoint is a change of the state's l1 key (a version complete in L1). A line is printed\n"
      "when the state's version, phase or l1/l2/l3 change. Bandwidths (the newest version's, and the mean)\n"
      "come from the job history (<prefix>/.cairn/history), with the launches and restarts; without one,\n"
      "from the files' times when the cache and prefix are visible from here ('?' otherwise).\n"
      "Exit status: 0 the job finalized (or --once printed a job that is not stalled), 1 the state file\n"
      "cannot be read, 2 bad options, 3 --once and no state file, 4 stall alarm.");
  set_usage(app, "cairn watch [PREFIX] [--stall DURATION] [--interval DURATION] [--once] [--json] [--config FILE]");
  return {app, [o](const Invocation&) { return run_watch(*o); }};
}

}  // namespace cairn::tool
