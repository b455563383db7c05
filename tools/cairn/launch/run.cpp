// `cairn run`: starts an MPI job on simulated nodes, optionally kills a node at a chosen point of a
// chosen checkpoint (failure injection), deletes that node's cache, relaunches, and reports where each
// attempt restarted from. The user guide is docs/launcher.md. This file: the command, its options and
// the attempt loop; the other parts are listed in run_job.hpp.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "base/prefix_owner.hpp"
#include "cache/cache_store.hpp"
#include "launch/cluster_hosts.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "launch/launcher.hpp"
#include "launch/process.hpp"
#include "launch/run_job.hpp"
#include "launch/run_migration.hpp"
#include "cli_units.hpp"

namespace cairn::tool {
namespace {

// ---- checking the options -------------------------------------------------------------------------

// This `cairn run`: host, pid and start time, so that two runs never share an id.
std::string this_run_id() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(time(nullptr));
}

// The prefix must not be held by another live job (base/prefix_owner.hpp); the job checks again at
// cairn_init, this says so before anything is launched.
// A cache that outlived its prefix (the prefix removed, the cache's name taken from its path) is
// refused here too, before any rank starts: the job would refuse it at cairn_init.
Status check_prefix_free(const Layout& layout, const std::string& run_id, bool adopt) {
  if (!fs::exists(layout.identity_file()) && cache_holds_versions(layout, "")) {
    IdentityDecision d = decide_identity(std::nullopt, {}, false, adopt, layout.prefix, layout.cache_job);
    if (d.check == IdentityCheck::refuse) return Status(Code::ERR_PREFIX_IN_USE, "cairn run: " + d.why);
  }
  if (!fs::exists(layout.owner_file())) return Status::ok();
  auto text = fs::read_file(layout.owner_file());
  auto holder = text ? decode_holder(*text) : Result<PrefixHolder>(text.status());
  if (!holder) return Status::ok();  // unreadable: the job takes it over, with a warning
  PrefixHolder me;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
  me.host = host;
  me.pid = getpid();
  me.run = run_id;
  const bool alive = holder->host == me.host && process_alive(holder->pid);
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);  // to the nanosecond, as the holder's renewal is recorded
  ClaimDecision d = decide_claim(*holder, me, now.tv_sec * 1000000000LL + now.tv_nsec, alive, layout.prefix);
  if (d.claim == Claim::held) return Status(Code::ERR_PREFIX_IN_USE, "cairn run: " + d.why);
  return Status::ok();
}

Status check_options(const RunOptions& o, const Invocation& inv, bool cluster) {
  if (o.nranks < 1) return make_error(Code::ERR_INVALID_ARG, "-n %d: the job needs at least one rank", o.nranks);
  if (!o.stray.empty() || !inv.has_separator)
    return make_error(Code::ERR_INVALID_ARG, "missing '--' before the command%s (cairn run -n NP --nodes K -- CMD ARGS...)",
                      o.stray.empty() ? "" : (" '" + o.stray.front() + "'").c_str());
  if (inv.trailing.empty()) return make_error(Code::ERR_INVALID_ARG, "no command after '--'");
  if (o.nnodes < 1 || o.nnodes > o.nranks)
    return make_error(Code::ERR_INVALID_ARG, "--nodes %d: must be 1..%d (at most one simulated node per rank)",
                      o.nnodes, o.nranks);
  if (o.ntasks_per_node < 0) return make_error(Code::ERR_INVALID_ARG, "--ntasks-per-node %d: must be 1 or more", o.ntasks_per_node);
  if (o.min_hosts < 0) return make_error(Code::ERR_INVALID_ARG, "--min-hosts %d: must be 1 or more", o.min_hosts);
  std::set<int> seen;
  for (int node : o.kill_nodes) {
    if (node < 0 || (!cluster && node >= o.nnodes))  // in a multi-host allocation: checked against its hosts
      return make_error(Code::ERR_INVALID_ARG, "--kill-node %d: nodes are numbered 0..%d", node, o.nnodes - 1);
    if (!seen.insert(node).second)
      return make_error(Code::ERR_INVALID_ARG, "--kill-node %d: node given twice", node);
  }
  for (uint64_t c : o.at_checkpoints)
    if (c < 1) return make_error(Code::ERR_INVALID_ARG, "--at-checkpoint: checkpoints are numbered from 1");
  if (o.kill_every_attempt && o.kill_nodes.empty())
    return make_error(Code::ERR_INVALID_ARG, "--kill-every-attempt needs --kill-node");
  if (o.retries < -1) return make_error(Code::ERR_INVALID_ARG, "--retries %d: must be 0 or more", o.retries);
  if (o.retries > 0 && o.no_relaunch)
    return make_error(Code::ERR_INVALID_ARG, "--retries and --no-relaunch contradict each other");
  if (o.spares < 0) return make_error(Code::ERR_INVALID_ARG, "--spares %d: must be 0 or more", o.spares);
  if (!(o.stall >= 0)) return make_error(Code::ERR_INVALID_ARG, "--stall %g: must be a number of seconds above 0", o.stall);
  return Status::ok();
}

