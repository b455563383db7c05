// `cairn run`: starts an MPI job on simulated nodes, optionally kills a node at a chosen point of a
// chosen checkpoint (failure injection), deletes that node's cache, relaunches, and reports where each
// attempt restarted from. The user guide is docs/launcher.md.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "core/fsutil.hpp"
#include "core/layout.hpp"
#include "core/log.hpp"
#include "core/manifest.hpp"
#include "injection.hpp"
#include "inventory.hpp"
#include "pfs/l3_store.hpp"
#include "job_state.hpp"
#include "launch_plan.hpp"
#include "process.hpp"

namespace cairn::tool {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(5);
constexpr auto kAbortGrace = std::chrono::seconds(60);    // for mpirun to end the job after the kill
constexpr auto kTermGrace = std::chrono::seconds(10);     // between SIGTERM and SIGKILL of mpirun's group
constexpr double kPidFileGrace = 2.0;                     // seconds to wait for missing pid.<rank> files

struct RunOptions {
  int nranks = 0;
  int nnodes = 1;
  std::vector<int> kill_nodes;
  std::vector<uint64_t> at_checkpoints;  // attempt k is killed at the k-th entry
  bool kill_every_attempt = false;       // attempts past the list are killed at its last entry
  int retries = -1;                      // relaunches after failed attempts; -1: the default
  int spares = 0;                        // spare nodes node<K>..node<K+S-1>
  bool scavenge = false;                 // flush the newest version complete in cache at the end
  uint64_t at_checkpoint = 0;            // the current attempt's (set per attempt)
  std::string phase = "checkpoint";
  std::string config_path;
  std::string between_attempts;
  bool no_relaunch = false;
  bool no_spare = false;  // relaunch on the surviving nodes only
  std::vector<std::string> stray;  // words before "--" that are no option: a forgotten "--"
};

struct Attempt {
  int number = 0;
  int wait_status = 0;
  bool injected = false;              // ran with the injection variables
  bool reached = false;               // the injection point was reached and the node(s) killed
  bool interrupted = false;           // the launcher was asked to stop (SIGINT/SIGTERM/SIGHUP)
  uint64_t at_checkpoint = 0;         // where this attempt was to be killed (0: not injected)
  std::string killed_text;            // "node1 (ranks 2,3)" when killed
  double wall_seconds = 0;            // how long the attempt ran
  std::optional<JobState> state;      // the job state file, when this attempt wrote it
};

// Everything one invocation of `cairn run` works from, resolved and checked.
struct RunContext {
  RunOptions options;
  LaunchSpec spec;
  Layout layout;
  std::string inject_text;  // "checkpoint:5"
  int next_spare = 0;       // the number of the next unused spare node
  int last_spare = -1;      // the number of the last spare node
};

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

std::string killed_nodes_text(const RunContext& ctx) {
  std::string out;
  const auto& nodes = ctx.options.kill_nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) out += i + 1 == nodes.size() ? " and " : ", ";
    out += ctx.spec.node_names[static_cast<size_t>(nodes[i])] + " (ranks " + join_ints(ranks_of_node(ctx.spec.ranks_per_node, nodes[i])) + ")";
  }
  return out;
}

std::string injection_point_text(const RunContext& ctx) {
  return "checkpoint " + std::to_string(ctx.options.at_checkpoint) + ", phase " + ctx.options.phase;
}

// ---- checking the options -------------------------------------------------------------------------

