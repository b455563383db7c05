#include "flush/service_link.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/log.hpp"
#include "flush/service_link_impl.hpp"

namespace cairn::flush {

using FlushState = ServiceLink::FlushState;

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
  impl_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return impl_->settled; });
  return impl_->agent_id_pub != 0;
}

bool ServiceLink::available() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->available;
}

uint64_t ServiceLink::agent_id() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->agent_id_pub;
}

std::string ServiceLink::agent_where() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->agent_where_pub;
}

Result<uint64_t> ServiceLink::submit(uint64_t version, const Manifest& manifest, const uint8_t* data, int slot,
                                     const l3::RankPlacement& place, int zstd_level) {
  if (zstd_level < 0 || zstd_level > 19 || (zstd_level > 0 && (!place.recorded || place.shared)))
    return make_error(Code::ERR_INVALID_ARG, "ServiceLink::submit: compression level %d for this placement",
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
    if (!impl_->available) return make_error(Code::ERR_NOT_SUPPORTED, "the checkpoint service is not available");
    id = j.id = impl_->next_job++;
    // The application's interval between these versions: when it made them (cairn_checkpoint, the
    // manifest's creation), not when they reach this stage, which they may do late (the first version's
    // set-up) or back to back (versions queued behind a slow drain).
    if (manifest.created_unix_ns > 0) {
      double made = static_cast<double>(manifest.created_unix_ns) / 1e9;
      if (impl_->last_made > 0 && made > impl_->last_made) impl_->interval_s = made - impl_->last_made;
      impl_->last_made = made;
    }
    impl_->jobs.emplace(id, std::move(j));
  }
  impl_->notify();
  return id;
}

FlushState ServiceLink::state(uint64_t job, Status* outcome) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end()) {
    *outcome = make_error(Code::ERR_INVALID_ARG, "no service job %llu", static_cast<unsigned long long>(job));
    return FlushState::failed;
  }
  *outcome = it->second.outcome;
  return it->second.state;
}

FlushState ServiceLink::wait(uint64_t job, double timeout_s, Status* outcome) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  auto ended = [&] {
    auto it = impl_->jobs.find(job);
    return it == impl_->jobs.end() || it->second.state != FlushState::pending;
  };
  impl_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), ended);
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end()) {
    *outcome = make_error(Code::ERR_INVALID_ARG, "no service job %llu", static_cast<unsigned long long>(job));
    return FlushState::failed;
  }
  *outcome = it->second.outcome;
  return it->second.state;
}

FlushState ServiceLink::cancel(uint64_t job, Status* outcome) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->jobs.find(job);
    if (it == impl_->jobs.end()) return FlushState::failed;
    it->second.cancel_requested = true;
  }
  impl_->notify();
  // The thread revokes the slot's registration and waits for its own writes of the slot; bounded, so
  // that a wedged provider cannot hold the pipeline.
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_for(lock, std::chrono::seconds(5), [&] {
    auto it = impl_->jobs.find(job);
    return it == impl_->jobs.end() ||
           (it->second.state != FlushState::pending && it->second.writes_in_flight == 0 && !it->second.cancel_requested);
  });
  auto it = impl_->jobs.find(job);
  if (it == impl_->jobs.end()) return FlushState::failed;
  *outcome = it->second.outcome;
  return it->second.state;
}

Status ServiceLink::probe(bool* changed) {
  if (!changed) return make_error(Code::ERR_INVALID_ARG, "cairn_probe_agents: changed is NULL");
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->probe_requested = true;
  impl_->notify();
  impl_->cv.wait_for(lock, std::chrono::seconds(1), [&] { return !impl_->probe_requested; });
  *changed = impl_->changes != impl_->changes_seen;
  impl_->changes_seen = impl_->changes;
  return Status::ok();
}

void ServiceLink::forget(uint64_t job) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->jobs.erase(job);
}

// ---- the thread ------------------------------------------------------------------------------------

// What every rank sees alike (the controller away, a refusal): a warning from rank 0, information from the others.
void ServiceLink::Impl::job_warning(const std::string& message) {
  if (s.rank == 0)
    LOG_WARN("%s", message.c_str());
  else
    LOG_INFO("%s", message.c_str());
}

void ServiceLink::Impl::notify(uint64_t n) { (void)!::write(wake.get(), &n, sizeof n); }

void ServiceLink::Impl::set_available(bool avail, bool settle) {
  std::lock_guard<std::mutex> lock(mu);
  available = avail;
  if (settle) settled = true;
  cv.notify_all();
}

