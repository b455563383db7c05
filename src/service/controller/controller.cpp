#include "service/controller/controller.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.hpp"
#include "service/daemon.hpp"
#include "service/agent/stage_chain.hpp"

namespace cairn::service {

std::string ControllerOptions::chain_for(const std::string& name) const {
  auto it = chains.find(name);
  if (it == chains.end()) it = chains.find("*");
  return it != chains.end() ? it->second : std::string(kDefaultChain);
}

int run_controller(const ControllerOptions& o) {
  Controller c(o);
  return c.run();
}

int Controller::run() {
  auto sig = open_signal_fd(false);
  if (!sig) {
    LOG_ERROR("%s", sig.status().message().c_str());
    return 1;
  }
  signals_ = std::move(*sig);
  wire::HostPort bound;
  auto lfd = wire::listen_tcp(o_.listen, &bound);
  if (!lfd) {
    LOG_ERROR("cannot listen on %s: %s", o_.listen.str().c_str(), lfd.status().message().c_str());
    return 1;
  }
  listen_ = std::move(*lfd);
  address_ = bound.str();
  started_ = wire::monotonic_seconds();
  Status af = write_address_file(o_.address_file, address_);
  if (!af.is_ok()) {
    LOG_ERROR("%s", af.message().c_str());
    return 1;
  }
  LOG_INFO("controller listening on %s (placement %s%s)", address_.c_str(), policy_name(o_.policy),
           o_.token.empty() ? "; managers are not authenticated: give --token-file" : "; managers need the token");
  while (!stop_) {
    std::vector<pollfd> fds;
    fds.push_back({signals_.get(), POLLIN, 0});
    fds.push_back({listen_.get(), POLLIN, 0});
    std::vector<uint64_t> ids;
    for (auto& [id, p] : peers_) {
      fds.push_back({p.conn->fd(), static_cast<short>(POLLIN | (p.conn->wants_write() ? POLLOUT : 0)), 0});
      ids.push_back(id);
    }
    int n = ::poll(fds.data(), fds.size(), 500);
    if (n < 0 && errno != EINTR) {
      LOG_ERROR("poll: %s", strerror(errno));
      return 1;
    }
    if (fds[0].revents & POLLIN) {
      int s = read_signal(signals_.get());
      if (s) {
        LOG_INFO("signal %d: stopping", s);
        stop_ = true;
      }
    }
    if (fds[1].revents & POLLIN) accept_all();
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = peers_.find(ids[i]);
      if (it == peers_.end()) continue;
      if (fds[2 + i].revents & (POLLIN | POLLHUP | POLLERR)) on_input(it->second);
    }
    // Write what is queued; close what is done.
    std::vector<uint64_t> done;
    for (auto& [id, p] : peers_) {
      Status st = p.conn->flush();
      if (!st.is_ok()) done.push_back(id);
      else if (p.closing && !p.conn->wants_write()) done.push_back(id);
    }
    for (uint64_t id : done) close_peer(id, "connection closed");
    reap_scale_up();
    for (auto it = agents_.begin(); it != agents_.end();)
      it = it->second.state == AgentState::gone ? agents_.erase(it) : std::next(it);
  }
  for (auto& [id, p] : peers_) p.conn->flush_all(0.5).ignore();
  LOG_INFO("controller stopped");
  return 0;
}

void Controller::accept_all() {
  for (;;) {
    std::string peer;
    auto fd = wire::accept_tcp(listen_.get(), &peer);
    if (!fd) return;
    Peer p;
    p.id = next_peer_++;
    p.conn = std::make_unique<wire::Connection>(std::move(*fd), peer);
    peers_.emplace(p.id, std::move(p));
  }
}

void Controller::on_input(Peer& p) {
  uint64_t id = p.id;
  Status st = p.conn->receive();
  auto alive = [&] {
    auto it = peers_.find(id);
    return it != peers_.end() && !it->second.closing;
  };
  Status framing = wire::dispatch_frames(*p.conn, [&](const wire::Frame& f) {
    if (!alive()) return false;
    on_frame(peers_.at(id), f);
    return peers_.count(id) != 0;  // still there (perhaps closing: then nothing more is read from it)
  });
  if (!alive()) return;
  if (!framing.is_ok()) return refuse(peers_.at(id), framing);
  if (!st.is_ok()) close_peer(id, st.message());
}

