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
#include "base/fsutil.hpp"
#include "base/layout.hpp"
#include "base/log.hpp"
#include "base/manifest.hpp"
#include "injection.hpp"
#include "inventory.hpp"
#include "pfs/l3_store.hpp"
#include "job_state.hpp"
#include "launch_plan.hpp"
#include "launcher.hpp"
#include "migration.hpp"
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
  bool scavenge = true;                  // flush the newest version complete in cache at the end
  uint64_t at_checkpoint = 0;            // the current attempt's (set per attempt)
  std::string phase = "checkpoint";
  std::string config_path;
  std::string between_attempts;
  bool no_relaunch = false;
  bool no_spare = false;  // relaunch on the surviving nodes only
  std::string launcher;   // --launcher: auto, mpirun or srun; empty: CAIRN_LAUNCHER, else auto
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
  double restarted_after = -1;        // seconds from the launch until the job had restarted; -1: no restart seen
  std::string migrated_text;          // "node1 to node4 (...)" when the job exited for a migration
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
  // mpirun, or srun inside a Slurm allocation (--launcher, CAIRN_LAUNCHER; launcher.hpp).
  auto launcher_reason = resolve_launcher(o.launcher, &ctx.spec);
  if (!launcher_reason) return launcher_reason.status();

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
  ctx.spec.multi_prog_file = ctx.layout.control + "/srun-multi-prog.conf";  // written per attempt, for srun
  if (log::level() >= log::Level::info)
    fprintf(stderr, "cairn run: launcher: %s (%s)\n", launcher_name(ctx.spec.launcher), launcher_reason->c_str());

  ctx.spec.ranks_per_node = ranks_per_node(o.nranks, o.nnodes);
  for (int i = 0; i < o.nnodes; ++i) ctx.spec.node_names.push_back(node_name(i));
  ctx.next_spare = o.nnodes;
  ctx.last_spare = o.nnodes + o.spares - 1;
  if (ctx.options.retries < 0)
    ctx.options.retries = o.no_relaunch || o.kill_nodes.empty() ? 0 : static_cast<int>(o.at_checkpoints.size());
  ctx.spec.command = inv.trailing;
  ctx.spec.inject_nodes = ctx.options.kill_nodes;
  if (ctx.spec.launcher == LauncherKind::srun) CAIRN_TRY(multi_prog_text(ctx.spec, false).status());
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

// ---- process migration (docs/migration.md) ------------------------------------------------------------

// The launcher's side of `cairn migrate`: answers requests in <prefix>/.cairn/migrate, moves the node's
// snapshots once the job has checkpointed and exited for it, and reports until the relaunched job has
// restarted. One request at a time.
bool attempt_failed(const Attempt& a);

class MigrationDesk {
 public:
  explicit MigrationDesk(const Layout& layout) : layout_(layout) {}

  // While the job runs: acknowledges a new request (a stat() per call).
  void poll() {
    if (pending_ || !fs::exists(layout_.migrate_file())) return;
    auto text = fs::read_file(layout_.migrate_file());
    if (!text) return;  // being replaced; next time
    auto req = parse_migrate_request(*text);
    if (!req) {
      fprintf(stderr, "cairn run: ignoring %s: %s\n", layout_.migrate_file().c_str(), req.status().message().c_str());
      (void)fs::remove_file(layout_.migrate_file());
      return;
    }
    pending_ = *req;
    result_ = MigrateResult{};
    result_.id = req->id;
    result_.node = req->node;
    result_.status = "waiting";
    result_.message = "the job checkpoints at its next cairn_need_checkpoint and exits";
    publish();
    fprintf(stderr, "cairn run: migration of %s requested; waiting for the job to checkpoint and exit\n",
            req->node.c_str());
  }

