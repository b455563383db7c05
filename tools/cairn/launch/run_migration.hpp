// The launcher's side of `cairn migrate` (docs/migration.md), for `cairn run`: answers requests in
// <prefix>/.cairn/migrate, moves the node's snapshots once the job has checkpointed and exited for it,
// and reports until the relaunched job has restarted. One request at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/layout.hpp"
#include "base/state_file.hpp"
#include "migrate/migration.hpp"
#include "launch/run_job.hpp"

namespace cairn::tool {

class MigrationDesk {
 public:
  explicit MigrationDesk(const Layout& layout) : layout_(layout) {}
  // While the job runs: acknowledges a new request (a stat() per call); for a move over the fabric,
  // starts its two ends at once, so that they are ready when the job has wound down.
  void poll(const RunContext& ctx);
  // After an attempt: true when the job exited for the pending migration and the node was moved, so
  // the job is to be relaunched with the spare in its place. Answers the request otherwise.
  bool after_attempt(RunContext& ctx, Attempt& a);
  // The relaunched job has restarted: the migration is complete.
  void restarted(const state_file::State& s, double since_launch);
  // The run ends with a request outstanding.
  void abandon();

 private:
  static double seconds_since(int64_t unix_ns);
  void publish();
  void fail(const std::string& why);
  // Takes a new request from its file and answers "waiting"; true when it took one.
  bool acknowledge();
  // The move's two ends over the fabric, started (prestart) or not; the transport's choice, checked.
  void prestart(const RunContext& ctx);
  Result<std::unique_ptr<FabricMove>> fabric_move(const RunContext& ctx, const std::string& spare,
                                                  const TransferOptions& topt);
  const Layout& layout_;
  std::unique_ptr<FabricMove> prestarted_;
  std::unique_ptr<FabricMove> finishing_;  // a move done, its two ends exiting on their own: reaped at the end
  std::optional<MigrateRequest> pending_;
  MigrateResult result_;
  bool relaunched_ = false;  // the node moved; the result is final once the job has restarted
};

}  // namespace cairn::tool