// Resolves the launcher, the command, the configuration and the layout; any failure is a usage error.
Result<RunContext> prepare(const RunOptions& o, const Invocation& inv) {
  CAIRN_TRY(check_options(o, inv, /*cluster=*/true));
  RunContext ctx;
  ctx.options = o;
  std::sort(ctx.options.kill_nodes.begin(), ctx.options.kill_nodes.end());

  if (find_executable(inv.trailing.front()).empty())
    return make_error(Code::ERR_INVALID_ARG, "command not found: %s", inv.trailing.front().c_str());
  // mpirun, or srun inside a Slurm allocation (--launcher, CAIRN_LAUNCHER; launcher.hpp).
  auto launcher_reason = resolve_launcher(o.launcher, &ctx.spec);
  if (!launcher_reason) return launcher_reason.status();
  // A multi-host allocation (Slurm's, or mpirun's hostfile): each host is a failure group (run_hosts.cpp).
  auto alloc = allocation_hosts(ctx.spec.launcher == LauncherKind::srun, ctx.spec.mpirun_args);
  if (!alloc) return alloc.status();
  const bool cluster = alloc->hosts.size() > 1;
  if (!cluster) CAIRN_TRY(check_options(o, inv, false));
  if (cluster && ctx.spec.launcher == LauncherKind::mpirun && getenv("SLURM_JOB_ID") && o.launcher.empty() &&
      !getenv("CAIRN_LAUNCHER"))
    return make_error(Code::ERR_INVALID_ARG,
                      "inside a multi-host Slurm allocation (%s) but srun was not found (set CAIRN_SRUN to it); "
                      "--launcher mpirun uses mpirun on these hosts instead",
                      alloc->source.c_str());

  // The job loads the same configuration (same environment, same file), so the layout agrees.
  std::string config_path;
  if (!o.config_path.empty()) {
    config_path = fs::absolute(o.config_path);
    ctx.spec.job_env.emplace_back("CAIRN_CONFIG", config_path);
    setenv("CAIRN_CONFIG", config_path.c_str(), 1);  // for the --between-attempts command too
  }
  auto loaded = load_job_config(config_path, "run");
  if (!loaded) return loaded.status();
  log::set_level(loaded->config.log_level);
  ctx.layout = make_layout(loaded->config);
  ctx.migration = migration_settings(loaded->config);
  if (const char* exec = getenv("CAIRN_MIGRATE_EXEC")) ctx.migrate_exec = split_whitespace(exec);
  ctx.spec.multi_prog_file = ctx.layout.control + "/srun-multi-prog.conf";  // written per attempt, for srun
  // One job per prefix (docs/launcher.md): refuse before launching when another live job holds it; the
  // ranks of every attempt carry this run's id, so a relaunch takes the prefix over from its earlier one.
  ctx.run_id = this_run_id();
  setenv("CAIRN_RUN_ID", ctx.run_id.c_str(), 1);  // mpirun and srun pass it on to every rank
  CAIRN_TRY(check_prefix_free(ctx.layout, ctx.run_id, loaded->config.adopt));
  if (log::level() >= log::Level::info)
    fprintf(stderr, "cairn run: launcher: %s (%s)\n", launcher_name(ctx.spec.launcher), launcher_reason->c_str());

  if (cluster) {
    CAIRN_TRY(prepare_cluster(ctx, *alloc));
  } else {
    if (o.ntasks_per_node > 0 || o.min_hosts > 0)
      return make_error(Code::ERR_INVALID_ARG, "%s: only inside a multi-host allocation (Slurm's, or mpirun's --hostfile)",
                        o.ntasks_per_node > 0 ? "--ntasks-per-node" : "--min-hosts");
    ctx.spec.ranks_per_node = ranks_per_node(o.nranks, o.nnodes);
    for (int i = 0; i < o.nnodes; ++i) ctx.spec.node_names.push_back(node_name(i));
    ctx.next_spare = o.nnodes;
    ctx.last_spare = o.nnodes + o.spares - 1;
  }
  ctx.spec.command = inv.trailing;
  ctx.spec.inject_nodes = ctx.options.kill_nodes;
  if (cluster && !o.fail_at.empty())
    return make_error(Code::ERR_INVALID_ARG, "--fail-at: only with simulated nodes on one machine (its targets are "
                                             "simulated nodes and ranks); in a multi-host allocation use --kill-node");
  CAIRN_TRY(prepare_timed_failures(ctx));  // --fail-at: before the default of --retries
  if (ctx.options.retries < 0) {
    ctx.options.retries = o.no_relaunch || o.kill_nodes.empty() ? 0 : static_cast<int>(o.at_checkpoints.size());
    if (o.stall > 0 && !o.no_relaunch) ctx.options.retries = std::max(ctx.options.retries, 1);  // a hang relaunches
    if (cluster && !o.no_relaunch) ctx.options.retries = std::max(ctx.options.retries, o.spares);  // a lost host relaunches
  }
  if (ctx.spec.launcher == LauncherKind::srun) CAIRN_TRY(multi_prog_text(ctx.spec, false).status());
  return ctx;
}