  // After an attempt: true when the job exited for the pending migration and the node was moved, so
  // the job is to be relaunched with the spare in its place. Answers the request otherwise.
  bool after_attempt(RunContext& ctx, Attempt& a) {
    poll();  // a request placed just before the job ended
    if (!pending_) return false;
    const MigrateRequest req = *pending_;
    result_.wind_down_seconds = seconds_since(req.requested_unix_ns);
    const bool for_us = a.state && a.state->values.count("exit_request") && a.state->values.at("exit_request") == "migrate";
    if (attempt_failed(a) || !for_us) {
      fail(attempt_failed(a) ? "the job failed (" + describe_wait_status(a.wait_status) + ") before it could migrate"
                             : "the job ended without acting on the request (it finished, or exited for another reason)");
      return false;
    }
    size_t idx = ctx.spec.node_names.size();
    for (size_t i = 0; i < ctx.spec.node_names.size(); ++i)
      if (ctx.spec.node_names[i] == req.node && ctx.spec.ranks_per_node[i] > 0) idx = i;
    // The job exited only to migrate: whatever stops the migration now, it is relaunched as it was.
    if (idx == ctx.spec.node_names.size()) {
      fail(req.node + " is not a node of the job any more; the job goes on on its nodes");
      return true;
    }
    if (ctx.next_spare > ctx.last_spare) {
      fail("no spare node is left; the job goes on on its nodes");
      return true;
    }
    const std::string spare = node_name(ctx.next_spare);
    result_.spare = spare;
    result_.status = "transferring";
    result_.message = req.node + " to " + spare;
    publish();

    TransferOptions topt;
    topt.buffers = req.buffers;
    topt.buffer_size = req.buffer_size;
    uint64_t expected = 0;
    Progress* bar = nullptr;
    std::unique_ptr<Progress> progress;
    topt.progress = [&](uint64_t done, uint64_t total) {
      if (!bar) {
        progress = std::make_unique<Progress>("migrating " + req.node + " to " + spare, total);
        bar = progress.get();
      }
      bar->add(done - expected);
      expected = done;
    };
    auto moved = transfer_node_cache(ctx.layout, req.node, spare, topt);
    if (progress) progress->finish();
    if (!moved) {
      fail("moving the snapshots of " + req.node + " to " + spare + " failed: " + moved.status().message() +
           "; the job goes on on its nodes");
      a.migrated_text = "migration of " + req.node + " failed";
      return true;  // relaunch as it was: the job only exited to migrate
    }
    const TransferStats& t = *moved;
    ctx.next_spare++;
    ctx.spec.node_names[idx] = spare;
    result_.version = t.version;
    result_.bytes = t.bytes;
    result_.transfer_seconds = t.seconds;
    char text[512];
    snprintf(text, sizeof text,
             "version %llu of %d ranks, %s (%s verified chunk by chunk) in %s, %.2f GB/s; pool %d x %s, at most %d "
             "filled at once",
             static_cast<unsigned long long>(t.version), t.ranks, format_bytes(t.bytes).c_str(),
             format_bytes(t.verified).c_str(), format_duration(t.seconds).c_str(),
             t.seconds > 0 ? static_cast<double>(t.bytes) / t.seconds / 1e9 : 0.0, t.buffers,
             format_bytes(t.buffer_size).c_str(), t.peak_in_use);
    fprintf(stderr, "cairn run: migrated %s to %s: %s\n", req.node.c_str(), spare.c_str(), text);
    a.migrated_text = req.node + " to " + spare + " (" + format_bytes(t.bytes) + " in " + format_duration(t.seconds) + ")";
    // The node leaves the job: its cache goes (the spare holds the version, verified, and L2 still protects it).
    Status st = fs::remove_tree(ctx.layout.node_cache(req.node));
    if (!st) fprintf(stderr, "cairn run: warning: removing the cache of %s: %s\n", req.node.c_str(), st.message().c_str());
    (void)fs::remove_file(layout_.migrate_file());
    result_.status = "relaunching";
    result_.message = "the job restarts with " + spare + " in place of " + req.node;
    publish();
    relaunched_ = true;
    return true;
  }

  // The relaunched job has restarted: the migration is complete.
  void restarted(const JobState& s, double since_launch) {
    if (!pending_ || !relaunched_) return;
    result_.restart_seconds = since_launch;
    result_.restart_level = s.restart_level;
    result_.total_seconds = seconds_since(pending_->requested_unix_ns);
    result_.status = "done";
    result_.message = "restarted from version " + std::to_string(s.restart_version) + " at " + s.restart_level;
    publish();
    fprintf(stderr, "cairn run: migration done: checkpoint and exit %.2f s, transfer %.2f s, relaunch and restart "
                    "from %s %.2f s; %.2f s in all\n",
            result_.wind_down_seconds, result_.transfer_seconds, s.restart_level.c_str(), since_launch,
            result_.total_seconds);
    pending_.reset();
    relaunched_ = false;
  }

