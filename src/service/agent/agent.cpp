#include "service/agent/agent.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/log.hpp"
#include "service/daemon.hpp"

namespace cairn::service {

int run_agent(const AgentOptions& o) {
  Agent a(o);
  return a.run();
}

int Agent::run() {
  Status st = setup();
  if (!st.is_ok()) {
    LOG_ERROR("agent cannot start: %s", st.message().c_str());
    return 1;
  }
  loop();
  LOG_INFO("agent %llu stops: %llu bytes drained in %llu transfers (%llu failed)",
           static_cast<unsigned long long>(job_.agent_id), static_cast<unsigned long long>(bytes_drained_),
           static_cast<unsigned long long>(transfers_done_), static_cast<unsigned long long>(transfers_failed_));
  return 0;
}

Status Agent::setup() {
  CAIRN_ASSIGN_OR_RETURN(sig, open_signal_fd(false));
  signals_ = std::move(sig);
  manager_ = std::make_unique<wire::Connection>(dup(STDIN_FILENO), dup(STDOUT_FILENO), "manager");
  CAIRN_ASSIGN_OR_RETURN(frame, wire::read_frame(*manager_, 30));
  CAIRN_ASSIGN_OR_RETURN(job, wire::expect<wire::StartAgent>(frame));
  job_ = job;
  log::set_tag("cairnd agent " + std::to_string(job_.agent_id));
  layout_.prefix = job_.prefix;
  write_opts_.turnstile_width = static_cast<int>(job_.turnstile_width);
  write_opts_.node_dir = opts_.work_dir.empty() ? "/tmp" : opts_.work_dir;
  write_opts_.local_index = static_cast<int>(job_.agent_id);
  write_opts_.node = host_name();

  wire::HostPort bound;
  CAIRN_ASSIGN_OR_RETURN(lfd, wire::listen_tcp(wire::HostPort{opts_.listen_host, 0}, &bound));
  listen_ = std::move(lfd);
  address_ = bound.str();
  fabric::EndpointOptions eo;
  eo.provider = job_.provider;
  eo.node = opts_.listen_host;
  CAIRN_ASSIGN_OR_RETURN(ep, fabric::Endpoint::open(eo));
  ep_ = std::move(ep);
  rma_ = std::make_unique<fabric::RmaQueue>(*ep_);
  if (job_.mode == wire::TransferMode::push && !ep_->delivery_complete())
    return make_error(Code::ERR_NOT_SUPPORTED, "provider %s cannot complete writes at delivery: push mode needs it",
                      ep_->provider().c_str());
  CAIRN_ASSIGN_OR_RETURN(pool, fabric::BufferPool::create(*ep_, job_.pool_bytes, job_.chunk_size));
  pool_ = std::move(pool);
  pull_ = std::make_unique<fabric::PullStream>(*rma_, *pool_);
  auto specs = parse_chain(job_.chain);
  if (!specs) return specs.status().prefixed("the application's chain");
  CAIRN_ASSIGN_OR_RETURN(chain, Chain::load(*specs));
  CAIRN_TRY(sink_.start(std::move(chain)));
  LOG_INFO("agent %llu for application %llu (%s, %u ranks, %s): sessions at %s, fabric %s on %s (%s), pool %u x %u KiB, "
           "prefix %s, chain %s",
           static_cast<unsigned long long>(job_.agent_id), static_cast<unsigned long long>(job_.app_id),
           job_.app_name.c_str(), job_.nranks, wire::mode_name(job_.mode), address_.c_str(),
           ep_->address_text(ep_->address()).c_str(), ep_->domain().c_str(), ep_->provider().c_str(), pool_->count(),
           pool_->chunk() >> 10, job_.prefix.c_str(), job_.chain.c_str());
  manager_->send_message(wire::AgentUp{job_.agent_id, static_cast<uint32_t>(getpid()), address_});
  CAIRN_TRY(manager_->flush_all(10));
  return Status::ok();
}

void Agent::loop() {
  last_tick_ = wire::monotonic_seconds();
  while (!stop_) {
    std::vector<pollfd> fds;
    fds.push_back({signals_.get(), POLLIN, 0});
    fds.push_back({manager_->fd(), POLLIN, 0});
    fds.push_back({listen_.get(), POLLIN, 0});
    fds.push_back({sink_.event_fd(), POLLIN, 0});
    std::vector<uint64_t> ids;
    for (auto& [id, s] : sessions_) {
      fds.push_back({s.conn->fd(), static_cast<short>(POLLIN | (s.conn->wants_write() ? POLLOUT : 0)), 0});
      ids.push_back(id);
    }
    if (manager_->wants_write()) fds.push_back({manager_->write_fd(), POLLOUT, 0});
    int timeout_ms = 100;
    bool fabric_busy = active_ != nullptr;
    if (ep_->wait_fd() >= 0 && ep_->ready_to_block()) {
      fds.push_back({ep_->wait_fd(), POLLIN, 0});
    } else {
      timeout_ms = fabric_busy ? 0 : 1;  // the provider has events pending, or no wait object: poll again soon
    }
    // A transfer held back by the bandwidth limit: wake when the limit lets its next piece go.
    double held = active_ ? throttled_until_ - wire::monotonic_seconds() : 0;
    if (held > 0) timeout_ms = std::min(timeout_ms, static_cast<int>(std::ceil(held * 1e3)));
    int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      LOG_ERROR("poll: %s", strerror(errno));
      return;
    }
    if (fds[0].revents & POLLIN) {
      int sig = read_signal(signals_.get());
      if (sig) {
        LOG_INFO("signal %d: stopping", sig);
        stop_ = true;
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      Status st = manager_->receive();
      if (!st.is_ok()) {
        LOG_INFO("the manager is gone (%s): stopping", st.message().c_str());
        stop_ = true;
      }
    }
    if (fds[2].revents & POLLIN) accept_sessions();
    if (fds[3].revents & POLLIN) on_sink_events();
    for (size_t i = 0; i < ids.size(); ++i) {
      const pollfd& p = fds[4 + i];
      auto it = sessions_.find(ids[i]);
      if (it == sessions_.end()) continue;
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) on_session_input(it->second);
      it = sessions_.find(ids[i]);
      if (it != sessions_.end() && it->second.conn->wants_write()) {
        Status st = it->second.conn->flush();
        if (!st.is_ok()) close_session(ids[i], st.message());
      }
    }
    if (manager_->wants_write() && !manager_->flush().is_ok()) stop_ = true;
    drive();
    if (wire::monotonic_seconds() - last_tick_ >= 0.5) tick();
  }
  if (active_) fail_transfer(make_error(Code::ERR_IO, "the agent is stopping"));
}