// Where attempt k is killed: the k-th --at-checkpoint; past the list, its last entry with
// --kill-every-attempt; else 0 (not injected).
uint64_t kill_point(const RunOptions& o, int k) {
  if (o.kill_nodes.empty() || o.at_checkpoints.empty()) return 0;
  if (static_cast<size_t>(k) <= o.at_checkpoints.size()) return o.at_checkpoints[static_cast<size_t>(k - 1)];
  return o.kill_every_attempt ? o.at_checkpoints.back() : 0;
}

// --no-spare=oversubscribe: every rank goes on, numbered as before; each lost node's ranks run one by one
// on the surviving node with the fewest ranks at that moment (its name: its cache and failure group), so
// that the ranks per node stay as even as they can and L2 keeps sets across nodes. Empty: ok.
std::string place_on_survivors(RunContext& ctx, const std::vector<int>& lost) {
  std::vector<std::pair<std::string, int>> load;  // surviving node -> ranks on it, in node order
  for (size_t i = 0; i < ctx.spec.node_names.size(); ++i) {
    if (ctx.spec.ranks_per_node[i] == 0 || std::find(lost.begin(), lost.end(), static_cast<int>(i)) != lost.end())
      continue;
    const std::vector<std::string> on = i < ctx.spec.spread.size() && !ctx.spec.spread[i].empty()
                                            ? ctx.spec.spread[i] : std::vector<std::string>{ctx.spec.node_names[i]};
    for (int k = 0; k < ctx.spec.ranks_per_node[i]; ++k) {
      const std::string& name = on[static_cast<size_t>(k) % on.size()];
      auto it = std::find_if(load.begin(), load.end(), [&](const auto& e) { return e.first == name; });
      if (it == load.end()) load.emplace_back(name, 1);
      else ++it->second;
    }
  }
  if (load.empty()) return "every node is lost and there is no spare; the job cannot continue";
  ctx.spec.spread.resize(ctx.spec.node_names.size());
  std::map<int, std::string> moved;  // rank -> its new node
  for (int node : lost) {
    auto idx = static_cast<size_t>(node);
    std::vector<std::string> to;
    std::string text;
    for (int r : ranks_of_node(ctx.spec.ranks_per_node, node)) {
      auto least = std::min_element(load.begin(), load.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      ++least->second;
      to.push_back(least->first);
      moved[r] = least->first;
      text += (text.empty() ? "" : ", ") + std::to_string(r) + " on " + least->first;
    }
    fprintf(stderr, "cairn run: no spare: the ranks of %s go on the surviving nodes, oversubscribed: %s\n",
            ctx.spec.node_names[idx].c_str(), text.c_str());
    ctx.spec.spread[idx] = to;
  }
  rebuild_moved_ranks(ctx, moved);
  return "";
}

}  // namespace