  // The run ends with a request outstanding.
  void abandon() {
    poll();
    if (pending_) fail(relaunched_ ? "the relaunched job ended before it restarted" : "cairn run ended before the job migrated");
  }

 private:
  static double seconds_since(int64_t unix_ns) {
    return unix_ns > 0 ? static_cast<double>(now_unix_ns() - unix_ns) / 1e9 : 0.0;
  }
  void publish() {
    Status st = fs::write_file_atomic(layout_.migrate_result_file(), format_migrate_result(result_), false);
    if (!st) fprintf(stderr, "cairn run: warning: %s\n", st.message().c_str());
  }
  void fail(const std::string& why) {
    fprintf(stderr, "cairn run: migration of %s abandoned: %s\n", result_.node.c_str(), why.c_str());
    result_.status = "failed";
    result_.message = why;
    publish();
    (void)fs::remove_file(layout_.migrate_file());
    pending_.reset();
    relaunched_ = false;
  }

  const Layout& layout_;
  std::optional<MigrateRequest> pending_;
  MigrateResult result_;
  bool relaunched_ = false;  // the node moved; the result is final once the job has restarted
};

// The launcher file: tells `cairn migrate` that this process manages the job, and its nodes and spares.
void write_launcher_file(const RunContext& ctx) {
  LauncherInfo info;
  info.pid = getpid();
  for (size_t i = 0; i < ctx.spec.node_names.size(); ++i)
    if (ctx.spec.ranks_per_node[i] > 0) info.nodes.push_back(ctx.spec.node_names[i]);
  for (int s = ctx.next_spare; s <= ctx.last_spare; ++s) info.spares.push_back(node_name(s));
  Status st = fs::make_dirs(ctx.layout.control);
  if (st) st = fs::write_file_atomic(ctx.layout.launcher_file(), format_launcher_info(info), false);
  if (!st) fprintf(stderr, "cairn run: warning: %s (cairn migrate will not find this job)\n", st.message().c_str());
}

Attempt run_attempt(const RunContext& ctx, int number, bool inject, MigrationDesk& desk) {
  Attempt attempt;
  attempt.number = number;
  attempt.injected = inject;
  InjectionRendezvous rendezvous(ctx.layout.inject_dir());
  if (inject) {
    Status st = rendezvous.reset();
    if (!st) fprintf(stderr, "cairn run: warning: failure-injection directory: %s\n", st.message().c_str());
  }
  auto launch = launch_argv(ctx.spec, inject);  // srun: also writes the --multi-prog file
  if (!launch) {
    fprintf(stderr, "cairn run: %s\n", launch.status().message().c_str());
    attempt.wait_status = 127 << 8;
    return attempt;
  }
  std::vector<std::string> argv = std::move(launch).value();
  if (log::level() >= log::Level::info) {
    fprintf(stderr, "cairn run: attempt %d (%s): %s\n", number, launcher_name(ctx.spec.launcher), join_quoted(argv).c_str());
    if (auto text = multi_prog_text(ctx.spec, inject); text && ctx.spec.launcher == LauncherKind::srun)
      fprintf(stderr, "cairn run: %s:\n%s", ctx.spec.multi_prog_file.c_str(), text->c_str());
  }

  const FileStamp state_before = stamp_of(ctx.layout.state_file());
  FileStamp state_seen = state_before;
  const auto launched = std::chrono::steady_clock::now();
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
    // Watch the state file for the restart (how long it took) and answer migration requests.
    if (attempt.restarted_after < 0) {
      FileStamp now = stamp_of(ctx.layout.state_file());
      if (!(now == state_seen)) {
        state_seen = now;
        auto s = read_state_written_since(ctx.layout.state_file(), state_before);
        if (s && s->restart_version > 0) {
          attempt.restarted_after = std::chrono::duration<double>(clock::now() - launched).count();
          desk.restarted(*s, attempt.restarted_after);
        }
      }
    }
    desk.poll();
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
    if (a.restarted_after >= 0) out += " (" + format_duration(a.restarted_after) + " after the launch)";
    out += "; " + describe_wait_status(a.wait_status);
    out += "; newest version " + std::to_string(s.version) + " (L1 " + std::to_string(s.l1) + ", L2 " +
           std::to_string(s.l2) + ", L3 " + std::to_string(s.l3) + ")";
  }
  if (a.reached) out += "; killed " + a.killed_text + " at checkpoint " + std::to_string(a.at_checkpoint);
  if (!a.migrated_text.empty()) out += "; exited to migrate: " + a.migrated_text;
  return out;
}