void ServiceLink::Impl::run() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) break;
    }
    double now = wire::monotonic_seconds();
    if (!ctl && now >= next_ctl) connect_controller();
    if (ctl && registered && have_assignment && !agent) connect_agent();
    bool suspect = false, busy = false, take = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      take = offer_due();
    }
    if (take) take_offer();
    {
      std::lock_guard<std::mutex> lock(mu);
      handle_cancels();
      if (agent && welcomed && !have_offer) send_jobs();  // a new version waits for the move to the offered agent
      drive_restore();
      if (agent && welcomed && welcome.mode == wire::TransferMode::push) push_chunks();
      check_deadlines();
      suspect = agent_suspect;
      busy = fabric_busy();
    }
    if (suspect && agent) agent_lost("silent about a version for longer than the timeout", true);
    std::vector<pollfd> fds;
    fds.push_back({wake.get(), POLLIN, 0});
    int ctl_at = -1, agent_at = -1;
    if (ctl) {
      ctl_at = static_cast<int>(fds.size());
      fds.push_back({ctl->fd(), static_cast<short>(POLLIN | (ctl->wants_write() ? POLLOUT : 0)), 0});
    }
    if (agent) {
      agent_at = static_cast<int>(fds.size());
      fds.push_back({agent->fd(), static_cast<short>(POLLIN | (agent->wants_write() ? POLLOUT : 0)), 0});
    }
    int timeout_ms = 200;
    if (ep) {
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
    auto pump = [&](std::unique_ptr<wire::Connection>& conn, int at, const std::function<void(const wire::Frame&)>& handle,
                    const std::function<void(const std::string&)>& lost) {
      if (at < 0 || !conn) return;
      Status st = (fds[at].revents & (POLLIN | POLLHUP | POLLERR)) ? conn->receive() : Status::ok();
      Status framing = wire::dispatch_frames(*conn, [&](const wire::Frame& f) {
        handle(f);
        return conn != nullptr;
      });
      if (!framing.is_ok() && conn) return lost(framing.message());
      if (conn && st.is_ok()) st = conn->flush();
      if (conn && !st.is_ok()) lost(st.message());
    };
    pump(ctl, ctl_at, [&](const wire::Frame& f) { on_controller_frame(f); },
         [&](const std::string& why) { controller_lost(why); });
    pump(agent, agent_at, [&](const wire::Frame& f) { on_agent_frame(f); },
         [&](const std::string& why) { agent_lost(why, true); });
    if (ep) progress_fabric();
  }
  // Leaving: say so, stop the jobs, revoke everything.
  if (ctl && registered) {
    ctl->send_message(wire::Unregister{app_id, s.key, s.rank});
    ctl->flush_all(0.5).ignore();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, j] : jobs)
      if (j.state == FlushState::pending) end_job(j, FlushState::failed, make_error(Code::ERR_IO, "the service link closed"));
  }
  agent.reset();
  ctl.reset();
  slot_mr.clear();
  ep.reset();
}

void ServiceLink::Impl::connect_controller() {
  auto fd = wire::connect_tcp(s.controller, std::min(s.timeout_s, 2.0));
  if (!fd) {
    if (!warned_unavailable)
      job_warning("checkpoint service " + s.controller.str() + " unreachable (" + fd.status().message() +
                  "): versions go through the embedded flusher; trying again");
    warned_unavailable = true;
    next_ctl = wire::monotonic_seconds() + backoff;
    backoff = std::min(backoff * 2, 10.0);
    set_available(false, true);
    return;
  }
  ctl = std::make_unique<wire::Connection>(std::move(*fd), s.controller.str());
  reported_bytes = 0;  // a new controller knows nothing yet
  reported_interval = 0;
  if (!ep) {
    fabric::EndpointOptions eo;
    eo.provider = s.provider;
    eo.node = wire::local_ip(ctl->fd());  // the interface that reaches the service reaches its agents too
    auto e = fabric::Endpoint::open(eo);
    if (!e) {
      LOG_ERROR("service mode off: %s", e.status().message().c_str());
      ctl.reset();
      next_ctl = wire::monotonic_seconds() + 3600 * 24 * 365.0;  // no point trying again
      set_available(false, true);
      return;
    }
    ep = std::move(*e);
  }
  wire::RegisterRank r;
  r.app_name = s.app_name;
  r.job = s.job;
  r.key = s.key;
  r.rank = s.rank;
  r.nranks = s.nranks;
  r.bytes = s.bytes;
  r.interval_s = s.interval_s;
  r.prefix = s.prefix;
  r.data_roots = s.data_roots;
  r.mode = s.mode;
  r.agents_wanted = s.agents_wanted;
  r.chunk_size = s.chunk_size;
  r.pool_bytes = s.pool_bytes;
  r.turnstile_width = s.turnstile_width;
  r.provider = ep->provider();
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  r.host = host;
  r.pid = static_cast<uint32_t>(getpid());
  ctl->send_message(r);
  registered = false;
  have_assignment = have_offer = switch_asked = false;
}