// After killed nodes: a spare takes each killed node's ranks while there is one; then, with
// --no-spare, the job continues on the survivors; else a fresh node of the same name. Empty: ok.
std::string replace_killed_nodes(RunContext& ctx) {
  std::vector<int> shrink;
  for (int node : ctx.options.kill_nodes) {
    auto idx = static_cast<size_t>(node);
    if (ctx.next_spare <= ctx.last_spare) {
      std::string spare = node_name(ctx.next_spare++);
      fprintf(stderr, "cairn run: spare %s replaces %s (ranks %s)\n", spare.c_str(), ctx.spec.node_names[idx].c_str(),
              join_ints(ranks_of_node(ctx.spec.ranks_per_node, node)).c_str());
      ctx.spec.node_names[idx] = spare;
    } else if (!ctx.options.no_spare.empty()) {
      shrink.push_back(node);
    }
  }
  if (shrink.empty()) return "";
  if (ctx.options.no_spare == "oversubscribe") return place_on_survivors(ctx, shrink);
  std::string why = why_job_cannot_shrink(ctx);
  int left = 0;
  for (int c : ctx.spec.ranks_per_node) left += c;
  std::string lost;
  for (int node : shrink) {
    left -= ctx.spec.ranks_per_node[static_cast<size_t>(node)];
    lost += (lost.empty() ? "" : ", ") + ctx.spec.node_names[static_cast<size_t>(node)];
  }
  if (!why.empty() || left < 1) {
    char buf[1024];
    snprintf(buf, sizeof buf,
             "%s lost and there is no spare; the job cannot continue on %d ranks: %s. "
             "Protect such state with cairn_protect_distributed, or give the job a spare node.",
             lost.c_str(), left, left < 1 ? "no node is left" : why.c_str());
    return buf;
  }
  for (int node : shrink) ctx.spec.ranks_per_node[static_cast<size_t>(node)] = 0;
  fprintf(stderr, "cairn run: no spare: continuing on the %d ranks of the surviving nodes\n", left);
  return "";
}