bool attempt_failed(const Attempt& a) { return a.reached || exit_code_of(a.wait_status) != 0; }

void print_summary(const RunContext& ctx, const std::vector<Attempt>& attempts) {
  int failures = 0;
  double lost = 0;
  for (const auto& a : attempts)
    if (attempt_failed(a)) ++failures, lost += a.wall_seconds;
  fprintf(stderr,
          "cairn run: summary (%s): %zu %s, %d failed; time lost %.1f s (whole wall time of the failed attempts)\n",
          launcher_name(ctx.spec.launcher), attempts.size(), attempts.size() == 1 ? "attempt" : "attempts", failures,
          lost);
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
    if (!last_words.empty()) fprintf(stderr, "cairn run: %s\n", last_words.c_str());
    if (o.scavenge) scavenge(ctx);
    return code;
  };
  int relaunches = 0;  // after failed attempts (bounded by --retries); migrations do not count
  for (int k = 1;; ++k) {
    // The n-th attempt that may fail is killed at the n-th --at-checkpoint entry.
    const uint64_t at = kill_point(o, relaunches + 1);
    const bool inject = at > 0;
    if (inject) {
      for (int node : o.kill_nodes)
        if (ctx.spec.ranks_per_node[static_cast<size_t>(node)] == 0)
          return finish(kExitFailure, "node " + std::to_string(node) +
                                          " has no ranks left (lost without a spare); cannot kill it again");
      ctx.options.at_checkpoint = at;
      ctx.inject_text = o.phase + ":" + std::to_string(at);
      ctx.spec.inject_env = {{"CAIRN_INJECT", ctx.inject_text}, {"CAIRN_INJECT_DIR", ctx.layout.inject_dir()}};
    }
    auto t0 = std::chrono::steady_clock::now();
    attempts.push_back(run_attempt(ctx, k, inject, desk));
    Attempt& a = attempts.back();
    a.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    a.at_checkpoint = inject ? at : 0;
    if (a.reached) a.killed_text = killed_nodes_text(ctx);
    const int status = exit_code_of(a.wait_status);

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
    if (killed) delete_killed_caches(ctx);
    if (relaunches >= o.retries) {
      if (o.retries > 0) fprintf(stderr, "cairn run: attempt %d failed and no retry is left (--retries %d)\n", k, o.retries);
      return finish(status);
    }
    if (killed && !o.between_attempts.empty() && !run_between_attempts(ctx, k)) return finish(kExitFailure);
    if (killed) {
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
(the whole wall time of the failed attempts); then (unless --no-scavenge) the newest version complete
in the surviving caches is flushed to L3, as `cairn flush` does, unless L3 holds it or a newer one.

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
                 "                 [--between-attempts CMD] [--no-relaunch] [--no-spare] [--no-scavenge]\n"
                 "                 [--launcher auto|mpirun|srun] -- CMD [ARGS...]");
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
  app->add_flag("--scavenge,!--no-scavenge", o->scavenge,
                "At the end (the default), flush the newest version complete in the caches to L3 unless it is\n"
                "there; --no-scavenge leaves the caches as they are");
  app->add_flag("--no-spare", o->no_spare,
                "Once no spare is left, relaunch on the surviving nodes only (fewer ranks); refused when the job has private state");
  app->add_option("--launcher", o->launcher,
                  "What starts the ranks: srun inside a Slurm allocation, else mpirun (auto, the default;\n"
                  "CAIRN_LAUNCHER sets another default), or mpirun or srun")
      ->check(CLI::IsMember({"auto", "mpirun", "srun"}))
      ->type_name("LAUNCHER");
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