Status check_options(const RunOptions& o, const Invocation& inv) {
  if (o.nranks < 1) return make_error(Code::ERR_INVALID_ARG, "-n %d: the job needs at least one rank", o.nranks);
  if (!o.stray.empty() || !inv.has_separator)
    return make_error(Code::ERR_INVALID_ARG, "missing '--' before the command%s (cairn run -n NP --nodes K -- CMD ARGS...)",
                      o.stray.empty() ? "" : (" '" + o.stray.front() + "'").c_str());
  if (inv.trailing.empty()) return make_error(Code::ERR_INVALID_ARG, "no command after '--'");
  if (o.nnodes < 1 || o.nnodes > o.nranks)
    return make_error(Code::ERR_INVALID_ARG, "--nodes %d: must be 1..%d (at most one simulated node per rank)",
                      o.nnodes, o.nranks);
  std::set<int> seen;
  for (int node : o.kill_nodes) {
    if (node < 0 || node >= o.nnodes)
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
  return Status::ok();
}

// Resolves the launcher, the command, the configuration and the layout; any failure is a usage error.
Result<RunContext> prepare(const RunOptions& o, const Invocation& inv) {
  CAIRN_TRY(check_options(o, inv));
  RunContext ctx;
  ctx.options = o;
  std::sort(ctx.options.kill_nodes.begin(), ctx.options.kill_nodes.end());

  if (find_executable(inv.trailing.front()).empty())
    return make_error(Code::ERR_INVALID_ARG, "command not found: %s", inv.trailing.front().c_str());
  const char* mpirun_env = getenv("CAIRN_MPIRUN");
  std::string mpirun_name = mpirun_env && *mpirun_env ? mpirun_env : "mpirun";
  ctx.spec.mpirun = find_executable(mpirun_name);
  if (ctx.spec.mpirun.empty())
    return make_error(Code::ERR_INVALID_ARG, "MPI launcher not found: %s (%s)", mpirun_name.c_str(),
                      mpirun_env && *mpirun_env ? "from CAIRN_MPIRUN" : "not in PATH; set CAIRN_MPIRUN to it");
  const char* mpirun_args = getenv("CAIRN_MPIRUN_ARGS");
  ctx.spec.mpirun_args = split_whitespace(mpirun_args ? mpirun_args : "");

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

  ctx.spec.ranks_per_node = ranks_per_node(o.nranks, o.nnodes);
  for (int i = 0; i < o.nnodes; ++i) ctx.spec.node_names.push_back(node_name(i));
  ctx.next_spare = o.nnodes;
  ctx.last_spare = o.nnodes + o.spares - 1;
  if (ctx.options.retries < 0)
    ctx.options.retries = o.no_relaunch || o.kill_nodes.empty() ? 0 : static_cast<int>(o.at_checkpoints.size());
  ctx.spec.command = inv.trailing;
  ctx.spec.inject_nodes = ctx.options.kill_nodes;
  return ctx;
}

// ---- one attempt ----------------------------------------------------------------------------------

// Identifies one version of the state file: the library replaces it by rename, so a rewrite changes
// the inode or the modification time.
struct FileStamp {
  bool exists = false;
  ino_t inode = 0;
  timespec mtime{};
  bool operator==(const FileStamp& o) const {
    return exists == o.exists && inode == o.inode && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

FileStamp stamp_of(const std::string& path) {
  FileStamp f;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return f;
  f.exists = true;
  f.inode = st.st_ino;
  f.mtime = st.st_mtim;
  return f;
}

// The state file, if the job rewrote it since `before` (else it belongs to an earlier run).
std::optional<JobState> read_state_written_since(const std::string& path, const FileStamp& before) {
  FileStamp now = stamp_of(path);
  if (!now.exists || now == before) return std::nullopt;
  auto state = read_job_state(path);
  if (!state) {
    fprintf(stderr, "cairn run: warning: %s\n", state.status().message().c_str());
    return std::nullopt;
  }
  return *state;
}

void kill_injected_ranks(const RunContext& ctx, const InjectionRendezvous& rendezvous, double grace) {
  std::vector<int> expected;
  for (int node : ctx.options.kill_nodes) {
    auto ranks = ranks_of_node(ctx.spec.ranks_per_node, node);
    expected.insert(expected.end(), ranks.begin(), ranks.end());
  }
  auto report = rendezvous.kill_ranks(expected, grace);
  fprintf(stderr, "cairn run: killed %s at %s\n", killed_nodes_text(ctx).c_str(), injection_point_text(ctx).c_str());
  if (!report.missing.empty())
    fprintf(stderr, "cairn run: warning: ranks %s wrote no usable pid file in %s; they were not killed\n",
            join_ints(report.missing).c_str(), rendezvous.dir().c_str());
}

Attempt run_attempt(const RunContext& ctx, int number, bool inject) {
  Attempt attempt;
  attempt.number = number;
  attempt.injected = inject;
  InjectionRendezvous rendezvous(ctx.layout.inject_dir());
  if (inject) {
    Status st = rendezvous.reset();
    if (!st) fprintf(stderr, "cairn run: warning: failure-injection directory: %s\n", st.message().c_str());
  }
  std::vector<std::string> argv = mpirun_argv(ctx.spec, inject);
  if (log::level() >= log::Level::info)
    fprintf(stderr, "cairn run: attempt %d: %s\n", number, join_quoted(argv).c_str());

  const FileStamp state_before = stamp_of(ctx.layout.state_file());
  auto child = spawn(argv, {}, /*own_group=*/true);
  if (!child) {
    fprintf(stderr, "cairn run: %s\n", child.status().message().c_str());
    attempt.wait_status = 127 << 8;
    return attempt;
  }

  using clock = std::chrono::steady_clock;
  std::optional<clock::time_point> killed_at, term_sent_at;
  bool group_killed = false;
  int stop_requests = 0;
  while (!try_reap(*child, &attempt.wait_status)) {
    while (int sig = take_relayed_signal()) {
      ::kill(child->pid, sig);  // mpirun relays it to the ranks, or ends the job
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        attempt.interrupted = true;
        if (++stop_requests >= 2) ::kill(-child->pid, SIGKILL);
      }
    }
    if (inject && !attempt.reached && rendezvous.reached()) {
      attempt.reached = true;
      kill_injected_ranks(ctx, rendezvous, kPidFileGrace);
      killed_at = clock::now();
    }
    if (killed_at && !term_sent_at && clock::now() - *killed_at > kAbortGrace) {
      fprintf(stderr, "cairn run: the MPI launcher did not end the job within %lld s of the kill; terminating it\n",
              static_cast<long long>(kAbortGrace.count()));
      ::kill(-child->pid, SIGTERM);
      term_sent_at = clock::now();
    }
    if (term_sent_at && !group_killed && clock::now() - *term_sent_at > kTermGrace) {
      ::kill(-child->pid, SIGKILL);
      group_killed = true;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  release_terminal(*child);
  // The point may have been reached just as the job ended.
  if (inject && !attempt.reached && rendezvous.reached()) {
    attempt.reached = true;
    kill_injected_ranks(ctx, rendezvous, 0);
  }
  if (inject) rendezvous.remove();
  attempt.state = read_state_written_since(ctx.layout.state_file(), state_before);
  return attempt;
}

// ---- between attempts -----------------------------------------------------------------------------

void delete_killed_caches(const RunContext& ctx) {
  for (int node : ctx.options.kill_nodes) {
    const std::string& name = ctx.spec.node_names[static_cast<size_t>(node)];
    std::string dir = ctx.layout.node_cache(name);
    Status st = fs::remove_tree(dir);
    if (!st) fprintf(stderr, "cairn run: warning: deleting the cache of %s: %s\n", name.c_str(), st.message().c_str());
    else if (log::level() >= log::Level::info)
      fprintf(stderr, "cairn run: deleted the cache of %s (%s)\n", name.c_str(), dir.c_str());
  }
}

// Runs the --between-attempts command; true when it succeeded.
bool run_between_attempts(const RunContext& ctx, int finished_attempt) {
  std::string killed;
  for (int node : ctx.options.kill_nodes)
    killed += (killed.empty() ? "" : ",") + ctx.spec.node_names[static_cast<size_t>(node)];
  EnvAssignments env = {{"CAIRN_PREFIX", ctx.layout.prefix},
                        {"CAIRN_CACHE_JOB", ctx.layout.cache_job},
                        {"CAIRN_ATTEMPT", std::to_string(finished_attempt)},
                        {"CAIRN_KILLED_NODES", killed}};
  auto child = spawn({"/bin/sh", "-c", ctx.options.between_attempts}, env, /*own_group=*/false);
  if (!child) {
    fprintf(stderr, "cairn run: --between-attempts: %s\n", child.status().message().c_str());
    return false;
  }
  int status = wait_for(*child);
  if (exit_code_of(status) != 0) {
    fprintf(stderr, "cairn run: the --between-attempts command failed (%s); not relaunching\n",
            describe_wait_status(status).c_str());
    return false;
  }
  return true;
}

// Without a spare the job goes on with fewer ranks, which only works when every region of its newest
// version has a global layout (not private). Looks at rank 0's manifest of the newest version, in the
// surviving caches or in the prefix; an empty string means the job may shrink.
std::string why_job_cannot_shrink(const RunContext& ctx) {
  uint64_t newest = 0;
  std::string manifest_bytes;
  auto consider = [&](uint64_t v, std::string bytes) {
    if (v > newest) newest = v, manifest_bytes = std::move(bytes);
  };
  auto nodes = fs::list_dir(ctx.layout.cache_job);
  for (const auto& node : nodes ? *nodes : std::vector<std::string>{}) {
    std::string r0 = ctx.layout.cache_job + "/" + node + "/r0";
    auto files = fs::list_dir(r0);
    for (const auto& f : files ? *files : std::vector<std::string>{}) {
      if (f.size() < 4 || f[0] != 'v' || f.compare(f.size() - 3, 3, ".l1") != 0) continue;
      auto bytes = fs::read_file(r0 + "/" + f);
      if (bytes && bytes->size() > 4) consider(std::strtoull(f.c_str() + 1, nullptr, 10), bytes->substr(4));
    }
  }
  auto committed = l3::list_committed(ctx.layout);
  if (!committed.empty() && committed.front().version > newest) {
    auto bytes = fs::read_file(l3::manifest_path(ctx.layout, committed.front().version, 0));
    if (bytes) consider(committed.front().version, *bytes);
  }
  if (!newest) return "";
  auto m = decode_manifest(manifest_bytes.data(), manifest_bytes.size());
  if (!m) return "";  // unreadable here: let the library decide, it reports clearly
  for (const auto& e : m->regions) {
    if (e.kind == RegionKind::file) return "file '" + e.name + "' of version " + std::to_string(newest) + " is per-rank";
    if (e.distribution == 0)
      return "region '" + e.name + "' of version " + std::to_string(newest) + " is private (per-rank data)";
  }
  return "";
}

// ---- the end of the run: scavenge and summary -----------------------------------------------------

// SCR's scavenge: writes the newest version complete in the caches that survive to L3 unless L3
// already holds it (or a newer one), with the code of `cairn flush` (flush_to_l3). A damaged newest
// version makes it try the one before.
void scavenge(const RunContext& ctx) {
  Inventory inv = scan_inventory(ctx.layout);
  uint64_t committed = 0;
  for (const auto& [ver, v] : inv.versions)
    if (v.l3.committed) {
      committed = ver;
      break;
    }
  for (const auto& [ver, v] : inv.versions) {
    if (!v.l1_complete()) continue;
    if (ver <= committed) {
      fprintf(stderr, "cairn run: scavenge: version %llu, the newest complete in cache, is %s; nothing to flush\n",
              static_cast<unsigned long long>(ver),
              ver == committed ? "already committed in L3" : "older than L3's newest");
      return;
    }
    int64_t t0 = now_unix_ns();
    Status st = flush_to_l3(ctx.layout, v, nullptr);
    if (!st.is_ok()) {
      fprintf(stderr, "cairn run: scavenge: version %llu not flushed: %s\n", static_cast<unsigned long long>(ver),
              st.message().c_str());
      continue;
    }
    double secs = static_cast<double>(now_unix_ns() - t0) / 1e9;
    fprintf(stderr, "cairn run: scavenge: flushed version %llu to L3: committed in %s (%s in %s)\n",
            static_cast<unsigned long long>(ver), ctx.layout.l3_version_dir(ver).c_str(),
            format_bytes(v.total_bytes()).c_str(), format_duration(secs).c_str());
    return;
  }
  fprintf(stderr, "cairn run: scavenge: no version newer than L3's newest (%llu) is complete in the surviving caches\n",
          static_cast<unsigned long long>(committed));
}

std::string describe_attempt(const Attempt& a) {
  std::string out = "attempt " + std::to_string(a.number) + ": ";
  if (!a.state) {
    out += describe_wait_status(a.wait_status) + "; the job wrote no state file";
  } else {
    const JobState& s = *a.state;
    if (s.restart_level.empty() || s.restart_level == "none" || s.restart_version == 0)
      out += "started without a restart";
    else
      out += "restarted from version " + std::to_string(s.restart_version) + " at " + s.restart_level;
    out += "; " + describe_wait_status(a.wait_status);
    out += "; newest version " + std::to_string(s.version) + " (L1 " + std::to_string(s.l1) + ", L2 " +
           std::to_string(s.l2) + ", L3 " + std::to_string(s.l3) + ")";
  }
  if (a.reached) out += "; killed " + a.killed_text + " at checkpoint " + std::to_string(a.at_checkpoint);
  return out;
}

bool attempt_failed(const Attempt& a) { return a.reached || exit_code_of(a.wait_status) != 0; }

void print_summary(const std::vector<Attempt>& attempts) {
  int failures = 0;
  double lost = 0;
  for (const auto& a : attempts)
    if (attempt_failed(a)) ++failures, lost += a.wall_seconds;
  fprintf(stderr, "cairn run: summary: %zu %s, %d failed; time lost %.1f s (whole wall time of the failed attempts)\n",
          attempts.size(), attempts.size() == 1 ? "attempt" : "attempts", failures, lost);
  for (const auto& a : attempts) fprintf(stderr, "cairn run: %s\n", describe_attempt(a).c_str());
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (it->state) {
      fprintf(stderr, "cairn run: newest version per level (state file of attempt %d): L1 %llu, L2 %llu, L3 %llu\n",
              it->number, static_cast<unsigned long long>(it->state->l1),
              static_cast<unsigned long long>(it->state->l2), static_cast<unsigned long long>(it->state->l3));
      break;
    }
}

// Where attempt k is killed: the k-th --at-checkpoint; past the list, its last entry with
// --kill-every-attempt; else 0 (not injected).
uint64_t kill_point(const RunOptions& o, int k) {
  if (o.kill_nodes.empty() || o.at_checkpoints.empty()) return 0;
  if (static_cast<size_t>(k) <= o.at_checkpoints.size()) return o.at_checkpoints[static_cast<size_t>(k - 1)];
  return o.kill_every_attempt ? o.at_checkpoints.back() : 0;
}

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
    } else if (ctx.options.no_spare) {
      shrink.push_back(node);
    }
  }
  if (shrink.empty()) return "";
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

int run_job(const RunContext& start) {
  install_signal_relay();
  RunContext ctx = start;
  const RunOptions& o = ctx.options;
  std::vector<Attempt> attempts;
  int status = 0;
  auto finish = [&](int code) {
    print_summary(attempts);
    if (o.scavenge) scavenge(ctx);
    return code;
  };
  for (int k = 1;; ++k) {
    const uint64_t at = kill_point(o, k);
    const bool inject = at > 0;
    if (inject) {
      for (int node : o.kill_nodes)
        if (ctx.spec.ranks_per_node[static_cast<size_t>(node)] == 0) {
          fprintf(stderr, "cairn run: node %d has no ranks left (lost without a spare); cannot kill it again\n", node);
          return finish(kExitFailure);
        }
      ctx.options.at_checkpoint = at;
      ctx.inject_text = o.phase + ":" + std::to_string(at);
      ctx.spec.inject_env = {{"CAIRN_INJECT", ctx.inject_text}, {"CAIRN_INJECT_DIR", ctx.layout.inject_dir()}};
    }
    auto t0 = std::chrono::steady_clock::now();
    attempts.push_back(run_attempt(ctx, k, inject));
    Attempt& a = attempts.back();
    a.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    a.at_checkpoint = inject ? at : 0;
    if (a.reached) a.killed_text = killed_nodes_text(ctx);
    status = exit_code_of(a.wait_status);

    if (inject && !a.reached) {
      print_summary(attempts);
      fprintf(stderr, "cairn run: checkpoint %llu phase %s was never reached in attempt %d (the job ended with %s); "
                      "no node was killed\n",
              static_cast<unsigned long long>(at), o.phase.c_str(), k, describe_wait_status(a.wait_status).c_str());
      if (o.scavenge) scavenge(ctx);
      return kExitNotReached;
    }
    if (!attempt_failed(a) || a.interrupted) break;
    const bool killed = a.reached;
    if (killed) delete_killed_caches(ctx);
    if (k - 1 >= o.retries) {
      if (o.retries > 0) fprintf(stderr, "cairn run: attempt %d failed and no retry is left (--retries %d)\n", k, o.retries);
      break;
    }
    if (killed && !o.between_attempts.empty() && !run_between_attempts(ctx, k)) return finish(kExitFailure);
    if (killed) {
      std::string why = replace_killed_nodes(ctx);
      if (!why.empty()) {
        print_summary(attempts);
        fprintf(stderr, "cairn run: %s\n", why.c_str());
        if (o.scavenge) scavenge(ctx);
        return kExitFailure;
      }
    }
    fprintf(stderr, "cairn run: relaunching the job (attempt %d)\n", k + 1);
  }
  return finish(status);
}

const char* const kFooter = R"(Simulated nodes:
  Ranks are spread evenly over nodes node0..node<K-1> in contiguous blocks (rank r on node
  floor(r*K/NP)); each rank gets CAIRN_NODE=<node>, its failure group and cache directory.
  The job is started as
    $CAIRN_MPIRUN $CAIRN_MPIRUN_ARGS -np c0 env CAIRN_NODE=node0 CMD ARGS : -np c1 env CAIRN_NODE=node1 ...
  CAIRN_MPIRUN defaults to mpirun (from PATH); CAIRN_MPIRUN_ARGS is split on whitespace (e.g.
  --oversubscribe for more ranks than cores). CAIRN_LOG=info prints the command line.

Failure injection (--kill-node, --at-checkpoint, --phase):
  The ranks of the chosen nodes run with CAIRN_INJECT=<phase>:<C> and CAIRN_INJECT_DIR=<prefix>/.cairn/inject.
  When one of them reaches the phase of checkpoint C, every rank of those nodes is sent SIGKILL; the
  MPI launcher then ends the job. The nodes' cache directories are deleted, the --between-attempts
  command runs (sh -c, with CAIRN_PREFIX, CAIRN_CACHE_JOB, CAIRN_ATTEMPT=<attempt that ended> and
  CAIRN_KILLED_NODES set), and the job is started again, to restart: on as many nodes as before (the
  next unused spare node, else a fresh node of the same name, replaces each killed one), or, with
  --no-spare once no spare is left, on the surviving nodes only, with fewer ranks, when every region
  of the newest version is distributed (not private). With C1,C2,... attempt k is killed at Ck (the
  node number I names the k-th node of the job, wherever a spare moved it); --kill-every-attempt
  kills every later attempt at the last entry. --retries R bounds the relaunches after failed
  attempts (non-zero exit or killed); the default is the number of entries with --kill-node, else 0.
  Phases: compute (after checkpoint C, while the job computes), checkpoint (during checkpoint C),
  flush (while version C is written to the file system).

At the end (success, failure or halt) a summary gives the attempts, the failures and the time lost
(the whole wall time of the failed attempts); --scavenge then flushes the newest version complete in
the surviving caches to L3, as `cairn flush` does, unless L3 holds it or a newer one.

Exit status:
  the last attempt's (128+N when it was killed by signal N); 2 for bad options or configuration, a
  command or MPI launcher not found; 3 when the injection point was never reached; 1 when the
  --between-attempts command failed.

See docs/launcher.md.)";

}  // namespace

