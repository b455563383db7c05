// Configuration: every knob is declared once in the table in knob_table.cpp (name, type, default,
// bounds, description). From that table come the parser (TOML file + CAIRN_* environment), the
// validation, `cairn config --list`, the docs' table (docs/config.md) and the sample config.
// Precedence: environment over config file over default.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "base/redundancy_scheme.hpp"
#include "base/status.hpp"

namespace cairn {

// How cairn_need_checkpoint times checkpoints: every interval_seconds, or Daly's optimum for
// mtbf_seconds and the measured checkpoint cost (docs/intervals.md).
enum class IntervalMode { fixed, automatic };

// How a checkpoint's snapshot reaches the L1 slot: a copy on the blocking path, copy-on-write (the
// application waits only for the write-protection), or cow where the kernel and the node allow it
// (docs/architecture.md, "Snapshots").
enum class SnapshotMode { copy, cow, automatic };
// Whether a copied snapshot copies only the chunks that changed since the slot's previous version (their
// hashes compared first): always, never, or when the last version showed enough of them unchanged.
enum class L1Incremental { automatic, on, off };
// What cairn_checkpoint waits for of a device (GPU) region's copy (docs/gpu.md): the copy itself (wait), or
// nothing (return: the application orders its next write after cairn's copy, cairn_device_wait_copied).
enum class DeviceCopy { wait, return_at_once };

// Service mode's transfers (docs/service.md): agents fi_read the ranks' slots, or ranks fi_write into
// the agents' buffers.
enum class ServiceMode { pull, push };
enum class ServiceRestart { application, agents };
// What a restart does when checkpoints exist but none can be rebuilt and verified: fail with
// CAIRN_ERR_UNRECOVERABLE (stop), or pass over every version there is and start afresh (start_over).
enum class IfUnrecoverable { stop, start_over };
// How `cairn run` moves a node's snapshots to a spare (docs/migration.md): auto is fabric when the
// checkpoint service is configured, else local.
enum class MigrateTransport { automatic, local, fabric };

struct Config {
  std::string prefix;         // L3 directory (parallel file system); default "cairn-checkpoints" in cwd
  std::string cache_dir;      // base of the node-local L1 cache; default "/dev/shm"
  int cache_versions = 2;     // versions kept in L1
  SnapshotMode snapshot = SnapshotMode::automatic;
  L1Incremental l1_incremental = L1Incremental::automatic;
  std::string cuda_driver = "libcuda.so.1";  // the CUDA driver library dlopened for device memory; "off": none
  DeviceCopy device_copy = DeviceCopy::wait;
  uint64_t device_piece = 64ull << 20;  // bytes per device copy piece
  int device_hash_threads = 8;          // threads hashing device pieces as they land
  Redundancy redundancy = Redundancy::xor_set;
  int set_size = 4;           // failure groups per redundancy set (xor, rs, partner ring)
  int rs_parity = 2;          // parity shards per set for rs
  int flush_every = 10;       // flush every N-th version to L3 (0: never, only at finalize)
  int l2_every = 1;           // protect every N-th version at L2 (0: never); the others stay L1-only
  int keep_flushed = 2;       // versions kept in L3
  bool recycle_flushed = true;  // a pruned version's data files are overwritten by the next flush
  int full_every = 0;         // L3: 0/1 every version full; N: incremental versions, a full one every N
  int files_per_node = 0;       // L3: 0 = a file per rank, N = N files per node
  int turnstile_width = 0;      // L3: writers per node at a time (0 = no limit)
  std::string data_prefixes;    // L3: extra file systems for data, "PATH[:WEIGHT],..."
  std::string compress = "none";  // L3: none | zstd | zstd:LEVEL
  bool flush_on_finalize = true;
  IntervalMode interval = IntervalMode::fixed;
  double interval_seconds = 0;  // cairn_need_checkpoint period (0: only on halt/signal); auto: the first
  double mtbf_seconds = 0;      // the job's mean time between failures, for interval = auto (0: unknown)
  double l3_mtbf_seconds = 0;   // the part of those failures that only L3 recovers (0: none)
  double halt_seconds = 0;      // checkpoint and exit this long before end_time
  int64_t end_time = 0;         // job end (Unix seconds); 0: none
  std::string exit_signal = "USR1";  // the signal that asks for a checkpoint and an exit (SIGTERM too)
  std::string node;             // failure group of this rank; default: the hostname
  log::Level log_level = log::Level::warn;
  uint64_t chunk_size = 1 << 20;       // checksum granularity (bytes)
  uint64_t exchange_chunk = 4 << 20;   // L2 exchange pipeline unit (bytes)
  int restart_threads = 0;             // threads per rank reading into the regions at a restart; 0: auto
  std::string job;              // job name in the cache path; default derived from prefix
  std::string app_name;         // the application in the prefix's identity; default: the executable's name
  bool adopt = false;           // take over a prefix of another identity
  uint64_t restart_version = 0;  // restart from this version or an older one; 0: the newest
  IfUnrecoverable if_unrecoverable = IfUnrecoverable::stop;
  double lease_seconds = 60;    // the hold on the prefix without renewal
  // Service mode (docs/service.md): L3 through cairnd's agents instead of the embedded flusher.
  std::string service;                     // the controller's HOST:PORT; empty: the embedded flusher
  ServiceMode service_mode = ServiceMode::pull;
  int service_agents = 1;                  // agents per application
  uint64_t service_chunk = 128 << 10;      // bytes per RMA transfer
  uint64_t service_buffer_pool = 8 << 20;  // an agent's buffer pool
  std::string service_provider = "tcp;ofi_rxm";
  double service_timeout = 30;             // seconds the application waits on the service at most
  ServiceRestart service_restart = ServiceRestart::application;  // who reads a restart from L3
  // Process migration (docs/migration.md).
  MigrateTransport migrate_transport = MigrateTransport::automatic;
  std::string migrate_listen = "127.0.0.1";  // where the reader on the node being emptied listens
};

// A knob as declared in the table (for listings and docs).
struct KnobInfo {
  std::string name;         // "cache_versions"
  std::string env;          // "CAIRN_CACHE_VERSIONS"
  std::string type;         // "int", "float", "bool", "string", "enum", "size", "duration", "level"
  std::string default_text; // as shown in docs
  std::string bounds;       // "1..64", "single|partner|xor|rs", ""
  std::string description;
};
const std::vector<KnobInfo>& knob_table();

// Looks up an environment variable; returns nullptr when unset. Tests pass their own.
using EnvLookup = std::function<const char*(const char*)>;
// The process environment; also lists CAIRN_* names present (for unknown-variable warnings).
EnvLookup process_env();
std::vector<std::string> process_env_cairn_names();

struct LoadedConfig {
  Config config;
  std::vector<std::string> warnings;  // e.g. unknown CAIRN_FOO variable
  // Where each knob's value came from, in knob_table() order: "default", "FILE:LINE" or
  // "environment variable CAIRN_X".
  std::vector<std::string> origins;
};

// Defaults, then the TOML file at `path` (nullptr or "" : none; CAIRN_CONFIG names one when nullptr),
// then the environment. Unknown knobs in the file and bad values anywhere are ERR_CONFIG with a message
// naming the knob, the source (file:line or variable) and the accepted values.
Result<LoadedConfig> load_config(const char* path, const EnvLookup& env,
                                 const std::vector<std::string>& env_cairn_names);

// Renderings of the table.
// `cairn config --list`: one `name = value` line per knob (valid TOML), followed by `# origin`
// when `origins` (in knob_table() order, as in LoadedConfig) is given.
std::string render_knob_list(const Config& effective, const std::vector<std::string>& origins = {});
std::string render_knob_list(const LoadedConfig& loaded);
// Each knob's effective value as a TOML literal (what --list shows), in knob_table() order: 42, 0.5,
// true, "1M", "xor" (also valid JSON: `cairn config --json`).
std::vector<std::string> knob_values_toml(const Config& effective);
std::string render_knob_markdown();                     // docs/config.md table
std::string render_sample_toml();                       // commented sample config

}  // namespace cairn
