// Process migration over the fabric (docs/migration.md, "Over the fabric"): the two ends of moving a
// node's newest L1 version into a spare node's cache when the two are different hosts. `cairn run`
// starts both (each on its node) and hands them the migration's key on stdin:
//
//   cairnd migrate-source   on the node being emptied: plans the move (cache/node_move.hpp), maps every
//                           file of the version read-only and registers it for remote reads, listens, and
//                           prints "listening HOST:PORT" on stdout; serves one writer that presents the key,
//                           and revokes every registration when the writer says it is done, or goes away
//   cairnd migrate-sink     on the spare: connects, presents the key, checks the offered plan, and pulls
//                           the files with fi_read into a bounded pool of buffers; a writer thread checks
//                           each chunk against the manifest on arrival and writes it into the spare's cache;
//                           the L1 records last. Prints "progress DONE TOTAL" lines and, at the end, one
//                           JSON object with the outcome on stdout
//
// The bulk data crosses only the fabric; the control messages (wire/migrate_messages.hpp) cross TCP.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/status.hpp"

namespace cairn::service {

struct MigrateSourceOptions {
  std::string cache_job;  // <cache_dir>/cairn-<job>, as on every node
  std::string node;       // the node whose cache is read
  std::string listen = "127.0.0.1";  // an address of this node the spare reaches, or iface:NAME
  std::string provider = "tcp;ofi_rxm";
  double timeout_s = 600;  // for the writer to come, and then for it to finish
  bool wait_go = false;    // after the key, ready libfabric and wait for a line "go" on stdin before planning
                           // (started while the job still winds down); the end of stdin withdraws it
};

struct MigrateSinkOptions {
  std::string cache_job;
  std::string node;    // the spare, whose cache is written
  std::string from;    // the node being emptied (checked against the offer)
  std::string source;  // HOST:PORT the reader printed; "-": the next line of stdin, after the key (the two
                       // ends then start at once, and the writer readies libfabric while the reader registers)
  std::string provider = "tcp;ofi_rxm";
  uint32_t buffers = 8;
  uint64_t buffer_size = 8ull << 20;  // rounded up to a multiple of the chunk size
  uint64_t rma_size = 1ull << 20;     // bytes per fi_read (a buffer takes several)
  double stall_timeout_s = 60;        // give up when no read completes for this long
};

// Both read the key (32 hex digits and a newline) from stdin first. Exit status: 0 the version is in the
// spare's cache; 1 it is not (the reason in the log, and for the sink in its JSON line); 2 bad options.
int run_migrate_source(const MigrateSourceOptions& o);
int run_migrate_sink(const MigrateSinkOptions& o);

// The key on stdin: one line of 32 hex digits. And any one line of stdin (without its newline).
Result<std::array<uint8_t, 16>> read_key_from_stdin();
Result<std::string> read_line_from_stdin();

// "iface:NAME": the first IPv4 (else IPv6) address of that interface; anything else as it is.
Result<std::string> resolve_listen_address(const std::string& listen);

}  // namespace cairn::service