void Agent::accept_sessions() {
  for (;;) {
    std::string peer;
    auto fd = wire::accept_tcp(listen_.get(), &peer);
    if (!fd) return;
    Session s;
    s.id = next_session_++;
    s.conn = std::make_unique<wire::Connection>(std::move(*fd), peer);
    LOG_DEBUG("connection from %s", peer.c_str());
    sessions_.emplace(s.id, std::move(s));
  }
}

void Agent::on_session_input(Session& s) {
  uint64_t id = s.id;
  Status st = s.conn->receive();
  Status framing = wire::dispatch_frames(*s.conn, [&](const wire::Frame& f) {
    on_frame(sessions_.at(id), f);
    return sessions_.count(id) != 0;
  });
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  if (!framing.is_ok()) return refuse(it->second, framing);
  if (!st.is_ok()) close_session(id, st.message());
}

// Decode a message and hand it to `handler`; one that does not decode is refused.
template <class M>
void Agent::handle(Session& s, const wire::Frame& f, void (Agent::*handler)(Session&, const M&)) {
  auto m = wire::decode<M>(f.payload);
  if (!m) return refuse(s, m.status());
  (this->*handler)(s, *m);
}

void Agent::on_frame(Session& s, const wire::Frame& f) {
  using T = wire::Type;
  if (!s.welcomed && f.type != T::session_hello && f.type != T::list_versions)
    return refuse(s, make_error(Code::ERR_SEQUENCE, "%s before session_hello", wire::type_name(uint16_t(f.type))));
  switch (f.type) {
    case T::session_hello: return handle<wire::SessionHello>(s, f, &Agent::on_hello);
    case T::flush: return handle<wire::Flush>(s, f, &Agent::on_flush);
    case T::cancel: return handle<wire::Cancel>(s, f, &Agent::on_cancel);
    case T::pushed: return handle<wire::Pushed>(s, f, &Agent::on_pushed);
    case T::list_versions: return handle<wire::ListVersions>(s, f, &Agent::on_list);
    case T::restore: return handle<wire::Restore>(s, f, &Agent::on_restore);
    default:
      return refuse(s, make_error(Code::ERR_FORMAT, "an agent does not take %s messages", wire::type_name(uint16_t(f.type))));
  }
}

