// One version posted to the service link (a job): the row of the link's table that its callers and its
// thread share under the link's lock (flush/service_link_impl.hpp). The agent session moves it
// (flush/agent_session), the link's callers watch it through its ticket (ServiceLink::test, wait, cancel).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "base/manifest.hpp"
#include "base/status.hpp"
#include "flush/service_link.hpp"
#include "flush/slot_registry.hpp"
#include "l3/l3_store.hpp"

namespace cairn::flush {

// Where one posted version (a job of the link: its flush by the agent) stands. Not base/job_state's
// JobState, the job state file.
enum class FlushState { pending, done, failed, cancelled };

struct LinkJob {
  uint64_t id = 0, version = 0;
  Manifest manifest;
  std::string manifest_bytes;
  const uint8_t* data = nullptr;
  int slot = 0;
  l3::RankPlacement place;
  int zstd_level = 0;
  FlushState state = FlushState::pending;
  Status outcome;
  bool sent = false;          // the current agent has it
  uint64_t generation = 0;    // counts the times it was sent: a push write of an earlier sending is stale
  uint64_t sent_to = 0;
  double last_heard = 0;      // the last sign of life about it from an agent (or its submission)
  bool cancel_requested = false;
  // push
  uint64_t next_offset = 0;
  std::deque<uint64_t> credits;
  int writes_in_flight = 0;
};

// The link's jobs by id, under the link's lock.
using LinkJobs = std::map<uint64_t, LinkJob>;

// The job ends (under the link's lock) with its outcome, and the registration of its slot is revoked:
// whoever had the key, it is dead now (a job that is resent registers anew). The caller wakes the link's
// callers (its condition variable) before it lets the lock go.
inline void end_job(LinkJob& j, FlushState st, const Status& why, SlotRegistry& slots) {
  j.state = st;
  j.outcome = st == FlushState::done ? Status::ok() : why;
  slots.revoke(j.slot);
}

}  // namespace cairn::flush
