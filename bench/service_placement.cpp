// cairn-bench --service --placement (docs/performance.md, "Placement"): three synthetic applications of
// different sizes and checkpoint intervals on two checkpoint nodes (two cairnd managers of 2 agents on
// 127.0.0.1, each agent limited to --agent-bandwidth MB/s), under each placement policy in turn. The
// applications start one after the other (each once the previous one has reported its traffic), so the
// policies that weigh traffic see it. Per policy: where each application's agent sat and why, its drain
// time per version (cairn_checkpoint to the version committed, the slowest rank) beside its interval,
// and each node's bytes drained and bandwidth use (its agents' bytes over the run's wall time), taken
// (the versions of the applications whose agent sat there, over the run's wall time; the agents' own
// counters as `cairn status --json` last showed them while the jobs ran are beside it, a lower bound as
// an agent's last half second may go unreported when its application ends). Rank 0 of each job writes its figures to a file; the
// parent prints one JSON object (or a table).
#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "cairn/cairn.h"
#include "service_bench.hpp"

namespace stdfs = std::filesystem;
using json = nlohmann::ordered_json;

namespace cairn_bench_service {
namespace {

struct AppSpec {
  double size_factor;  // of --size, per rank
  double interval_s;   // compute time between checkpoints
};
// Large and frequent, small and frequent, middling and rare.
constexpr AppSpec kApps[3] = {{1.0, 0.5}, {0.25, 0.5}, {0.5, 1.5}};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

json r3(double x) { return std::isfinite(x) ? json(std::round(x * 1000.0) / 1000.0) : json(nullptr); }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `cairn status --json` of the controller, or null.
json status(const std::string& cairn, const std::string& address) {
  std::string cmd = cairn + " status --service " + address + " --json 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (pclose(p) != 0) return nullptr;
  return json::parse(out, nullptr, false);
}

uint64_t app_size(const Options& o, int i) {
  uint64_t s = static_cast<uint64_t>(static_cast<double>(o.size) * kApps[i].size_factor);
  return std::max<uint64_t>(s & ~uint64_t(3), 65536);
}

// One policy: daemons, three jobs, the figures.
json run_policy(const Options& o, const std::string& policy, int argc, char** argv, bool* ok) {
  std::error_code ec;
  std::string tmpl = stdfs::absolute(o.prefix_base, ec).string() + "/cairn-bench-placement.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  json out;
  out["policy"] = policy;
  if (!mkdtemp(buf.data())) {
    fprintf(stderr, "cairn-bench: cannot create a work directory under %s\n", o.prefix_base.c_str());
    *ok = false;
    return out;
  }
  const std::string dir = buf.data();
  const std::string cairnd = find_cairnd(o.cairnd), cairn = find_cairn(cairnd);
  const std::string af = dir + "/controller.address";
  pid_t ctl = spawn({cairnd, "controller", "--listen", "127.0.0.1:0", "--address-file", af, "--placement", policy,
                     "--log", dir + "/controller.log", "--log-level", "info"});
  std::string address;
  for (int i = 0; i < 1000 && address.empty(); ++i) {
    std::ifstream in(af);
    std::getline(in, address);
    if (address.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<pid_t> daemons{ctl}, jobs;
  std::map<uint64_t, json> seen;  // agent id -> its last report
  double t_start = now(), t_end = t_start;
  if (address.empty()) {
    fprintf(stderr, "cairn-bench: the controller did not start; see %s/controller.log\n", dir.c_str());
    *ok = false;
  } else {
    char bw[32];
    snprintf(bw, sizeof bw, "%g", o.agent_mbs);
    for (int m = 0; m < 2; ++m) {  // m0 joins first
      daemons.push_back(spawn({cairnd, "manager", "--controller", address, "--name", "m" + std::to_string(m),
                               "--agents", "2", "--agent-bandwidth", bw, "--work-dir", dir + "/m" + std::to_string(m),
                               "--log-level", "warn"}));
      for (int i = 0; i < 500; ++i) {
        json st = status(cairn, address);
        if (st.is_object() && st["managers"].size() == static_cast<size_t>(m + 1)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    const char* mpirun = getenv("CAIRN_MPIRUN");
    std::string self = stdfs::read_symlink("/proc/self/exe", ec).string();
    t_start = now();
    auto watch = [&] {
      json st = status(cairn, address);
      if (!st.is_object()) return st;
      for (const auto& a : st["agents"]) seen[a["id"].get<uint64_t>()] = a;
      return st;
    };
    for (int i = 0; i < 3; ++i) {
      std::vector<std::string> cmd{mpirun && *mpirun ? mpirun : "mpirun"};
      for (auto& w : words(getenv("CAIRN_MPIRUN_ARGS"))) cmd.push_back(w);
      cmd.insert(cmd.end(), {"-np", std::to_string(o.ranks), "env", "CAIRN_BENCH_CHILD=1", self.empty() ? argv[0] : self});
      for (int a = 1; a < argc; ++a) cmd.push_back(argv[a]);
      cmd.insert(cmd.end(), {"--child-dir", dir, "--child-service", address, "--child-app", std::to_string(i)});
      jobs.push_back(spawn(cmd));
      // The next application starts once this one's traffic is known (the last: once it has its agent;
      // or after 60 s).
      const std::string prefix = dir + "/app" + std::to_string(i);
      for (double t0 = now(); now() - t0 < 60;) {
        json st = watch();
        bool known = false;
        if (st.is_object())
          for (const auto& a : st["applications"])
            known |= a["prefix"] == prefix && (i < 2 ? a["demand_bps"].get<double>() > 0 : !a["agents"].empty() &&
                                                                                           a["agents"][0] != 0);
        if (known) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    // Every application stays (past its versions) until all three are placed: the placements see each other.
    std::ofstream(dir + "/all-placed") << "1\n";
    // Watch until every job ended.
    std::vector<bool> done(jobs.size(), false);
    for (size_t left = jobs.size(); left > 0;) {
      watch();
      for (size_t j = 0; j < jobs.size(); ++j) {
        int status_code = 0;
        if (!done[j] && waitpid(jobs[j], &status_code, WNOHANG) == jobs[j]) {
          done[j] = true;
          --left;
          if (!WIFEXITED(status_code) || WEXITSTATUS(status_code) != 0) {
            fprintf(stderr, "cairn-bench: application %zu's job failed (policy %s)\n", j, policy.c_str());
            *ok = false;
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    t_end = now();
  }
  for (pid_t p : daemons) kill(p, SIGTERM);
  for (pid_t p : daemons)
    if (wait_exit(p) != 0) {
      fprintf(stderr, "cairn-bench: a daemon did not stop cleanly (policy %s)\n", policy.c_str());
      *ok = false;
    }
  // The figures: each application's (its job's file, and its agent as last seen), each node's.
  json apps = json::array();
  struct Node {
    uint64_t placed = 0, seen = 0;  // bytes its agents had to drain; bytes they were last seen to have drained
    double busy = 0;
  };
  std::map<std::string, Node> node{{"m0", {}}, {"m1", {}}};
  for (const auto& [id, a] : seen) {
    auto& n = node[a["manager"].get<std::string>()];
    n.seen += a["bytes_drained"].get<uint64_t>();
    n.busy += a["busy_s"].get<double>();
  }
  for (int i = 0; i < 3; ++i) {
    json app = json::parse(slurp(dir + "/app" + std::to_string(i) + ".json"), nullptr, false);
    if (!app.is_object()) {
      *ok = false;
      app = json{{"app", i}};
    }
    const std::string prefix = dir + "/app" + std::to_string(i);
    for (const auto& [id, a] : seen)
      if (a.contains("application")) {
        // Agents are matched to applications by the order of their ids: application i registered i-th.
        if (a["application"].get<uint64_t>() == static_cast<uint64_t>(i + 1)) {
          app["manager"] = a["manager"];
          app["why"] = a["why"];
        }
      }
    if (app.contains("manager"))
      node[app["manager"].get<std::string>()].placed += app_size(o, i) * o.ranks * static_cast<uint64_t>(o.versions);
    apps.push_back(app);
  }
  out["applications"] = apps;
  json nodes = json::array();
  for (const auto& [name, n] : node)
    nodes.push_back({{"name", name},
                     {"bytes_drained", n.placed},
                     {"bytes_seen", n.seen},
                     {"agents_busy_s", r3(n.busy)},
                     {"use_mbs", r3(static_cast<double>(n.placed) / std::max(t_end - t_start, 1e-3) / 1e6)}});
  out["nodes"] = nodes;
  out["wall_s"] = r3(t_end - t_start);
  if (!*ok && o.verbose) fprintf(stderr, "%s", slurp(dir + "/controller.log").c_str());
  stdfs::remove_all(dir, ec);
  return out;
}

}  // namespace

int run_placement(const Options& o, int argc, char** argv) {
  json doc;
  doc["mode"] = "service-placement";
  doc["ranks"] = o.ranks;
  doc["versions"] = o.versions;
  doc["agent_bandwidth_mbs"] = o.agent_mbs;
  doc["load_start"] = r3(bench::loadavg_1m());
  bool ok = true;
  json policies = json::array();
  for (const char* p : {"stacking", "bandwidth", "interval"}) policies.push_back(run_policy(o, p, argc, argv, &ok));
  doc["policies"] = policies;
  doc["load_end"] = r3(bench::loadavg_1m());
  if (o.json) {
    printf("%s\n", doc.dump(1).c_str());
  } else {
    printf("cairn-bench --service --placement: %d ranks per application, %d versions each, agents at %g MB/s "
           "(load %.2f -> %.2f)\n", o.ranks, o.versions, o.agent_mbs, doc["load_start"].get<double>(),
           doc["load_end"].get<double>());
    for (const auto& p : doc["policies"]) {
      printf("\n%s (%.1f s)\n", p["policy"].get<std::string>().c_str(), p["wall_s"].get<double>());
      for (const auto& a : p["applications"])
        printf("  app %d: %s/rank every %.1f s on %s: drain median %.3f s, max %.3f s%s\n", a.value("app", -1),
               std::to_string(a.value("bytes_per_rank", 0ull) >> 20).append(" MiB").c_str(), a.value("interval_s", 0.0),
               a.value("manager", std::string("?")).c_str(), a.value("drain_median_s", 0.0), a.value("drain_max_s", 0.0),
               a.value("within_interval", false) ? "" : "  (longer than its interval)");
      for (const auto& n : p["nodes"])
        printf("  node %s: %llu MiB drained, %.1f MB/s over the run\n", n["name"].get<std::string>().c_str(),
               static_cast<unsigned long long>(n["bytes_drained"].get<uint64_t>() >> 20), n["use_mbs"].get<double>());
    }
  }
  return ok ? 0 : 1;
}

// One application: its state, `versions` checkpoints `interval` apart (a sleep stands for the compute),
// each timed from cairn_checkpoint to committed (cairn_wait): the drain.
int run_placement_child(const Options& o, int argc, char** argv) {
  int provided = 0, rank = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int i = std::clamp(o.child_app, 0, 2);
  const uint64_t bytes = app_size(o, i);
  std::vector<float> state(bytes / sizeof(float));
  for (size_t k = 0; k < state.size(); ++k) state[k] = static_cast<float>((k * 2654435761u + rank) % 1000);
  const std::string name = "app" + std::to_string(i);
  setenv("CAIRN_PREFIX", (o.child_dir + "/" + name).c_str(), 1);
  setenv("CAIRN_CACHE_DIR", o.cache_dir.c_str(), 1);
  setenv("CAIRN_JOB", (stdfs::path(o.child_dir).filename().string() + "-" + name).c_str(), 1);
  setenv("CAIRN_NODE", ("node" + std::to_string(rank)).c_str(), 1);
  setenv("CAIRN_REDUNDANCY", "single", 1);
  setenv("CAIRN_FLUSH_EVERY", "1", 1);
  setenv("CAIRN_FLUSH_ON_FINALIZE", "false", 1);
  setenv("CAIRN_SERVICE", o.child_service.c_str(), 1);
  setenv("CAIRN_SERVICE_TIMEOUT", "300", 1);
  setenv("CAIRN_SERVICE_PROVIDER", o.provider.c_str(), 1);
  setenv("CAIRN_LOG", "warn", 1);
  int rc = cairn_init(MPI_COMM_WORLD, nullptr);
  if (rc == CAIRN_SUCCESS) rc = cairn_protect("data", state.data(), state.size(), CAIRN_FLOAT);
  std::vector<double> drains;
  for (int v = 0; v < o.versions && rc == CAIRN_SUCCESS; ++v) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kApps[i].interval_s));
    for (auto& x : state) x = x * 0.5f + 1.0f;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    rc = cairn_checkpoint();
    if (rc == CAIRN_SUCCESS) rc = cairn_wait();
    double d = now() - t0, slowest = 0;
    MPI_Allreduce(&d, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (v > 0) drains.push_back(slowest);  // the first one also opens the slots
  }
  if (rank == 0)
    for (double t0 = now(); now() - t0 < 120 && access((o.child_dir + "/all-placed").c_str(), F_OK) != 0;)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rc != CAIRN_SUCCESS) fprintf(stderr, "cairn-bench --placement: rank %d: %s: %s\n", rank, cairn_strerror(rc), cairn_last_error());
  if (rc == CAIRN_SUCCESS) rc = cairn_finalize();
  if (rank == 0 && rc == CAIRN_SUCCESS) {
    double med = bench::median(drains), mx = drains.empty() ? 0 : *std::max_element(drains.begin(), drains.end());
    json j = {{"app", i},
              {"bytes_per_rank", bytes},
              {"interval_s", kApps[i].interval_s},
              {"drain_median_s", r3(med)},
              {"drain_max_s", r3(mx)},
              {"within_interval", mx <= kApps[i].interval_s}};
    std::ofstream(o.child_dir + "/" + name + ".json") << j.dump();
  }
  MPI_Finalize();
  return rc == CAIRN_SUCCESS ? 0 : 1;
}

}  // namespace cairn_bench_service