// Bad input: say why, log it with the peer, drop the connection (the stream may be out of step).
void Agent::refuse(Session& s, const Status& why) {
  LOG_ERROR("refused %s: %s", s.conn->peer().c_str(), why.message().c_str());
  s.conn->send_message(wire::ErrorMsg{why.c_code() < 0 ? why.c_code() : -1, why.message()});
  s.conn->flush_all(1).ignore();
  close_session(s.id, "refused");
}

void Agent::on_hello(Session& s, const wire::SessionHello& m) {
  if (s.welcomed) return refuse(s, make_error(Code::ERR_SEQUENCE, "a second session_hello"));
  if (m.app_id != job_.app_id || !wire::same_key(m.key, job_.key))
    return refuse(s, make_error(Code::ERR_INVALID_ARG, "application %llu rank %u: not the application this agent "
                                "serves, or a wrong key", static_cast<unsigned long long>(m.app_id), m.rank));
  if (m.rank >= job_.nranks)
    return refuse(s, make_error(Code::ERR_INVALID_ARG, "rank %u of an application of %u ranks", m.rank, job_.nranks));
  auto peer = ep_->insert_peer(m.fabric_address);
  if (!peer) return refuse(s, peer.status());
  // A rank that reconnects replaces its old session (and what it had queued: the rank posts again).
  for (auto& [id, other] : sessions_)
    if (id != s.id && other.welcomed && other.rank == m.rank) {
      close_session(id, "replaced by a new session of the same rank");
      break;
    }
  s.welcomed = true;
  s.rank = m.rank;
  s.peer = *peer;
  s.has_peer = true;
  wire::SessionWelcome w;
  w.agent_id = job_.agent_id;
  w.fabric_address = ep_->address();
  w.mode = job_.mode;
  w.chunk_size = pool_->chunk();
  w.pool_addr = pool_->remote_addr(0);
  w.pool_key = pool_->key();
  w.pool_bytes = pool_->bytes();
  s.conn->send_message(w);
  LOG_INFO("rank %u connected from %s (fabric %s)", m.rank, s.conn->peer().c_str(),
           ep_->address_text(m.fabric_address).c_str());
}

void Agent::on_flush(Session& s, const wire::Flush& m) {
  auto manifest = decode_manifest(m.manifest.data(), m.manifest.size());
  Status st = manifest ? Status::ok() : manifest.status();
  if (st.is_ok() && (manifest->version != m.version || manifest->rank != s.rank || manifest->nranks != job_.nranks))
    st = make_error(Code::ERR_INVALID_ARG, "the manifest is of version %llu rank %u of %u ranks, the session's is "
                    "version %llu rank %u of %u", static_cast<unsigned long long>(manifest->version), manifest->rank,
                    manifest->nranks, static_cast<unsigned long long>(m.version), s.rank, job_.nranks);
  if (st.is_ok()) st = check_chunk_table(*manifest).status();
  if (st.is_ok()) st = check_placement(m);
  if (!st.is_ok()) return refuse(s, st);
  for (const auto& q : queue_)
    if (q.session == s.id && q.flush.version == m.version) return;  // already queued
  if (active_ && active_->req.session == s.id && active_->req.flush.version == m.version) return;
  queue_.push_back(Request{s.id, m, *manifest});
  LOG_DEBUG("rank %u version %llu queued (%llu bytes)", s.rank, static_cast<unsigned long long>(m.version),
            static_cast<unsigned long long>(manifest->total_size));
}