namespace {

int run_job(const RunContext& start) {
  install_signal_relay();
  RunContext ctx = start;
  const RunOptions& o = ctx.options;
  std::vector<Attempt> attempts;
  MigrationDesk desk(ctx.layout);
  if (fs::exists(ctx.layout.migrate_file())) {  // left by a run that ended before acting on it
    fprintf(stderr, "cairn run: removing a migration request left from an earlier run (%s)\n",
            ctx.layout.migrate_file().c_str());
    (void)fs::remove_file(ctx.layout.migrate_file());
  }
  write_launcher_file(ctx);
  // Every way out: the summary, an answer to an outstanding migration request, the scavenge.
  auto finish = [&](int code, const std::string& last_words = "") {
    (void)fs::remove_file(ctx.layout.launcher_file());
    desk.abandon();
    print_summary(ctx, attempts);
    print_host_summary(ctx);
    if (!last_words.empty()) fprintf(stderr, "cairn run: %s\n", last_words.c_str());
    const std::string scavenged = o.scavenge ? scavenge(ctx) : std::string();
    if (!o.json_path.empty()) write_summary_json(ctx, attempts, code, last_words, scavenged);
    // The job is over: a hold its rank 0 could not give back (killed, or ended without cairn_finalize) is
  // given back here, so that the next job on the prefix need not wait for the lease to run out.
    if (release_for_run(ctx.layout.owner_file(), ctx.run_id))
      fprintf(stderr, "cairn run: released %s: the job's rank 0 ended without cairn_finalize and left its hold on it\n",
              ctx.layout.prefix.c_str());
    return code;
  };
  int relaunches = 0;  // after failed attempts (bounded by --retries); migrations do not count
  ctx.epoch = std::chrono::steady_clock::now();  // --fail-at's times count from the first launch
  // Since when Slurm refuses the job's step for the whole allocation (as the host probes are refused, in
  // run_hosts.cpp: a failed attempt's step left completing): the launch is asked again, for as long.
  bool refusing = false;
  std::chrono::steady_clock::time_point refused_since{};
  for (int k = 1;; ++k) {
    // The n-th attempt that may fail is killed at the n-th --at-checkpoint entry.
    const uint64_t at = kill_point(o, relaunches + 1);
    const bool inject = at > 0;
    if (inject) {
      for (int node : o.kill_nodes) {
        const auto idx = static_cast<size_t>(node);
        if (ctx.spec.ranks_per_node[idx] == 0)
          return finish(kExitFailure, "node " + std::to_string(node) +
                                          " has no ranks left (lost without a spare); cannot kill it again");
        // Since --no-spare=oversubscribe, ranks of several entries share nodes: a kill would not be of one node.
        bool shared = idx < ctx.spec.spread.size() && !ctx.spec.spread[idx].empty();
        for (const auto& on : ctx.spec.spread)
          shared = shared || std::find(on.begin(), on.end(), ctx.spec.node_names[idx]) != on.end();
        if (shared)
          return finish(kExitFailure, "node " + std::to_string(node) +
                                          " shares its node with other ranks since --no-spare=oversubscribe; cannot kill it alone");
      }
      ctx.options.at_checkpoint = at;
      ctx.inject_text = o.phase + ":" + std::to_string(at);
      ctx.spec.inject_env = {{"CAIRN_INJECT", ctx.inject_text}, {"CAIRN_INJECT_DIR", ctx.layout.inject_dir()}};
    }
    auto t0 = std::chrono::steady_clock::now();
    attempts.push_back(run_attempt(ctx, k, inject, desk));
    Attempt& a = attempts.back();
    a.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    a.at_checkpoint = inject ? at : 0;
    if (a.failure) ++ctx.next_failure;
    if (a.reached) a.killed_text = killed_nodes_text(ctx);
    const int status = exit_code_of(a.wait_status);

    if (ctx.spec.launcher == LauncherKind::srun && !a.interrupted &&
        classify_step_end(a.wait_status, a.srun_stderr_tail) == StepEnd::refused) {
      const std::string why = "the job's step: " + refusal_line(a.srun_stderr_tail);
      const auto now = std::chrono::steady_clock::now();
      if (!refusing) refused_since = now;
      refusing = true;
      if (std::chrono::duration<double>(now - refused_since).count() >= slurm_timeout())
        return finish(status, steps_refused_text(why));
      fprintf(stderr, "cairn run: Slurm refused the job's step (%s); asking again\n", why.c_str());
      attempts.pop_back();  // nothing ran: the same attempt again, not a relaunch
      --k;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    refusing = false;

    if (inject && !a.reached)
      return finish(kExitNotReached,
                    "checkpoint " + std::to_string(at) + " phase " + o.phase + " was never reached in attempt " +
                        std::to_string(k) + " (the job ended with " + describe_wait_status(a.wait_status) +
                        "); no node was killed");
    if (!a.interrupted && desk.after_attempt(ctx, a)) {
      write_launcher_file(ctx);
      fprintf(stderr, "cairn run: relaunching the job after the migration (attempt %d)\n", k + 1);
      continue;
    }
    if (!attempt_failed(a) || a.interrupted) return finish(status);
    const bool killed = a.reached;
    if (killed && !ctx.cluster.active) delete_killed_caches(ctx);
    if (a.failure) {  // --fail-at: the failure's caches are gone whether or not the job goes on
      std::string why = after_timed_failure(ctx, *a.failure);
      if (!why.empty()) return finish(kExitFailure, why);
      write_launcher_file(ctx);
    }
    if (a.state && a.state->phase == "unrecoverable")  // a relaunch would meet the same checkpoints
      return finish(status, "attempt " + std::to_string(k) + " found checkpoints but none it could restart from, so "
                                "no relaunch would do better: " + a.state->values["unrecoverable"]);
    std::vector<std::string> down;  // cluster mode: the hosts found down after this attempt
    if (ctx.cluster.active) {
      std::string how;
      if (std::string gone = allocation_gone(ctx); !gone.empty()) return finish(status, gone);
      wait_for_step_end(ctx);
      std::string refused;
      down = find_down_hosts(ctx, &how, &refused);
      if (!refused.empty()) return finish(status, refused);
      if (down.empty()) {
        fprintf(stderr, "cairn run: attempt %d failed and every host of the job answers: the application failed, not a host\n", k);
      } else {
        fprintf(stderr, "cairn run: attempt %d failed; host%s down: %s\n", k, down.size() == 1 ? "" : "s", how.c_str());
        a.hosts_text = "lost " + how;
      }
    }
    if (relaunches >= o.retries) {
      if (!down.empty()) ctx.cluster.lost.insert(ctx.cluster.lost.end(), down.begin(), down.end());
      if (o.retries > 0) fprintf(stderr, "cairn run: attempt %d failed and no retry is left (--retries %d)\n", k, o.retries);
      return finish(status);
    }
    if (killed && !o.between_attempts.empty() && !run_between_attempts(ctx, k)) return finish(kExitFailure);
    if (ctx.cluster.active && !down.empty()) {
      std::string why = replace_lost_hosts(ctx, down, a);
      if (!why.empty()) return finish(kExitFailure, why);
      write_launcher_file(ctx);
    } else if (killed && !ctx.cluster.active) {
      std::string why = replace_killed_nodes(ctx);
      if (!why.empty()) return finish(kExitFailure, why);
      write_launcher_file(ctx);
    }
    ++relaunches;
    fprintf(stderr, "cairn run: relaunching the job (attempt %d)\n", k + 1);
  }
}

const char* const kFooter = R"(Simulated nodes:
  Ranks are spread evenly over nodes node0..node<K-1> in contiguous blocks (rank r on node
  floor(r*K/NP)); each rank gets CAIRN_NODE=<node>, its failure group and cache directory.
  The job is started as
    $CAIRN_MPIRUN $CAIRN_MPIRUN_ARGS -np c0 env CAIRN_NODE=node0 CMD ARGS : -np c1 env CAIRN_NODE=node1 ...
  CAIRN_MPIRUN defaults to mpirun (from PATH); CAIRN_MPIRUN_ARGS is split on whitespace (e.g.
  --oversubscribe for more ranks than cores). CAIRN_LOG=info prints the launcher chosen and the
  command line.

Slurm (--launcher, CAIRN_LAUNCHER: auto, mpirun or srun):
  auto (the default) uses srun inside a Slurm allocation (SLURM_JOB_ID set; salloc, sbatch) when
  srun is found, else mpirun. Under srun the job is started as
    $CAIRN_SRUN --mpi=pmix --kill-on-bad-exit=1 --quit-on-interrupt $CAIRN_SRUN_ARGS -n NP \
        --multi-prog <prefix>/.cairn/srun-multi-prog.conf
  where the file has one line per node, "0-1 env CAIRN_NODE=node0 CMD ARGS", so every rank gets
  its node as under mpirun. CAIRN_SRUN defaults to srun (from PATH); CAIRN_SRUN_ARGS is split on
  whitespace and replaces the default of an option it gives (e.g. --mpi=pmi2). --launcher srun
  outside an allocation is an error. With more ranks than cores, Open MPI started by srun needs
  OMPI_MCA_mpi_yield_when_idle=1, or its ranks busy-wait (under mpirun --oversubscribe they yield).

On a cluster (a multi-host allocation: SLURM_JOB_NODELIST names several hosts, or mpirun's hostfile):
  Every host is a failure group: no CAIRN_NODE is set and --nodes is refused. The ranks go on the
  allocation's hosts in order, --ntasks-per-node T per host, else in blocks; --spares K keeps the last K
  hosts back. srun gets -m arbitrary -w <prefix>/.cairn/srun-hosts (one host per rank). After a failed
  attempt the hosts that are down (sinfo's state, then a probe step `srun -w HOST true` on the others,
  each bounded by CAIRN_SLURM_COMMAND_TIMEOUT seconds, default 30) are left out (-x) for the rest of the
  run and spares take their ranks; with none left, --no-spare=shrink goes on down to --min-hosts hosts.
  --kill-node I loses the job's I-th host: CAIRN_KILL_HOST_EXEC runs with {host} replaced. The scavenge
  runs one step per surviving host. Allocate with --no-kill, or Slurm ends the allocation with the host.

Failure injection (--kill-node, --at-checkpoint, --phase):
  The ranks of the chosen nodes run with CAIRN_INJECT=<phase>:<C> and CAIRN_INJECT_DIR=<prefix>/.cairn/inject.
  When one of them reaches the phase of checkpoint C, every rank of those nodes is sent SIGKILL; the
  MPI launcher then ends the job. The nodes' cache directories are deleted, the --between-attempts
  command runs (sh -c, with CAIRN_PREFIX, CAIRN_CACHE_JOB, CAIRN_ATTEMPT=<attempt that ended> and
  CAIRN_KILLED_NODES set), and the job is started again, to restart: on as many nodes as before (the
  next unused spare node, else a fresh node of the same name, replaces each killed one), or, with
  --no-spare[=shrink] once no spare is left, on the surviving nodes only, with fewer ranks, when every
  region of the newest version is distributed (not private); with --no-spare=oversubscribe, with
  every rank, the lost nodes' ranks one by one on the surviving node with the fewest ranks, the
  newest version rebuilt for them from L2 into their new caches first, so the job restarts from it
  at L1. With C1,C2,... attempt k is killed at Ck (the
  node number I names the k-th node of the job, wherever a spare moved it); --kill-every-attempt
  kills every later attempt at the last entry. --retries R bounds the relaunches after failed
  attempts (non-zero exit or killed); the default is the number of entries with --kill-node, else 0.
  An attempt whose restart found checkpoints but none it could rebuild (phase=unrecoverable in the
  state file) is not relaunched: a relaunch would meet the same ones (if_unrecoverable = start_over
  makes the job start afresh instead).
  Phases: compute (after checkpoint C, while the job computes), checkpoint (during checkpoint C),
  flush (while version C is written to the file system).

Failures at chosen times (--fail-at T1:KIND[:TARGET],T2:...):
  Every rank runs with the injection variables and writes its pid file at cairn_init. When time Ti
  (seconds from the first launch) has come and the ranks it strikes are up, they get SIGKILL: node:I
  the ranks of the job's I-th node (its cache is deleted; the next spare, else a fresh node of the
  same name, replaces it), rank:R one rank (its node's cache stays), job every rank (every node's
  cache is deleted, so only L3 serves). One failure strikes an attempt; one due while the job is down
  strikes the next attempt as soon as its ranks are up. Each is recorded in the job history (a
  "failure" line). --retries defaults to the number of failures listed.

Hung jobs (--stall SECONDS):
  An attempt that neither rewrites the job state file (cairn_init, every checkpoint, every change of
  phase) nor appends to the job history for SECONDS is hung: every process under the MPI launcher
  gets SIGKILL, the launcher's group SIGTERM (SIGKILL 10 s later), and the attempt is relaunched like
  a failed one (--retries, at least 1 by default with --stall). The summary says "stalled: no
  checkpoint/progress for SECONDS s".

At the end (success, failure or halt) a summary gives the attempts, the failures and the time lost
(the whole wall time of the failed attempts); then (unless --no-scavenge) the newest version complete
in the surviving caches is flushed to L3, as `cairn flush` does, unless L3 holds it or a newer one; the
ranks of a version whose node's cache is gone are rebuilt from the survivors' L2 files first.

Migration (cairn migrate --node I, docs/migration.md):
  While the job runs, <prefix>/.cairn/launcher names this process, the nodes and the free spares. A
  request makes the job checkpoint and exit; the node's newest snapshots are piped through a bounded
  pool of buffers into the next spare's cache, verified chunk by chunk, and the job is relaunched
  with the spare in place of the node, every rank restarting from L1. Migrations do not count as
  failures or retries.

Exit status:
  the last attempt's (128+N when it was killed by signal N); 2 for bad options or configuration, a
  command or MPI launcher not found, or srun asked for outside an allocation; 3 when the injection
  point was never reached; 1 when the --between-attempts command failed.

See docs/launcher.md.)";

}  // namespace