void Controller::refuse(Peer& p, const Status& why) {
  LOG_ERROR("refused %s: %s", p.conn->peer().c_str(), why.message().c_str());
  p.conn->send_message(wire::ErrorMsg{why.c_code() < 0 ? why.c_code() : -1, why.message()});
  p.closing = true;
}

void Controller::send(uint64_t peer, const std::string& frame_bytes) {
  auto it = peers_.find(peer);
  if (it != peers_.end() && !it->second.closing) it->second.conn->send(frame_bytes);
}

namespace {
const char* role_name(int role) {
  static const char* const kNames[] = {"new connection", "registered rank", "manager", "client"};
  return role >= 0 && role < 4 ? kNames[role] : "?";
}
}  // namespace

// Decode a message and hand it to `handler` when this kind of connection may send it; a message that
// does not decode, or comes on the wrong kind of connection, is refused.
template <class M>
void Controller::handle(Peer& p, const wire::Frame& f, std::initializer_list<Role> allowed,
                        void (Controller::*handler)(Peer&, const M&)) {
  auto m = wire::decode<M>(f.payload);
  if (!m) return refuse(p, m.status());
  if (std::find(allowed.begin(), allowed.end(), p.role) == allowed.end())
    return refuse(p, make_error(Code::ERR_SEQUENCE, "a %s message on this connection (a %s)",
                                wire::type_name(uint16_t(f.type)), role_name(static_cast<int>(p.role))));
  (this->*handler)(p, *m);
}

void Controller::on_frame(Peer& p, const wire::Frame& f) {
  using T = wire::Type;
  switch (f.type) {
    case T::register_rank: return handle<wire::RegisterRank>(p, f, {Role::unknown}, &Controller::on_register);
    case T::reassign: return handle<wire::Reassign>(p, f, {Role::rank}, &Controller::on_reassign);
    case T::unregister: return handle<wire::Unregister>(p, f, {Role::rank}, &Controller::on_unregister);
    case T::rank_usage: return handle<wire::RankUsage>(p, f, {Role::rank}, &Controller::on_usage);
    case T::manager_hello: return handle<wire::ManagerHello>(p, f, {Role::unknown}, &Controller::on_manager_hello);
    case T::agent_up: return handle<wire::AgentUp>(p, f, {Role::manager}, &Controller::on_agent_up);
    case T::agent_exit: return handle<wire::AgentExit>(p, f, {Role::manager}, &Controller::on_agent_exit);
    case T::agent_stats: return handle<wire::AgentStats>(p, f, {Role::manager}, &Controller::on_agent_stats);
    case T::status_request:
      return handle<wire::StatusRequest>(p, f, {Role::unknown, Role::client}, &Controller::on_status);
    default:
      return refuse(p, make_error(Code::ERR_FORMAT, "the controller does not take %s messages",
                                  wire::type_name(uint16_t(f.type))));
  }
}

void Controller::on_status(Peer& p, const wire::StatusRequest&) {
  p.role = Role::client;
  p.conn->send_message(wire::StatusReply{status_json()});
}

void Controller::close_peer(uint64_t id, const std::string& why) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  Peer& p = it->second;
  if (p.role == Role::manager) manager_lost(p.manager, why);
  if (p.role == Role::rank) rank_gone(p);
  peers_.erase(id);
}

// ---- managers ---------------------------------------------------------------------------------------

