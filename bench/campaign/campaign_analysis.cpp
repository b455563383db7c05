// cairn-bench --campaign: one run's figures from what it left (campaign.hpp). The launcher's run record
// (<prefix>/.cairn/run-record: when each attempt was launched, when each failure struck), the job history
// (<prefix>/.cairn/history: when each launch was up, what it restored and when the restart returned, when
// each version's copy began) and the application's log (synthetic --print-checkpoints: what each
// checkpoint blocked, the computation between two). Every time is taken on one clock (Unix nanoseconds
// of this machine), so the pieces of a failure's loss add up to its whole by construction.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "base/history_line.hpp"
#include "campaign.hpp"

namespace cairn::bench {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct AttemptRec {
  int number = 0;
  int64_t launched = 0;  // the launcher started it
};
struct FailureRec {
  int attempt = 0;
  int64_t t = 0;
  std::string kind;
  double due_s = 0, at_s = 0;
};
struct LaunchRec {
  int64_t up = 0;              // its start line: cairn_init done
  bool restarted = false;
  uint64_t restored = 0;       // version restored (0: started afresh)
  std::string level = "none";
  int64_t restart_end = 0;     // the restart returned
  int64_t ended = 0;           // its end line (cairn_finalize), 0 if killed
  bool took_version = false;   // it wrote a version's line
  // Where the job stood after it: it restarted, or it went on afresh (a version, its end). A launch with
  // none of these was struck before its restart returned (or before an afresh start's first version):
  // it tells nothing of where the job went back to, and held no computation of its own.
  bool settled() const { return restarted || took_version || ended; }
};
struct VersionRec {
  int64_t start = 0;           // the copy began
  double copy_s = 0;
};

Result<std::vector<nlohmann::json>> read_lines(const std::string& path, bool required) {
  std::ifstream in(path);
  if (!in) {
    if (!required) return std::vector<nlohmann::json>{};
    return make_error(Code::ERR_IO, "cannot read %s", path.c_str());
  }
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = history::decode_line(line);
    if (j) out.push_back(std::move(j).value());  // a line torn by a killed rank 0 is skipped
  }
  return out;
}

int64_t i64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

double seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