Command add_run_command(CLI::App& root) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = root.add_subcommand("run", "Run an MPI job on simulated nodes, with optional failure injection.");
  set_usage(app, "cairn run -n NP [--nodes K] [--spares S] [--kill-node I[,J...] --at-checkpoint C[,C2...]\n"
                 "                 [--phase PHASE] [--kill-every-attempt]] [--retries R] [--config FILE]\n"
                 "                 [--between-attempts CMD] [--no-relaunch] [--no-spare] [--scavenge] -- CMD [ARGS...]");
  app->add_option("-n,--np", o->nranks, "Number of MPI ranks")->required()->type_name("NP");
  app->add_option("--nodes", o->nnodes, "Number of simulated nodes, 1..NP")
      ->type_name("K")
      ->capture_default_str();
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
  app->add_flag("--scavenge", o->scavenge,
                "At the end, flush the newest version complete in the caches to L3 unless it is there");
  app->add_flag("--no-spare", o->no_spare,
                "Once no spare is left, relaunch on the surviving nodes only (fewer ranks); refused when the job has private state");
  app->add_option("stray", o->stray)->group("");  // a command given without "--": reported clearly
  app->footer(kFooter);

  Command cmd;
  cmd.app = app;
  cmd.takes_trailing_command = true;
  cmd.run = [o](const Invocation& inv) {
    auto ctx = prepare(*o, inv);
    if (!ctx) {
      print_error("run", ctx.status().message());
      return kExitUsage;
    }
    return run_job(*ctx);
  };
  return cmd;
}

}  // namespace cairn::tool
