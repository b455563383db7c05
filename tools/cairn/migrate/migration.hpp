// Process migration (PPMR, docs/migration.md): `cairn migrate` asks the `cairn run` that manages a job
// to move one node's ranks to a spare node. The job checkpoints and exits; the launcher pipes the
// node's newest snapshots, chunk by chunk through a bounded pool of buffers, into the spare's cache
// (verifying every chunk against the manifest as it passes), and relaunches with the spare in place of
// the node, every rank restarting from L1.
//
// The three control files, in <prefix>/.cairn/, are key=value lines (base/state_file.hpp's codec):
//   launcher        written by `cairn run` while it runs: pid, nodes, free spares
//   migrate         the request, written by `cairn migrate`; removed by the launcher when it is done
//   migrate.result  the launcher's progress and answer, for the request id it names
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "base/layout.hpp"
#include "base/status.hpp"

namespace cairn::tool {

// ---- control files --------------------------------------------------------------------------------

struct LauncherInfo {
  pid_t pid = 0;
  std::vector<std::string> nodes;   // the job's nodes, in order (index I of --node I)
  std::vector<std::string> spares;  // spare nodes not used yet, in the order they are taken
};

struct MigrateRequest {
  std::string id;                       // unique per request: "<pid>-<unix ns>"
  std::string node;                     // the node to leave
  int buffers = 8;                      // buffers in the pool
  uint64_t buffer_size = 8ull << 20;    // bytes per buffer (rounded up to a multiple of chunk_size)
  std::string transport = "auto";       // auto | local | fabric (the job's migrate_transport decides auto)
  int64_t requested_unix_ns = 0;
};

struct MigrateResult {
  std::string id;
  std::string status;  // waiting | transferring | relaunching | done | failed
  std::string message;
  std::string node, spare;
  uint64_t version = 0;
  uint64_t bytes = 0;
  double wind_down_seconds = 0;  // request -> the job has checkpointed and exited
  double transfer_seconds = 0;   // the pipelined copy into the spare's cache, verified (over the fabric:
                                 // starting the two ends and registering included)
  double move_seconds = 0;       // of which moving the bytes: the first read to the last record written
  double restart_seconds = 0;    // relaunch -> every rank restarted
  double total_seconds = 0;      // request -> restarted
  std::string restart_level;
  std::string transport;         // local | fabric: how the bytes travelled
  bool final() const { return status == "done" || status == "failed"; }
};

std::string format_launcher_info(const LauncherInfo& info);
LauncherInfo parse_launcher_info(const std::string& text);
std::string format_migrate_request(const MigrateRequest& r);
// ERR_FORMAT when a key is missing or malformed.
Result<MigrateRequest> parse_migrate_request(const std::string& text);
std::string format_migrate_result(const MigrateResult& r);
MigrateResult parse_migrate_result(const std::string& text);

// ---- how the bytes travel ---------------------------------------------------------------------------

// The job's configuration for migrations (migrate_transport, migrate_listen, service, service_provider).
struct MigrationSettings {
  MigrateTransport transport = MigrateTransport::automatic;
  bool service = false;  // `service` is set: the deployment has a fabric
  std::string listen = "127.0.0.1";
  std::string provider = "tcp;ofi_rxm";
};
MigrationSettings migration_settings(const Config& config);

// "local" or "fabric" for a request's transport ("auto", "local", "fabric"), and why: the request's own
// choice, else the job's migrate_transport, else (auto) fabric when the service is configured.
// ERR_INVALID_ARG for a transport that is none of these.
struct TransportChoice {
  bool fabric = false;
  std::string reason;  // "--transport fabric", "migrate_transport = local", "auto: service is set", ...
};
Result<TransportChoice> choose_transport(const std::string& requested, const MigrationSettings& s);

// ---- the transfer ---------------------------------------------------------------------------------

struct TransferOptions {
  int buffers = 8;
  uint64_t buffer_size = 8ull << 20;
  // Called from the writer thread with the bytes moved so far and the total (for a progress bar).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct TransferStats {
  uint64_t version = 0;
  int ranks = 0;
  int files = 0;
  uint64_t bytes = 0;        // bytes moved (slot data verified against the manifests, plus the rest)
  uint64_t verified = 0;     // of which checked chunk by chunk against the manifests
  double seconds = 0;
  int buffers = 0;           // the pool's size
  uint64_t buffer_size = 0;  // bytes per buffer, after rounding
  int peak_in_use = 0;       // the most buffers filled and not yet written at one moment
  std::string provider;      // over the fabric: the libfabric provider
  double setup_seconds = 0;  // over the fabric: starting the two ends and registering (beside `seconds`)
};

// Moves the newest version that every rank directory of `from` holds at L1 into the same rank
// directories under `to` (<cache_job>/<to>/r<rank>/): the slot data (verified chunk by chunk against
// the version's manifest while it passes), the slot's redundancy data, the set file and the protected
// marker, and the L1 record last, so the spare holds the version only once all of it is there. A
// reader thread fills buffers from the pool; a writer thread checks and writes them; the pool bounds
// the memory in flight. On any error the files written under `to` are removed and `from` is left
// as it was.
Result<TransferStats> transfer_node_cache(const Layout& layout, const std::string& from, const std::string& to,
                                          const TransferOptions& options);

// The same move over libfabric (migration_fabric.cpp): `cairnd migrate-source` started on `from` and
// `cairnd migrate-sink` on `to`, each through `exec` (CAIRN_MIGRATE_EXEC: words put before cairnd's, with
// {node} replaced by the node's name, e.g. `srun --overlap -N1 -n1 -w {node}`; empty: a process of this
// machine with CAIRN_NODE set), the migration's key on their stdin; the writer pulls the files with
// fi_read through its pool of options.buffers buffers, checks every chunk on arrival and writes the
// version into the spare's cache, the L1 records last. Their logs go to <control>/migrate-{source,sink}.log.
struct FabricTransfer {
  std::string cairnd;                 // the executable
  std::vector<std::string> exec;      // the words before it, {node} not yet replaced
  std::string log_dir;                // where the two logs go
  double timeout_seconds = 600;
};
Result<TransferStats> transfer_over_fabric(const Layout& layout, const MigrationSettings& settings,
                                           const FabricTransfer& how, const std::string& from, const std::string& to,
                                           const TransferOptions& options);

// The same in two steps, so that the two ends start while the job still winds down: start() launches
// both (each loads libfabric and waits), go() -- once the job has exited -- lets the reader plan and
// serve, and the writer pull; it returns as soon as the writer says the version is in the spare's cache.
// Destroyed, it reaps the two ends (stopping them when they have not finished: without go(), or after a
// failure, when it also removes whatever a writer left on a spare that had no cache before).
class FabricMove {
 public:
  static Result<std::unique_ptr<FabricMove>> start(const Layout& layout, const MigrationSettings& settings,
                                                   const FabricTransfer& how, const std::string& from,
                                                   const std::string& to, const TransferOptions& options);
  Result<TransferStats> go(const std::function<void(uint64_t done, uint64_t total)>& progress);
  const std::string& from() const { return from_; }
  const std::string& to() const { return to_; }
  FabricMove(const FabricMove&) = delete;
  FabricMove& operator=(const FabricMove&) = delete;
  ~FabricMove();

 private:
  struct Ends;
  FabricMove();
  void stop(double grace);
  Status fail(Status why);
  Layout layout_;
  FabricTransfer how_;
  std::string from_, to_;
  bool spare_existed_ = true;
  std::unique_ptr<Ends> ends_;
};
// cairnd for the fabric transfer: CAIRN_CAIRND, else beside this executable, else from PATH; "" when none.
std::string find_cairnd();

}  // namespace cairn::tool
