#include "flush/service_link.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <optional>

#include "base/log.hpp"
#include "flush/service_link_impl.hpp"

namespace cairn::flush {

ServiceLink::ServiceLink(ServiceSettings s) : impl_(std::make_unique<Impl>(std::move(s))) {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  impl_->wake = fs::Fd(fd);
  impl_->thread = std::thread([this] { impl_->run(); });
}

ServiceLink::~ServiceLink() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->notify();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool ServiceLink::wait_ready(double timeout_s) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return impl_->agent.settled; });
  return impl_->agent.id != 0;
}

bool ServiceLink::available() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->agent.available;
}

uint64_t ServiceLink::agent_id() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->agent.id;
}

std::string ServiceLink::agent_where() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->agent.where;
}

Result<FlushTicket> ServiceLink::post(uint64_t version, const Manifest& manifest, const uint8_t* data,
                                      int slot, const l3::RankPlacement& place, int zstd_level) {
  if (zstd_level < 0 || zstd_level > 19 || (zstd_level > 0 && (!place.recorded || place.shared)))
    return make_error(Code::ERR_INVALID_ARG, "ServiceLink::post: compression level %d for this placement",
                      zstd_level);
  LinkJob j;
  j.zstd_level = zstd_level;
  j.version = version;
  j.manifest = manifest;
  j.manifest_bytes = encode_manifest(manifest);
  j.data = data;
  j.slot = slot;
  j.place = place;
  j.last_heard = wire::monotonic_seconds();
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->agent.available) return make_error(Code::ERR_NOT_SUPPORTED, "the checkpoint service is not available");
    id = impl_->jobs.add(std::move(j));
  }
  impl_->notify();
  return id;
}

Status ServiceLink::test(FlushTicket ticket, bool* done) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->jobs.finish(ticket, done);
}

Status ServiceLink::wait(FlushTicket ticket, double timeout_s, bool* done) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return impl_->jobs.ended(ticket); });
  return impl_->jobs.finish(ticket, done);
}

Status ServiceLink::cancel(FlushTicket ticket) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    CAIRN_TRY(impl_->jobs.request_cancel(ticket));
  }
  impl_->notify();
  // The thread revokes the slot's registration and waits for its own writes of the slot; bounded, so
  // that a wedged provider cannot hold the pipeline.
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_for(lock, std::chrono::seconds(5), [&] {
    const LinkJob* j = impl_->jobs.find(ticket);
    return !j || (j->state != FlushState::pending && j->writes_in_flight == 0 && !j->cancel_requested);
  });
  return impl_->jobs.cancelled(ticket);
}

Status ServiceLink::probe(bool* changed) {
  if (!changed) return make_error(Code::ERR_INVALID_ARG, "cairn_probe_agents: changed is NULL");
  std::unique_lock<std::mutex> lock(impl_->mu);
  AgentView& a = impl_->agent;
  a.probe_requested = true;
  impl_->notify();
  impl_->cv.wait_for(lock, std::chrono::seconds(1), [&] { return !a.probe_requested; });
  *changed = a.changes != a.changes_seen;
  a.changes_seen = a.changes;
  return Status::ok();
}

// ---- the thread ------------------------------------------------------------------------------------

void ServiceLink::Impl::notify(uint64_t n) { (void)!::write(wake.get(), &n, sizeof n); }

void ServiceLink::Impl::set_available(bool avail, bool settle) {
  std::lock_guard<std::mutex> lock(mu);
  agent.available = avail;
  if (settle) agent.settled = true;
  cv.notify_all();
}

