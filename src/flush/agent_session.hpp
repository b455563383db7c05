// The service link's session with the rank's current agent: the TCP connection (hello, welcome, the
// agent's words about each version), the libfabric endpoint the agent reads the slots through (pull) or
// this rank writes them through (push, with the peer inserted at the welcome), and the movement of the
// link's jobs at that agent:
//
//   send_jobs       each version not yet with the agent goes out (flush), its slot registered (SlotRegistry)
//   push_chunks     push: a chunk written into each buffer the agent credits (a transfer of the fabric's
//                   RmaQueue, fabric/rma_queue.hpp), and said so (pushed) at its completion (completed)
//   check_deadlines a job no agent said anything about for timeout_s fails (and the agent is suspect)
//   handle_cancels  a cancelled job is told to the agent, ended, and let go once no write of it is in flight
//
// Which agent, and when to change it, is the link's business (ControllerClient, ServiceLink::Impl); what
// the session cannot go on with it tells the link (Heard, completed), which then closes it (close) and
// hands its jobs back (unsend). Owned by the link and used on its thread only; the methods that take the
// jobs are called with the link's lock held, and the link wakes its callers afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/endpoint.hpp"
#include "fabric/rma_queue.hpp"
#include "flush/link_job.hpp"
#include "flush/service_link.hpp"
#include "flush/slot_registry.hpp"
#include "wire/session_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::flush {

class AgentSession {
 public:
  AgentSession(const ServiceSettings& s, SlotRegistry& slots) : s_(s), slots_(slots) {}

  // The endpoint, opened once on `node` (the interface that reaches the service) and kept across agents.
  bool has_endpoint() const { return ep_ != nullptr; }
  Status open_endpoint(const std::string& node);
  fabric::Endpoint* endpoint() const { return ep_.get(); }
  // Leaving: every slot's key dies, then the endpoint closes.
  void close_endpoint();

  // Open the session with agent `a` (its hello goes out; the welcome comes back). False: unreachable
  // (said in the log); the link asks the controller for another.
  bool connect(const wire::Assigned& a, uint64_t app_id);
  // The connection, for the link's poll and frame pump; nullptr when there is none.
  wire::Connection* connection() const { return conn_.get(); }
  bool connected() const { return conn_ != nullptr; }
  // The agent welcomed the session: versions may go to it.
  bool welcomed() const { return conn_ && welcomed_; }
  // Welcomed in push mode: this rank writes the chunks into the agent's buffers.
  bool pushing() const { return welcomed() && welcome_.mode == wire::TransferMode::push; }
  // The agent the session is (or was last) with.
  const wire::Assigned& agent() const { return agent_; }
  // End the session: the connection closes and the agent's fabric address is forgotten.
  void close();
  // Leaving: the connection closes (the endpoint goes with close_endpoint).
  void hang_up() { conn_.reset(); }

  // What a frame of the agent means to the link.
  struct Heard {
    enum class Kind { nothing, welcomed, restored, lost } kind = Kind::nothing;
    std::string why;          // lost: the session is of no more use (the link ends it, asks for another)
    wire::Restored restored;  // restored: the agent's answer to the link's restore
    bool ended = false;       // a job ended (done): the link wakes its callers
  };
  // A frame of the agent: the welcome, progress, credits, done (the job ends), restored (for the link).
  Heard on_frame(const wire::Frame& f, LinkJobs& jobs);
  // The agent is lost: the jobs it had go back to unsent (sent again from the start, under new keys, to
  // the next agent), their slots' keys die, and it is no longer suspect.
  void unsend(LinkJobs& jobs);

  // The jobs not yet with the agent go out; `before_send` is called for each just before (the link
  // reports the rank's usage to the controller). A job whose slot cannot be registered fails.
  void send_jobs(LinkJobs& jobs, const std::function<void(const LinkJob&)>& before_send);
  // Push mode: write chunks into the buffers credited, as far as the provider's queue takes them.
  void push_chunks(LinkJobs& jobs);
  // The endpoint's completions (at most 64; 0 on none or an error), the push writes that ended appended to
  // *done; it also makes progress for the provider (with manual data progress, tcp, an agent's read of our
  // memory is served only then).
  int poll(std::vector<fabric::RmaQueue::Done>* done);
  // Apply the push writes that ended (the job said pushed to the agent). A failed write of a job still with
  // the agent: its message, and the link ends the session.
  std::optional<std::string> completed(const std::vector<fabric::RmaQueue::Done>& done, LinkJobs& jobs);
  // A job no agent said anything about for timeout_s fails; one the agent had makes it suspect.
  void check_deadlines(LinkJobs& jobs);
  // A job timed out at the current agent: the link gives it up.
  bool suspect() const { return suspect_; }
  // Cancelled jobs: the agent is told, the job ends cancelled, and its request is let go once no write of
  // its slot is in flight (ServiceLink::cancel waits for that).
  void handle_cancels(LinkJobs& jobs);

 private:
  struct Push {  // a chunk of a job's slot for a buffer the agent credited
    uint64_t job = 0, generation = 0, offset = 0, buffer = 0;
    uint32_t len = 0;
  };
  // The pushes not posted yet that `which` accepts are taken back (their jobs count them no longer).
  void drop_pushes(LinkJobs& jobs, const std::function<bool(const Push&)>& which);

  const ServiceSettings& s_;
  SlotRegistry& slots_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::unique_ptr<wire::Connection> conn_;
  wire::Assigned agent_;
  bool welcomed_ = false;
  wire::SessionWelcome welcome_;
  uint64_t agent_peer_ = 0;
  bool have_agent_peer_ = false;
  std::unique_ptr<fabric::RmaQueue> rma_;  // the push writes: every local operation of the endpoint
  std::map<uint64_t, Push> pushes_;        // by the queue's tag, queued or in flight
  uint64_t next_push_ = 1;
  bool suspect_ = false;
};

}  // namespace cairn::flush
