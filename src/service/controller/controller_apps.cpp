// The controller's applications: registration, the agents of each, reassignment, retirement.
#include <algorithm>

#include "base/log.hpp"
#include "service/controller/controller.hpp"

namespace cairn::service {

namespace {

// `path` lies under `root` (both absolute, compared step by step; no "." or ".." steps accepted).
bool under(const std::string& path, std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (path.find("/../") != std::string::npos || path.find("/./") != std::string::npos ||
      (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0))
    return false;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          (root == "/" || path[root.size()] == '/'));
}
}  // namespace

Status Controller::prefix_allowed(const wire::RegisterRank& m) const {
  if (o_.allow_prefixes.empty()) return Status::ok();
  std::vector<std::string> paths = m.data_roots;
  paths.push_back(m.prefix);
  for (const auto& p : paths) {
    bool ok = false;
    for (const auto& root : o_.allow_prefixes) ok = ok || under(p, root);
    if (!ok)
      return make_error(Code::ERR_INVALID_ARG, "%s lies outside the directories this service writes to (--allow-prefix)",
                        p.c_str());
  }
  return Status::ok();
}

Controller::AppRec* Controller::find_app_by_key(const wire::AppKey& key) {
  AppRec* found = nullptr;
  for (auto& [id, app] : apps_)
    if (wire::same_key(app.reg.key, key)) found = &app;  // no early exit: the time does not depend on where
  return found;
}

void Controller::on_register(Peer& p, const wire::RegisterRank& m) {
  Status allowed = prefix_allowed(m);
  if (!allowed.is_ok()) return refuse(p, allowed);
  AppRec* app = find_app_by_key(m.key);
  if (app && (app->reg.app_name != m.app_name || app->reg.nranks != m.nranks || app->reg.prefix != m.prefix))
    return refuse(p, make_error(Code::ERR_INVALID_ARG, "%s rank %u: the key belongs to another application",
                                m.app_name.c_str(), m.rank));
  if (!app) {
    // A prefix belongs to one application: a live one keeps it; one whose ranks are all gone (a crashed
    // job) gives it up to the job that comes after it.
    std::vector<uint64_t> stale;
    for (auto& [id, other] : apps_) {
      if (other.reg.prefix != m.prefix) continue;
      if (!other.rank_peer.empty())
        return refuse(p, make_error(Code::ERR_INVALID_ARG,
                                    "%s: the prefix %s is in use by application %llu (%s, %zu ranks connected)",
                                    m.app_name.c_str(), m.prefix.c_str(), static_cast<unsigned long long>(id),
                                    other.reg.app_name.c_str(), other.rank_peer.size()));
      stale.push_back(id);
    }
    for (uint64_t id : stale) retire_app(id, "a new job registered with its prefix");
    AppRec rec;
    rec.id = next_app_++;
    rec.reg = m;
    rec.agents = agents_for(m.agents_wanted, m.nranks, o_.max_agents_per_app);
    rec.slot_agent.assign(rec.agents, 0);
    rec.slot_failures.assign(rec.agents, 0);
    rec.registered = wire::monotonic_seconds();
    rec.interval_s = m.interval_s;
    app = &apps_.emplace(rec.id, std::move(rec)).first->second;
    LOG_INFO("application %llu registered: %s (job %s), %u ranks, %s, %u agent(s), prefix %s, from %s pid %u",
             static_cast<unsigned long long>(app->id), m.app_name.c_str(), m.job.c_str(), m.nranks,
             wire::mode_name(m.mode), app->agents, m.prefix.c_str(), m.host.c_str(), m.pid);
    std::vector<uint32_t> all;
    for (uint32_t s = 0; s < app->agents; ++s) all.push_back(s);
    start_slots(*app, all);
  }
  uint64_t old = app->rank_peer.count(m.rank) ? app->rank_peer[m.rank] : 0;
  p.role = Role::rank;
  p.app = app->id;
  p.rank = m.rank;
  app->rank_peer[m.rank] = p.id;
  app->rank_bytes[m.rank] = m.bytes;
  if (old && old != p.id) close_peer(old, "the rank registered again");
  answer_rank(*app, p.id, m.rank);
}

// The assignment of a slot whose agent is up (else false).
bool Controller::assignment(const AppRec& app, uint32_t slot, wire::Assigned* out) const {
  uint64_t agent = app.slot_agent[slot];
  auto a = agents_.find(agent);
  if (!agent || a == agents_.end() || a->second.state != AgentState::up) return false;
  out->app_id = app.id;
  out->slot = slot;
  out->agent_id = agent;
  out->agent_address = a->second.address;
  auto mgr = managers_.find(a->second.manager);
  out->manager = mgr != managers_.end() ? mgr->second.name : "";
  return true;
}