void ServiceLink::Impl::run() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) break;
    }
    double now = wire::monotonic_seconds();
    if (ctl.due(now)) connect_controller();
    if (ctl.has_assignment() && !session.connected()) connect_agent();
    bool suspect = false, busy = false, take = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      take = offer_due();
    }
    if (take) take_offer();
    {
      std::lock_guard<std::mutex> lock(mu);
      LinkJobs& rows = jobs.rows();
      session.handle_cancels(rows);
      if (session.welcomed() && !ctl.has_offer())  // a new version waits for the move to the offered agent
        session.send_jobs(rows, [&](const LinkJob& j) { ctl.report_usage(j.manifest.total_size, jobs.interval_s()); });
      drive_restore();
      if (session.pushing()) session.push_chunks(rows);
      session.check_deadlines(rows);
      suspect = session.suspect();
      busy = fabric_busy();
      cv.notify_all();
    }
    if (suspect && session.connected()) agent_lost("silent about a version for longer than the timeout", true);
    std::vector<pollfd> fds;
    fds.push_back({wake.get(), POLLIN, 0});
    int ctl_at = -1, agent_at = -1;
    if (wire::Connection* c = ctl.connection()) {
      ctl_at = static_cast<int>(fds.size());
      fds.push_back({c->fd(), static_cast<short>(POLLIN | (c->wants_write() ? POLLOUT : 0)), 0});
    }
    if (wire::Connection* c = session.connection()) {
      agent_at = static_cast<int>(fds.size());
      fds.push_back({c->fd(), static_cast<short>(POLLIN | (c->wants_write() ? POLLOUT : 0)), 0});
    }
    int timeout_ms = 200;
    if (fabric::Endpoint* ep = session.endpoint()) {
      if (ep->wait_fd() >= 0 && ep->ready_to_block())
        fds.push_back({ep->wait_fd(), POLLIN, 0});
      else
        timeout_ms = busy ? 0 : 1;
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake.get(), &v, sizeof v);
    }
    // Every frame that arrived, then what is left to send; a handler may close the connection it reads.
    auto pump = [&](const std::function<wire::Connection*()>& conn, int at,
                    const std::function<void(const wire::Frame&)>& handle,
                    const std::function<void(const std::string&)>& lost) {
      if (at < 0 || !conn()) return;
      Status st = (fds[at].revents & (POLLIN | POLLHUP | POLLERR)) ? conn()->receive() : Status::ok();
      Status framing = wire::dispatch_frames(*conn(), [&](const wire::Frame& f) {
        handle(f);
        return conn() != nullptr;
      });
      if (!framing.is_ok() && conn()) return lost(framing.message());
      if (conn() && st.is_ok()) st = conn()->flush();
      if (conn() && !st.is_ok()) lost(st.message());
    };
    pump([&] { return ctl.connection(); }, ctl_at, [&](const wire::Frame& f) { ctl.on_frame(f); },
         [&](const std::string& why) { ctl.lost(why); });
    pump([&] { return session.connection(); }, agent_at, [&](const wire::Frame& f) { on_agent_frame(f); },
         [&](const std::string& why) { agent_lost(why, true); });
    if (session.has_endpoint()) progress_fabric();
  }
  // Leaving: say so, stop the jobs, revoke everything.
  ctl.unregister();
  {
    std::lock_guard<std::mutex> lock(mu);
    jobs.end_pending(FlushState::failed, make_error(Code::ERR_IO, "the service link closed"), slots);
    cv.notify_all();
  }
  session.hang_up();
  ctl.close();
  session.close_endpoint();
}

void ServiceLink::Impl::connect_controller() {
  if (!ctl.dial()) return set_available(false, true);
  if (!session.has_endpoint()) {
    Status st = session.open_endpoint(ctl.local_ip());  // the interface that reaches the service reaches its agents too
    if (!st.is_ok()) {
      LOG_ERROR("service mode off: %s", st.message().c_str());
      ctl.give_up();
      return set_available(false, true);
    }
  }
  ctl.register_rank(session.endpoint()->provider());
}

void ServiceLink::Impl::connect_agent() {
  if (!session.connect(ctl.assigned(), ctl.app_id())) ctl.agent_unreachable();
}

void ServiceLink::Impl::controller_refused(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu);
  jobs.end_pending(FlushState::failed, make_error(Code::ERR_NOT_SUPPORTED, "%s", why.c_str()), slots, /*unsent_only=*/true);
  agent.available = false;
  agent.settled = true;
  cv.notify_all();
}

