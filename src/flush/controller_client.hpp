// The service link's connection to the controller (cairnd): it registers the rank, learns which agent
// serves it (an assignment), hears of another one offered when the controller scales the application's
// agents (an offer, taken between versions), asks for a replacement when an agent is unreachable or lost,
// reports what the rank checkpoints and how often (rank_usage), and says goodbye when the link closes.
// When the controller is unreachable it tries again with a backoff (0.5 s doubling to 10 s).
//
// It knows nothing of the versions or the agent session: what the controller's words mean for them it
// tells the link through Listener, at the moment it happens. Owned by the link and used on its thread
// only (no lock of its own).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "flush/service_link.hpp"
#include "wire/control_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::flush {

class ControllerClient {
 public:
  // The link's side, called from on_frame and lost().
  class Listener {
   public:
    virtual ~Listener() = default;
    // The controller refused the registration or has no agent for the rank now (an assignment may still
    // come on this connection): versions not yet with an agent go elsewhere.
    virtual void controller_refused(const std::string& why) = 0;
    // An assignment was taken (assigned() is it). changed: another agent than the one before, or the first;
    // replaced: it replaces an earlier agent (a change cairn_probe_agents reports).
    virtual void agent_assigned(bool changed, bool replaced) = 0;
    // The connection is gone (the client is already back to unconnected, retrying after its backoff).
    virtual void controller_gone() = 0;
  };

  ControllerClient(const ServiceSettings& s, Listener& link) : s_(s), link_(link) {}

  // The connection, for the link's poll and frame pump; nullptr when there is none.
  wire::Connection* connection() const { return ctl_.get(); }
  // Not connected, and the backoff has passed: time to dial.
  bool due(double now) const { return !ctl_ && now >= next_; }
  // Connect (TCP). False: unreachable, said once until it is reachable again, and retried after the
  // backoff. True: connected, not yet registered (register_rank).
  bool dial();
  // The local address of the connection: the interface that reaches the service reaches its agents too.
  std::string local_ip() const;
  // Close the connection and never dial again (the fabric endpoint cannot be opened: service mode off).
  void give_up();
  // Register the rank (wire::RegisterRank), whose endpoint speaks `provider`; the answer is an assignment.
  void register_rank(const std::string& provider);
  // Leaving: unregister (when registered) and wait up to half a second for it to go out; then close().
  void unregister();
  void close() { ctl_.reset(); }

  // A frame from the controller: an assignment, an offer, or a refusal.
  void on_frame(const wire::Frame& f);
  // The connection failed (`why`): said (rank 0 warns), back to unconnected, and the listener is told.
  void lost(const std::string& why);

  // Registered and assigned an agent: the link may open the session with assigned().
  bool has_assignment() const { return ctl_ && registered_ && have_assignment_; }
  const wire::Assigned& assigned() const { return assigned_; }
  uint64_t app_id() const { return app_id_; }
  // The assigned agent is unreachable: ask for another (connected only).
  void agent_unreachable();
  // The agent is lost: ask for another, when registered and assigned (else nothing to ask).
  void replace_agent();

  // Dynamic agents. An offered agent is taken between versions (the link decides when: offer_due).
  bool has_offer() const { return have_offer_; }
  // cairn_probe_agents asked: an offer held now is to be taken as soon as no version is in flight.
  void probe() { switch_asked_ = have_offer_; }
  // An offer held this long while the rank hands nothing over is taken then: a rank that stopped
  // checkpointing (done, or in a long phase without versions) must not keep a dropped agent running, whose
  // place another application may wait for.
  static constexpr double kIdleTakeSeconds = 1.0;
  // The offer is to be taken now: one is held, a probe asked for it, a version waits to go out, or it is
  // kIdleTakeSeconds old at `now` (monotonic seconds) with nothing waiting
  // (`unsent`), and no version is in flight at the current agent.
  bool offer_due(bool unsent, bool in_flight, double now) const {
    return have_offer_ && !in_flight && (switch_asked_ || unsent || now - offer_at_ >= kIdleTakeSeconds);
  }
  // Take the offer (said in the log): it becomes the assignment, and the controller is told (Reassign
  // without a lost agent, which it answers with the same agent). The link closes the old session first.
  void take_offer();

  // What the rank checkpoints (bytes) and how often (interval_s, 0: not known), before a version goes to
  // the agent; sent when registered and it changed: a new size, the first interval, or one that moved by
  // more than a quarter (placement weighs it).
  void report_usage(uint64_t bytes, double interval_s);

 private:
  // What every rank sees alike (the controller away, a refusal): a warning from rank 0, information from
  // the others.
  void job_warning(const std::string& message) const;

  const ServiceSettings& s_;
  Listener& link_;
  std::unique_ptr<wire::Connection> ctl_;
  bool registered_ = false;
  uint64_t app_id_ = 0;
  double next_ = 0, backoff_ = 0.5;
  bool warned_unavailable_ = false;
  bool have_assignment_ = false;
  wire::Assigned assigned_;
  bool have_offer_ = false;    // the controller offered another agent (dynamic agents): taken between versions
  bool switch_asked_ = false;  // a probe asked for it while a version was in flight
  wire::Assigned offer_;
  double offer_at_ = 0;  // when the offer came (monotonic seconds)
  uint64_t reported_bytes_ = 0;  // what rank_usage said last
  double reported_interval_ = 0;
};

}  // namespace cairn::flush