void Controller::on_manager_hello(Peer& p, const wire::ManagerHello& m) {
  if (!o_.token.empty() && !wire::same_secret(m.token, o_.token))
    return refuse(p, make_error(Code::ERR_INVALID_ARG, "manager %s: wrong or missing token", m.name.c_str()));
  // A name belongs to one manager. The same process coming back (same host and pid: its connection
  // dropped) replaces its old entry; another process under a taken name is refused, and the holder stays
  // (two managers on one node without --name would otherwise replace each other in a loop).
  for (auto& [id, rec] : managers_)
    if (rec.name == m.name) {
      if (rec.host != m.host || rec.pid != m.pid)
        return refuse(p, make_error(Code::ERR_INVALID_ARG,
                                    "the manager name '%s' is taken by manager %llu at %s (pid %u, joined %.0f s "
                                    "ago): give this one a name of its own with --name (managers without --name "
                                    "take the host name); a holder that is gone loses the name within "
                                    "about 25 s",
                                    m.name.c_str(), static_cast<unsigned long long>(rec.id), rec.host.c_str(), rec.pid,
                                    wire::monotonic_seconds() - rec.joined));
      uint64_t old_peer = rec.peer;
      LOG_WARN("manager %s joined again: its previous connection is dropped", m.name.c_str());
      close_peer(old_peer, "replaced by a new connection of the same manager");
      break;
    }
  ManagerRec rec;
  rec.id = next_manager_++;
  rec.peer = p.id;
  rec.name = m.name;
  rec.host = m.host;
  rec.capacity = m.capacity;
  rec.pid = m.pid;
  rec.joined = wire::monotonic_seconds();
  p.role = Role::manager;
  p.manager = rec.id;
  managers_[rec.id] = rec;
  // A manager whose node went down without closing its connection holds its name until the controller
  // notices: keepalive probes (idle) or the unacknowledged-data timeout (busy) notice within about 25 s,
  // so a replacement under that name is let in then.
  int on = 1, idle = 10, interval = 5, count = 3;
  unsigned user_timeout_ms = 25000;
  setsockopt(p.conn->fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
  setsockopt(p.conn->fd(), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(p.conn->fd(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(p.conn->fd(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(p.conn->fd(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  p.conn->send_message(wire::ManagerWelcome{rec.id});
  LOG_INFO("manager %llu joined: %s at %s, %u agents, pid %u (from %s)", static_cast<unsigned long long>(rec.id),
           m.name.c_str(), m.host.c_str(), m.capacity, m.pid, p.conn->peer().c_str());
  start_empty_slots();  // slots that found no room before may find it now
}

void Controller::on_agent_up(Peer& p, const wire::AgentUp& m) {
  auto it = agents_.find(m.agent_id);
  if (it == agents_.end() || it->second.manager != p.manager || it->second.state != AgentState::starting) {
    LOG_WARN("manager %llu: agent_up for agent %llu, which it was not starting",
             static_cast<unsigned long long>(p.manager), static_cast<unsigned long long>(m.agent_id));
    return;
  }
  AgentRec& a = it->second;
  a.state = AgentState::up;
  a.pid = m.pid;
  a.address = m.address;
  LOG_INFO("agent %llu up at %s (pid %u) for application %llu slot %u", static_cast<unsigned long long>(a.id),
           m.address.c_str(), m.pid, static_cast<unsigned long long>(a.app), a.slot);
  auto app = apps_.find(a.app);
  if (app == apps_.end()) return;
  if (a.slot < app->second.slot_failures.size()) app->second.slot_failures[a.slot] = 0;
  answer_waiting(app->second, a.slot);
  offer_waiting(app->second, a.slot);
}

void Controller::on_agent_exit(Peer& p, const wire::AgentExit& m) {
  auto it = agents_.find(m.agent_id);
  if (it == agents_.end() || it->second.manager != p.manager) return;  // already forgotten
  if (it->second.state == AgentState::stopping) {  // as asked: its place on the manager is free now
    it->second.state = AgentState::gone;
    return start_empty_slots();
  }
  agent_lost(it->second, "agent " + std::to_string(m.agent_id) + " " + m.reason);
}

void Controller::on_agent_stats(Peer& p, const wire::AgentStats& m) {
  auto it = agents_.find(m.agent_id);
  if (it == agents_.end() || it->second.manager != p.manager) return;
  it->second.stats = m;
  // The node's bandwidth as measured: the drain rates of its agents (bytes over busy time) together.
  double sum = 0;
  for (const auto& [id, a] : agents_)
    if (a.manager == p.manager && a.state != AgentState::gone && a.stats.busy_s > 0.05)
      sum += static_cast<double>(a.stats.bytes_drained) / a.stats.busy_s;
  auto mgr = managers_.find(p.manager);
  if (mgr != managers_.end()) mgr->second.peak_bps = std::max(mgr->second.peak_bps, sum);
  auto app = apps_.find(it->second.app);
  if (app != apps_.end()) rescale(app->second);
}

void Controller::manager_lost(uint64_t manager, const std::string& why) {
  auto it = managers_.find(manager);
  if (it == managers_.end()) return;
  LOG_WARN("manager %llu (%s) lost: %s", static_cast<unsigned long long>(manager), it->second.name.c_str(), why.c_str());
  managers_.erase(it);
  for (auto& [id, a] : agents_)
    if (a.manager == manager && a.state != AgentState::gone) agent_lost(a, "its manager was lost");
}

}  // namespace cairn::service
