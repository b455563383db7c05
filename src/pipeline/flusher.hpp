// The L3 seam: a flusher moves one rank's sealed version from its L1 slot to the prefix, in the
// background, with one asynchronous lifecycle -- post, test, wait, cancel -- the shape of AXL's and
// VeloC's transfer modules. The pipeline's stages do not know who moves the bytes:
//
//   embedded  a thread of this process writes the slot with l3::write_rank (flush/embedded_flusher)
//   service   agents of cairnd pull the slot over libfabric RMA and write it (the service mode)
//
// Whoever writes, the result on disk is the same: the rank's data, its where-record when the layout
// needs one, and its manifest written last (l3::write_rank's order, docs/format.md "L3"). A flusher never
// writes COMMIT: the pipeline does, on rank 0, once every rank's flusher reported success.
//
// The contract
// - post(request) hands one version of this rank to the flusher and returns at once with a ticket. From
//   then until the ticket is finished (test() said done, wait() returned, or cancel() returned) the
//   flusher may read request.data (the L1 slot) and nobody writes to it: the pipeline keeps the slot lent
//   to the version until it has left the pipeline. Posting never blocks on the transfer; a request that
//   cannot even be queued (flusher stopped, bad request) returns an error and no ticket.
// - test(ticket, &done) never blocks. done = false: still moving. done = true: the ticket is finished and
//   the returned Status is the outcome (ok: the rank's files are durable in the prefix).
// - wait(ticket) blocks until the ticket is finished and returns its outcome.
// - cancel(ticket) asks the flusher to stop; it returns once the flusher no longer reads the slot, with
//   the outcome if the transfer finished anyway, else ERR_CANCELLED. A cancelled transfer may leave
//   partial files of the version; they are never read (no COMMIT) and pruned later.
// - Each ticket is finished exactly once (by test, wait or cancel); using it afterwards is ERR_INVALID_ARG.
// - Tickets are finished in any order. post/test/wait/cancel are called from one thread at a time
//   (the pipeline's), but the transfer itself runs elsewhere (a thread, or another process).
// - A flusher is stopped by its destructor, which cancels what is still in flight.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn::pipeline {

// One rank's part of one version, to be written to L3.
struct FlushRequest {
  uint64_t version = 0;
  const Manifest* manifest = nullptr;  // sealed: chunk hashes filled; valid until the ticket is finished
  const uint8_t* data = nullptr;       // manifest->total_size bytes: the version's L1 slot
  int slot = 0;                        // which slot of this rank's cache holds it (service: the
  std::string slot_path;               //   registered mapping of that slot file)
  // Called once between the data and the manifest, where a failure at the "flush" phase is injected
  // (cairn run --phase flush). Only the embedded flusher can honour it; may be empty.
  std::function<void()> after_data;
  // May be null. Where set, a flusher that hands the version to another one (the service flusher falling
  // back to the embedded one) writes that one's name here before the ticket finishes; the caller sets it
  // to the posting flusher's name first. It says who moved the version: the job history's `via`.
  std::string* via = nullptr;
  // May be null. Where set, a flusher that learns how many bytes it put into L3 files for this rank (the
  // embedded one: the stream, its compressed chunks, or an incremental version's changed chunks) writes
  // them here before the ticket finishes with success; one that does not (the service's agents do not
  // report it) leaves the caller's value as it was.
  uint64_t* written = nullptr;
};

using FlushTicket = uint64_t;  // 0 is never a valid ticket

// A region a restart through a flusher's agents writes into (Flusher::restore).
struct RestoreTarget {
  std::string name;
  uint8_t* ptr = nullptr;
  uint64_t size = 0;
};

class Flusher {
 public:
  virtual ~Flusher() = default;
  // "embedded", "service": recorded in the job history as the version's `via`.
  virtual const char* name() const = 0;
  virtual Result<FlushTicket> post(const FlushRequest& request) = 0;
  virtual Status test(FlushTicket ticket, bool* done) = 0;
  virtual Status wait(FlushTicket ticket) = 0;
  virtual Status cancel(FlushTicket ticket) = 0;

  // What only a flusher with checkpoint agents does (the service's, docs/service.md); the others keep
  // these defaults. cairn_probe_agents: take an agent offered now, *changed if the serving agent changed.
  virtual Status probe_agents(bool* changed) {
    *changed = false;
    return Status::ok();
  }
  // Restart of version v from L3 through the agents into `targets`; the caller verifies what landed.
  virtual Status restore(uint64_t /*version*/, const std::vector<RestoreTarget>& /*targets*/) {
    return Status(Code::ERR_NOT_SUPPORTED, "service mode is off (the service knob is empty)");
  }
};

}  // namespace cairn::pipeline
