// cairn-bench --service --placement (docs/performance.md, "Placement"): three synthetic applications of
// different sizes and checkpoint intervals on two checkpoint nodes (two cairnd managers of 2 agents on
// 127.0.0.1, each agent limited to --agent-bandwidth MB/s). First under each placement policy in turn with
// the fixed allotment (one agent per application), then once more under the interval policy with dynamic
// agents (the controller's --scale-agents). The applications start one after the other (each once the
// previous one has reported its traffic), so the policies that weigh traffic see it. Per run: where each
// application's agents sat and why, how many it had and why (`cairn status --json`: agent_count,
// scaling.why), its drain time per version beside its interval (service_placement_child.cpp), and each
// node's bytes drained and bandwidth use over the run's wall time (the bytes of the versions of the ranks
// whose agent, as last seen, sat there; the agents' own counters as `cairn status --json` last showed
// them are beside it, a lower bound as an agent's last half second may go unreported when its
// application ends). Rank 0 of each job writes its figures to a file; the parent prints one JSON object
// (or a table), with the fixed against the dynamic allotment side by side.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "service/service_placement.hpp"

namespace stdfs = std::filesystem;

namespace cairn::bench {
namespace {

using json = ojson;

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

// The dynamic run's placement policy: the one meant for many applications of different traffic.
constexpr const char* kDynamicPolicy = "interval";

struct Run {
  std::string policy;
  bool scale_agents = false;  // the controller's --scale-agents: dynamic agents
};

// What `cairn status --json` last showed while the jobs ran.
struct Seen {
  std::map<uint64_t, json> agents;     // agent id -> its record
  std::map<std::string, json> apps;    // application prefix -> its record
};

// Each application's agents (in slot order) with their node and reason, its agent count and scaling, from
// what was last seen of it; the figures of its job's file.
json application_report(const std::string& dir, int i, const Seen& seen, bool* ok) {
  json app = json::parse(slurp(dir + "/app" + std::to_string(i) + ".json"), nullptr, false);
  if (!app.is_object()) {
    *ok = false;
    app = json{{"app", i}};
  }
  auto it = seen.apps.find(dir + "/app" + std::to_string(i));
  if (it == seen.apps.end()) return app;
  const json& rec = it->second;
  json agents = json::array();
  for (const auto& id : rec["agents"]) {
    auto a = seen.agents.find(id.get<uint64_t>());
    if (a != seen.agents.end()) agents.push_back({{"id", id}, {"manager", a->second["manager"]}, {"why", a->second["why"]}});
  }
  if (!agents.empty()) {  // the first slot's agent, as the fixed allotment's only one
    app["manager"] = agents[0]["manager"];
    app["why"] = agents[0]["why"];
  }
  app["agent_count"] = rec["agent_count"];
  app["agents"] = agents;
  app["scaling_why"] = rec["scaling"]["why"];
  app["scaling_changes"] = rec["scaling"]["changes"];
  return app;
}

// One run: daemons, three jobs, the figures.
json run_one(const ServiceOptions& o, const Run& run, int argc, char** argv, bool* ok) {
  std::error_code ec;
  std::string tmpl = stdfs::absolute(o.prefix_base, ec).string() + "/cairn-bench-placement.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  json out;
  out["policy"] = run.policy;
  out["agents"] = run.scale_agents ? "dynamic" : "fixed";
  if (!mkdtemp(buf.data())) {
    fprintf(stderr, "cairn-bench: cannot create a work directory under %s\n", o.prefix_base.c_str());
    *ok = false;
    return out;
  }
  const std::string dir = buf.data();
  const std::string cairnd = find_program(o.cairnd, "cairnd", "tools/cairnd"), cairn = find_program("", "cairn", "tools/cairn");
  const std::string af = dir + "/controller.address";
  std::vector<std::string> ctl_cmd{cairnd, "controller", "--listen", "127.0.0.1:0", "--address-file", af, "--placement",
                                   run.policy, "--log", dir + "/controller.log", "--log-level", "info"};
  if (run.scale_agents) ctl_cmd.push_back("--scale-agents");
  pid_t ctl = spawn(ctl_cmd);
  std::string address;
  for (int i = 0; i < 1000 && address.empty(); ++i) {
    std::ifstream in(af);
    std::getline(in, address);
    if (address.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<pid_t> daemons{ctl}, jobs;
  Seen seen;
  double t_start = now(), t_end = t_start;
  const std::string what = run.policy + (run.scale_agents ? ", dynamic agents" : "");
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
      for (const auto& a : st["agents"]) seen.agents[a["id"].get<uint64_t>()] = a;
      // An application's record is kept when every agent it names was seen (a dynamic agent just added
      // may be named before its manager lists it): the report shows the newest consistent view.
      for (const auto& a : st["applications"]) {
        bool whole = a["agents"].is_array();
        for (const auto& id : whole ? a["agents"] : json::array())
          whole = whole && id.is_number_unsigned() && seen.agents.count(id.get<uint64_t>()) > 0;
        const std::string prefix = a["prefix"].get<std::string>();
        if (whole || !seen.apps.count(prefix)) seen.apps[prefix] = a;
      }
      return st;
    };
    for (int i = 0; i < 3; ++i) {
      std::vector<std::string> cmd{mpirun && *mpirun ? mpirun : "mpirun"};
      for (auto& w : split_words(getenv("CAIRN_MPIRUN_ARGS"))) cmd.push_back(w);
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
            fprintf(stderr, "cairn-bench: application %zu's job failed (%s)\n", j, what.c_str());
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
      fprintf(stderr, "cairn-bench: a daemon did not stop cleanly (%s)\n", what.c_str());
      *ok = false;
    }
  // The figures: each application's (its job's file, its agents as last seen), each node's.
  json apps = json::array();
  struct Node {
    uint64_t placed = 0, seen = 0;  // bytes its agents had to drain; bytes they were last seen to have drained
    double busy = 0;
  };
  std::map<std::string, Node> node{{"m0", {}}, {"m1", {}}};
  for (const auto& [id, a] : seen.agents) {
    auto& n = node[a["manager"].get<std::string>()];
    n.seen += a["bytes_drained"].get<uint64_t>();
    n.busy += a["busy_s"].get<double>();
  }
  for (int i = 0; i < 3; ++i) {
    json app = application_report(dir, i, seen, ok);
    // Rank r's versions to the node of its agent (rank r of n goes to agent floor(r*k/n) of k).
    const json& agents = app.value("agents", json::array());
    for (int r = 0; r < o.ranks && !agents.empty(); ++r)
      node[agents[r * agents.size() / o.ranks]["manager"].get<std::string>()].placed +=
          app_size(o, i) * static_cast<uint64_t>(o.versions);
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
  for (int i = 0; i < 3; ++i)  // the applications' caches (service_placement_child.cpp names their jobs)
    stdfs::remove_all(o.cache_dir + "/cairn-" + stdfs::path(dir).filename().string() + "-app" + std::to_string(i), ec);
  return out;
}

// Per application, the fixed allotment beside the dynamic one under the same policy. An allotment keeps
// every drain within its interval when each application's does and the service moved every version (a
// version its embedded flusher wrote, for want of an agent, does not count for the service).
json comparison(const json& fixed, const json& dynamic) {
  json apps = json::array();
  bool fixed_all = true, dynamic_all = true;
  auto side = [](const json& a) {
    return json{{"agent_count", a.value("agent_count", json(nullptr))},
                {"scaling_why", a.value("scaling_why", json(nullptr))},
                {"drain_median_s", a.value("drain_median_s", json(nullptr))},
                {"drain_max_s", a.value("drain_max_s", json(nullptr))},
                {"blocking_max_s", a.value("blocking_max_s", json(nullptr))},
                {"within_interval", a.value("within_interval", false)},
                {"via", a.value("via", json::object())}};
  };
  auto kept = [](const json& a) {
    const json via = a.value("via", json::object());
    return a.value("within_interval", false) && via.size() == 1 && via.contains("service");
  };
  for (size_t i = 0; i < 3; ++i) {
    const json& f = fixed["applications"].at(i);
    const json& d = dynamic["applications"].at(i);
    fixed_all = fixed_all && kept(f);
    dynamic_all = dynamic_all && kept(d);
    apps.push_back({{"app", i}, {"interval_s", kApps[i].interval_s}, {"fixed", side(f)}, {"dynamic", side(d)}});
  }
  return {{"policy", fixed["policy"]},
          {"applications", apps},
          {"fixed_all_within", fixed_all},
          {"dynamic_all_within", dynamic_all}};
}

std::string mib(uint64_t bytes) {
  char b[32];
  snprintf(b, sizeof b, "%g MiB", static_cast<double>(bytes) / 1048576.0);
  return b;
}

void print_table(const ServiceOptions& o, const json& doc) {
  printf("cairn-bench --service --placement: %d ranks per application, %d versions each, agents at %g MB/s "
         "(load %.2f -> %.2f)\n", o.ranks, o.versions, o.agent_mbs, doc["load_start"].get<double>(),
         doc["load_end"].get<double>());
  json runs = doc["policies"];
  runs.push_back(doc["dynamic"]);
  for (const auto& p : runs) {
    printf("\n%s, %s agents (%.1f s)\n", p["policy"].get<std::string>().c_str(), p["agents"].get<std::string>().c_str(),
           p["wall_s"].get<double>());
    for (const auto& a : p["applications"]) {
      std::string where;
      for (const auto& g : a.value("agents", json::array())) where += (where.empty() ? "" : ",") + g["manager"].get<std::string>();
      printf("  app %d: %s/rank every %.1f s, %d agent(s) on %s: drain median %.3f s, max %.3f s%s\n", a.value("app", -1),
             mib(a.value("bytes_per_rank", 0ull)).c_str(), a.value("interval_s", 0.0), a.value("agent_count", 0),
             where.empty() ? "?" : where.c_str(), a["drain_median_s"].is_number() ? a["drain_median_s"].get<double>() : -1.0,
             a["drain_max_s"].is_number() ? a["drain_max_s"].get<double>() : -1.0,
             a.value("within_interval", false) ? "" : "  (longer than its interval)");
      const json via = a.value("via", json::object());
      if (via.contains("embedded"))
        printf("         %d of its versions written by its embedded flusher (no agent then)\n", via["embedded"].get<int>());
      if (p["agents"] == "dynamic") printf("         %s\n", a.value("scaling_why", std::string("?")).c_str());
    }
    for (const auto& n : p["nodes"])
      printf("  node %s: %s drained, %.1f MB/s over the run\n", n["name"].get<std::string>().c_str(),
             mib(n["bytes_drained"].get<uint64_t>()).c_str(), n["use_mbs"].get<double>());
  }
  const json& c = doc["comparison"];
  printf("\nfixed against dynamic agents (%s placement): drain max against the interval\n",
         c["policy"].get<std::string>().c_str());
  for (const auto& a : c["applications"]) {
    auto cell = [](const json& s) {
      char b[96];
      snprintf(b, sizeof b, "%d agent(s), %.3f s %s", s.value("agent_count", 0),
               s["drain_max_s"].is_number() ? s["drain_max_s"].get<double>() : -1.0,
               s.value("within_interval", false) ? "within" : "LONGER");
      return std::string(b);
    };
    printf("  app %d (%.1f s): fixed %s; dynamic %s\n", a["app"].get<int>(), a["interval_s"].get<double>(),
           cell(a["fixed"]).c_str(), cell(a["dynamic"]).c_str());
  }
}

}  // namespace

int run_placement(const ServiceOptions& o, int argc, char** argv) {
  json doc;
  doc["mode"] = "service-placement";
  doc["ranks"] = o.ranks;
  doc["versions"] = o.versions;
  doc["agent_bandwidth_mbs"] = o.agent_mbs;
  doc["buffer_pool"] = kBufferPool;
  doc["load_start"] = r3(loadavg_1m());
  bool ok = true;
  json policies = json::array();
  for (const char* p : {"stacking", "bandwidth", "interval"}) policies.push_back(run_one(o, {p, false}, argc, argv, &ok));
  doc["policies"] = policies;
  doc["dynamic"] = run_one(o, {kDynamicPolicy, true}, argc, argv, &ok);
  for (const auto& p : policies)
    if (p["policy"] == kDynamicPolicy && ok) doc["comparison"] = comparison(p, doc["dynamic"]);
  doc["load_end"] = r3(loadavg_1m());
  if (o.json)
    printf("%s\n", doc.dump(1).c_str());
  else if (ok)
    print_table(o, doc);
  return ok ? 0 : 1;
}

}  // namespace cairn::bench
