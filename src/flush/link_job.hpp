// One version posted to the service link (a job), and the link's table of them (JobTable), which its
// callers and its thread share under the link's lock (flush/service_link_impl.hpp). The agent session
// moves the jobs (flush/agent_session), the link's callers watch them through their tickets
// (ServiceLink::test, wait, cancel).
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
  double last_heard = 0;      // the last sign of life about it from an agent (or its submission)
  bool cancel_requested = false;
  // push
  uint64_t next_offset = 0;
  std::deque<uint64_t> credits;
  int writes_in_flight = 0;
};

// The link's jobs by id, under the link's lock.
using LinkJobs = std::map<uint64_t, LinkJob>;

// The table of jobs that the link's callers and its thread share, and what the link learns from the
// versions handed to it. Every member function is called with the link's lock held.
class JobTable {
 public:
  // A new job (its id is set here): the interval between the versions handed over, from when the
  // application made them (the manifest's creation), not when they reach the link, which they may do
  // late (the first version's set-up) or back to back (versions queued behind a slow drain).
  uint64_t add(LinkJob j);
  LinkJob* find(uint64_t id);
  // Unknown, or no longer pending: the ticket's caller may finish it.
  bool ended(uint64_t id) const;
  // An ended job's ticket is finished (the job leaves the table) and its outcome returned; *done false
  // (and ok) while it is pending; ERR_INVALID_ARG for an unknown ticket.
  Status finish(uint64_t id, bool* done);
  // The link's thread is to stop the job (ERR_INVALID_ARG for an unknown ticket).
  Status request_cancel(uint64_t id);
  // The job leaves the table; its outcome: ERR_CANCELLED if it was still pending.
  Status cancelled(uint64_t id);
  // Every pending job (with unsent_only: every one no agent has yet) ends `st` with `why`.
  void end_pending(FlushState st, const Status& why, SlotRegistry& slots, bool unsent_only = false);
  // Whether some pending job, not being cancelled, waits to go out, and whether one is at the agent.
  void pending(bool* unsent, bool* in_flight) const;
  // Some job is pending, or a write of its slot is in flight: the fabric has work.
  bool moving() const;
  double interval_s() const { return interval_s_; }
  // For the agent session, which moves the rows.
  LinkJobs& rows() { return jobs_; }

 private:
  LinkJobs jobs_;
  uint64_t next_id_ = 1;
  double last_made_ = 0, interval_s_ = 0;
};

// The job ends (under the link's lock) with its outcome, and the registration of its slot is revoked:
// whoever had the key, it is dead now (a job that is resent registers anew). The caller wakes the link's
// callers (its condition variable) before it lets the lock go.
inline void end_job(LinkJob& j, FlushState st, const Status& why, SlotRegistry& slots) {
  j.state = st;
  j.outcome = st == FlushState::done ? Status::ok() : why;
  slots.revoke(j.slot);
}

}  // namespace cairn::flush