// The data file must lie under the application's prefix or one of its data prefixes, named without
// any "." or ".." step: the agent writes nowhere else, whatever a rank asks.
Status Agent::check_placement(const wire::Flush& f) const {
  if (f.placed == 0) return Status::ok();
  const std::string& p = f.file;
  for (size_t start = 1; start <= p.size();) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return make_error(Code::ERR_INVALID_ARG, "data file %s: not a plain absolute path", p.c_str());
    start = end + 1;
  }
  std::vector<std::string> roots = job_.data_roots;
  roots.push_back(job_.prefix);
  for (std::string r : roots) {
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    if (p.size() > r.size() + 1 && p.compare(0, r.size(), r) == 0 && p[r.size()] == '/') return Status::ok();
  }
  return make_error(Code::ERR_INVALID_ARG, "data file %s lies outside the application's prefix and data prefixes",
                    p.c_str());
}

void Agent::on_cancel(Session& s, const wire::Cancel& m) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it)
    if (it->session == s.id && it->flush.version == m.version) {
      queue_.erase(it);
      s.conn->send_message(wire::Done{m.version, static_cast<int32_t>(Code::ERR_CANCELLED), "cancelled"});
      return;
    }
  if (active_ && active_->req.session == s.id && active_->req.flush.version == m.version)
    fail_transfer(make_error(Code::ERR_CANCELLED, "cancelled"));
}

void Agent::on_list(Session& s, const wire::ListVersions& m) {
  if (m.app_id != job_.app_id || !wire::same_key(m.key, job_.key))
    return refuse(s, make_error(Code::ERR_INVALID_ARG, "list_versions of application %llu: not the application this "
                                "agent serves, or a wrong key", static_cast<unsigned long long>(m.app_id)));
  wire::VersionList out;
  for (const auto& c : l3::list_committed(layout_)) out.versions.push_back(c.version);
  s.conn->send_message(out);
}

void Agent::close_session(uint64_t id, const std::string& why) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  if (it->second.welcomed) LOG_INFO("rank %u: session closed (%s)", it->second.rank, why.c_str());
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](const Request& r) { return r.session == id; }),
               queue_.end());
  if (active_ && active_->req.session == id && !active_->aborting)
    fail_transfer(make_error(Code::ERR_IO, "the rank's session closed"));
  if (it->second.has_peer && !(active_ && active_->req.session == id)) ep_->remove_peer(it->second.peer);
  sessions_.erase(it);
}

void Agent::tick() {
  double now = wire::monotonic_seconds();
  if (active_) busy_s_ += now - std::max(active_->started, last_tick_);
  last_tick_ = now;
  // Every rank with a version here hears that the agent is alive: the active one with its bytes.
  for (const auto& q : queue_) {
    auto it = sessions_.find(q.session);
    if (it != sessions_.end()) it->second.conn->send_message(wire::Progress{q.flush.version, 0});
  }
  if (active_) {
    auto it = sessions_.find(active_->req.session);
    if (it != sessions_.end()) it->second.conn->send_message(wire::Progress{active_->req.flush.version, active_->written});
    if (now - active_->last_completion > opts_.stall_timeout_s && !active_->aborting)
      fail_transfer(make_error(Code::ERR_IO, "no chunk moved for %.0f s", opts_.stall_timeout_s));
  }
  send_stats();
}

void Agent::send_stats() {
  wire::AgentStats st;
  st.agent_id = job_.agent_id;
  for (const auto& [id, s] : sessions_) st.sessions += s.welcomed ? 1 : 0;
  st.queued = static_cast<uint32_t>(queue_.size());
  st.bytes_drained = bytes_drained_;
  st.transfers_done = transfers_done_;
  st.transfers_failed = transfers_failed_;
  st.busy_s = busy_s_;
  if (active_) {
    st.active_rank = active_->req.manifest.rank;
    st.active_version = active_->req.flush.version;
    st.active_total = active_->req.manifest.total_size;
    st.active_done = std::min(active_->written, st.active_total);
  }
  manager_->send_message(st);
}

}  // namespace cairn::service