void Controller::answer_rank(AppRec& app, uint64_t peer, uint32_t rank) {
  uint32_t slot = slot_of_rank(rank, app.reg.nranks, app.agents);
  uint64_t agent = app.slot_agent[slot];
  wire::Assigned out;
  if (assignment(app, slot, &out)) {
    send(peer, wire::frame(out));
    app.rank_agent[rank] = agent;  // a rank takes what it asked for at once
    stop_unused(app);
    return;
  }
  app.waiting[slot].insert(peer);
  if (!agent) start_slots(app, {slot});
  if (!app.slot_agent[slot]) {
    // No room now: the rank writes with its embedded flusher meanwhile; it is answered when a slot frees.
    send(peer, wire::frame(wire::ErrorMsg{static_cast<int32_t>(Code::ERR_NOT_SUPPORTED),
                                          "no checkpoint node has room for an agent of this application now"}));
  }
}

void Controller::answer_waiting(AppRec& app, uint32_t slot) {
  auto w = app.waiting.find(slot);
  if (w == app.waiting.end()) return;
  std::set<uint64_t> peers = std::move(w->second);
  app.waiting.erase(w);
  for (uint64_t peer : peers) {
    auto it = peers_.find(peer);
    if (it != peers_.end() && it->second.app == app.id) answer_rank(app, peer, it->second.rank);
  }
}

std::vector<NodeLoad> Controller::node_loads() const {
  std::vector<NodeLoad> out;
  for (const auto& [id, m] : managers_) {  // ids grow in join order
    NodeLoad n;
    n.manager_id = id;
    n.name = m.name;
    n.capacity = m.capacity;
    n.bandwidth_bps = m.peak_bps;
    for (const auto& [aid, a] : agents_) {
      if (a.manager != id || a.state == AgentState::gone) continue;
      ++n.agents;  // a stopping agent holds its place, and carries no traffic
      if (a.state == AgentState::stopping) continue;
      auto app = apps_.find(a.app);
      if (app != apps_.end()) n.demand_bps += demand(app->second).per_agent_bps();
    }
    out.push_back(n);
  }
  return out;
}

AppDemand Controller::demand(const AppRec& app) const {
  AppDemand d;
  for (const auto& [r, b] : app.rank_bytes) d.bytes_per_version += static_cast<double>(b);
  if (app.rank_bytes.empty()) d.bytes_per_version = static_cast<double>(app.reg.bytes) * app.reg.nranks;
  d.interval_s = app.interval_s;
  d.agents = app.agents;
  return d;
}

// Applications without any agent first, so that a freed place goes to one of them before another
// application's second agent.
void Controller::start_empty_slots() {
  for (bool first : {true, false})
    for (auto& [id, app] : apps_) {
      if (starving(app) != first) continue;
      std::vector<uint32_t> empty;
      for (uint32_t s = 0; s < app.agents; ++s)
        if (app.slot_agent[s] == 0) empty.push_back(s);
      if (!empty.empty()) start_slots(app, empty);
    }
}

void Controller::stop_agent(AgentRec& a) {
  auto mgr = managers_.find(a.manager);
  if (mgr == managers_.end()) {  // its manager is gone, and the agent with it
    a.state = AgentState::gone;
    return;
  }
  send(mgr->second.peer, wire::frame(wire::StopAgent{a.id}));
  a.state = AgentState::stopping;
}

void Controller::start_slots(AppRec& app, const std::vector<uint32_t>& slots) {
  std::vector<uint32_t> todo;
  for (uint32_t s : slots)
    if (app.slot_agent[s] == 0 && app.slot_failures[s] < kMaxFailedStarts) todo.push_back(s);
  if (todo.empty()) return;
  auto places = place_agents(o_.policy, node_loads(), static_cast<uint32_t>(todo.size()), demand(app));
  if (!places.empty()) owed_.erase(app.id);
  for (size_t i = 0; i < places.size(); ++i) {
    AgentRec a;
    a.id = next_agent_++;
    a.app = app.id;
    a.manager = places[i].manager_id;
    a.slot = todo[i];
    a.why = places[i].why;
    a.started = wire::monotonic_seconds();
    app.slot_agent[a.slot] = a.id;
    const ManagerRec& m = managers_.at(a.manager);
    wire::StartAgent sa;
    sa.agent_id = a.id;
    sa.app_id = app.id;
    sa.key = app.reg.key;
    sa.app_name = app.reg.app_name;
    sa.nranks = app.reg.nranks;
    sa.prefix = app.reg.prefix;
    sa.data_roots = app.reg.data_roots;
    sa.mode = app.reg.mode;
    sa.chunk_size = app.reg.chunk_size;
    sa.pool_bytes = app.reg.pool_bytes;
    sa.provider = app.reg.provider;
    sa.turnstile_width = app.reg.turnstile_width;
    sa.chain = o_.chain_for(app.reg.app_name);
    send(m.peer, wire::frame(sa));
    LOG_INFO("agent %llu for application %llu slot %u on manager %s (%s)", static_cast<unsigned long long>(a.id),
             static_cast<unsigned long long>(app.id), a.slot, m.name.c_str(), a.why.c_str());
    agents_[a.id] = a;
  }
  if (places.size() < todo.size()) {
    LOG_WARN("application %llu: no room for %zu agent(s): every checkpoint node is full or none has joined",
             static_cast<unsigned long long>(app.id), todo.size() - places.size());
    need_node("application " + std::to_string(app.id) + " needs " + std::to_string(todo.size() - places.size()) +
              " more agent(s)");
    give_way();
  }
}

