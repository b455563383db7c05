// `cairn plot [--out FILE] [PREFIX] [--width W] [--json] [--config FILE]`: a timeline of a job's checkpoints
// and the levels each reached, and the bandwidth per level, drawn with matplotlib by the Python package
// (`python3 -m cairn.plot`, bindings/python/cairn/plot.py; python_module.hpp finds it) in the format of
// FILE's extension (PNG, SVG, PDF). From the job history (<prefix>/.cairn/history), which cairn.plot
// reads itself, when it holds events; without one, from the versions still on disk (docs/tools.md,
// "Where the times come from"): this file summarises them as the JSON `--json` prints, and cairn.plot
// draws that. `--json` prints what was plotted, summarised here (base/history.hpp, inventory.hpp).

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "inspect/history_summary.hpp"
#include "inspect/inventory.hpp"
#include "inspect/python_module.hpp"
#include "inspect/version_times.hpp"

namespace cairn::tool {
namespace {

struct PlotOptions {
  std::string out, prefix, config_path, campaign;
  int width = 1000;
  bool json = false;
};

struct Point {
  uint64_t version;
  VersionTimes times;
};

// ---- what was plotted, as JSON -------------------------------------------------------------------

nlohmann::json bandwidth_json(double bw) { return bw > 0 ? nlohmann::json(bw) : nlohmann::json(); }

nlohmann::json level_json(const history::LevelRecord& r) {
  if (!r.reached) return nullptr;
  nlohmann::json j = {{"start_unix_ns", r.start_ns}, {"end_unix_ns", r.end_ns}, {"seconds", r.seconds},
                      {"bytes", r.bytes}, {"bandwidth_bytes_per_s", bandwidth_json(r.bandwidth())},
                      {"launch", r.launch + 1}};
  if (r.rank_bytes) j["rank_bytes"] = r.rank_bytes;
  if (r.redundancy_bytes) j["redundancy_bytes"] = r.redundancy_bytes;
  if (r.copied_bytes != history::LevelRecord::kUnknown) j["copied_bytes"] = r.copied_bytes;
  if (r.full_sent_bytes != history::LevelRecord::kUnknown) {
    j["sent_bytes"] = r.sent_bytes;
    j["full_sent_bytes"] = r.full_sent_bytes;
  }
  if (r.l3_bytes_written) j["l3_bytes_written"] = r.l3_bytes_written;
  if (r.at_finalize) j["at_finalize"] = true;
  return j;
}

nlohmann::json history_json(const history::Summary& s) {
  nlohmann::json j;
  j["launches"] = nlohmann::json::array();
  for (size_t i = 0; i < s.launches.size(); ++i) {
    const history::Launch& L = s.launches[i];
    nlohmann::json restarts = nlohmann::json::array();
    for (const auto& r : L.restarts)
      restarts.push_back({{"version", r.version},
                          {"level", history::level_name(r.level)},
                          {"start_unix_ns", r.start_ns},
                          {"end_unix_ns", r.end_ns},
                          {"seconds", static_cast<double>(r.end_ns - r.start_ns) / 1e9},
                          {"bytes", r.bytes},
                          {"rejected", r.rejected}});
    j["launches"].push_back({{"launch", i + 1},
                             {"id", L.id},
                             {"started", L.started},
                             {"start_unix_ns", L.start_ns},
                             {"last_unix_ns", L.last_ns},
                             {"finalized", L.finalized},
                             {"end_status", L.finalized ? nlohmann::json(L.end_status) : nlohmann::json()},
                             {"exit_requested", L.exit_requested},
                             {"ranks", L.ranks},
                             {"nodes", L.nodes},
                             {"groups", L.groups},
                             {"restarts", restarts},
                             {"versions", L.versions}});
  }
  j["versions"] = nlohmann::json::array();
  for (const auto& [v, rec] : s.versions)
    j["versions"].push_back({{"version", v},
                             {"launch", rec.launch + 1},
                             {"discarded", rec.discarded},
                             {"levels",
                              {{"l1", level_json(rec.level[0])},
                               {"l2", level_json(rec.level[1])},
                               {"l3", level_json(rec.level[2])}}}});
  j["failures"] = nlohmann::json::array();
  for (const auto& f : s.failures)
    j["failures"].push_back({{"version", f.version},
                             {"level", f.level ? history::level_name(f.level) : "discarded"},
                             {"unix_ns", f.t_ns},
                             {"error", f.error},
                             {"launch", f.launch + 1}});
  for (int lv = 1; lv <= 3; ++lv) {
    history::LevelStats st = history::level_stats(s, lv);
    j["bandwidth"]["l" + std::to_string(lv)] = {{"samples", st.samples},
                                                {"last_version", st.last_version},
                                                {"last_bytes_per_s", bandwidth_json(st.last)},
                                                {"mean_bytes_per_s", bandwidth_json(st.mean)}};
  }
  return j;
}

nlohmann::json disk_level_json(int64_t a, int64_t b, double seconds, uint64_t bytes) {
  if (!b) return nullptr;
  return {{"start_unix_ns", a ? a : b}, {"end_unix_ns", b}, {"seconds", seconds}, {"bytes", bytes},
          {"bandwidth_bytes_per_s", bandwidth_json(seconds > 0 ? static_cast<double>(bytes) / seconds : 0)}};
}

nlohmann::json disk_json(const std::vector<Point>& pts) {
  nlohmann::json j;
  j["launches"] = nlohmann::json::array();
  j["versions"] = nlohmann::json::array();
  for (const auto& p : pts) {
    const VersionTimes& t = p.times;
    j["versions"].push_back({{"version", p.version},
                             {"levels",
                              {{"l1", disk_level_json(t.created_ns, t.l1_ns, t.l1_seconds(), t.bytes)},
                               {"l2", disk_level_json(t.l1_ns, t.l2_ns, t.l2_seconds(), t.bytes)},
                               {"l3", disk_level_json(t.l3_start_ns, t.l3_ns, t.l3_seconds(), t.bytes)}}}});
  }
  return j;
}

// Draws with cairn.plot: from the history file itself, or from `summary` (the disk data, handed over in
// a temporary file). quiet: it prints nothing but errors (--json owns stdout).
int draw(const PlotOptions& o, const std::string& history_path, const nlohmann::json* summary, bool quiet) {
  std::vector<std::string> args = {"--out", o.out, "--width", std::to_string(o.width)};
  if (quiet) args.push_back("--quiet");
  std::string tmp;
  if (summary) {
    const char* dir = getenv("TMPDIR");
    tmp = std::string(dir && *dir ? dir : "/tmp") + "/cairn-plot-XXXXXX.json";
    int fd = mkstemps(tmp.data(), 5);
    if (fd < 0) {
      print_error("plot", "cannot create a temporary file in " + tmp.substr(0, tmp.rfind('/')) + ": " + strerror(errno));
      return kExitFailure;
    }
    close(fd);
    Status st = fs::write_file_atomic(tmp, summary->dump(), false);
    if (!st.is_ok()) {
      unlink(tmp.c_str());
      print_error("plot", st.message());
      return kExitFailure;
    }
    args.insert(args.end(), {"--summary", tmp});
  } else {
    args.insert(args.end(), {"--history", history_path});
  }
  auto status = run_python_module("cairn.plot", args);
  if (!tmp.empty()) unlink(tmp.c_str());
  if (!status) {
    print_error("plot", status.status().message() + "; cairn plot draws with the Python package cairn and matplotlib "
                                                    "(docs/python.md)");
    return kExitFailure;
  }
  if (*status != kExitOk && locate_python_package().directory.empty())
    print_error("plot", "the Python package cairn was not found beside this program: set PYTHONPATH to where it is "
                        "installed (docs/tools.md)");
  return *status;
}

// --campaign FILE: the useful fraction per policy of a cairn-bench --campaign report, drawn by cairn.plot.
int run_plot_campaign(const PlotOptions& o) {
  if (o.out.empty() || o.json || !o.prefix.empty()) {
    print_error("plot", "--campaign FILE goes with --out FILE only (no PREFIX, no --json)");
    return kExitUsage;
  }
  auto status = run_python_module("cairn.plot", {"--out", o.out, "--width", std::to_string(o.width), "--campaign", o.campaign});
  if (!status) {
    print_error("plot", status.status().message() + "; cairn plot draws with the Python package cairn and matplotlib "
                                                    "(docs/python.md)");
    return kExitFailure;
  }
  return *status;
}

int run_plot(const PlotOptions& o) {
  if (!o.campaign.empty()) return run_plot_campaign(o);
  if (o.out.empty() && !o.json) {
    print_error("plot", "--out FILE is required (FILE.png, .svg or .pdf; or --json to print the data only)");
    return kExitUsage;
  }
  if (o.width < 400 || o.width > 8000) {
    print_error("plot", "--width must be 400..8000 pixels");
    return kExitUsage;
  }
  auto ctx = load_tool_context("plot", o.config_path, o.prefix);
  if (!ctx) {
    print_error("plot", ctx.status().message());
    return kExitUsage;
  }
  const Layout& layout = ctx->layout;
  nlohmann::json j = {{"prefix", layout.prefix}, {"history", history::path(layout)}};
  std::vector<std::string> warnings;

  auto hist = history::read_history(history::path(layout));
  if (!hist) warnings.push_back("cannot read the history: " + hist.status().message());
  else
    for (const auto& w : hist->parsed.warnings) warnings.push_back("history " + hist->path + ": " + w);
  const bool use_history = hist && hist->exists && !hist->parsed.lines.empty();
  if (o.json || !use_history)  // else cairn.plot reads the history and warns itself
    for (const auto& w : warnings) print_error("plot", w);

  if (use_history) {
    j.update(history_json(history::summarize(hist->parsed.lines)));
    j["source"] = "history";
  } else {
    Inventory inv = scan_inventory(layout);
    std::vector<Point> pts;
    for (auto it = inv.versions.rbegin(); it != inv.versions.rend(); ++it) {
      VersionTimes t = version_times(it->second);
      if (t.created_ns || t.l1_ns || t.l3_ns) pts.push_back({it->first, t});
    }
    if (pts.empty()) {
      if (o.json)
        printf("%s\n", nlohmann::json{{"prefix", layout.prefix}, {"source", nullptr}, {"versions", nlohmann::json::array()},
                                      {"launches", nlohmann::json::array()}}
                           .dump(2)
                           .c_str());
      print_error("plot", "nothing to plot: no history and no checkpoints in " + layout.prefix + " or in the cache " +
                              layout.cache_job);
      return kExitNothing;
    }
    std::string why = hist && hist->exists ? "the history " + hist->path + " holds no events"
                                           : "no history at " + history::path(layout);
    if (!o.json)
      printf("cairn plot: %s; times reconstructed from the %zu version(s) still on disk (approximate)\n", why.c_str(),
             pts.size());
    j.update(disk_json(pts));
    j["source"] = "disk";
    j["note"] = why;
  }
  j["warnings"] = warnings;
  j["out"] = o.out.empty() ? nlohmann::json() : nlohmann::json(o.out);
  j["width"] = o.width;
  j["height"] = std::max(o.width * 16 / 25, 400);  // cairn.plot's figure
  if (!o.out.empty()) {
    fflush(stdout);
    int drawn = draw(o, hist ? hist->path : history::path(layout), use_history ? nullptr : &j, o.json);
    if (drawn != kExitOk) return drawn;
  }
  if (o.json) printf("%s\n", j.dump(2).c_str());
  return kExitOk;
}

}  // namespace

Command add_plot_command(CLI::App& root) {
  auto o = std::make_shared<PlotOptions>();
  CLI::App* app = root.add_subcommand("plot", "Draw a timeline of a job's launches and checkpoints per level, with bandwidths (PNG, SVG, PDF).");
  app->add_option("--out", o->out, "The file to write; its extension gives the format (.png, .svg, .pdf)")
      ->type_name("FILE");
  add_prefix_arg(app, o->prefix);
  app->add_option("--width", o->width, "Width in pixels at 100 dpi (default 1000; height is 0.64 of it, at least 400)")
      ->type_name("PIXELS");
  app->add_flag("--json", o->json, "Print the data plotted as JSON (without --out, draw nothing)");
  app->add_option("--campaign", o->campaign,
                  "Draw the useful fraction per policy of a campaign instead: the JSON cairn-bench --campaign --json\n"
                  "prints (docs/performance.md)")
      ->type_name("FILE");
  add_config_option(app, o->config_path);
  app->footer(
      "The times come from the job history (<prefix>/.cairn/history): every launch, restart and version.\n"
      "Without one, only the versions still on disk appear (cache_versions in L1, keep_flushed in L3), their\n"
      "times from their manifests and files (docs/tools.md). Drawn by the Python package cairn with matplotlib\n"
      "(python3 -m cairn.plot).\n"
      "Exit status: 0 written, 1 the file could not be written, 2 bad options, 3 nothing to plot.");
  set_usage(app, "cairn plot --out FILE [PREFIX] [--width PIXELS] [--json] [--config FILE]\n"
                 "       cairn plot --out FILE --campaign REPORT.json [--width PIXELS]");
  return {app, [o](const Invocation&) { return run_plot(*o); }};
}

}  // namespace cairn::tool
