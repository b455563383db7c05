// One attempt of `cairn run`: the job started under the MPI launcher, the chosen nodes killed at the
// injection point, the restart and migration requests watched, the job's end awaited (docs/launcher.md).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "base/fsutil.hpp"
#include "base/history.hpp"
#include "base/log.hpp"
#include "common.hpp"
#include "launch/cluster_hosts.hpp"
#include "launch/injection.hpp"
#include "launch/launcher.hpp"
#include "migrate/migration.hpp"
#include "launch/process.hpp"
#include "launch/run_job.hpp"
#include "launch/run_migration.hpp"

namespace cairn::tool {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(5);
constexpr auto kAbortGrace = std::chrono::seconds(60);    // for mpirun to end the job after the kill
constexpr auto kTermGrace = std::chrono::seconds(10);     // between SIGTERM and SIGKILL of mpirun's group
constexpr double kPidFileGrace = 2.0;                     // seconds to wait for missing pid.<rank> files

// Identifies one version of the state file: the library replaces it by rename, so a rewrite changes
// the inode or the modification time.
struct FileStamp {
  bool exists = false;
  ino_t inode = 0;
  timespec mtime{};
  uint64_t size = 0;
  bool operator==(const FileStamp& o) const {
    return exists == o.exists && inode == o.inode && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && size == o.size;
  }
};

FileStamp stamp_of(const std::string& path) {
  FileStamp f;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return f;
  f.exists = true;
  f.inode = st.st_ino;
  f.mtime = st.st_mtim;
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

// --stall: the job shows progress by rewriting its state file (every checkpoint, every change of phase)
// or appending to its history; an attempt that does neither for `limit` seconds from its launch or its
// last sign of life is hung (a deadlocked rank, a stopped node) and is ended like a failed one.
class StallWatch {
 public:
  StallWatch(const Layout& layout, double limit)
      : state_(layout.state_file()), history_(history::path(layout)), limit_(limit) {
    seen_state_ = stamp_of(state_);
    seen_history_ = stamp_of(history_);
    last_ = std::chrono::steady_clock::now();
  }
  // True once, when the limit has passed without progress; `why` then says so.
  bool check(std::string* why) {
    if (limit_ <= 0 || fired_) return false;
    const auto now = std::chrono::steady_clock::now();
    FileStamp s = stamp_of(state_), h = stamp_of(history_);
    if (!(s == seen_state_) || !(h == seen_history_)) {
      seen_state_ = s, seen_history_ = h, last_ = now;
      return false;
    }
    if (std::chrono::duration<double>(now - last_).count() <= limit_) return false;
    fired_ = true;
    char buf[256];
    snprintf(buf, sizeof buf, "no checkpoint/progress for %g s", limit_);
    *why = buf;
    if (auto st = state_file::read_state(state_); st && st->has_value())
      *why += " (last: version " + std::to_string((*st)->version) + ", L1 " + std::to_string((*st)->l1) + ", phase " +
              (*st)->phase + ")";
    return true;
  }

 private:
  std::string state_, history_;
  double limit_;
  FileStamp seen_state_, seen_history_;
  std::chrono::steady_clock::time_point last_;
  bool fired_ = false;
};

// The state file, if the job rewrote it since `before` (else it belongs to an earlier run).
std::optional<state_file::State> read_state_written_since(const std::string& path, const FileStamp& before) {
  FileStamp now = stamp_of(path);
  if (!now.exists || now == before) return std::nullopt;
  auto state = state_file::read_state(path);
  if (!state) {
    fprintf(stderr, "cairn run: warning: %s\n", state.status().message().c_str());
    return std::nullopt;
  }
  return *state;
}

// srun's standard error through a pipe: copied to the launcher's own as it comes (the job's output is
// not held back), its last bytes kept (OutputTail) to tell a step Slurm refused (classify_step_end).
// pump() never blocks; srun blocks only when the pipe is full between two polls of the attempt's loop.
class StderrTee {
 public:
  ~StderrTee() {
    if (read_ >= 0) close(read_);
    if (write_ >= 0) close(write_);
  }
  // The descriptor the child writes to, or -1 (no pipe: the child keeps the launcher's stderr).
  int open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    read_ = fds[0], write_ = fds[1];
    fcntl(read_, F_SETFL, O_NONBLOCK);
    (void)fcntl(write_, F_SETPIPE_SZ, 1 << 20);  // room for bursts between polls (best effort)
    return write_;
  }
  void child_started() {  // the launcher's copy of the write end goes: EOF once srun (and any heir) closed it
    if (write_ >= 0) close(write_);
    write_ = -1;
  }
  void pump() {
    if (read_ < 0) return;
    char buf[16384];
    for (;;) {
      ssize_t n = read(read_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // EAGAIN: nothing more now; 0: closed
      tail_.append(buf, static_cast<size_t>(n));
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, buf + off, static_cast<size_t>(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;  // our stderr is gone: the tail is still kept
        off += w;
      }
    }
  }
  const std::string& tail() const { return tail_.text(); }

 private:
  int read_ = -1, write_ = -1;
  OutputTail tail_;
};

void kill_injected_ranks(const RunContext& ctx, const InjectionRendezvous& rendezvous, double grace) {
  std::vector<int> expected;
  for (int node : ctx.options.kill_nodes) {
    auto ranks = ranks_of_node(ctx.spec.ranks_per_node, node);
    expected.insert(expected.end(), ranks.begin(), ranks.end());
  }
  if (ctx.cluster.active && !ctx.cluster.kill_exec.empty()) {  // lose the hosts themselves (run_hosts.cpp)
    kill_injected_hosts(ctx);
    fprintf(stderr, "cairn run: killed %s at %s (host lost with CAIRN_KILL_HOST_EXEC)\n", killed_nodes_text(ctx).c_str(),
            injection_point_text(ctx).c_str());
    return;
  }
  auto report = rendezvous.kill_ranks(expected, grace);
  fprintf(stderr, "cairn run: killed %s at %s\n", killed_nodes_text(ctx).c_str(), injection_point_text(ctx).c_str());
  if (!report.missing.empty())
    fprintf(stderr, "cairn run: warning: ranks %s wrote no usable pid file in %s; they were not killed\n",
            join_ints(report.missing).c_str(), rendezvous.dir().c_str());
}

}  // namespace

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

// The launcher file: tells `cairn migrate` that this process manages the job, and its nodes and spares.
void write_launcher_file(const RunContext& ctx) {
  LauncherInfo info;
  info.pid = getpid();
  for (size_t i = 0; i < ctx.spec.node_names.size(); ++i)
    if (ctx.spec.ranks_per_node[i] > 0 &&
        std::find(info.nodes.begin(), info.nodes.end(), ctx.spec.node_names[i]) == info.nodes.end())
      info.nodes.push_back(ctx.spec.node_names[i]);  // once: --no-spare=oversubscribe puts ranks on a node twice
  for (int s = ctx.next_spare; s <= ctx.last_spare; ++s) info.spares.push_back(node_name(s));
  info.spares.insert(info.spares.end(), ctx.cluster.spares.begin(), ctx.cluster.spares.end());
  Status st = fs::make_dirs(ctx.layout.control);
  if (st) st = fs::write_file_atomic(ctx.layout.launcher_file(), format_launcher_info(info), false);
  if (!st) fprintf(stderr, "cairn run: warning: %s (cairn migrate will not find this job)\n", st.message().c_str());
}

Attempt run_attempt(const RunContext& ctx, int number, bool inject, MigrationDesk& desk) {
  Attempt attempt;
  attempt.number = number;
  attempt.injected = inject;
  InjectionRendezvous rendezvous(ctx.layout.inject_dir());
  const bool timed = !ctx.failures.empty();  // --fail-at: every rank writes its pid file
  if (inject || timed) {
    Status st = rendezvous.reset();
    if (!st) fprintf(stderr, "cairn run: warning: failure-injection directory: %s\n", st.message().c_str());
  }
  auto launch = launch_argv(ctx.spec, inject || timed);  // srun: also writes the --multi-prog file
  if (!launch) {
    fprintf(stderr, "cairn run: %s\n", launch.status().message().c_str());
    attempt.wait_status = 127 << 8;
    return attempt;
  }
  std::vector<std::string> argv = std::move(launch).value();
  if (log::level() >= log::Level::info) {
    fprintf(stderr, "cairn run: attempt %d (%s): %s\n", number, launcher_name(ctx.spec.launcher), join_quoted(argv).c_str());
    if (auto text = multi_prog_text(ctx.spec, inject || timed); text && ctx.spec.launcher == LauncherKind::srun)
      fprintf(stderr, "cairn run: %s:\n%s", ctx.spec.multi_prog_file.c_str(), text->c_str());
  }

  const FileStamp state_before = stamp_of(ctx.layout.state_file());
  FileStamp state_seen = state_before;
  const auto launched = std::chrono::steady_clock::now();
  record_attempt_launch(ctx, number);
  StderrTee srun_stderr;  // srun: Slurm's refusal of the step is told by what srun writes there
  const int stderr_fd = ctx.spec.launcher == LauncherKind::srun ? srun_stderr.open() : -1;
  auto child = spawn(argv, mpirun_env(ctx.spec, getenv("OMPI_MCA_odls_base_sigkill_timeout")), /*own_group=*/true,
                     -1, -1, stderr_fd);
  srun_stderr.child_started();
  if (!child) {
    fprintf(stderr, "cairn run: %s\n", child.status().message().c_str());
    attempt.wait_status = 127 << 8;
    return attempt;
  }

  using clock = std::chrono::steady_clock;
  std::optional<clock::time_point> killed_at, term_sent_at;
  bool group_killed = false;
  int stop_requests = 0;
  StallWatch stall(ctx.layout, ctx.options.stall);
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
    if (timed && !killed_at && !term_sent_at && !attempt.interrupted &&
        strike_due_failure(ctx, rendezvous, child->pid, attempt))
      killed_at = clock::now();
    std::string why;
    if (!killed_at && !term_sent_at && !attempt.interrupted && stall.check(&why)) {
      // A hung job is killed outright (it cannot checkpoint any more): SIGKILL to every process under the
      // MPI launcher (mpirun's ranks; srun's live elsewhere), SIGTERM to the launcher's group, which ends
      // the job (srun cancels its step), and SIGKILL to that group after kTermGrace.
      attempt.stalled = true;
      attempt.stalled_text = "stalled: " + why;
      fprintf(stderr, "cairn run: attempt %d %s; killing the job\n", number, attempt.stalled_text.c_str());
      for (pid_t p : descendants_of(child->pid)) ::kill(p, SIGKILL);
      ::kill(-child->pid, SIGTERM);
      term_sent_at = clock::now();
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
    desk.poll(ctx);
    srun_stderr.pump();
    std::this_thread::sleep_for(kPollInterval);
  }
  srun_stderr.pump();  // what srun wrote last (a process it left holding the pipe is not waited for)
  attempt.srun_stderr_tail = srun_stderr.tail();
  release_terminal(*child);
  // The point may have been reached just as the job ended.
  if (inject && !attempt.reached && rendezvous.reached()) {
    attempt.reached = true;
    kill_injected_ranks(ctx, rendezvous, 0);
  }
  if (inject || timed) rendezvous.remove();
  attempt.state = read_state_written_since(ctx.layout.state_file(), state_before);
  return attempt;
}

bool attempt_failed(const Attempt& a) {
  return a.reached || a.failure || a.stalled || exit_code_of(a.wait_status) != 0;
}

}  // namespace cairn::tool
