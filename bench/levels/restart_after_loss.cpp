// cairn-bench --restart-after-loss: what a relaunched job pays to come back after one node and its cache
// were lost, beside the same relaunch with every cache intact -- the comparison with SCR, whose job
// rebuilds inside SCR_Init, where cairn's rebuilds inside cairn_init + cairn_restart_available +
// cairn_restart. The parent (parent.cpp) runs one MPI job that writes the version ("write"), then --reps
// times a relaunched job with the caches intact ("intact") and one after the loss of the last node's
// cache ("lost"), each new processes as a real code's restart is; every job runs one stage here, and
// the parent prints the report from the jobs' files (report_restart_after_loss). docs/performance.md,
// "Restart after a lost node".
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "base/xxh.hpp"
#include "bench.hpp"
#include "session.hpp"

namespace cairn::bench {
namespace {

const char* const kLevelName[] = {"none", "L1", "L2", "L3"};

// What one rank measured in one relaunched job, gathered on rank 0 in this order.
enum Figure {
  kInit,              // new memory: open() -- cairn_init and cairn_protect -- this rank's time
  kCalls,             // new memory: cairn_restart_available + cairn_restart, this rank's time
  kInitPretouched,    // the same into memory written before
  kCallsPretouched,
  kFirstTouch,        // writing the same bytes of new memory once, alone
  kFigures
};

// Anonymous memory that nothing has touched: what a relaunched code's regions are before its restart.
uint8_t* map_new_memory(uint64_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die("mmap of %llu bytes: %s", static_cast<unsigned long long>(size), strerror(errno));
  return static_cast<uint8_t*>(p);
}

// The state of rank r: --size bytes of splitmix64 from a seed of its own, written by "write", checked by
// every restart.
uint64_t state_seed() { return 3000 + static_cast<uint64_t>(g_rank); }

class LossStage {
 public:
  LossStage(const Options& o, const JobInfo& job) : o_(o), job_(job), session_(o) {}

