// cairn-bench --campaign: the runs (campaign.hpp). A failure-free run without checkpoints first (the
// time the work takes when nothing fails), then interval = auto (whose measured checkpoint cost gives
// Daly's optimum), the fixed intervals around that optimum, and the one-level policy, each run under the
// same failure schedule; each run's result must equal the failure-free run's, bit for bit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>


#include "bench.hpp"
#include "campaign.hpp"
#include "policy/interval.hpp"
#include "service/service_bench.hpp"

namespace cairn::bench {
namespace {

namespace stdfs = std::filesystem;

// What a failure must not leave behind: the work directory, the current job's cache, its cairn run.
struct Leftovers {
  std::string work, cache;
  pid_t run = -1;
  bool keep_work = false;
} g_left;

void clean_up() {
  if (g_left.run > 0) {  // SIGTERM: cairn run passes it to the job and does not relaunch
    kill(g_left.run, SIGTERM);
    waitpid(g_left.run, nullptr, 0);
    g_left.run = -1;
  }
  std::error_code ec;
  if (!g_left.cache.empty()) stdfs::remove_all(g_left.cache, ec);
  if (!g_left.work.empty() && !g_left.keep_work) stdfs::remove_all(g_left.work, ec);
}

[[noreturn]] void fail(const std::string& what) {
  fprintf(stderr, "cairn-bench --campaign: %s\n", what.c_str());
  clean_up();
  exit(1);
}

void on_signal(int) {
  clean_up();
  _exit(130);
}

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The MTBF of the mix's whole-job failures (only L3 recovers them); 0 when the mix has none.
double l3_mtbf(const CampaignOptions& o) {
  const double all = o.mix.node + o.mix.rank + o.mix.job;
  return o.mix.job > 0 ? o.mtbf * all / o.mix.job : 0;
}

// A run's work files: WORK/<n>-<slug of its name> (the prefix) and the same with .log (the application's
// output); n counts the runs of the campaign from 1, the failure-free run first.
std::string run_prefix(const std::string& work, int n, const std::string& name) {
  std::string slug;
  for (char c : name) slug += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return work + "/" + std::to_string(n) + "-" + slug;
}

// What analyse_run found, into a run's object of the report.
void put_figures(json& j, const RunFigures& f, int64_t started) {
  j["wall_s"] = f.wall;
  j["started_unix_ns"] = started;
  j["attempts"] = f.attempts;
  j["result"] = f.result;
  j["checkpoints"] = f.checkpoints;
  j["checkpoint_time_s"] = f.checkpoint_time;
  j["checkpoint_cost_s"] = f.checkpoints ? f.checkpoint_time / static_cast<double>(f.checkpoints) : 0.0;
  j["mean_interval_s"] = f.mean_interval;
  j["step_s"] = f.step;
  json failures = json::array();
  for (const auto& x : f.failures)
    failures.push_back({{"at_s", x.at_s}, {"due_s", x.due_s}, {"kind", x.kind}, {"redone_s", x.redone},
                        {"teardown_s", x.teardown}, {"startup_s", x.startup}, {"restart_s", x.restart},
                        {"total_s", x.total()}, {"level", x.level}, {"version", x.version}, {"cut_short", x.cut_short}});
  j["failures"] = failures;
}

// --from REPORT --reanalyse: every run of a campaign kept with --keep analysed again (after a change to the
// analysis), its figures replaced; the failure-free run's too when the report has its start. 0, or an error
// naming the run whose files are missing.
Status reanalyse(json& report) {
  if (!report.contains("kept") || !report["kept"].is_string())
    return make_error(Code::ERR_INVALID_ARG, "the report names no kept work directory: run the campaign with --keep");
  const std::string work = report["kept"].get<std::string>();
  json& free = report["failure_free"];
  if (free.contains("started_unix_ns")) {
    const std::string prefix = run_prefix(work, 1, "failure-free");
    auto f = analyse_run(prefix, prefix + ".log", free["started_unix_ns"].get<int64_t>());
    if (!f) return f.status().prefixed("the failure-free run (" + prefix + ")");
    free["wall_s"] = f->wall;
    free["step_s"] = f->step;
  }
  int n = 1;
  for (auto& p : report["policies"]) {
    const std::string name = p.value("name", "");
    const std::string prefix = run_prefix(work, ++n, name);
    if (!p.contains("started_unix_ns")) return make_error(Code::ERR_INVALID_ARG, "policy %s has no start time", name.c_str());
    auto f = analyse_run(prefix, prefix + ".log", p["started_unix_ns"].get<int64_t>());
    if (!f) return f.status().prefixed("policy " + name + " (" + prefix + ")");
    if (f->result != p.value("result", ""))
      return make_error(Code::ERR_INVALID_ARG, "policy %s: %s holds a run with result %s, the report says %s", name.c_str(),
                        prefix.c_str(), f->result.c_str(), p.value("result", "").c_str());
    put_figures(p, f.value(), p["started_unix_ns"].get<int64_t>());
  }
  return Status::ok();
}

struct Policy {
  std::string name;        // "auto", "fixed 1x", "L3 only"
  std::string interval;    // "auto", "fixed"
  double interval_s = 0;   // fixed: the interval; auto: 0
  double factor = 0;       // fixed: times Daly's optimum
  bool one_level = false;
};

struct Campaign {
  const CampaignOptions& o;
  std::string cairn, app, work;
  long iterations = 0;
  std::vector<policy::ScheduledFailure> schedule;
  int runs = 0;

