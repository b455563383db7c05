#include "launch/run_migration.hpp"

#include <cstdio>
#include <cstring>
#include <memory>

#include "base/fsutil.hpp"
#include "launch/launch_plan.hpp"
#include "launch/process.hpp"
#include "format.hpp"
#include "progress.hpp"

namespace cairn::tool {

// While the job runs: acknowledges a new request (a stat() per call).
void MigrationDesk::poll(const RunContext& ctx) {
  if (acknowledge()) prestart(ctx);
}

bool MigrationDesk::acknowledge() {
  if (pending_ || !fs::exists(layout_.migrate_file())) return false;
  auto text = fs::read_file(layout_.migrate_file());
  if (!text) return false;  // being replaced; next time
  auto req = parse_migrate_request(*text);
  if (!req) {
    fprintf(stderr, "cairn run: ignoring %s: %s\n", layout_.migrate_file().c_str(), req.status().message().c_str());
    (void)fs::remove_file(layout_.migrate_file());
    return false;
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
  return true;
}

namespace {
TransferOptions transfer_options(const MigrateRequest& req) {
  TransferOptions topt;
  topt.buffers = req.buffers;
  topt.buffer_size = req.buffer_size;
  return topt;
}
}  // namespace

// Over the fabric, the two ends start while the job winds down (each loads libfabric, which costs a
// few tenths of a second, and waits). Whatever stops the migration later stops them too.
void MigrationDesk::prestart(const RunContext& ctx) {
  auto transport = choose_transport(pending_->transport, ctx.migration);
  if (!transport || !transport->fabric || next_spare(ctx).empty()) return;
  auto move = fabric_move(ctx, next_spare(ctx), transfer_options(*pending_));
  if (move) prestarted_ = std::move(move).value();  // else the move is started (and fails, and says why) later
}

Result<std::unique_ptr<FabricMove>> MigrationDesk::fabric_move(const RunContext& ctx, const std::string& spare,
                                                               const TransferOptions& topt) {
  if (prestarted_ && prestarted_->from() == pending_->node && prestarted_->to() == spare) return std::move(prestarted_);
  prestarted_.reset();
  FabricTransfer how;
  how.cairnd = find_cairnd();
  how.exec = ctx.migrate_exec;
  if (how.exec.empty() && ctx.cluster.active && ctx.spec.launcher == LauncherKind::srun)  // the ends on their hosts
    how.exec = {ctx.spec.srun, "--overlap", "-N1", "-n1", "-w", "{node}", "-J", "cairn-migrate", "--mpi=none"};
  how.log_dir = ctx.layout.control;
  return FabricMove::start(ctx.layout, ctx.migration, how, pending_->node, spare, topt);
}

// After an attempt: true when the job exited for the pending migration and the node was moved, so
// the job is to be relaunched with the spare in its place. Answers the request otherwise.
bool MigrationDesk::after_attempt(RunContext& ctx, Attempt& a){
  poll(ctx);  // a request placed just before the job ended
  if (!pending_) return false;
  // The node has moved already and the relaunched attempt failed before it restarted (a rank dead at
  // its start, a hung start ended by --stall): an ordinary failure, relaunched like any other; the next
  // attempt's restart completes the migration.
  if (relaunched_) return false;
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
  if (next_spare(ctx).empty()) {
    fail("no spare node is left; the job goes on on its nodes");
    return true;
  }
  const std::string spare = next_spare(ctx);
  auto transport = choose_transport(req.transport, ctx.migration);
  if (!transport) {
    fail(transport.status().message() + "; the job goes on on its nodes");
    return true;
  }
  if (ctx.cluster.active && !transport->fabric) {  // the caches are on the hosts, not here
    fail("in a multi-host allocation a migration goes over the fabric (migrate_transport = fabric, and "
         "migrate_listen an address the spare reaches, e.g. iface:eth0); the job goes on on its hosts");
    return true;
  }
  result_.transport = transport->fabric ? "fabric" : "local";
  result_.spare = spare;
  result_.status = "transferring";
  result_.message = req.node + " to " + spare + " (" + result_.transport + ": " + transport->reason + ")";
  publish();
  fprintf(stderr, "cairn run: moving %s to %s %s (%s)\n", req.node.c_str(), spare.c_str(),
          transport->fabric ? "over the fabric" : "between the two caches", transport->reason.c_str());

  TransferOptions topt = transfer_options(req);
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
  Result<TransferStats> moved = Status::ok();
  if (transport->fabric) {
    auto move = fabric_move(ctx, spare, topt);
    moved = move ? (*move)->go(topt.progress) : Result<TransferStats>(move.status());
    if (move) finishing_ = std::move(move).value();  // reaped once the job has restarted
  } else {
    moved = transfer_node_cache(ctx.layout, req.node, spare, topt);
  }
  if (progress) progress->finish();
  if (!moved) {
    fail("moving the snapshots of " + req.node + " to " + spare + " failed: " + moved.status().message() +
         "; the job goes on on its nodes");
    a.migrated_text = "migration of " + req.node + " failed";
    return true;  // relaunch as it was: the job only exited to migrate
  }
  const TransferStats& t = *moved;
  take_spare(ctx, req.node + " (migration)");
  ctx.spec.node_names[idx] = spare;
  result_.version = t.version;
  result_.bytes = t.bytes;
  result_.transfer_seconds = t.seconds + t.setup_seconds;
  result_.move_seconds = t.seconds;
  char text[640];
  snprintf(text, sizeof text,
           "version %llu of %d ranks, %s (%s verified chunk by chunk) in %s, %.2f GB/s; pool %d x %s, at most %d "
           "filled at once",
           static_cast<unsigned long long>(t.version), t.ranks, format_bytes(t.bytes).c_str(),
           format_bytes(t.verified).c_str(), format_duration(t.seconds).c_str(),
           t.seconds > 0 ? static_cast<double>(t.bytes) / t.seconds / 1e9 : 0.0, t.buffers,
           format_bytes(t.buffer_size).c_str(), t.peak_in_use);
  if (transport->fabric) {
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used, "; over %s, %s starting the two ends and registering",
             t.provider.c_str(), format_duration(t.setup_seconds).c_str());
  }
  fprintf(stderr, "cairn run: migrated %s to %s: %s\n", req.node.c_str(), spare.c_str(), text);
  a.migrated_text = req.node + " to " + spare + " (" + format_bytes(t.bytes) + " in " + format_duration(t.seconds) + ")";
  // The node leaves the job: its cache goes (the spare holds the version, verified, and L2 still protects it).
  Status st = ctx.cluster.active ? remove_host_cache(ctx, req.node) : fs::remove_tree(ctx.layout.node_cache(req.node));
  if (!st) fprintf(stderr, "cairn run: warning: removing the cache of %s: %s\n", req.node.c_str(), st.message().c_str());
  (void)fs::remove_file(layout_.migrate_file());
  result_.status = "relaunching";
  result_.message = "the job restarts with " + spare + " in place of " + req.node;
  publish();
  relaunched_ = true;
  return true;
}

// The relaunched job has restarted: the migration is complete.
void MigrationDesk::restarted(const state_file::State& s, double since_launch){
  if (!pending_ || !relaunched_) return;
  result_.restart_seconds = since_launch;
  result_.restart_level = s.restart_level;
  result_.total_seconds = seconds_since(pending_->requested_unix_ns);
  finishing_.reset();
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
void MigrationDesk::abandon() {
  acknowledge();  // a request placed at the very end is answered too (nothing is started for it)
  if (pending_) fail(relaunched_ ? "the relaunched job ended before it restarted" : "cairn run ended before the job migrated");
}

double MigrationDesk::seconds_since(int64_t unix_ns){
  return unix_ns > 0 ? static_cast<double>(now_unix_ns() - unix_ns) / 1e9 : 0.0;
}

void MigrationDesk::publish(){
  Status st = fs::write_file_atomic(layout_.migrate_result_file(), format_migrate_result(result_), false);
  if (!st) fprintf(stderr, "cairn run: warning: %s\n", st.message().c_str());
}

void MigrationDesk::fail(const std::string& why){
  prestarted_.reset();  // its two ends stop
  finishing_.reset();
  fprintf(stderr, "cairn run: migration of %s abandoned: %s\n", result_.node.c_str(), why.c_str());
  result_.status = "failed";
  result_.message = why;
  publish();
  (void)fs::remove_file(layout_.migrate_file());
  pending_.reset();
  relaunched_ = false;
}

}  // namespace cairn::tool
