// The control messages: ranks and the controller (registration, reassignment), managers and the
// controller (agents started, stopped, lost, their load), and the status query. Field order and
// limits are the wire format (docs/format.md, "The service's wire protocol").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/message.hpp"

namespace cairn::wire {

inline bool absolute_path(const std::string& p) { return !p.empty() && p[0] == '/'; }

// A rank announces itself and its application. The first rank of an unknown key creates the
// application; the others (same key) join it.
struct RegisterRank {
  static constexpr Type kType = Type::register_rank;
  std::string app_name, job;
  AppKey key{};
  uint32_t rank = 0, nranks = 0;
  uint64_t bytes = 0;       // this rank's snapshot bytes (0: not known yet)
  double interval_s = 0;    // seconds between checkpoints (0: not known)
  std::string prefix;       // absolute: where the application's versions live
  std::vector<std::string> data_roots;  // absolute: further file systems its data files may lie on
  TransferMode mode = TransferMode::pull;
  uint32_t agents_wanted = 1;
  uint32_t chunk_size = 128 << 10;  // transfer chunk
  uint64_t pool_bytes = 8 << 20;    // an agent's buffer pool
  uint32_t turnstile_width = 0;
  std::string provider = "tcp;ofi_rxm";  // the libfabric provider the ranks opened; the agents use the same
  std::string host;
  uint32_t pid = 0;
  void write(Writer& w) const {
    w.bytes(app_name), w.bytes(job), w.fixed(key), w.u32(rank), w.u32(nranks), w.u64(bytes), w.f64(interval_s);
    w.bytes(prefix), w.strings(data_roots), w.u8(uint8_t(mode)), w.u32(agents_wanted), w.u32(chunk_size);
    w.u64(pool_bytes), w.u32(turnstile_width), w.bytes(provider), w.bytes(host), w.u32(pid);
  }
  void read(Reader& r) {
    app_name = r.bytes(kMaxName), job = r.bytes(kMaxName), key = r.fixed<16>(), rank = r.u32(), nranks = r.u32();
    bytes = r.u64(), interval_s = r.f64(), prefix = r.bytes(kMaxPath), data_roots = r.strings(kMaxRoots, kMaxPath);
    mode = TransferMode(r.u8()), agents_wanted = r.u32(), chunk_size = r.u32(), pool_bytes = r.u64();
    turnstile_width = r.u32(), provider = r.bytes(kMaxName), host = r.bytes(kMaxName), pid = r.u32();
  }
  std::string invalid() const {
    if (app_name.empty()) return "empty application name";
    if (nranks == 0 || rank >= nranks) return "rank " + std::to_string(rank) + " of " + std::to_string(nranks);
    if (!absolute_path(prefix)) return "the prefix is not an absolute path";
    for (const auto& d : data_roots)
      if (!absolute_path(d)) return "a data prefix is not an absolute path";
    if (uint8_t(mode) > 1) return "unknown transfer mode " + std::to_string(uint8_t(mode));
    if (agents_wanted == 0) return "zero agents wanted";
    if (chunk_size < 4096 || chunk_size > (64u << 20)) return "transfer chunk outside 4 KiB..64 MiB";
    if (pool_bytes < chunk_size || pool_bytes > (uint64_t(16) << 30)) return "buffer pool outside chunk..16 GiB";
    if (interval_s < 0) return "negative interval";
    if (provider.empty()) return "no libfabric provider";
    return "";
  }
};

// The controller's answer to register_rank and reassign: the agent that serves the rank.
struct Assigned {
  static constexpr Type kType = Type::assigned;
  uint64_t app_id = 0;
  uint32_t slot = 0;        // which of the application's agents (ranks are cut into blocks)
  uint64_t agent_id = 0;
  std::string agent_address;  // HOST:PORT of its session listener
  std::string manager;        // the checkpoint node it runs on
  void write(Writer& w) const { w.u64(app_id), w.u32(slot), w.u64(agent_id), w.bytes(agent_address), w.bytes(manager); }
  void read(Reader& r) {
    app_id = r.u64(), slot = r.u32(), agent_id = r.u64(), agent_address = r.bytes(kMaxName), manager = r.bytes(kMaxName);
  }
  std::string invalid() const { return app_id && agent_id && !agent_address.empty() ? "" : "no application or agent"; }
};

// A rank's agent stopped answering (connection lost, or silent past the timeout).
struct Reassign {
  static constexpr Type kType = Type::reassign;
  uint64_t app_id = 0;
  AppKey key{};
  uint32_t rank = 0;
  uint64_t lost_agent = 0;
  void write(Writer& w) const { w.u64(app_id), w.fixed(key), w.u32(rank), w.u64(lost_agent); }
  void read(Reader& r) { app_id = r.u64(), key = r.fixed<16>(), rank = r.u32(), lost_agent = r.u64(); }
  std::string invalid() const { return ""; }
};

struct Unregister {
  static constexpr Type kType = Type::unregister;
  uint64_t app_id = 0;
  AppKey key{};
  uint32_t rank = 0;
  void write(Writer& w) const { w.u64(app_id), w.fixed(key), w.u32(rank); }
  void read(Reader& r) { app_id = r.u64(), key = r.fixed<16>(), rank = r.u32(); }
  std::string invalid() const { return ""; }
};

// What a rank checkpoints, once known and whenever it changes: the bytes of its latest version and the
// seconds between its last two versions (what placement policies weigh; `cairn status` shows them).
struct RankUsage {
  static constexpr Type kType = Type::rank_usage;
  uint64_t app_id = 0;
  AppKey key{};
  uint32_t rank = 0;
  uint64_t bytes = 0;
  double interval_s = 0;
  void write(Writer& w) const { w.u64(app_id), w.fixed(key), w.u32(rank), w.u64(bytes), w.f64(interval_s); }
  void read(Reader& r) { app_id = r.u64(), key = r.fixed<16>(), rank = r.u32(), bytes = r.u64(), interval_s = r.f64(); }
  std::string invalid() const { return interval_s >= 0 ? "" : "negative interval"; }
};

struct ManagerHello {
  static constexpr Type kType = Type::manager_hello;
  std::string name;   // unique per controller: the same process reconnecting replaces itself, another is refused
  std::string host;   // the address its agents listen on
  uint32_t capacity = 0;  // agents it may run
  uint32_t pid = 0;
  std::string token;  // the deployment's shared secret (empty: none configured)
  void write(Writer& w) const { w.bytes(name), w.bytes(host), w.u32(capacity), w.u32(pid), w.bytes(token); }
  void read(Reader& r) {
    name = r.bytes(kMaxName), host = r.bytes(kMaxName), capacity = r.u32(), pid = r.u32(), token = r.bytes(kMaxName);
  }
  std::string invalid() const { return name.empty() || host.empty() ? "empty manager name or host" : ""; }
};

struct ManagerWelcome {
  static constexpr Type kType = Type::manager_welcome;
  uint64_t manager_id = 0;
  void write(Writer& w) const { w.u64(manager_id); }
  void read(Reader& r) { manager_id = r.u64(); }
  std::string invalid() const { return manager_id ? "" : "manager id 0"; }
};

// Start one agent for one application. The manager hands it on, unchanged, to the agent's stdin.
struct StartAgent {
  static constexpr Type kType = Type::start_agent;
  uint64_t agent_id = 0, app_id = 0;
  AppKey key{};
  std::string app_name;
  uint32_t nranks = 0;
  std::string prefix;
  std::vector<std::string> data_roots;
  TransferMode mode = TransferMode::pull;
  uint32_t chunk_size = 0;
  uint64_t pool_bytes = 0;
  std::string provider;
  uint32_t turnstile_width = 0;
  std::string chain;  // the stages a version goes through (service/agent/stage_chain.hpp)
  void write(Writer& w) const {
    w.u64(agent_id), w.u64(app_id), w.fixed(key), w.bytes(app_name), w.u32(nranks), w.bytes(prefix);
    w.strings(data_roots), w.u8(uint8_t(mode)), w.u32(chunk_size), w.u64(pool_bytes), w.bytes(provider);
    w.u32(turnstile_width), w.bytes(chain);
  }
  void read(Reader& r) {
    agent_id = r.u64(), app_id = r.u64(), key = r.fixed<16>(), app_name = r.bytes(kMaxName), nranks = r.u32();
    prefix = r.bytes(kMaxPath), data_roots = r.strings(kMaxRoots, kMaxPath), mode = TransferMode(r.u8());
    chunk_size = r.u32(), pool_bytes = r.u64(), provider = r.bytes(kMaxName), turnstile_width = r.u32();
    chain = r.bytes(kMaxText);
  }
  std::string invalid() const {
    if (!agent_id || !app_id || nranks == 0) return "no agent, application or ranks";
    if (!absolute_path(prefix)) return "the prefix is not an absolute path";
    for (const auto& d : data_roots)
      if (!absolute_path(d)) return "a data prefix is not an absolute path";
    if (uint8_t(mode) > 1) return "unknown transfer mode";
    if (chunk_size < 4096 || chunk_size > (64u << 20) || pool_bytes < chunk_size || pool_bytes > (uint64_t(16) << 30))
      return "transfer chunk or buffer pool out of range";
    if (provider.empty()) return "no libfabric provider";
    if (chain.empty()) return "no chain of stages";
    return "";
  }
};

struct StopAgent {
  static constexpr Type kType = Type::stop_agent;
  uint64_t agent_id = 0;
  void write(Writer& w) const { w.u64(agent_id); }
  void read(Reader& r) { agent_id = r.u64(); }
  std::string invalid() const { return ""; }
};

// The agent listens: ranks may connect.
struct AgentUp {
  static constexpr Type kType = Type::agent_up;
  uint64_t agent_id = 0;
  uint32_t pid = 0;
  std::string address;  // HOST:PORT
  void write(Writer& w) const { w.u64(agent_id), w.u32(pid), w.bytes(address); }
  void read(Reader& r) { agent_id = r.u64(), pid = r.u32(), address = r.bytes(kMaxName); }
  std::string invalid() const { return agent_id && !address.empty() ? "" : "no agent id or address"; }
};

struct AgentExit {
  static constexpr Type kType = Type::agent_exit;
  uint64_t agent_id = 0;
  int32_t status = 0;  // exit status, or -signal
  std::string reason;
  void write(Writer& w) const { w.u64(agent_id), w.i32(status), w.bytes(reason); }
  void read(Reader& r) { agent_id = r.u64(), status = r.i32(), reason = r.bytes(kMaxText); }
  std::string invalid() const { return ""; }
};

// An agent's load, every half second while it runs.
struct AgentStats {
  static constexpr Type kType = Type::agent_stats;
  uint64_t agent_id = 0;
  uint32_t sessions = 0;        // ranks connected
  uint32_t queued = 0;          // flush requests waiting
  uint64_t bytes_drained = 0;   // written and verified, since start
  uint64_t transfers_done = 0, transfers_failed = 0;
  double busy_s = 0;            // seconds with a transfer in progress
  uint32_t active_rank = UINT32_MAX;  // the transfer in progress (UINT32_MAX: none)
  uint64_t active_version = 0, active_done = 0, active_total = 0;
  void write(Writer& w) const {
    w.u64(agent_id), w.u32(sessions), w.u32(queued), w.u64(bytes_drained), w.u64(transfers_done);
    w.u64(transfers_failed), w.f64(busy_s), w.u32(active_rank), w.u64(active_version), w.u64(active_done);
    w.u64(active_total);
  }
  void read(Reader& r) {
    agent_id = r.u64(), sessions = r.u32(), queued = r.u32(), bytes_drained = r.u64(), transfers_done = r.u64();
    transfers_failed = r.u64(), busy_s = r.f64(), active_rank = r.u32(), active_version = r.u64();
    active_done = r.u64(), active_total = r.u64();
  }
  std::string invalid() const { return busy_s >= 0 && active_done <= active_total ? "" : "inconsistent counters"; }
};

struct StatusRequest {
  static constexpr Type kType = Type::status_request;
  uint32_t flags = 0;  // none defined; must be 0
  void write(Writer& w) const { w.u32(flags); }
  void read(Reader& r) { flags = r.u32(); }
  std::string invalid() const { return flags == 0 ? "" : "unknown flags"; }
};

struct StatusReply {
  static constexpr Type kType = Type::status_reply;
  std::string json;  // docs/service.md, "cairn status"
  void write(Writer& w) const { w.bytes(json); }
  void read(Reader& r) { json = r.bytes(kMaxPayload); }
  std::string invalid() const { return ""; }
};

}  // namespace cairn::wire