void Controller::agent_lost(AgentRec& a, const std::string& why) {
  if (a.state == AgentState::gone) return;
  if (a.state == AgentState::stopping) {  // stopped as asked (its manager lost meanwhile): nothing to replace
    a.state = AgentState::gone;
    return;
  }
  bool never_up = a.state == AgentState::starting;
  a.state = AgentState::gone;
  LOG_WARN("agent %llu (application %llu slot %u) lost: %s", static_cast<unsigned long long>(a.id),
           static_cast<unsigned long long>(a.app), a.slot, why.c_str());
  auto it = apps_.find(a.app);
  if (it == apps_.end()) return;
  AppRec& app = it->second;
  if (app.retiring.erase(a.id)) return;  // a dropped slot's agent: its ranks are moving anyway
  if (a.slot >= app.slot_agent.size() || app.slot_agent[a.slot] != a.id) return;
  app.slot_agent[a.slot] = 0;
  if (never_up) ++app.slot_failures[a.slot];
  start_slots(app, {a.slot});  // a replacement, on another node if this one is gone
  if (!app.slot_agent[a.slot] && app.waiting.count(a.slot)) {
    for (uint64_t peer : app.waiting[a.slot])
      send(peer, wire::frame(wire::ErrorMsg{static_cast<int32_t>(Code::ERR_NOT_SUPPORTED),
                                            "no agent can be started for this application now"}));
  }
}

// The application of a registered rank's connection, when the request names it, that rank and its key;
// else the request is refused (and nullptr).
Controller::AppRec* Controller::own_app(Peer& p, const char* what, uint64_t app_id, uint32_t rank,
                                        const wire::AppKey& key) {
  auto it = apps_.find(p.app);
  if (it != apps_.end() && app_id == p.app && rank == p.rank && wire::same_key(it->second.reg.key, key))
    return &it->second;
  refuse(p, make_error(Code::ERR_INVALID_ARG, "%s for application %llu rank %u: not this connection's application "
                       "and rank, or a wrong key", what, static_cast<unsigned long long>(app_id), rank));
  return nullptr;
}

void Controller::on_reassign(Peer& p, const wire::Reassign& m) {
  AppRec* own = own_app(p, "reassign", m.app_id, m.rank, m.key);
  if (!own) return;
  AppRec& app = *own;
  uint32_t slot = slot_of_rank(m.rank, app.reg.nranks, app.agents);
  auto a = agents_.find(app.slot_agent[slot]);
  if (m.lost_agent && a != agents_.end() && a->first == m.lost_agent) {
    // The rank could not reach it (or it fell silent): stop it, wherever it is, and start another.
    auto mgr = managers_.find(a->second.manager);
    if (mgr != managers_.end()) send(mgr->second.peer, wire::frame(wire::StopAgent{a->first}));
    agent_lost(a->second, "rank " + std::to_string(m.rank) + " could not reach it");
  }
  answer_rank(app, p.id, m.rank);
}

void Controller::on_usage(Peer& p, const wire::RankUsage& m) {
  AppRec* app = own_app(p, "rank_usage", m.app_id, m.rank, m.key);
  if (!app) return;
  app->rank_bytes[m.rank] = m.bytes;
  if (m.rank == 0 && m.interval_s > 0) app->interval_s = m.interval_s;
  rescale(*app);
}

void Controller::on_unregister(Peer& p, const wire::Unregister& m) {
  if (!own_app(p, "unregister", m.app_id, m.rank, m.key)) return;
  rank_gone(p);
  p.role = Role::unknown;
  p.closing = true;
}

void Controller::rank_gone(Peer& p) {
  auto it = apps_.find(p.app);
  if (it == apps_.end()) return;
  AppRec& app = it->second;
  auto r = app.rank_peer.find(p.rank);
  if (r != app.rank_peer.end() && r->second == p.id) {
    app.rank_peer.erase(r);
    app.rank_agent.erase(p.rank);
  }
  for (auto& [slot, peers] : app.waiting) peers.erase(p.id);
  for (auto& [slot, peers] : app.offered) peers.erase(p.id);
  if (app.rank_peer.empty()) return retire_app(app.id, "every rank left");
  stop_unused(app);
}

void Controller::retire_app(uint64_t id, const std::string& why) {
  auto it = apps_.find(id);
  if (it == apps_.end()) return;
  std::vector<uint64_t> all = it->second.slot_agent;
  all.insert(all.end(), it->second.retiring.begin(), it->second.retiring.end());
  for (uint64_t agent : all) {
    auto a = agents_.find(agent);
    if (a != agents_.end() && (a->second.state == AgentState::starting || a->second.state == AgentState::up))
      stop_agent(a->second);
  }
  owed_.erase(id);
  LOG_INFO("application %llu (%s) retired: %s", static_cast<unsigned long long>(id), it->second.reg.app_name.c_str(),
           why.c_str());
  apps_.erase(it);
}

}  // namespace cairn::service
