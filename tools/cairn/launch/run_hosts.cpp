// Cluster mode of `cairn run` (docs/launcher.md, "On a cluster"): inside a multi-host allocation every
// host is a failure group of its own; ranks are placed on hosts, spare hosts are kept back, and after a
// failed attempt the hosts that are down are found (Slurm's node state, a probe step on each host),
// left out, and replaced by spares.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>

#include "base/fsutil.hpp"
#include "launch/cluster_hosts.hpp"
#include "common.hpp"
#include "launch/run_job.hpp"

namespace cairn::tool {

// Past it a Slurm command is killed and the host it asked about counts as down.
double slurm_timeout() {
  if (const char* t = getenv("CAIRN_SLURM_COMMAND_TIMEOUT")) {
    char* end = nullptr;
    double v = strtod(t, &end);
    if (end != t && *end == '\0' && v > 0) return v;
  }
  return 30;
}

std::string steps_refused_text(const std::string& why) {
  const char* job = getenv("SLURM_JOB_ID");
  return "Slurm refuses every new step of the allocation" + (job ? " (job " + std::string(job) + ")" : std::string()) +
         " for " + std::to_string(static_cast<int>(slurm_timeout())) + " s (" + why +
         "): a step of the failed attempt is left completing, or the allocation is ending, and no "
         "relaunch can run in it; the checkpoints are kept: run the job again in a new allocation "
         "(`cairn status` shows the version it will restart from)";
}

namespace {

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// sinfo's state of each of `hosts` ("idle", "down*", ...); an empty map, with *error set, when sinfo
// could not tell.
std::map<std::string, std::string> slurm_states(const RunContext& ctx, const std::vector<std::string>& hosts,
                                                std::string* error) {
  std::map<std::string, std::string> states;
  if (ctx.cluster.sinfo.empty()) {
    *error = "sinfo not found";
    return states;
  }
  BoundedRun run = run_bounded({ctx.cluster.sinfo, "-h", "-N", "-n", join_hosts(hosts), "-o", "%N %T"}, {}, slurm_timeout());
  if (run.timed_out || exit_code_of(run.wait_status) != 0) {
    *error = "sinfo " + std::string(run.timed_out ? "gave no answer in " + std::to_string(static_cast<int>(slurm_timeout())) + " s"
                                                  : describe_wait_status(run.wait_status)) +
             (run.output.empty() ? "" : ": " + last_line(run.output));
    return states;
  }
  std::stringstream lines(run.output);
  for (std::string host, state; lines >> host >> state;) states[host] = state;
  return states;
}

// A step of one task on `host` (`true`), bounded in time: true when it ran. `refused` is set when Slurm
// refused the step for the whole allocation (kStepsRefused), which says nothing about the host.
bool probe_host(const RunContext& ctx, const std::string& host, std::string* why, bool* refused) {
  std::vector<std::string> argv{ctx.spec.srun, "--overlap", "-N1", "-n1", "-w", host, "-J", "cairn-probe",
                                "--mpi=none", "--quit-on-interrupt", "true"};
  BoundedRun run = run_bounded(argv, {}, slurm_timeout());
  if (!run.timed_out && exit_code_of(run.wait_status) == 0) return true;
  *refused = !run.timed_out && run.output.find(kStepsRefused) != std::string::npos;
  *why = run.timed_out ? "probe step: no answer in " + std::to_string(static_cast<int>(slurm_timeout())) + " s"
                       : "probe step: " + describe_wait_status(run.wait_status) +
                             (run.output.empty() ? "" : ", " + last_line(run.output));
  return false;
}

// mpirun's rsh agent (CAIRN_MPIRUN_ARGS's --mca plm_rsh_agent, OMPI_MCA_plm_rsh_agent, else ssh) as the
// words of a probe: the first alternative found in PATH; ssh without questions and with a bound to connect.
std::vector<std::string> mpirun_agent(const RunContext& ctx, std::string* error) {
  const char* env = getenv("OMPI_MCA_plm_rsh_agent");
  if (!env || !*env) env = getenv("OMPI_MCA_orte_rsh_agent");
  std::string tried;
  for (auto words : rsh_agents(ctx.spec.mpirun_args, env)) {
    const std::string path = find_executable(words[0]);
    if (path.empty()) {
      tried += (tried.empty() ? "" : ", ") + words[0];
      continue;
    }
    words[0] = path;
    if (path.size() >= 3 && path.compare(path.size() - 3, 3, "ssh") == 0)
      words.insert(words.begin() + 1, {"-o", "BatchMode=yes", "-o",
                                       "ConnectTimeout=" + std::to_string(static_cast<int>(slurm_timeout()))});
    return words;
  }
  *error = "mpirun's rsh agent (" + (tried.empty() ? std::string("none given") : tried) +
           ") is not found in PATH, so no host can be probed (set OMPI_MCA_plm_rsh_agent)";
  return {};
}

// `AGENT HOST true`, bounded in time: true when it ran (as mpirun's daemon would be started there).
bool probe_through_agent(const std::vector<std::string>& agent, const std::string& host, std::string* why) {
  std::vector<std::string> argv = agent;
  argv.insert(argv.end(), {host, "true"});
  BoundedRun run = run_bounded(argv, {}, slurm_timeout());
  if (!run.timed_out && exit_code_of(run.wait_status) == 0) return true;
  const std::string name = agent[0].substr(agent[0].rfind('/') + 1);
  *why = run.timed_out ? "probe through " + name + ": no answer in " + std::to_string(static_cast<int>(slurm_timeout())) + " s"
                       : "probe through " + name + ": " + describe_wait_status(run.wait_status) +
                             (run.output.empty() ? "" : ", " + last_line(run.output));
  return false;
}

std::vector<std::string> job_hosts(const RunContext& ctx) {
  std::vector<std::string> out;
  for (size_t i = 0; i < ctx.spec.node_names.size(); ++i)
    if (ctx.spec.ranks_per_node[i] > 0) out.push_back(ctx.spec.node_names[i]);
  return out;
}

}  // namespace

Status prepare_cluster(RunContext& ctx, const AllocationHosts& given) {
  const RunOptions& o = ctx.options;
  // Hosts the user keeps from the job's steps (CAIRN_SRUN_ARGS -x/--exclude: checkpoint nodes) are not its.
  AllocationHosts alloc = given;
  const auto& words = ctx.spec.srun_args;
  for (size_t i = 0; ctx.spec.launcher == LauncherKind::srun && i < words.size(); ++i) {
    std::string list;
    if ((words[i] == "-x" || words[i] == "--exclude") && i + 1 < words.size()) list = words[i + 1];
    else if (words[i].rfind("--exclude=", 0) == 0) list = words[i].substr(10);
    else if (words[i].rfind("-x", 0) == 0 && words[i].size() > 2) list = words[i].substr(2);
    else continue;
    auto excluded = expand_hostlist(list);
    if (!excluded) return make_error(Code::ERR_INVALID_ARG, "CAIRN_SRUN_ARGS: %s", excluded.status().message().c_str());
    std::erase_if(alloc.hosts, [&](const std::string& h) { return std::find(excluded->begin(), excluded->end(), h) != excluded->end(); });
    alloc.source += " less CAIRN_SRUN_ARGS's exclude " + list;
  }
  const int nh = static_cast<int>(alloc.hosts.size());
  const std::string where = alloc.source + ": " + std::to_string(nh) + " hosts";
  if (nh < 1) return make_error(Code::ERR_INVALID_ARG, "no host is left to run the job (%s)", where.c_str());
  if (o.nodes_given)
    return make_error(Code::ERR_INVALID_ARG,
                      "--nodes %d: simulated nodes are for one machine, and this run is inside a multi-host "
                      "allocation (%s), where every host is a failure group of its own; drop --nodes (the ranks "
                      "are placed on the hosts: --ntasks-per-node, else in blocks)",
                      o.nnodes, where.c_str());
  if (o.no_spare == "oversubscribe")
    return make_error(Code::ERR_INVALID_ARG,
                      "--no-spare=oversubscribe: not in a multi-host allocation (%s); use --no-spare=shrink or spares",
                      where.c_str());
  if (o.spares >= nh)
    return make_error(Code::ERR_INVALID_ARG,
                      "--spares %d: the allocation has %d host%s (%s); at least one must be left to run the ranks",
                      o.spares, nh, nh == 1 ? "" : "s", where.c_str());
  int needed = o.ntasks_per_node > 0 ? (o.nranks + o.ntasks_per_node - 1) / o.ntasks_per_node : std::min(nh - o.spares, o.nranks);
  if (needed + o.spares > nh)
    return make_error(Code::ERR_INVALID_ARG,
                      "the allocation is too small: %d ranks at --ntasks-per-node %d need %d hosts, and --spares %d "
                      "%d more, but the allocation has %d (%s)",
                      o.nranks, o.ntasks_per_node, needed, o.spares, o.spares, nh, where.c_str());
  ctx.cluster.active = true;
  ctx.cluster.source = alloc.source;
  ctx.cluster.hosts = alloc.hosts;
  if (ctx.spec.launcher == LauncherKind::srun) {
    const std::string beside = ctx.spec.srun.substr(0, ctx.spec.srun.rfind('/') + 1) + "sinfo";
    ctx.cluster.sinfo = find_executable(beside).empty() ? find_executable("sinfo") : beside;
  }
  if (const char* exec = getenv("CAIRN_KILL_HOST_EXEC")) ctx.cluster.kill_exec = split_whitespace(exec);

  // Hosts already down are left out before the first launch (Slurm's state; a probe would cost a step each).
  std::vector<std::string> up = alloc.hosts;
  if (ctx.spec.launcher == LauncherKind::srun) {
    std::string error;
    auto states = slurm_states(ctx, alloc.hosts, &error);
    if (!error.empty()) fprintf(stderr, "cairn run: warning: the hosts' state is not known (%s); all are used\n", error.c_str());
    for (const auto& [host, state] : states)
      if (slurm_state_is_down(state)) {
        fprintf(stderr, "cairn run: host %s is down before the first launch (sinfo: %s): left out\n", host.c_str(), state.c_str());
        up.erase(std::remove(up.begin(), up.end(), host), up.end());
        ctx.cluster.lost.push_back(host);
      }
  }
  if (static_cast<int>(up.size()) < needed)
    return make_error(Code::ERR_INVALID_ARG,
                      "only %zu of the allocation's %d hosts are up (down: %s), and the job needs %d for its %d ranks; "
                      "no host is left to run them",
                      up.size(), nh, join_hosts(ctx.cluster.lost).c_str(), needed, o.nranks);
  ctx.spec.real_hosts = true;
  // The job's steps are named, so that the launcher can wait until a failed one has left every host.
  const bool named = std::any_of(words.begin(), words.end(), [](const std::string& w) {
    return w == "-J" || w.rfind("--job-name", 0) == 0 || (w.rfind("-J", 0) == 0 && w.size() > 2);
  });
  if (!named) ctx.spec.srun_args.push_back("--job-name=cairn-run");
  ctx.spec.host_file = ctx.layout.control + "/srun-hosts";
  ctx.spec.exclude = ctx.cluster.lost;
  ctx.spec.node_names.assign(up.begin(), up.begin() + needed);
  ctx.cluster.spares.assign(up.begin() + needed, up.end());
  if (static_cast<int>(ctx.cluster.spares.size()) < o.spares)
    fprintf(stderr, "cairn run: warning: --spares %d, but only %zu host%s left after those down\n", o.spares,
            ctx.cluster.spares.size(), ctx.cluster.spares.size() == 1 ? " is" : "s are");
  if (o.ntasks_per_node > 0) {
    ctx.spec.ranks_per_node.assign(static_cast<size_t>(needed), o.ntasks_per_node);
    ctx.spec.ranks_per_node.back() = o.nranks - o.ntasks_per_node * (needed - 1);
  } else {
    ctx.spec.ranks_per_node = ranks_per_node(o.nranks, needed);
  }
  ctx.cluster.min_hosts = o.min_hosts > 0 ? o.min_hosts : needed;
  if (ctx.cluster.min_hosts > needed)
    return make_error(Code::ERR_INVALID_ARG, "--min-hosts %d: more than the %d hosts the job starts on", o.min_hosts, needed);
  for (int node : o.kill_nodes)
    if (node >= needed)
      return make_error(Code::ERR_INVALID_ARG, "--kill-node %d: the job runs on %d hosts, numbered 0..%d", node, needed,
                        needed - 1);
  ctx.next_spare = 0;  // the simulated nodes' spares: none
  ctx.last_spare = -1;
  std::string placed;
  for (size_t i = 0; i < ctx.spec.node_names.size(); ++i)
    placed += (placed.empty() ? "" : ", ") + ctx.spec.node_names[i] + " (ranks " +
              join_ints(ranks_of_node(ctx.spec.ranks_per_node, static_cast<int>(i))) + ")";
  fprintf(stderr, "cairn run: %d hosts (%s): ranks on %s; spare%s: %s\n", nh, alloc.source.c_str(), placed.c_str(),
          ctx.cluster.spares.size() == 1 ? "" : "s", ctx.cluster.spares.empty() ? "none" : join_hosts(ctx.cluster.spares).c_str());
  return Status::ok();
}

std::string allocation_gone(const RunContext& ctx) {
  const char* job = getenv("SLURM_JOB_ID");
  if (ctx.spec.launcher != LauncherKind::srun || !job || ctx.cluster.sinfo.empty()) return "";
  const std::string squeue = ctx.cluster.sinfo.substr(0, ctx.cluster.sinfo.rfind('/') + 1) + "squeue";
  BoundedRun run = run_bounded({squeue, "-h", "-j", job, "-o", "%T"}, {}, slurm_timeout());
  if (run.timed_out) return "";  // cannot tell: the probes will
  std::string state = last_line(run.output);
  if (exit_code_of(run.wait_status) == 0 && (state == "RUNNING" || state == "SUSPENDED" || state == "CONFIGURING"))
    return "";
  return "the allocation (Slurm job " + std::string(job) + ") has ended" +
         (state.empty() || exit_code_of(run.wait_status) != 0 ? "" : " (" + state + ")") +
         ": no step can run any more (allocate with --no-kill so that a lost host does not end it)";
}

void wait_for_step_end(const RunContext& ctx) {
  const char* job = getenv("SLURM_JOB_ID");
  if (ctx.spec.launcher != LauncherKind::srun || !job || ctx.cluster.sinfo.empty()) return;
  const std::string dir = ctx.cluster.sinfo.substr(0, ctx.cluster.sinfo.rfind('/') + 1);
  const auto t0 = std::chrono::steady_clock::now();
  std::string left;
  bool cancelled = false;
  for (double waited = 0; waited < slurm_timeout();
       waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) {
    BoundedRun run = run_bounded({dir + "squeue", "-h", "-s", "-j", job, "-o", "%i %j"}, {}, slurm_timeout());
    if (run.timed_out || exit_code_of(run.wait_status) != 0) return;  // cannot tell: go on
    left.clear();
    std::vector<std::string> ids;
    std::stringstream lines(run.output);
    for (std::string id, name; lines >> id >> name;)
      if (name == "cairn-run") ids.push_back(id), left += (left.empty() ? "" : " ") + id;
    if (left.empty()) return;
    // Tasks of a step whose srun is gone (a stalled attempt, killed) or that a host's loss left behind keep
    // running, and a new step's ranks would get their connections: after a grace, Slurm kills them.
    if (!cancelled && waited > 3) {
      for (const auto& id : ids) (void)run_bounded({dir + "scancel", "--signal=KILL", id}, {}, slurm_timeout());
      cancelled = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  fprintf(stderr, "cairn run: warning: step %s of the failed attempt is still there after %g s; going on\n", left.c_str(),
          slurm_timeout());
}

std::vector<std::string> find_down_hosts(const RunContext& ctx, std::string* how, std::string* refused_text) {
  std::vector<std::string> candidates = job_hosts(ctx);
  candidates.insert(candidates.end(), ctx.cluster.spares.begin(), ctx.cluster.spares.end());
  std::vector<std::string> down;
  auto note = [&](const std::string& host, const std::string& why) {
    down.push_back(host);
    *how += (how->empty() ? "" : ", ") + host + " (" + why + ")";
  };
  if (ctx.spec.launcher != LauncherKind::srun) {
    // Without Slurm, a host is down when mpirun's own way there (its rsh agent) cannot run `true` on it.
    std::string agent_error;
    auto agent = mpirun_agent(ctx, &agent_error);
    if (agent.empty()) {
      fprintf(stderr, "cairn run: warning: cannot tell which hosts are down: %s\n", agent_error.c_str());
      if (!ctx.cluster.kill_exec.empty())  // but the hosts the launcher lost itself are
        for (int node : ctx.options.kill_nodes) note(ctx.spec.node_names[static_cast<size_t>(node)], "lost by --kill-node");
      return down;
    }
    std::vector<std::string> why(candidates.size());
    std::vector<char> ok(candidates.size(), 0);
    std::vector<std::thread> probes;
    for (size_t i = 0; i < candidates.size(); ++i)
      probes.emplace_back([&, i] { ok[i] = probe_through_agent(agent, candidates[i], &why[i]) ? 1 : 0; });
    for (auto& t : probes) t.join();
    for (size_t i = 0; i < candidates.size(); ++i)
      if (!ok[i]) note(candidates[i], why[i]);
    return down;
  }
  std::string error;
  auto states = slurm_states(ctx, candidates, &error);
  if (!error.empty()) fprintf(stderr, "cairn run: warning: %s; probing every host\n", error.c_str());
  std::vector<std::string> to_probe;
  for (const auto& host : candidates) {
    auto it = states.find(host);
    if (it != states.end() && slurm_state_is_down(it->second)) note(host, "sinfo: " + it->second);
    else to_probe.push_back(host);
  }
  // One probe step per host Slurm calls up, all at once: a host whose slurmd is gone fails its step even
  // before the controller has noticed. A step refused for the whole allocation (kStepsRefused) is asked
  // again for a while, as the failed attempt's step may still be completing; if Slurm goes on refusing, no
  // relaunch can run in this allocation, and that (not a lost host) is the answer.
  std::vector<std::string> why(to_probe.size());
  std::vector<char> ok(to_probe.size(), 0), refused(to_probe.size(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0;; ++round) {
    std::vector<std::thread> probes;
    for (size_t i = 0; i < to_probe.size(); ++i)
      if (round == 0 || refused[i])
        probes.emplace_back([&, i] {
          bool r = false;
          ok[i] = probe_host(ctx, to_probe[i], &why[i], &r) ? 1 : 0;
          refused[i] = r ? 1 : 0;
        });
    for (auto& t : probes) t.join();
    const auto it = std::find(refused.begin(), refused.end(), 1);
    if (it == refused.end()) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= slurm_timeout()) {
      *refused_text = steps_refused_text(why[static_cast<size_t>(it - refused.begin())]);
      return {};
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  for (size_t i = 0; i < to_probe.size(); ++i)
    if (!ok[i]) note(to_probe[i], (states.count(to_probe[i]) ? "sinfo: " + states[to_probe[i]] + ", " : "") + why[i]);
  return down;
}

std::string replace_lost_hosts(RunContext& ctx, const std::vector<std::string>& down, Attempt& attempt) {
  ClusterRun& c = ctx.cluster;
  for (const auto& host : down) {
    c.lost.push_back(host);
    ctx.spec.exclude.push_back(host);
    c.spares.erase(std::remove(c.spares.begin(), c.spares.end(), host), c.spares.end());  // a spare lost too
  }
  std::vector<size_t> shrink;
  std::string text;
  for (size_t i = 0; i < ctx.spec.node_names.size(); ++i) {
    if (ctx.spec.ranks_per_node[i] == 0) continue;
    const std::string host = ctx.spec.node_names[i];
    if (std::find(down.begin(), down.end(), host) == down.end()) continue;
    const std::string ranks = join_ints(ranks_of_node(ctx.spec.ranks_per_node, static_cast<int>(i)));
    if (!c.spares.empty()) {
      const std::string spare = c.spares.front();
      c.spares.erase(c.spares.begin());
      ctx.spec.node_names[i] = spare;
      c.spares_used.push_back(spare + " for " + host + " (attempt " + std::to_string(attempt.number + 1) + ")");
      fprintf(stderr, "cairn run: spare host %s replaces %s (ranks %s)\n", spare.c_str(), host.c_str(), ranks.c_str());
      text += (text.empty() ? "" : "; ") + std::string("spare ") + spare + " took ranks " + ranks + " of " + host;
    } else {
      shrink.push_back(i);
    }
  }
  if (!text.empty()) attempt.hosts_text += (attempt.hosts_text.empty() ? "" : "; ") + text;
  if (shrink.empty()) return "";
  int hosts_left = static_cast<int>(job_hosts(ctx).size()) - static_cast<int>(shrink.size());
  std::string lost;
  int ranks_left = 0;
  for (int n : ctx.spec.ranks_per_node) ranks_left += n;
  for (size_t i : shrink) {
    lost += (lost.empty() ? "" : ", ") + ctx.spec.node_names[i];
    ranks_left -= ctx.spec.ranks_per_node[i];
  }
  if (ctx.options.no_spare.empty() || hosts_left < 1)
    return lost + " lost and no spare host is left" +
           (hosts_left < 1 ? "; no host is left to run the job"
                           : "; give the job more spares (--spares), or let it go on with fewer ranks (--no-spare=shrink "
                             "--min-hosts N)");
  if (hosts_left < c.min_hosts)
    return lost + " lost and no spare host is left; " + std::to_string(hosts_left) + " host" +
           (hosts_left == 1 ? " is" : "s are") + " left, fewer than --min-hosts " + std::to_string(c.min_hosts);
  std::string why = why_job_cannot_shrink(ctx);
  if (!why.empty())
    return lost + " lost and no spare host is left; the job cannot continue on " + std::to_string(ranks_left) +
           " ranks: " + why + ". Protect such state with cairn_protect_distributed, or give the job a spare host.";
  for (size_t i : shrink) ctx.spec.ranks_per_node[i] = 0;
  fprintf(stderr, "cairn run: no spare host: continuing on the %d ranks of the %d surviving hosts\n", ranks_left, hosts_left);
  attempt.hosts_text += (attempt.hosts_text.empty() ? "" : "; ") + std::string("shrunk to ") +
                        std::to_string(ranks_left) + " ranks";
  return "";
}

void kill_injected_hosts(const RunContext& ctx) {
  for (int node : ctx.options.kill_nodes) {
    const std::string& host = ctx.spec.node_names[static_cast<size_t>(node)];
    std::vector<std::string> argv;
    for (const auto& w : ctx.cluster.kill_exec) {
      std::string word = w;
      for (size_t at; (at = word.find("{host}")) != std::string::npos;) word.replace(at, 6, host);
      argv.push_back(word);
    }
    BoundedRun run = run_bounded(argv, {}, slurm_timeout());
    if (run.timed_out || exit_code_of(run.wait_status) != 0)
      fprintf(stderr, "cairn run: warning: CAIRN_KILL_HOST_EXEC for %s: %s%s\n", host.c_str(),
              run.timed_out ? "no end in time" : describe_wait_status(run.wait_status).c_str(),
              run.output.empty() ? "" : (": " + last_line(run.output)).c_str());
  }
}

std::string scavenge_hosts(const RunContext& ctx) {
  // Under srun a step per host; under mpirun its own way onto a host, the rsh agent (as the probe uses).
  const bool srun = ctx.spec.launcher == LauncherKind::srun;
  std::vector<std::string> agent;
  if (!srun) {
    std::string agent_error;
    agent = mpirun_agent(ctx, &agent_error);
    if (agent.empty()) {
      const std::string said = "the caches are on the hosts, and " + agent_error + "; run `cairn flush` on the hosts instead";
      fprintf(stderr, "cairn run: scavenge: %s\n", said.c_str());
      return said;
    }
  }
  if (std::string gone = allocation_gone(ctx); !gone.empty()) {
    const std::string said = "not run: " + gone + "; the caches on the hosts are out of reach";
    fprintf(stderr, "cairn run: scavenge: %s\n", said.c_str());
    return said;
  }
  std::vector<std::string> hosts;
  for (const auto& h : job_hosts(ctx))
    if (std::find(ctx.cluster.lost.begin(), ctx.cluster.lost.end(), h) == ctx.cluster.lost.end()) hosts.push_back(h);
  if (hosts.empty()) {
    fprintf(stderr, "cairn run: scavenge: no host of the job is left\n");
    return "no host of the job is left";
  }
  RunContext staged = ctx;
  staged.layout.cache_job = ctx.layout.control + "/scavenge-hosts";
  (void)fs::remove_tree(staged.layout.cache_job);
  if (Status st = fs::make_dirs(staged.layout.cache_job); !st) {
    fprintf(stderr, "cairn run: scavenge: %s\n", st.message().c_str());
    return st.message();
  }
  // One step per host, all at once: its node directory of the job's cache, copied as it is.
  const double bound = std::max(slurm_timeout(), 600.0);
  std::vector<std::string> why(hosts.size());
  std::vector<char> ok(hosts.size(), 0);
  std::vector<std::thread> steps;
  for (size_t i = 0; i < hosts.size(); ++i)
    steps.emplace_back([&, i] {
      const std::vector<std::string> copy{"/bin/sh", "-c", "[ ! -d \"$0\" ] || { mkdir -p \"$1\" && cp -a \"$0/.\" \"$1/\"; }",
                                          ctx.layout.node_cache(hosts[i]), staged.layout.node_cache(hosts[i])};
      std::vector<std::string> argv;
      if (srun) {
        argv = {ctx.spec.srun, "--overlap", "-N1", "-n1", "-w", hosts[i], "-J", "cairn-scavenge", "--mpi=none", "--quit-on-interrupt"};
        argv.insert(argv.end(), copy.begin(), copy.end());
      } else {  // an rsh agent joins its words and hands them to the host's shell, as ssh does
        argv = agent;
        argv.insert(argv.end(), {hosts[i], join_quoted(copy)});
      }
      BoundedRun run = run_bounded(argv, {}, bound);
      ok[i] = !run.timed_out && exit_code_of(run.wait_status) == 0;
      if (!ok[i]) why[i] = run.timed_out ? "no end in " + std::to_string(static_cast<int>(bound)) + " s"
                                         : describe_wait_status(run.wait_status) + (run.output.empty() ? "" : ": " + last_line(run.output));
    });
  for (auto& t : steps) t.join();
  std::string copied, failed;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (ok[i]) copied += (copied.empty() ? "" : ", ") + hosts[i];
    else failed += (failed.empty() ? "" : ", ") + hosts[i] + " (" + why[i] + ")";
  }
  const std::string via = srun ? "a step per surviving host" : "each surviving host, through " + agent[0].substr(agent[0].rfind('/') + 1) + ",";
  fprintf(stderr, "cairn run: scavenge: %s copied its cache: %s%s\n", via.c_str(), copied.empty() ? "none" : copied.c_str(),
          failed.empty() ? "" : ("; failed: " + failed).c_str());
  std::string said = scavenge_caches(staged);
  (void)fs::remove_tree(staged.layout.cache_job);
  return said;
}

std::string next_spare(const RunContext& ctx) {
  if (ctx.cluster.active) return ctx.cluster.spares.empty() ? "" : ctx.cluster.spares.front();
  return ctx.next_spare <= ctx.last_spare ? node_name(ctx.next_spare) : "";
}

void take_spare(RunContext& ctx, const std::string& for_what) {
  if (!ctx.cluster.active) {
    ++ctx.next_spare;
    return;
  }
  if (ctx.cluster.spares.empty()) return;
  ctx.cluster.spares_used.push_back(ctx.cluster.spares.front() + " for " + for_what);
  ctx.cluster.spares.erase(ctx.cluster.spares.begin());
}

Status remove_host_cache(const RunContext& ctx, const std::string& host) {
  if (ctx.spec.launcher != LauncherKind::srun) return Status::ok();  // no step to run there: left in place
  BoundedRun run = run_bounded({ctx.spec.srun, "--overlap", "-N1", "-n1", "-w", host, "-J", "cairn-clean", "--mpi=none",
                                "rm", "-rf", ctx.layout.node_cache(host)},
                               {}, slurm_timeout());
  if (run.timed_out || exit_code_of(run.wait_status) != 0)
    return make_error(Code::ERR_IO, "a step on %s: %s", host.c_str(),
                      run.timed_out ? "no end in time" : (describe_wait_status(run.wait_status) + " " + last_line(run.output)).c_str());
  return Status::ok();
}

void print_host_summary(const RunContext& ctx) {
  if (!ctx.cluster.active) return;
  const ClusterRun& c = ctx.cluster;
  std::string used;
  for (const auto& s : c.spares_used) used += (used.empty() ? "" : ", ") + s;
  fprintf(stderr, "cairn run: hosts: lost %s; spares used: %s; spares left: %s\n",
          c.lost.empty() ? "none" : join_hosts(c.lost).c_str(), used.empty() ? "none" : used.c_str(),
          c.spares.empty() ? "none" : join_hosts(c.spares).c_str());
}

}  // namespace cairn::tool
