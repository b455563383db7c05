// The rank's side of service mode: one thread per rank that keeps the connection to the controller
// (registration, reassignment), the session with the rank's agent, the libfabric endpoint and the
// registrations of the rank's L1 slots, and moves the versions handed to it:
//
//   pull  the agent fi_reads the slot; this thread makes progress for the provider (with manual data
//         progress, tcp, a read of our memory is served only while someone polls our endpoint)
//   push  this thread fi_writes chunks of the slot into the buffers the agent credits, and says so
//
// A job ends done (the agent says the rank's files are durable), failed (the agent said why, or no
// agent said anything about it for `timeout_s`, or the controller is gone), or cancelled. A job whose
// agent is lost goes to the replacement the controller names, within the same timeout. When a job does
// not end done, the registration of its slot is revoked (the key dies with it) before anyone else
// touches the slot. ServiceFlusher turns this into the Flusher contract with the embedded fallback.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/fsutil.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"
#include "pipeline/flusher.hpp"
#include "l3/l3_store.hpp"
#include "wire/message.hpp"
#include "wire/socket.hpp"

namespace cairn::fabric {
class Endpoint;
class MemoryRegion;
}

namespace cairn::flush {

// The contract the flushers implement (pipeline/flusher.hpp).
using pipeline::Flusher;
using pipeline::FlushRequest;
using pipeline::FlushTicket;
using pipeline::RestoreTarget;

struct ServiceSettings {
  wire::HostPort controller;
  wire::TransferMode mode = wire::TransferMode::pull;
  uint32_t agents_wanted = 1;
  uint32_t chunk_size = 128 << 10;
  uint64_t pool_bytes = 8 << 20;
  std::string provider = "tcp;ofi_rxm";
  double timeout_s = 10;
  // The application, as registered.
  std::string app_name, job, prefix;
  std::vector<std::string> data_roots;
  uint32_t turnstile_width = 0;
  double interval_s = 0;
  wire::AppKey key{};
  uint32_t rank = 0, nranks = 1;
  uint64_t bytes = 0;  // snapshot bytes, if known at start
};

class ServiceLink {
 public:
  explicit ServiceLink(ServiceSettings s);
  ServiceLink(const ServiceLink&) = delete;
  ServiceLink& operator=(const ServiceLink&) = delete;
  ~ServiceLink();  // unregisters, closes the sessions, revokes every registration

  // Wait until the rank has an agent to talk to, or it is clear it will not get one soon (controller
  // unreachable or refusing), at most timeout_s. True when an agent session is up.
  bool wait_ready(double timeout_s);
  // Worth posting to: registered with a controller that has (or is getting) an agent for this rank.
  bool available() const;

  // The flushers' asynchronous lifecycle (pipeline/flusher.hpp): post a version, then test, wait or cancel
  // its ticket until the ticket is finished -- test or wait said done, or cancel returned -- which happens
  // exactly once; the ticket is unknown afterwards (ERR_INVALID_ARG, and done). Two differences, because
  // the service flusher that uses the link falls back to the embedded flusher: wait is bounded, and the
  // outcome is the service's alone (a failure here is where the fallback starts).
  // Hand over one version. `data` (manifest.total_size bytes, the slot) stays untouched and readable until
  // the ticket is finished. zstd_level > 0: the agent stores the chunks compressed at that level (a
  // placement of the rank's own file, recorded). ERR_NOT_SUPPORTED when the service is not available.
  Result<FlushTicket> post(uint64_t version, const Manifest& manifest, const uint8_t* data, int slot,
                           const l3::RankPlacement& place, int zstd_level = 0);
  // Never blocks. *done false: still moving. *done true: finished, and the Status is the outcome: ok when
  // the agent said the rank's files are durable, else why the service gave it up (the agent failed it, no
  // agent said anything about it for timeout_s, the controller went, the link closed).
  Status test(FlushTicket ticket, bool* done);
  // Block up to timeout_s for the ticket to finish; then as test.
  Status wait(FlushTicket ticket, double timeout_s, bool* done);
  // Stop the version: tell the agent, revoke the slot's registration, and return once this process no
  // longer reads the slot (no write of it in flight; bounded, so that a wedged provider cannot hold the
  // pipeline). Finishes the ticket: ok if it had ended done anyway, else its outcome (ERR_CANCELLED when
  // this stopped it).
  Status cancel(FlushTicket ticket);

  // Restart from L3 through the agent (service_restore.cpp): the agent reads version `version` of this
  // rank from the prefix, verifies it and fi_writes each region's bytes into `targets` (registered here
  // for remote writes until the call returns). OK when the agent says every region was written; the
  // caller verifies what landed. Any failure, or no answer within timeout_s: an error, and the
  // registrations are revoked before the call returns (no write of the agent lands afterwards).
  using RestoreTarget = pipeline::RestoreTarget;
  Status restore(uint64_t version, const std::vector<RestoreTarget>& targets, double timeout_s);
  // Dynamic agents: take a new agent the controller offered (a scaling change) now, unless a version is in
  // flight (then as soon as it ends). Without a probe the offer is taken at the next version handed over,
  // before it goes out. *changed: this rank's agent is another than at the previous probe (a scaling
  // change or the replacement of a lost agent). Waits at most a second for the link's thread.
  Status probe(bool* changed);

  // For logs and tests: the agent serving this rank now (0: none), and where.
  uint64_t agent_id() const;
  std::string agent_where() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::flush
