// Dynamic agents: the controller scales an application's agents from its metrics (scaling.hpp) and moves
// its ranks between versions; and asks for one more checkpoint node when every manager is full
// (scale_up_command). docs/service.md, "Dynamic agents".
//
// A change goes in three steps, so that no version in flight is lost:
//   1. k changes: new slots get agents (placement as usual); the agents of dropped slots are kept running
//      ("retiring").
//   2. Every connected rank whose agent changes is offered its new agent (an assigned message it did not
//      ask for) once that agent is up. The rank takes it between versions (at its next version, or at
//      cairn_probe_agents), and says so by asking again (reassign without a lost agent), which records it.
//   3. A retiring agent no rank uses any more is stopped.
// No new change starts before the last one settled (every rank moved, nothing retiring).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "service/controller/controller.hpp"
#include "service/controller/scaling.hpp"

namespace cairn::service {

bool Controller::scale_settled(const AppRec& app) const {
  if (!app.retiring.empty()) return false;
  for (uint64_t agent : app.slot_agent) {
    auto a = agents_.find(agent);
    if (!agent || a == agents_.end() || a->second.state != AgentState::up) return false;
  }
  for (const auto& [rank, peer] : app.rank_peer) {
    auto r = app.rank_agent.find(rank);
    if (r == app.rank_agent.end() || r->second != app.slot_agent[slot_of_rank(rank, app.reg.nranks, app.agents)])
      return false;
  }
  return true;
}

void Controller::rescale(AppRec& app) {
  if (!o_.scale_agents) return;
  give_way();  // a waiting application's turn may have come (a donor settled)
  // One agent's drain bandwidth: the mean over this application's agents that have drained something.
  double sum = 0;
  int n = 0;
  for (const auto& [id, a] : agents_)
    if (a.app == app.id && a.state == AgentState::up && a.stats.busy_s > 0.05 && a.stats.bytes_drained > 0) {
      sum += static_cast<double>(a.stats.bytes_drained) / a.stats.busy_s;
      ++n;
    }
  if (n) app.agent_bps = sum / n;
  double now = wire::monotonic_seconds();
  if (!scale_settled(app) || now - app.last_scaled < std::max(2.0, app.interval_s)) return;
  ScaleInputs in;
  in.bytes_per_version = demand(app).bytes_per_version;
  in.interval_s = app.interval_s;
  in.agent_bps = app.agent_bps;
  in.current = app.agents;
  in.nranks = app.reg.nranks;
  in.max_per_app = o_.max_agents_per_app;
  in.fraction = o_.scale_fraction;
  ScaleDecision d = scale_agents(in);
  app.scale_why = d.why;
  bool hungry = false;
  for (const auto& [id, other] : apps_) hungry = hungry || (id != app.id && starving(other));
  uint32_t k = cap_scale_up(app.agents, d.agents, free_places(), hungry, !o_.scale_up_command.empty());
  if (k < d.agents) {
    app.scale_why += hungry ? "; held at " + std::to_string(k) + ": an application waits for its first agent"
                            : "; held at " + std::to_string(k) + ": no checkpoint node has room for more";
    if (!hungry) need_node("application " + std::to_string(app.id) + " would scale up to " + std::to_string(d.agents));
  }
  if (k != app.agents) change_agents(app, k, app.scale_why);
}

// Steps 1 and 2 of a change (above): k agents from now on.
void Controller::change_agents(AppRec& app, uint32_t k, const std::string& why) {
  uint32_t old = app.agents;
  app.agents = k;
  app.last_scaled = wire::monotonic_seconds();
  ++app.scale_changes;
  LOG_INFO("application %llu: agents %u -> %u (%s)", static_cast<unsigned long long>(app.id), old, k, why.c_str());
  if (k > old) {
    app.slot_agent.resize(k, 0);
    app.slot_failures.resize(k, 0);
    std::vector<uint32_t> added;
    for (uint32_t s = old; s < k; ++s) added.push_back(s);
    start_slots(app, added);
  } else {
    for (uint32_t s = k; s < old; ++s)
      if (app.slot_agent[s]) app.retiring.insert(app.slot_agent[s]);
    app.slot_agent.resize(k);
    app.slot_failures.resize(k);
    // Ranks that waited for a dropped slot's agent ask again under the new k.
    std::set<uint64_t> again;
    for (auto it = app.waiting.begin(); it != app.waiting.end();)
      if (it->first >= k) {
        again.insert(it->second.begin(), it->second.end());
        it = app.waiting.erase(it);
      } else {
        ++it;
      }
    for (uint64_t peer : again) {
      auto p = peers_.find(peer);
      if (p != peers_.end()) answer_rank(app, peer, p->second.rank);
    }
  }
  app.offered.clear();
  for (const auto& [rank, peer] : app.rank_peer) offer(app, peer, rank);
  stop_unused(app);
}

bool Controller::starving(const AppRec& app) const {
  if (app.rank_peer.empty()) return false;
  bool may_start = false;
  for (uint32_t s = 0; s < app.agents; ++s) {
    if (app.slot_agent[s]) return false;
    may_start = may_start || app.slot_failures[s] < kMaxFailedStarts;
  }
  return may_start;
}

uint32_t Controller::free_places() const {
  uint32_t free = 0;
  for (const auto& n : node_loads()) free += n.capacity > n.agents ? n.capacity - n.agents : 0;
  return free;
}

// With dynamic agents, an application that found no room for its first agent is given the place of
// another's extra one: the donor (pick_donor) goes down by one through the usual steps, and the place its
// dropped agent leaves goes to the waiting application first (start_empty_slots). One donor per waiting
// application at a time.
void Controller::give_way() {
  if (!o_.scale_agents) return;
  for (auto& [id, app] : apps_) {
    if (!starving(app) || owed_.count(id)) continue;
    std::vector<AppShare> shares;
    for (const auto& [oid, other] : apps_)
      if (oid != id) shares.push_back(AppShare{oid, other.agents, scale_settled(other)});
    uint64_t donor = pick_donor(shares);
    if (!donor) continue;
    owed_.insert(id);
    AppRec& d = apps_.at(donor);
    d.scale_why = "down to " + std::to_string(d.agents - 1) + ": gives an agent to application " + std::to_string(id) +
                  " (" + app.reg.app_name + "), which found no room for its first";
    change_agents(d, d.agents - 1, d.scale_why);
  }
}

// Tell a rank its agent under the current k, when that differs from the one it took; later, when the
// agent is not up yet.
void Controller::offer(AppRec& app, uint64_t peer, uint32_t rank) {
  uint32_t slot = slot_of_rank(rank, app.reg.nranks, app.agents);
  uint64_t agent = app.slot_agent[slot];
  auto took = app.rank_agent.find(rank);
  if (took != app.rank_agent.end() && took->second == agent) return;
  wire::Assigned out;
  if (!assignment(app, slot, &out)) {
    app.offered[slot].insert(peer);
    return;
  }
  send(peer, wire::frame(out));
}

void Controller::offer_waiting(AppRec& app, uint32_t slot) {
  auto w = app.offered.find(slot);
  if (w == app.offered.end()) return;
  std::set<uint64_t> peers = std::move(w->second);
  app.offered.erase(w);
  for (uint64_t peer : peers) {
    auto it = peers_.find(peer);
    if (it != peers_.end() && it->second.app == app.id) offer(app, peer, it->second.rank);
  }
}

void Controller::stop_unused(AppRec& app) {
  for (auto it = app.retiring.begin(); it != app.retiring.end();) {
    bool used = false;
    for (const auto& [rank, agent] : app.rank_agent) used = used || (agent == *it && app.rank_peer.count(rank));
    auto a = agents_.find(*it);
    bool running = a != agents_.end() && (a->second.state == AgentState::starting || a->second.state == AgentState::up);
    if (used && running) {
      ++it;
      continue;
    }
    if (running) {
      stop_agent(a->second);
      LOG_INFO("agent %llu (application %llu) stopped: no rank uses it after the scale-down",
               static_cast<unsigned long long>(*it), static_cast<unsigned long long>(app.id));
    }
    it = app.retiring.erase(it);
  }
}

// ---- scale_up_command ------------------------------------------------------------------------------------

void Controller::need_node(const std::string& why) {
  if (o_.scale_up_command.empty()) return;
  double now = wire::monotonic_seconds();
  if (scale_up_pid_ || now - scale_up_last_ < o_.scale_up_interval_s) return;  // running, or asked lately
  pid_t pid = fork();
  if (pid < 0) {
    LOG_ERROR("scale-up command: fork: %s", strerror(errno));
    return;
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the controller's signal fd blocks these
    for (int fd = 3; fd < 1024; ++fd) close(fd);  // the controller's sockets stay with it
    setenv("CAIRN_CONTROLLER", address_.c_str(), 1);
    execl("/bin/sh", "sh", "-c", o_.scale_up_command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  scale_up_pid_ = pid;
  scale_up_last_ = now;
  ++scale_up_runs_;
  scale_up_state_ = "running (pid " + std::to_string(pid) + ") since " + why;
  LOG_WARN("every checkpoint node is full (%s): running the scale-up command (pid %d): %s", why.c_str(), pid,
           o_.scale_up_command.c_str());
}

void Controller::reap_scale_up() {
  if (!scale_up_pid_) return;
  int status = 0;
  pid_t r = waitpid(scale_up_pid_, &status, WNOHANG);
  if (r == 0) return;
  std::string how = r < 0                ? std::string("lost: ") + strerror(errno)
                    : WIFEXITED(status)  ? "exit status " + std::to_string(WEXITSTATUS(status))
                    : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "ended";
  if (r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    LOG_INFO("scale-up command (pid %d) ended: %s", scale_up_pid_, how.c_str());
  else
    LOG_ERROR("scale-up command (pid %d) failed: %s", scale_up_pid_, how.c_str());
  scale_up_state_ = "last run " + how;
  scale_up_pid_ = 0;
}

}  // namespace cairn::service