  void run() {
    const SetPlan plan = default_sets(g_nranks);
    session_.set_sets(plan.set_size, plan.rs_parity);
    const uint64_t size = o_.size;
    const std::string& stage = o_.child_stage;
    // Written (touched) memory holding what the version holds: the write's state, the reference of every
    // restart, and the pre-touched restart's regions.
    uint8_t* touched = alloc_faulted(size);
    fill_random(touched, size, state_seed());
    const uint64_t hash = XXH3_64bits(touched, size);
    if (stage == "write") {
      session_.clean_levels();
      session_.open(o_.redundancy.c_str(), 0, protect(touched, size));
      CHECK_CAIRN(cairn_checkpoint());
      CHECK_CAIRN(cairn_wait());
      session_.close();
      free(touched);
      return;
    }
    if (stage != "intact" && stage != "lost") die("unknown --child-stage '%s'", stage.c_str());
    const bool lost = stage == "lost";
    const int want = lost ? CAIRN_LEVEL_L2 : CAIRN_LEVEL_L1;
    const std::string lost_node = session_.cache_job() + "/node" + std::to_string(g_nranks - 1);
    // The lost node's cache removed before each restart (the restart from L2 writes it back).
    std::function<void()> lose = [] {};
    if (lost)
      lose = [&] {
        std::error_code ec;
        if (stdfs::remove_all(lost_node, ec) == 0 || ec) die("cannot remove the cache of the lost node %s", lost_node.c_str());
      };
    double mine[kFigures] = {};

    // 1. The relaunched code: its regions new memory, the restart the first thing to write them.
    uint8_t* fresh = map_new_memory(size);
    Session::Restart r = session_.timed_restart(o_.redundancy.c_str(), 0, want, lose, [] {}, protect(fresh, size));
    check_restored(fresh, size, hash, want);
    mine[kInit] = r.init_s;
    mine[kCalls] = r.calls_s;
    std::string log = restart_lines(r.log);

    // 2. Writing the same bytes of new memory once, every rank at once as in the restart: first touch alone.
    uint8_t* other = map_new_memory(size);
    barrier();
    double t0 = now();
    memset(other, 0, size);
    clobber(other);
    mine[kFirstTouch] = now() - t0;
    munmap(other, size);

    // 3. The same restart into memory written before (zeroed: the restart must bring every byte back).
    r = session_.timed_restart(o_.redundancy.c_str(), 0, want, lose, [&] { memset(touched, 0, size); },
                               protect(touched, size));
    check_restored(touched, size, hash, want);
    mine[kInitPretouched] = r.init_s;
    mine[kCallsPretouched] = r.calls_s;

    // 4. The bare read of the same bytes: this rank's slot into written memory (the caches are whole here).
    json bare = nullptr;
    if (!lost) {
      SlotRead sr = timed_slot_read(newest_slot_file(session_), touched, size, 1);
      bare = {{"pread_s", sr.pread_s}, {"map_memcpy_s", sr.map_memcpy_s}, {"s", sr.best_s()}};
    }
    munmap(fresh, size);
    free(touched);

    std::vector<double> all(static_cast<size_t>(g_nranks) * kFigures);
    CHECK_MPI(MPI_Gather(mine, kFigures, MPI_DOUBLE, all.data(), kFigures, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (g_rank != 0) return;
    auto column = [&](Figure f) {
      json a = json::array();
      for (int k = 0; k < g_nranks; ++k) a.push_back(all[static_cast<size_t>(k) * kFigures + f]);
      return a;
    };
    json out;
    out["stage"] = stage;
    out["ranks"] = g_nranks;
    out["level"] = kLevelName[want];
    out["per_rank"] = {{"init_s", column(kInit)},
                       {"restart_calls_s", column(kCalls)},
                       {"init_pretouched_s", column(kInitPretouched)},
                       {"restart_calls_pretouched_s", column(kCallsPretouched)},
                       {"first_touch_s", column(kFirstTouch)}};
    out["bare_read"] = bare;
    out["log"] = log;
    out["mpi_thread_multiple"] = job_.thread_multiple;
    out["cpus_per_rank"] = job_.cpus_per_rank;
    out["set_size"] = plan.set_size;
    std::string path = session_.dir() + "/loss-" + stage + ".json";
    std::ofstream f(path);
    f << out.dump(2) << "\n";
    if (!f) die("cannot write %s", path.c_str());
  }

 private:
  static std::function<void()> protect(uint8_t* p, uint64_t size) {
    return [p, size] { CHECK_CAIRN(cairn_protect("state", p, size, CAIRN_BYTE)); };
  }

  // Every rank's bytes are the version's (the level was checked by timed_restart).
  static void check_restored(const uint8_t* p, uint64_t size, uint64_t hash, int level) {
    int ok = XXH3_64bits(p, size) == hash ? 1 : 0, all = 0;
    CHECK_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all) die("the restart from %s restored different bytes (rank %d: %s)", kLevelName[level], g_rank, ok ? "right" : "wrong");
  }

  // The library's restart lines of rank 0 (log = info): its phases and their times.
  static std::string restart_lines(const std::string& log) {
    std::string lines;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);)
      if (line.find("restart") != std::string::npos) lines += line + "\n";
    return lines;
  }

  const Options& o_;
  const JobInfo& job_;
  Session session_;
};

}  // namespace

int run_restart_after_loss(const Options& o, const JobInfo& job) {
  LossStage(o, job).run();
  barrier();
  return 0;
}

namespace {

// One stage's jobs, read back: per repetition, per rank, each Figure.
struct StageRuns {
  std::vector<json> jobs;  // loss-<stage>-<i>.json
  // The slowest rank's, and the median rank's, per repetition, of one per-rank series (or the sum of two).
  std::vector<double> per_rep(const char* a, const char* b, bool slowest) const {
    std::vector<double> v;
    for (const json& j : jobs) {
      std::vector<double> ranks;
      for (size_t k = 0; k < j["per_rank"][a].size(); ++k)
        ranks.push_back(j["per_rank"][a][k].get<double>() + (b ? j["per_rank"][b][k].get<double>() : 0));
      v.push_back(slowest ? *std::max_element(ranks.begin(), ranks.end()) : median(ranks));
    }
    return v;
  }
  // Per rank, the median over repetitions (the per-rank figure of the report).
  json per_rank(const char* a, const char* b) const {
    json out = json::array();
    const size_t n = jobs.empty() ? 0 : jobs[0]["per_rank"][a].size();
    for (size_t k = 0; k < n; ++k) {
      std::vector<double> reps;
      for (const json& j : jobs) reps.push_back(j["per_rank"][a][k].get<double>() + (b ? j["per_rank"][b][k].get<double>() : 0));
      out.push_back(round6(median(reps)));
    }
    return out;
  }
  static json round6(double x) { return std::round(x * 1e6) / 1e6; }
};

json seconds(double s) { return s > 0 ? StageRuns::round6(s) : json(nullptr); }

}  // namespace