  // One run of the job under `p` (nullptr: the failure-free run without checkpoints).
  json run(const Policy* p) {
    const std::string tag = p ? p->name : "failure-free";
    const std::string prefix = run_prefix(work, ++runs, tag);
    const std::string job = "cbc-" + std::to_string(getpid()) + "-" + std::to_string(runs);
    stdfs::create_directories(prefix);
    // The policy's knobs, as environment variables (they win over any config file of the caller's).
    setenv("CAIRN_PREFIX", prefix.c_str(), 1);
    setenv("CAIRN_JOB", job.c_str(), 1);
    setenv("CAIRN_CACHE_DIR", o.cache_dir.c_str(), 1);
    setenv("CAIRN_INTERVAL", p ? p->interval.c_str() : "fixed", 1);
    char num[64];
    snprintf(num, sizeof num, "%.6f", p ? p->interval_s : 0.0);  // 0 with fixed: no checkpoint is ever due
    setenv("CAIRN_INTERVAL_SECONDS", num, 1);
    snprintf(num, sizeof num, "%.6f", o.mtbf);
    setenv("CAIRN_MTBF_SECONDS", num, 1);
    // What interval = auto is told of the failures only L3 recovers: the whole-job ones of the mix, or,
    // with one level, every failure (each is made a whole-job one below).
    snprintf(num, sizeof num, "%.6f", p && p->one_level ? o.mtbf : l3_mtbf(o));
    setenv("CAIRN_L3_MTBF_SECONDS", num, 1);
    setenv("CAIRN_REDUNDANCY", p && p->one_level ? "single" : "xor", 1);
    setenv("CAIRN_FLUSH_EVERY", std::to_string(p && p->one_level ? 1 : o.flush_every).c_str(), 1);
    setenv("CAIRN_FLUSH_ON_FINALIZE", "false", 1);
    // A failure before any version could be rebuilt (a node lost while the first version's L2 encode ran,
    // nothing in L3 yet) leaves checkpoints none of which can serve: the job starts afresh, its progress
    // lost, as an operator would restart it, rather than stop the campaign (cairn run relaunches no
    // attempt that found itself unrecoverable).
    setenv("CAIRN_IF_UNRECOVERABLE", "start_over", 1);
    g_left.cache = o.cache_dir + "/cairn-" + job;

    std::vector<std::string> cmd{cairn, "run", "-n", std::to_string(o.ranks), "--nodes", std::to_string(o.nodes),
                                 "--spares", std::to_string(o.spares), "--no-scavenge"};
    if (p) {
      // One level: no node-local copy survives a failure, so every failure is one of the whole job.
      std::vector<policy::ScheduledFailure> list = schedule;
      if (p->one_level)
        for (auto& f : list) f.kind = policy::FailureKind::job, f.target = 0;
      cmd.insert(cmd.end(), {"--fail-at", policy::format_failures(list), "--retries", std::to_string(list.size())});
    }
    cmd.insert(cmd.end(), {"--", app, "--size", std::to_string(o.size), "--iters", std::to_string(iterations), "--work",
                           "0", "--sleep-ms", std::to_string(static_cast<long>(std::lround(o.step_ms))),
                           "--need-checkpoint", "--print-checkpoints"});
    const std::string log = prefix + ".log";
    if (o.verbose) fprintf(stderr, "cairn-bench --campaign: %s: %s\n", tag.c_str(), log.c_str());
    const int64_t started = unix_ns();
    g_left.run = spawn(cmd, log);
    // A run that hangs is ended: far more than the work at the worst useful fraction worth measuring.
    const double limit = 60 + 20 * o.work;
    int status = 0;
    const double t0 = now();
    for (;;) {
      pid_t r = waitpid(g_left.run, &status, WNOHANG);
      if (r == g_left.run) break;
      if (now() - t0 > limit) fail(tag + ": the run did not end within " + std::to_string(static_cast<int>(limit)) + " s; see " + log);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    g_left.run = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail(tag + ": cairn run failed (" + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) +
           "):\n" + slurp(log));
    auto figures = analyse_run(prefix, log, started);
    if (!figures) fail(tag + ": " + figures.status().message() + "\n" + slurp(log));
    RunFigures& f = figures.value();
    if (!f.finished) fail(tag + ": the job printed no result:\n" + slurp(log));
    std::error_code ec;
    stdfs::remove_all(g_left.cache, ec);
    g_left.cache.clear();
    if (!o.keep) {
      stdfs::remove_all(prefix, ec);
      stdfs::remove(log, ec);
    }
    json j;
    j["name"] = tag;
    if (p) {
      j["interval"] = p->interval;
      j["interval_s"] = p->interval == "fixed" ? json(round3(p->interval_s)) : json();
      if (p->factor > 0) j["optimum_factor"] = p->factor;
      j["levels"] = p->one_level ? "L3 only" : "multilevel";
      j["redundancy"] = p->one_level ? "single" : "xor";
      j["flush_every"] = p->one_level ? 1 : o.flush_every;
    }
    put_figures(j, f, started);
    if (o.verbose)
      fprintf(stderr, "cairn-bench --campaign: %s: %.1f s, %zu failures, %llu checkpoints\n", tag.c_str(), f.wall,
              f.failures.size(), static_cast<unsigned long long>(f.checkpoints));
    return j;
  }
};

}  // namespace

int check_campaign_options(CampaignOptions& o, const std::string& size_text, const std::string& factors_text) {
  if (o.ranks < 2) {
    fprintf(stderr, "cairn-bench --campaign: --ranks %d: at least 2\n", o.ranks);
    return 2;
  }
  if (!parse_size(size_text, &o.size) || o.size < 4096) {
    fprintf(stderr, "cairn-bench --campaign: --size %s: expected a size of at least 4K, e.g. 16M\n", size_text.c_str());
    return 2;
  }
  if (o.nodes > o.ranks) {
    fprintf(stderr, "cairn-bench --campaign: --nodes %d: at most one node per rank (--ranks %d)\n", o.nodes, o.ranks);
    return 2;
  }
  auto mix = policy::parse_failure_mix(o.mix_text);
  if (!mix) {
    fprintf(stderr, "cairn-bench --campaign: --mix: %s\n", mix.status().message().c_str());
    return 2;
  }
  o.mix = mix.value();
  o.factors.clear();
  std::stringstream ss(factors_text);
  for (std::string w; std::getline(ss, w, ',');) {
    char* end = nullptr;
    double f = strtod(w.c_str(), &end);
    if (w.empty() || *end || !(f > 0 && f < 100)) {
      fprintf(stderr, "cairn-bench --campaign: --factors %s: expected multiples above 0, e.g. 0.5,1,2\n", factors_text.c_str());
      return 2;
    }
    o.factors.push_back(f);
  }
  if (o.work / (o.step_ms / 1000) < 10) {
    fprintf(stderr, "cairn-bench --campaign: --work %g s is fewer than 10 steps of %g ms\n", o.work, o.step_ms);
    return 2;
  }
  return 0;
}

int run_campaign(CampaignOptions o) {
  if (!o.from.empty()) {
    json report = json::parse(slurp(o.from), nullptr, false);
    if (!report.is_object() || report.value("mode", "") != "campaign" || !report.contains("policies")) {
      fprintf(stderr, "cairn-bench --campaign: --from %s: not a campaign report (cairn-bench --campaign --json)\n", o.from.c_str());
      return 2;
    }
    if (o.reanalyse) {
      if (Status st = reanalyse(report); !st) {
        fprintf(stderr, "cairn-bench --campaign: --reanalyse %s: %s\n", o.from.c_str(), st.message().c_str());
        return 2;
      }
    }
    complete_report(report);
    if (o.json) printf("%s\n", report.dump(1).c_str());
    else print_table(report);
    return 0;
  }
  // Failures over far more than any run takes; a run meets those that come before it ends.
  auto schedule = policy::draw_failures(o.seed, o.mtbf, o.mix, 20 * o.work + 60, o.nodes, o.ranks);
  if (!schedule) {
    fprintf(stderr, "cairn-bench --campaign: %s\n", schedule.status().message().c_str());
    return 2;
  }
  json sched = json::array();
  for (const auto& f : schedule.value())
    sched.push_back({{"at_s", f.at}, {"kind", policy::failure_kind_name(f.kind)}, {"target", f.target}});
  if (o.schedule_only) {
    if (o.json) printf("%s\n", json{{"seed", o.seed}, {"mtbf_s", o.mtbf}, {"schedule", sched}}.dump(1).c_str());
    else printf("%s\n", policy::format_failures(schedule.value()).c_str());
    return 0;
  }
  Campaign c{o, {}, {}, {}, 0, schedule.value(), 0};
  c.cairn = find_program(o.cairn, "cairn", "tools/cairn");
  c.app = find_program(o.app, "synthetic", "examples/synthetic/synthetic");
  c.iterations = std::lround(o.work * 1000 / o.step_ms);
  std::error_code ec;
  std::string tmpl = stdfs::absolute(o.prefix_base, ec).string() + "/cairn-bench-campaign.XXXXXX";
  if (!mkdtemp(tmpl.data())) fail("cannot make a work directory under " + o.prefix_base);
  c.work = g_left.work = tmpl;
  g_left.keep_work = o.keep;
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  const double load_start = loadavg_1m();

  json report;
  report["mode"] = "campaign";
  report["run"] = machine_info(load_start, o.ranks);
  report["campaign"] = {{"ranks", o.ranks}, {"nodes", o.nodes}, {"spares", o.spares}, {"size_bytes", o.size},
                        {"step_s", o.step_ms / 1000}, {"iterations", c.iterations}, {"work_s", o.work},
                        {"mtbf_s", o.mtbf}, {"l3_mtbf_s", l3_mtbf(o)}, {"mix", policy::format_failure_mix(o.mix)}, {"seed", o.seed},
                        {"flush_every", o.flush_every}, {"schedule", sched}};
  json free = c.run(nullptr);
  report["failure_free"] = {{"wall_s", free["wall_s"]}, {"result", free["result"]}, {"step_s", free["step_s"]},
                            {"started_unix_ns", free["started_unix_ns"]}};

  std::vector<Policy> policies;
  policies.push_back({"auto", "auto", 0, 0, false});
  json runs = json::array();
  runs.push_back(c.run(&policies[0]));
  // Daly's optimum from the cost interval = auto measured, as auto computes it (policy/interval.hpp).
  const double cost = std::max(runs[0]["checkpoint_cost_s"].get<double>(), policy::kMinMeasuredCost);
  auto optimum = policy::daly_interval(cost, o.mtbf);
  if (!optimum) fail("Daly's optimum: " + optimum.status().message());
  report["optimum"] = {{"checkpoint_cost_s", cost}, {"daly_interval_s", optimum.value()}};
  for (double f : o.factors) {
    char name[64];
    snprintf(name, sizeof name, "fixed %gx", f);
    Policy p{name, "fixed", f * optimum.value(), f, false};
    runs.push_back(c.run(&p));
  }
  if (o.l3_only) {
    Policy p{"L3 only", "auto", 0, 0, true};
    runs.push_back(c.run(&p));
  }
  for (auto& r : runs)
    if (r["result"] != free["result"])
      fail("policy " + r["name"].get<std::string>() + " computed result " + r["result"].get<std::string>() +
           ", the failure-free run " + free["result"].get<std::string>());
  report["policies"] = runs;
  report["run"]["loadavg_1m_end"] = round3(loadavg_1m());
  complete_report(report);
  if (o.keep) report["kept"] = c.work;
  if (!o.plot.empty()) {  // the report beside the picture, FILE.json; cairn plot's own words on stderr
    const std::string data = o.plot + ".json", log = c.work + "/plot.log";
    FILE* f = fopen(data.c_str(), "w");
    if (!f) fail("cannot write " + data);
    fputs(report.dump(1).c_str(), f);
    fclose(f);
    int rc = wait_exit(spawn({c.cairn, "plot", "--campaign", data, "--out", o.plot}, log));
    const std::string said = slurp(log);
    if (rc != 0 || o.verbose) fputs(said.c_str(), stderr);
    if (rc != 0) fprintf(stderr, "cairn-bench --campaign: cairn plot --campaign exited %d (the figures are in %s)\n", rc, data.c_str());
    else report["plot"] = o.plot;
  }
  clean_up();
  if (o.json) printf("%s\n", report.dump(1).c_str());
  else print_table(report);
  return 0;
}

}  // namespace cairn::bench
