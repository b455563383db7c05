// ServiceLink's state and the thread that owns it (service_link.cpp: the API, the loop, the controller;
// service_session.cpp: the agent session, the slots' registrations, push writes). Private to those files.
#pragma once

#include <deque>

#include "fabric/endpoint.hpp"
#include "flush/service_link.hpp"
#include "wire/session_messages.hpp"

namespace cairn::flush {

struct PushOp : fabric::OpContext {
  uint64_t job = 0, generation = 0, offset = 0, buffer = 0;
  uint32_t len = 0;
};

struct LinkJob {
  uint64_t id = 0, version = 0;
  Manifest manifest;
  std::string manifest_bytes;
  const uint8_t* data = nullptr;
  int slot = 0;
  l3::RankPlacement place;
  int zstd_level = 0;
  ServiceLink::FlushState state = ServiceLink::FlushState::pending;
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

// A restore asked of the agent (service_restore.cpp).
struct LinkRestore {
  uint64_t version = 0;
  std::vector<ServiceLink::RestoreTarget> targets;
  bool sent = false, ended = false, abandon = false;
  Status outcome;
  std::vector<std::unique_ptr<fabric::MemoryRegion>> regions;  // revoked when it ends
};

struct ServiceLink::Impl {
  explicit Impl(ServiceSettings settings) : s(std::move(settings)) {}
  ServiceSettings s;

  // Shared with the callers, under mu.
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, LinkJob> jobs;
  std::unique_ptr<LinkRestore> restore;
  uint64_t next_job = 1;
  double last_made = 0, interval_s = 0;  // between the making of the last two versions handed over
  bool settled = false;    // wait_ready may return: an agent is up, or none will be soon
  bool available = false;  // registered, and an agent is up or being started
  bool stop = false;
  uint64_t agent_id_pub = 0;
  bool probe_requested = false;  // cairn_probe_agents: take an offered agent now
  uint64_t changes = 0, changes_seen = 0;  // agent changes, and how many the last probe saw
  std::string agent_where_pub;
  fs::Fd wake;
  std::thread thread;

  // Owned by the thread.
  std::unique_ptr<wire::Connection> ctl;
  bool registered = false;
  uint64_t app_id = 0;
  double next_ctl = 0, backoff = 0.5;
  bool have_assignment = false;
  wire::Assigned assigned;
  bool have_offer = false;    // the controller offered another agent (dynamic agents): taken between versions
  bool switch_asked = false;  // a probe asked for it while a version was in flight
  wire::Assigned offer;
  std::unique_ptr<wire::Connection> agent;
  bool welcomed = false;
  wire::SessionWelcome welcome;
  uint64_t agent_peer = 0;
  bool have_agent_peer = false;
  std::unique_ptr<fabric::Endpoint> ep;
  std::map<int, std::unique_ptr<fabric::MemoryRegion>> slot_mr;
  std::vector<std::unique_ptr<PushOp>> free_ops;
  bool warned_unavailable = false;
  uint64_t reported_bytes = 0;  // what rank_usage said last
  double reported_interval = 0;
  bool agent_suspect = false;  // a job timed out at the current agent: give it up (outside mu)

  void run();
  void notify(uint64_t n = 1);
  void job_warning(const std::string& message);
  void set_available(bool avail, bool settle);
  // controller (service_link.cpp)
  void connect_controller();
  void on_controller_frame(const wire::Frame& f);
  void controller_lost(const std::string& why);
  bool offer_due();  // under mu
  void take_offer();
  // agent session (service_session.cpp)
  void connect_agent();
  void on_agent_frame(const wire::Frame& f);
  void agent_lost(const std::string& why, bool ask_for_another);
  void send_jobs();
  void push_chunks();
  void progress_fabric();
  void check_deadlines();
  void handle_cancels();
  void end_job(LinkJob& j, ServiceLink::FlushState st, const Status& why);
  Result<fabric::MemoryRegion*> registration(LinkJob& j);
  void revoke(int slot);
  bool fabric_busy() const;
  // restore (service_restore.cpp), under mu
  void drive_restore();
  void on_restored(const wire::Restored& m);
  void end_restore(const Status& why);
};

}  // namespace cairn::flush