int report_restart_after_loss(const Options& o, const std::string& dir, const std::string& cache_job,
                              double load_start, const std::string& date) {
  StageRuns intact, lost;
  for (int i = 0; i < o.reps; ++i)
    for (auto& [stage, runs] : {std::pair<const char*, StageRuns*>{"intact", &intact}, {"lost", &lost}}) {
      std::string path = dir + "/loss-" + stage + "-" + std::to_string(i) + ".json";
      std::ifstream in(path);
      try {
        runs->jobs.push_back(json::parse(in));
      } catch (const std::exception& e) {
        fprintf(stderr, "cairn-bench: %s: %s\n", path.c_str(), e.what());
        return 1;
      }
    }
  auto med = [](const std::vector<double>& v) { return v.empty() ? 0.0 : median(v); };
  const double after_loss = med(lost.per_rep("init_s", "restart_calls_s", true));
  const double after_intact = med(intact.per_rep("init_s", "restart_calls_s", true));
  std::vector<double> touch = lost.per_rep("first_touch_s", nullptr, true);
  for (double t : intact.per_rep("first_touch_s", nullptr, true)) touch.push_back(t);
  std::vector<double> bare, bare_pread, bare_map;
  for (const json& j : intact.jobs) {
    bare.push_back(j["bare_read"]["s"].get<double>());
    bare_pread.push_back(j["bare_read"]["pread_s"].get<double>());
    bare_map.push_back(j["bare_read"]["map_memcpy_s"].get<double>());
  }

  json out;
  out["mode"] = "restart-after-loss";
  out["ranks"] = o.ranks;
  out["bytes_per_rank"] = o.size;
  out["redundancy"] = o.redundancy;
  out["lost_node"] = "node" + std::to_string(o.ranks - 1);
  out["restart_level_after_loss"] = lost.jobs.at(0)["level"];
  out["restart_level_intact"] = intact.jobs.at(0)["level"];
  out["init_restart_s"] = seconds(after_loss);
  out["init_restart_rank_median_s"] = seconds(med(lost.per_rep("init_s", "restart_calls_s", false)));
  out["init_restart_intact_s"] = seconds(after_intact);
  out["init_restart_intact_rank_median_s"] = seconds(med(intact.per_rep("init_s", "restart_calls_s", false)));
  out["init_restart_pretouched_s"] = seconds(med(lost.per_rep("init_pretouched_s", "restart_calls_pretouched_s", true)));
  out["init_restart_intact_pretouched_s"] =
      seconds(med(intact.per_rep("init_pretouched_s", "restart_calls_pretouched_s", true)));
  out["first_touch_s"] = seconds(med(touch));
  out["bare_read_s"] = seconds(med(bare));
  out["bare_read"] = {{"pread_s", seconds(med(bare_pread))}, {"map_memcpy_s", seconds(med(bare_map))}};
  // Where the time goes: cairn_init (+ cairn_protect) and the two restart calls, each the slowest rank's.
  for (auto& [name, runs] : {std::pair<const char*, const StageRuns*>{"after_loss", &lost}, {"intact", &intact}})
    out["phases_s"][name] = {{"init", seconds(med(runs->per_rep("init_s", nullptr, true)))},
                             {"restart_calls", seconds(med(runs->per_rep("restart_calls_s", nullptr, true)))}};
  out["per_rank"] = {{"init_restart_s", lost.per_rank("init_s", "restart_calls_s")},
                     {"init_restart_intact_s", intact.per_rank("init_s", "restart_calls_s")},
                     {"init_restart_pretouched_s", lost.per_rank("init_pretouched_s", "restart_calls_pretouched_s")},
                     {"init_restart_intact_pretouched_s", intact.per_rank("init_pretouched_s", "restart_calls_pretouched_s")},
                     {"first_touch_s", lost.per_rank("first_touch_s", nullptr)}};
  auto rounded = [](std::vector<double> v) {
    for (double& x : v) x = std::round(x * 1e6) / 1e6;
    return v;
  };
  out["reps_s"] = {{"init_restart_s", rounded(lost.per_rep("init_s", "restart_calls_s", true))},
                   {"init_restart_intact_s", rounded(intact.per_rep("init_s", "restart_calls_s", true))}};
  // The target: a lost node costs the relaunched job at most twice the restart with every cache whole.
  constexpr double kMaxRatio = 2.0;
  json t;
  t["what"] = "init_restart_s / init_restart_intact_s";
  t["max_ratio"] = kMaxRatio;
  t["ratio"] = after_loss > 0 && after_intact > 0 ? round3(after_loss / after_intact) : json(nullptr);
  t["pass"] = t["ratio"].is_number() ? json(after_loss <= kMaxRatio * after_intact) : json(nullptr);
  out["targets"] = {{"restart_after_loss", t}};
  out["restart_after_loss_target_met"] = t["pass"];
  // Without a target: the restarts against the bare read of the same bytes, first touch's share.
  auto ratio = [](double a, double b) { return a > 0 && b > 0 ? round3(a / b) : json(nullptr); };
  out["ratios"] = {{"init_restart_intact_vs_bare_read", ratio(after_intact, med(bare))},
                   {"init_restart_vs_bare_read", ratio(after_loss, med(bare))},
                   {"first_touch_vs_init_restart_intact", ratio(med(touch), after_intact)}};
  out["restart_log"] = {{"after_loss", lost.jobs.back()["log"]}, {"intact", intact.jobs.back()["log"]}};

  json run = machine_info(load_start, o.ranks);
  run["date_start"] = date;
  run["size_bytes"] = o.size;
  run["reps"] = o.reps;
  run["statistic"] = "per relaunched job the slowest rank's (and the median rank's) time; the median over --reps jobs";
  run["relaunched_jobs"] = 2 * o.reps;
  describe_dirs(run, o.cache_dir, dir, cache_job);
  run["set_size"] = lost.jobs.at(0)["set_size"];
  run["mpi_thread_multiple"] = lost.jobs.at(0)["mpi_thread_multiple"];
  run["cpus_per_rank"] = lost.jobs.at(0)["cpus_per_rank"];
  {
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(thp, line);
    run["transparent_hugepage"] = line;  // first touch of anonymous memory depends on it
  }
  out["run"] = run;
  if (o.json) {
    printf("%s\n", out.dump(2).c_str());
    fflush(stdout);
    return 0;
  }
  printf("cairn-bench --restart-after-loss  %s  %s, %ld cores  %d ranks x %.1f MiB, %s, median of %d relaunches\n",
         run["date"].get<std::string>().c_str(), run["cpu"].get<std::string>().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
         o.ranks, static_cast<double>(o.size) / (1 << 20), o.redundancy.c_str(), o.reps);
  printf("load average %.2f at start, %.2f at end; %s lost; seconds, slowest rank (median rank)\n\n", load_start,
         loadavg_1m(), out["lost_node"].get<std::string>().c_str());
  auto row = [&](const char* label, const char* key, const char* rank_median) {
    const json& v = out[key];
    if (!v.is_number()) {
      printf("  %-52s %9s\n", label, "-");
      return;
    }
    printf("  %-52s %9.4f", label, v.get<double>());
    if (rank_median && out[rank_median].is_number()) printf("  (%.4f)", out[rank_median].get<double>());
    printf("\n");
  };
  std::string lost_label = "init + restart after the lost node (" + out["restart_level_after_loss"].get<std::string>() + ")";
  std::string intact_label = "init + restart, caches intact (" + out["restart_level_intact"].get<std::string>() + ")";
  row(lost_label.c_str(), "init_restart_s", "init_restart_rank_median_s");
  row(intact_label.c_str(), "init_restart_intact_s", "init_restart_intact_rank_median_s");
  row("  the same into pre-touched memory, after the loss", "init_restart_pretouched_s", nullptr);
  row("  the same into pre-touched memory, intact", "init_restart_intact_pretouched_s", nullptr);
  row("first touch of the same bytes of new memory", "first_touch_s", nullptr);
  row("bare read of the same bytes (L1 slot)", "bare_read_s", nullptr);
  printf("\ntargets\n");
  if (t["ratio"].is_number())
    printf("  %-40s %6.3f <= %.2f  %s\n", t["what"].get<std::string>().c_str(), t["ratio"].get<double>(), kMaxRatio,
           t["pass"].get<bool>() ? "PASS" : "MISS");
  else
    printf("  %-40s %6s\n", t["what"].get<std::string>().c_str(), "-");
  fflush(stdout);
  return 0;
}

}  // namespace cairn::bench
