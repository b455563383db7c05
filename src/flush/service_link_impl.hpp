// ServiceLink's state and the thread that owns it. Private to the link's files:
//   service_link.cpp     the API (post, test, wait, cancel, probe), the thread's loop, and what it does when
//                        the controller or the agent speaks or goes (the glue between the three parts below)
//   service_restore.cpp  the restore through the agent
// The thread drives three parts, each with its own contract at the top of its header:
//   ControllerClient  (controller_client)  registration, the assigned and offered agents, usage, backoff
//   AgentSession      (agent_session)      the session with the current agent, the fabric endpoint, the
//                                          jobs' movement there (flush, push writes, deadlines, cancels)
//   SlotRegistry      (slot_registry)      the slots' registrations with the endpoint
// What the callers and the thread share is below mu: the jobs (link_job.hpp), the restore, the agent as
// the callers see it.
#pragma once

#include <memory>
#include <vector>

#include "fabric/endpoint.hpp"
#include "flush/agent_session.hpp"
#include "flush/controller_client.hpp"
#include "flush/link_job.hpp"
#include "flush/service_link.hpp"
#include "flush/slot_registry.hpp"
#include "wire/session_messages.hpp"

namespace cairn::flush {

// A restore asked of the agent (service_restore.cpp).
struct LinkRestore {
  uint64_t version = 0;
  std::vector<ServiceLink::RestoreTarget> targets;
  bool sent = false, ended = false, abandon = false;
  Status outcome;
  std::vector<std::unique_ptr<fabric::MemoryRegion>> regions;  // revoked when it ends
};

// What the callers see of the rank's agent, as the link's thread last published it.
struct AgentView {
  bool settled = false;    // wait_ready may return: an agent is up, or none will be soon
  bool available = false;  // registered, and an agent is up or being started
  uint64_t id = 0;         // the agent serving the rank (0: none)
  std::string where;       // its manager and address, for logs
  uint64_t changes = 0, changes_seen = 0;  // agent changes, and how many the last probe saw
  bool probe_requested = false;            // cairn_probe_agents: take an offered agent now
};

struct ServiceLink::Impl : ControllerClient::Listener {
  explicit Impl(ServiceSettings settings) : s(std::move(settings)) {}
  ServiceSettings s;

  // Shared with the callers, under mu; cv wakes them when a job, the restore or the agent changes.
  std::mutex mu;
  std::condition_variable cv;
  JobTable jobs;
  std::unique_ptr<LinkRestore> restore;
  AgentView agent;
  bool stop = false;
  fs::Fd wake;  // the callers wake the thread (notify)
  std::thread thread;

  // Owned by the thread.
  SlotRegistry slots;
  ControllerClient ctl{s, *this};
  AgentSession session{s, slots};

  void run();
  void notify(uint64_t n = 1);
  void set_available(bool avail, bool settle);
  void connect_controller();
  void connect_agent();
  // What the controller's words mean for the jobs and the session (ControllerClient::Listener).
  void controller_refused(const std::string& why) override;
  void agent_assigned(bool changed, bool replaced) override;
  void controller_gone() override;
  bool offer_due();  // under mu
  void take_offer();
  void on_agent_frame(const wire::Frame& f);
  void agent_lost(const std::string& why, bool ask_for_another);
  void progress_fabric();
  bool fabric_busy() const;  // under mu
  // restore (service_restore.cpp), under mu
  void drive_restore();
  void on_restored(const wire::Restored& m);
  void end_restore(const Status& why);
};

}  // namespace cairn::flush