void ServiceLink::Impl::agent_assigned(bool changed, bool replaced) {
  if (replaced) {
    std::lock_guard<std::mutex> lock(mu);
    ++agent.changes;
  }
  if (changed && session.connected())
    agent_lost("the controller assigned agent " + std::to_string(ctl.assigned().agent_id), false);
  set_available(true, false);
}

void ServiceLink::Impl::controller_gone() {
  if (session.connected()) agent_lost("the controller is gone", false);
  std::lock_guard<std::mutex> lock(mu);
  jobs.end_pending(FlushState::failed, make_error(Code::ERR_IO, "the checkpoint service is gone"), slots);
  agent.available = false;
  agent.id = 0;
  agent.settled = true;
  cv.notify_all();
}

// An offered agent is taken when a probe asked for it, a new version is ready to go, or the rank has
// handed nothing over for a while (ControllerClient::kIdleTakeSeconds), and no version is in flight at the
// current agent. Under mu.
bool ServiceLink::Impl::offer_due() {
  bool unsent = false, in_flight = false;
  jobs.pending(&unsent, &in_flight);
  if (agent.probe_requested) {
    ctl.probe();
    if (!ctl.has_offer() || in_flight) {  // nothing to take now (or later, once the version in flight ends)
      agent.probe_requested = false;
      cv.notify_all();
    }
  }
  return ctl.offer_due(unsent, in_flight, wire::monotonic_seconds());
}

void ServiceLink::Impl::take_offer() {
  session.close();  // nothing in flight there: a plain goodbye
  ctl.take_offer();
  std::lock_guard<std::mutex> lock(mu);
  agent.id = 0;
  ++agent.changes;
  agent.probe_requested = false;  // a probe waiting for this move sees it
  cv.notify_all();
}

void ServiceLink::Impl::on_agent_frame(const wire::Frame& f) {
  AgentSession::Heard heard;
  {
    std::lock_guard<std::mutex> lock(mu);
    heard = session.on_frame(f, jobs.rows());
    if (heard.kind == AgentSession::Heard::Kind::welcomed) {
      agent.id = session.agent().agent_id;
      agent.where = session.agent().manager + " " + session.agent().agent_address;
      agent.available = true;
      agent.settled = true;
      cv.notify_all();
    } else if (heard.kind == AgentSession::Heard::Kind::restored) {
      on_restored(heard.restored);  // wakes the restore's caller when it ends
    } else if (heard.ended) {
      cv.notify_all();
    }
  }
  if (heard.kind == AgentSession::Heard::Kind::lost) agent_lost(heard.why, true);
}

// The agent is gone or no use: its jobs go to the next agent (sent again from the start, under new
// keys) within their deadlines; with ask_for_another the controller is told to replace it.
void ServiceLink::Impl::agent_lost(const std::string& why, bool ask_for_another) {
  LOG_WARN("agent %llu lost: %s", static_cast<unsigned long long>(ctl.assigned().agent_id), why.c_str());
  session.close();
  {
    std::lock_guard<std::mutex> lock(mu);
    session.unsend(jobs.rows());
    agent.id = 0;
    if (restore && restore->sent && !restore->ended) end_restore(Status(Code::ERR_IO, "agent lost: " + why));
  }
  if (ask_for_another) ctl.replace_agent();
}

void ServiceLink::Impl::progress_fabric() {
  for (int round = 0; round < 16; ++round) {
    std::vector<fabric::RmaQueue::Done> done;
    int n = session.poll(&done);
    if (n == 0 && done.empty()) return;
    std::optional<std::string> failed;
    {
      std::lock_guard<std::mutex> lock(mu);
      failed = session.completed(done, jobs.rows());
      cv.notify_all();
    }
    if (failed) agent_lost("a push failed: " + *failed, true);
    if (n < 64) return;
  }
}

bool ServiceLink::Impl::fabric_busy() const {
  if (jobs.moving()) return true;
  return restore && restore->sent && !restore->ended;  // the agent writes into our memory
}

}  // namespace cairn::flush
