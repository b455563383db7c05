// `cairn run --fail-at`: failures at chosen times from the first launch, for campaigns that measure what
// failures cost (cairn-bench --campaign; docs/launcher.md, "Failures at chosen times"). The kills reuse
// the failure-injection rendezvous (injection.hpp): every rank writes its pid file at cairn_init, and
// only processes that carry this job's injection directory are ever killed.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/fsutil.hpp"
#include "base/history.hpp"
#include "base/layout.hpp"
#include "base/history_line.hpp"
#include "base/log.hpp"
#include "launch/injection.hpp"
#include "launch/process.hpp"
#include "launch/run_job.hpp"

namespace cairn::tool {
namespace {

using policy::FailureKind;

// A point no checkpoint reaches (versions count from 1): the ranks write their pid files and go on.
constexpr const char* kTimedInjection = "timed:0";

std::vector<int> ranks_struck(const RunContext& ctx, const policy::ScheduledFailure& f) {
  if (f.kind == FailureKind::rank) return {f.target};
  if (f.kind == FailureKind::node) return ranks_of_node(ctx.spec.ranks_per_node, f.target);
  std::vector<int> all;
  for (int r = 0; r < ctx.options.nranks; ++r) all.push_back(r);
  return all;
}

std::string node_of_rank(const RunContext& ctx, int rank) {
  for (size_t n = 0; n < ctx.spec.ranks_per_node.size(); ++n) {
    auto ranks = ranks_of_node(ctx.spec.ranks_per_node, static_cast<int>(n));
    for (int r : ranks)
      if (r == rank) return ctx.spec.node_names[n];
  }
  return "?";
}

// <prefix>/.cairn/run-record (docs/format.md, "The run record"): JSON lines of the job history's codec,
// beside the history (which only the job writes), so that a reader of a campaign sees when each attempt
// was launched and each failure struck beside the job's own lines. One write(2) with O_APPEND.
void append_record(const RunContext& ctx, const std::string& line) {
  const std::string path = run_record_path(ctx.layout);
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "cairn run: warning: cannot append to %s: %s\n", path.c_str(), strerror(errno));
    return;
  }
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

void record_failure(const RunContext& ctx, const policy::ScheduledFailure& f, double at_s,
                    const std::vector<std::string>& nodes, const std::vector<int>& ranks, int attempt) {
  std::string ranks_text;
  for (int r : ranks) ranks_text += (ranks_text.empty() ? "" : ",") + std::to_string(r);
  history::LineWriter w("failure");
  w.i64("t", history::now_ns())
      .i64("attempt", attempt)
      .str("kind", policy::failure_kind_name(f.kind))
      .strings("nodes", nodes)
      .str("ranks", ranks_text)
      .real("due_s", f.at)
      .real("at_s", at_s);
  append_record(ctx, w.finish());
}

}  // namespace

std::string run_record_path(const Layout& layout) { return layout.control + "/run-record"; }

void record_attempt_launch(const RunContext& ctx, int attempt) {
  if (ctx.failures.empty()) return;
  if (attempt == 1) (void)fs::remove_file(run_record_path(ctx.layout));  // one run's record
  history::LineWriter w("attempt");
  w.i64("t", history::now_ns()).i64("attempt", attempt).strings("nodes", ctx.spec.node_names);
  append_record(ctx, w.finish());
}

Status prepare_timed_failures(RunContext& ctx) {
  const RunOptions& o = ctx.options;
  if (o.fail_at.empty()) return Status::ok();
  if (!o.kill_nodes.empty()) return make_error(Code::ERR_INVALID_ARG, "--fail-at and --kill-node exclude each other");
  if (!o.no_spare.empty())
    return make_error(Code::ERR_INVALID_ARG, "--fail-at goes without --no-spare (its nodes and ranks keep their numbers)");
  if (o.no_relaunch) return make_error(Code::ERR_INVALID_ARG, "--fail-at goes without --no-relaunch");
  auto list = policy::parse_failures(o.fail_at, o.nnodes, o.nranks);
  if (!list) return list.status().prefixed("--fail-at");
  ctx.failures = std::move(list).value();
  if (ctx.options.retries < 0) ctx.options.retries = static_cast<int>(ctx.failures.size());
  for (int n = 0; n < o.nnodes; ++n) ctx.spec.inject_nodes.push_back(n);
  ctx.spec.inject_env = {{"CAIRN_INJECT", kTimedInjection}, {"CAIRN_INJECT_DIR", ctx.layout.inject_dir()}};
  return Status::ok();
}

bool strike_due_failure(const RunContext& ctx, const InjectionRendezvous& rendezvous, pid_t launcher_pid,
                        Attempt& attempt) {
  if (attempt.failure || ctx.next_failure >= ctx.failures.size()) return false;
  const policy::ScheduledFailure& f = ctx.failures[ctx.next_failure];
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.epoch).count();
  if (now < f.at) return false;
  // A failure due while the job is down (or starting) strikes as soon as its ranks are up.
  std::vector<int> ranks = ranks_struck(ctx, f);
  if (!rendezvous.pids_written(ranks)) return false;
  auto report = rendezvous.kill_ranks(ranks, 0.5);
  if (!report.missing.empty()) {  // not ours or gone strange: end the attempt all the same
    fprintf(stderr, "cairn run: warning: ranks %s could not be killed one by one; killing the whole job\n",
            join_ints(report.missing).c_str());
    for (pid_t p : descendants_of(launcher_pid)) ::kill(p, SIGKILL);
  }
  std::vector<std::string> nodes;
  if (f.kind == FailureKind::node) nodes.push_back(ctx.spec.node_names[static_cast<size_t>(f.target)]);
  if (f.kind == FailureKind::job)
    for (size_t n = 0; n < ctx.spec.node_names.size(); ++n)
      if (ctx.spec.ranks_per_node[n] > 0) nodes.push_back(ctx.spec.node_names[n]);
  attempt.failure = f;
  char when[96];
  snprintf(when, sizeof when, " at %.2f s (due %.2f s)", now, f.at);
  attempt.failure_text = f.kind == FailureKind::node ? "node " + nodes[0] + " (ranks " + join_ints(ranks) + ")"
                         : f.kind == FailureKind::rank ? "rank " + std::to_string(f.target) + " on " + node_of_rank(ctx, f.target)
                                                       : "the whole job (every rank, every node's cache)";
  attempt.failure_text += when;
  fprintf(stderr, "cairn run: failure %zu of %zu: lost %s\n", ctx.next_failure + 1, ctx.failures.size(),
          attempt.failure_text.c_str());
  record_failure(ctx, f, now, nodes, ranks, attempt.number);
  return true;
}

std::string after_timed_failure(RunContext& ctx, const policy::ScheduledFailure& f) {
  std::vector<int> lost;
  if (f.kind == FailureKind::node) lost.push_back(f.target);
  if (f.kind == FailureKind::job)
    for (size_t n = 0; n < ctx.spec.node_names.size(); ++n)
      if (ctx.spec.ranks_per_node[n] > 0) lost.push_back(static_cast<int>(n));
  if (lost.empty()) return "";
  // The code of --kill-node deletes the caches and finds the replacements; its list is borrowed.
  std::vector<int> saved = ctx.options.kill_nodes;
  ctx.options.kill_nodes = lost;
  delete_killed_caches(ctx);
  std::string why;
  if (f.kind == FailureKind::node) why = replace_killed_nodes(ctx);  // the job's nodes other than a lost one come back
  ctx.options.kill_nodes = saved;
  return why;
}

}  // namespace cairn::tool