void ServiceLink::Impl::on_controller_frame(const wire::Frame& f) {
  if (f.type == wire::Type::error) {
    auto e = wire::decode<wire::ErrorMsg>(f.payload);
    std::string why = e ? e->message : e.status().message();
    // Refused outright (a bad registration) or no room for an agent now: the embedded flusher writes
    // meanwhile; an assignment may still come on this connection when a checkpoint node frees.
    job_warning("checkpoint service: " + why + "; versions go through the embedded flusher meanwhile");
    registered = true;
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, j] : jobs)
      if (j.state == FlushState::pending && !j.sent) end_job(j, FlushState::failed, make_error(Code::ERR_NOT_SUPPORTED, "%s", why.c_str()));
    available = false;
    settled = true;
    cv.notify_all();
    return;
  }
  auto a = wire::expect<wire::Assigned>(f);
  if (!a) return controller_lost(a.status().message());
  if (have_assignment && a->agent_id != assigned.agent_id) {
    // Not an answer (we have an agent): the controller scaled the application's agents. Taken between
    // versions (offer_due), never under a version in flight.
    offer = *a;
    have_offer = true;
    LOG_INFO("checkpoint service: agent %llu at %s offered (slot %u); taken between versions",
             static_cast<unsigned long long>(a->agent_id), a->agent_address.c_str(), a->slot);
    return;
  }
  if (have_offer && offer.agent_id == a->agent_id) have_offer = false;
  registered = true;
  backoff = 0.5;
  warned_unavailable = false;
  app_id = a->app_id;
  bool changed = !have_assignment || assigned.agent_id != a->agent_id;
  if (changed && assigned.agent_id && assigned.agent_id != a->agent_id) {
    std::lock_guard<std::mutex> lock(mu);
    ++changes;
  }
  assigned = *a;
  have_assignment = true;
  if (changed && agent) agent_lost("the controller assigned agent " + std::to_string(a->agent_id), false);
  set_available(true, false);
  LOG_INFO("checkpoint service: application %llu, agent %llu at %s on %s", static_cast<unsigned long long>(a->app_id),
           static_cast<unsigned long long>(a->agent_id), a->agent_address.c_str(), a->manager.c_str());
}

// An offered agent is taken when a probe asked for it or a new version is ready to go, and no version
// is in flight at the current agent. Under mu.
bool ServiceLink::Impl::offer_due() {
  bool unsent = false, in_flight = false;
  for (const auto& [id, j] : jobs)
    if (j.state == FlushState::pending && !j.cancel_requested) (j.sent ? in_flight : unsent) = true;
  if (probe_requested) {
    switch_asked = have_offer;
    if (!have_offer || in_flight) {  // nothing to take now (or later, once the version in flight ends)
      probe_requested = false;
      cv.notify_all();
    }
  }
  return have_offer && (switch_asked || unsent) && !in_flight;
}

void ServiceLink::Impl::take_offer() {
  LOG_INFO("checkpoint service: moving from agent %llu to agent %llu at %s between versions",
           static_cast<unsigned long long>(assigned.agent_id), static_cast<unsigned long long>(offer.agent_id),
           offer.agent_address.c_str());
  agent.reset();  // nothing in flight there: a plain goodbye
  welcomed = false;
  if (have_agent_peer) ep->remove_peer(agent_peer);
  have_agent_peer = false;
  assigned = offer;
  have_assignment = true;
  have_offer = switch_asked = false;
  // Ask again without a lost agent: the controller records that we took it (and answers with it).
  if (ctl) ctl->send_message(wire::Reassign{app_id, s.key, s.rank, 0});
  std::lock_guard<std::mutex> lock(mu);
  agent_id_pub = 0;
  ++changes;
  probe_requested = false;  // a probe waiting for this move sees it
  cv.notify_all();
}

void ServiceLink::Impl::controller_lost(const std::string& why) {
  job_warning("checkpoint service " + s.controller.str() + " lost (" + why +
              "): versions go through the embedded flusher until it is back");
  ctl.reset();
  registered = false;
  have_assignment = have_offer = switch_asked = false;
  next_ctl = wire::monotonic_seconds() + backoff;
  warned_unavailable = true;
  if (agent) agent_lost("the controller is gone", false);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [id, j] : jobs)
    if (j.state == FlushState::pending) end_job(j, FlushState::failed, make_error(Code::ERR_IO, "the checkpoint service is gone"));
  available = false;
  agent_id_pub = 0;
  settled = true;
  cv.notify_all();
}

}  // namespace cairn::flush