Result<RunFigures> analyse_run(const std::string& prefix, const std::string& app_log, int64_t started_ns) {
  CAIRN_ASSIGN_OR_RETURN(record, read_lines(prefix + "/.cairn/run-record", false));
  CAIRN_ASSIGN_OR_RETURN(hist, read_lines(prefix + "/.cairn/history", true));
  std::vector<AttemptRec> attempts;
  std::vector<FailureRec> failures;
  for (const auto& j : record) {
    const std::string ev = j.value("ev", "");
    if (ev == "attempt") attempts.push_back({static_cast<int>(i64(j, "attempt")), i64(j, "t")});
    if (ev == "failure")
      failures.push_back({static_cast<int>(i64(j, "attempt")), i64(j, "t"), j.value("kind", ""),
                          j.value("due_s", 0.0), j.value("at_s", 0.0)});
  }
  // A run without --fail-at has no record: its one attempt began with the history's first line.
  std::map<std::string, LaunchRec> launches;
  std::vector<std::string> order;  // launch ids by their start line
  // Per launch: a job that went back to an older version numbers its next versions from there again, so
  // a number alone names several versions of a run (and a restart may record the version it restored
  // once more); the first record of a number within its launch is the copy the launch took.
  std::map<std::pair<std::string, uint64_t>, VersionRec> versions;
  for (const auto& j : hist) {
    const std::string ev = j.value("ev", ""), id = j.value("launch", "");
    if (ev == "start") {
      launches[id].up = i64(j, "t");
      order.push_back(id);
    } else if (ev == "restart") {
      LaunchRec& L = launches[id];
      L.restarted = true;
      L.restored = static_cast<uint64_t>(i64(j, "version"));
      L.level = j.value("level", "");
      L.restart_end = i64(j, "end_ns");
    } else if (ev == "l1") {
      launches[id].took_version = true;
      versions.emplace(std::make_pair(id, static_cast<uint64_t>(i64(j, "version"))),
                       VersionRec{i64(j, "start_ns"), j.value("copy_s", 0.0)});
    } else if (ev == "end") {
      launches[id].ended = i64(j, "t");
    }
  }
  if (order.empty()) return make_error(Code::ERR_FORMAT, "%s/.cairn/history: no launch started", prefix.c_str());
  if (attempts.empty()) attempts.push_back({1, started_ns});
  std::sort(attempts.begin(), attempts.end(), [](auto& a, auto& b) { return a.number < b.number; });

  // Each attempt's launch: the one whose start line falls between its launch and the next attempt's.
  std::vector<const LaunchRec*> of_attempt(attempts.size(), nullptr);
  std::vector<std::string> id_of_attempt(attempts.size());
  for (const std::string& id : order) {
    const LaunchRec& L = launches[id];
    for (size_t k = 0; k < attempts.size(); ++k) {
      int64_t next = k + 1 < attempts.size() ? attempts[k + 1].launched : kNever;
      if (L.up >= attempts[k].launched && L.up < next) {
        of_attempt[k] = &L;
        id_of_attempt[k] = id;
      }
    }
  }
  // The computation a launch's state holds at time t: what its restored version held, plus its own time
  // since its start (or its restart). A version's is its launch's at the end of its copy. The launch that
  // took a restored version: the newest before the restoring one with a version of that number; where no
  // launch names it (struck between the version's seal on every rank and rank 0's line for it), the newest
  // version below it in the newest launch that has one, which holds at most one interval less.
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  auto anchor_of = [&](const LaunchRec& L) { return L.restarted ? L.restart_end : L.up; };
  std::map<std::string, double> base;  // per launch: the computation its starting state held (s)
  auto held_by = [&](size_t j, const VersionRec& v) {  // version v of launch order[j]
    return base[order[j]] + seconds(v.start + static_cast<int64_t>(v.copy_s * 1e9) - anchor_of(launches[order[j]]));
  };
  auto version_held = [&](uint64_t v, size_t before) -> double {
    if (v == 0) return 0;
    for (size_t j = before; j-- > 0;)
      if (auto it = versions.find({order[j], v}); it != versions.end()) return held_by(j, it->second);
    for (size_t j = before; j-- > 0;)
      if (auto it = versions.upper_bound({order[j], v}); it != versions.begin() && (--it)->first.first == order[j])
        return held_by(j, it->second);
    return 0;
  };
  for (size_t i = 0; i < order.size(); ++i) {
    const LaunchRec& L = launches[order[i]];
    base[order[i]] = L.restarted ? version_held(L.restored, i) : 0;
  }
  auto index_of = [&](int number) -> int {
    for (size_t k = 0; k < attempts.size(); ++k)
      if (attempts[k].number == number) return static_cast<int>(k);
    return -1;
  };

  RunFigures out;
  out.attempts = static_cast<int>(attempts.size());
  const LaunchRec* last = of_attempt.back();
  if (!last || !last->ended)
    return make_error(Code::ERR_FORMAT, "the last attempt of %s did not finish (no end line in its history)", prefix.c_str());
  out.wall = seconds(last->ended - started_ns);

  std::sort(failures.begin(), failures.end(), [](auto& a, auto& b) { return a.t < b.t; });
  for (size_t i = 0; i < failures.size(); ++i) {
    const FailureRec& f = failures[i];
    const int k = index_of(f.attempt);
    if (k < 0 || static_cast<size_t>(k) + 1 >= attempts.size())
      return make_error(Code::ERR_FORMAT, "failure at %.2f s struck attempt %d, which no attempt followed", f.at_s, f.attempt);
    const int64_t cut = i + 1 < failures.size() ? failures[i + 1].t : kNever;
    FailureLoss loss;
    loss.at_s = f.at_s;
    loss.due_s = f.due_s;
    loss.kind = f.kind;
    // The version the job went back to: the next attempt that restarted or started afresh (one struck
    // before its restart returned is passed over: the one after it says where the job went).
    const LaunchRec* back = nullptr;
    size_t back_at = order.size();
    for (size_t n = static_cast<size_t>(k) + 1; n < attempts.size() && !back; ++n)
      if (of_attempt[n] && of_attempt[n]->settled()) back = of_attempt[n], back_at = position[id_of_attempt[n]];
    loss.version = back ? back->restored : 0;
    // Re-done work: what the struck launch's state held at the strike beyond what the state the job
    // returned to holds (all of it when the job started afresh). A launch struck before its restart
    // returned held nothing of its own: the failure before it counts the way back.
    const LaunchRec* struck = of_attempt[static_cast<size_t>(k)];
    const std::string& id = id_of_attempt[static_cast<size_t>(k)];
    if (struck && struck->settled() && anchor_of(*struck) > 0 && anchor_of(*struck) < f.t) {
      const double at_strike = base[id] + seconds(f.t - anchor_of(*struck));
      loss.redone = std::max(0.0, at_strike - version_held(loss.version, back_at));
    }
    // The recovery: the launcher's teardown, the new job's start-up, the restart; each cut short by the
    // next failure if it came first.
    const AttemptRec& next = attempts[static_cast<size_t>(k) + 1];
    const LaunchRec* L = of_attempt[static_cast<size_t>(k) + 1];
    const int64_t launched = std::min(next.launched, cut);
    loss.teardown = seconds(std::max<int64_t>(0, launched - f.t));
    const int64_t up = L ? std::min(L->up, cut) : cut;
    if (up != kNever) loss.startup = seconds(std::max<int64_t>(0, up - launched));
    if (L && L->up < cut) {
      // Not settled: its restart ran until the next failure struck it.
      const int64_t done = std::min(L->restarted ? L->restart_end : L->settled() ? L->up : cut, cut);
      loss.restart = seconds(std::max<int64_t>(0, done - L->up));
      if (L->settled()) loss.level = L->restarted ? L->level : "none";
      loss.cut_short = done == cut;
    } else {
      loss.cut_short = true;
    }
    out.failures.push_back(loss);
  }

  // The application's own account of its checkpoints, and its result.
  std::ifstream in(app_log);
  if (!in) return make_error(Code::ERR_IO, "cannot read the application's log %s", app_log.c_str());
  double gaps = 0, stepped = 0, loop_step = 0;
  uint64_t counted = 0, steps = 0;
  long previous = -1;  // the iteration of the launch's previous checkpoint; -1: none yet
  for (std::string line; std::getline(in, line);) {
    long iteration = 0;
    double blocked = 0, after = 0;
    char hex[32] = "";
    if (sscanf(line.c_str(), "synthetic: checkpoint at iteration %ld blocked %lf after %lf", &iteration, &blocked, &after) == 3) {
      ++out.checkpoints;
      out.checkpoint_time += blocked;
      if (after >= 0) gaps += after, ++counted;
      if (after >= 0 && previous >= 0 && iteration > previous) stepped += after, steps += static_cast<uint64_t>(iteration - previous);
      previous = iteration;
    } else if (line.rfind("synthetic: resuming", 0) == 0 ||
               (line.rfind("synthetic: ", 0) == 0 && line.find(" ranks x ") != std::string::npos)) {
      previous = -1;  // a new launch: its first checkpoint has no gap before it
    } else if (sscanf(line.c_str(), "synthetic: steps %lf", &loop_step) == 1) {
    } else if (sscanf(line.c_str(), "result %31s", hex) == 1) {
      out.finished = true;
      out.result = hex;
    }
  }
  out.mean_interval = counted ? gaps / static_cast<double>(counted) : 0;
  out.step = steps ? stepped / static_cast<double>(steps) : loop_step;
  return out;
}

}  // namespace cairn::bench