Command add_run_command(CLI::App& root) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = root.add_subcommand("run", "Run an MPI job on simulated nodes, with optional failure injection.");
  set_usage(app, "cairn run -n NP [--nodes K] [--spares S] [--kill-node I[,J...] --at-checkpoint C[,C2...]\n"
                 "                 [--phase PHASE] [--kill-every-attempt]] [--retries R] [--config FILE]\n"
                 "                 [--between-attempts CMD] [--no-relaunch] [--no-spare[=MODE]] [--no-scavenge]\n"
                 "                 [--stall DURATION] [--fail-at LIST] [--json FILE] [--launcher auto|mpirun|srun]\n"
                 "                 [--ntasks-per-node T] [--min-hosts H] -- CMD [ARGS...]");
  app->add_option("-n,--np", o->nranks, "Number of MPI ranks")->required()->type_name("NP");
  CLI::Option* nodes = app->add_option("--nodes", o->nnodes, "Number of simulated nodes, 1..NP (one machine only)")
                           ->type_name("K")
                           ->capture_default_str();
  app->add_option("--ntasks-per-node", o->ntasks_per_node,
                  "In a multi-host allocation: ranks per host (default: the ranks in blocks over the hosts\n"
                  "not kept as spares)")
      ->type_name("T");
  app->add_option("--min-hosts", o->min_hosts,
                  "In a multi-host allocation: fewest hosts a relaunch may run on with --no-spare=shrink\n"
                  "(default: as many as the first launch)")
      ->type_name("H");
  auto* kill = app->add_option("--kill-node", o->kill_nodes, "Node(s) to kill, numbered from 0 (comma-separated)")
                   ->delimiter(',')
                   ->type_name("I[,J...]");
  auto* at = app->add_option("--at-checkpoint", o->at_checkpoints,
                             "Checkpoint (version) at which to kill them; C1,C2,...: attempt k is killed at Ck")
                 ->delimiter(',')
                 ->type_name("C[,C2...]");
  auto* phase = app->add_option("--phase", o->phase, "Phase of that checkpoint at which to kill them")
                    ->check(CLI::IsMember({"compute", "checkpoint", "flush"}))
                    ->type_name("PHASE")
                    ->capture_default_str();
  kill->needs(at);
  at->needs(kill);
  phase->needs(kill);
  app->add_option("--config", o->config_path, "Config file (TOML) for the job; exported as CAIRN_CONFIG")
      ->check(CLI::Validator(CLI::ExistingFile).description(""))
      ->type_name("FILE");
  app->add_option("--between-attempts", o->between_attempts,
                  "Shell command run after a node was killed, before the relaunch")
      ->type_name("CMD");
  app->add_flag("--no-relaunch", o->no_relaunch, "After killing the node(s), do not start the job again");
  app->add_option("--retries", o->retries,
                  "Relaunches after failed attempts (non-zero exit or killed); default: the number of\n"
                  "--at-checkpoint entries with --kill-node, else 0")
      ->type_name("R");
  app->add_flag("--kill-every-attempt", o->kill_every_attempt,
                "Kill the node(s) in every attempt, past the --at-checkpoint list at its last entry")
      ->needs(kill);
  app->add_option("--spares", o->spares, "Spare nodes node<K>..node<K+S-1>, held back to replace killed nodes")
      ->type_name("S")
      ->capture_default_str();
  app->add_flag("--scavenge,!--no-scavenge", o->scavenge,
                "At the end (the default), flush the newest version complete in the caches to L3 unless it is\n"
                "there; --no-scavenge leaves the caches as they are");
  app->add_option("--stall", o->stall,
                  "End an attempt that has taken no checkpoint and made no progress (no state file or history\n"
                  "update) for DURATION (seconds, or 90s, 10m, 1h), and relaunch it like a failed one (--retries;\n"
                  "default 1 with --stall)")
      ->transform(cli::duration_value())
      ->type_name("DURATION");
  app->add_option("--no-spare", o->no_spare,
                  "Once no spare is left: shrink (the default) relaunches on the surviving nodes' ranks only\n"
                  "(refused when the job has private state); oversubscribe keeps every rank and runs the lost\n"
                  "nodes' ranks on the surviving nodes (the newest version rebuilt for them from L2)")
      ->expected(0, 1)
      ->default_str("shrink")
      ->check(CLI::IsMember({"shrink", "oversubscribe"}))
      ->type_name("MODE");
  app->add_option("--json", o->json_path,
                  "Also write the summary as JSON to FILE ('-': stdout, after the job's output): every attempt,\n"
                  "its restart and newest versions, the scavenge, the exit status")
      ->type_name("FILE");
  app->add_option("--launcher", o->launcher,
                  "What starts the ranks: srun inside a Slurm allocation, else mpirun (auto, the default;\n"
                  "CAIRN_LAUNCHER sets another default), or mpirun or srun")
      ->check(CLI::IsMember({"auto", "mpirun", "srun"}))
      ->type_name("LAUNCHER");
  app->add_option("--fail-at", o->fail_at,
                  "Failures at times from the first launch: TIME:node:I (node I lost: its ranks killed, its cache\n"
                  "deleted), TIME:rank:R (rank R killed), TIME:job (every rank killed, every cache deleted),\n"
                  "comma-separated; cairn-bench --campaign draws them at a chosen MTBF")
      ->type_name("LIST")
      ->excludes(kill);
  app->add_option("stray", o->stray)->group("");  // a command given without "--": reported clearly
  app->footer(kFooter);

  return {app, [o, nodes](const Invocation& inv) {
    o->nodes_given = nodes->count() > 0;
    auto ctx = prepare(*o, inv);
    if (!ctx) {
      print_error("run", ctx.status().message());
      return kExitUsage;
    }
    return run_job(*ctx);
  }, /*takes_trailing_command=*/true};
}

}  // namespace cairn::tool
