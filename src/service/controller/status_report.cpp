// `cairn status --service`: the controller's registry as one JSON document (docs/service.md, "cairn
// status"). Keys never appear in it.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "service/controller/controller.hpp"

namespace cairn::service {

std::string Controller::status_json() const {
  using nlohmann::json;
  double now = wire::monotonic_seconds();
  json doc;
  doc["controller"] = {{"address", address_},
                       {"pid", static_cast<int>(getpid())},
                       {"uptime_s", now - started_},
                       {"placement", policy_name(o_.policy)},
                       {"protocol", wire::kProtocol}};
  json managers = json::array();
  const auto loads = node_loads();
  for (const auto& [id, m] : managers_) {
    double demand_bps = 0;
    for (const auto& n : loads)
      if (n.manager_id == id) demand_bps = n.demand_bps;
    json agents = json::array();
    for (const auto& [aid, a] : agents_)
      if (a.manager == id && a.state != AgentState::gone) agents.push_back(aid);
    managers.push_back({{"id", id},
                        {"name", m.name},
                        {"host", m.host},
                        {"pid", m.pid},
                        {"capacity", m.capacity},
                        {"agents", agents},
                        {"bandwidth_bps", m.peak_bps},
                        {"demand_bps", demand_bps},
                        {"joined_s_ago", now - m.joined}});
  }
  doc["managers"] = managers;
  json agents = json::array();
  for (const auto& [id, a] : agents_) {
    if (a.state == AgentState::gone) continue;
    auto mgr = managers_.find(a.manager);
    const wire::AgentStats& s = a.stats;
    json j = {{"id", id},
              {"application", a.app},
              {"slot", a.slot},
              {"manager", mgr != managers_.end() ? mgr->second.name : ""},
              {"state", a.state == AgentState::up ? "up" : a.state == AgentState::stopping ? "stopping" : "starting"},
              {"pid", a.pid},
              {"address", a.address},
              {"why", a.why},
              {"sessions", s.sessions},
              {"queued", s.queued},
              {"bytes_drained", s.bytes_drained},
              {"transfers", s.transfers_done},
              {"transfers_failed", s.transfers_failed},
              {"busy_s", s.busy_s},
              {"drain_gbps", s.busy_s > 0 ? static_cast<double>(s.bytes_drained) / s.busy_s / 1e9 : 0.0}};
    if (s.active_rank != UINT32_MAX)
      j["active"] = {{"rank", s.active_rank},
                     {"version", s.active_version},
                     {"bytes_done", s.active_done},
                     {"bytes_total", s.active_total}};
    agents.push_back(j);
  }
  doc["agents"] = agents;
  json apps = json::array();
  for (const auto& [id, app] : apps_) {
    uint64_t bytes = 0;
    for (const auto& [r, b] : app.rank_bytes) bytes += b;
    uint64_t drained = 0;
    json slots = json::array();
    for (uint64_t agent : app.slot_agent) {
      slots.push_back(agent);
      auto a = agents_.find(agent);
      if (a != agents_.end()) drained += a->second.stats.bytes_drained;
    }
    apps.push_back({{"id", id},
                    {"name", app.reg.app_name},
                    {"job", app.reg.job},
                    {"host", app.reg.host},
                    {"pid", app.reg.pid},
                    {"nranks", app.reg.nranks},
                    {"ranks_connected", app.rank_peer.size()},
                    {"bytes_per_version", bytes},
                    {"interval_s", app.interval_s},
                    {"demand_bps", demand(app).bytes_per_version > 0 && app.interval_s > 0
                                       ? demand(app).bytes_per_version / app.interval_s : 0.0},
                    {"mode", wire::mode_name(app.reg.mode)},
                    {"chain", o_.chain_for(app.reg.app_name)},
                    {"provider", app.reg.provider},
                    {"chunk_size", app.reg.chunk_size},
                    {"buffer_pool", app.reg.pool_bytes},
                    {"prefix", app.reg.prefix},
                    {"agents", slots},
                    {"agent_count", app.agents},
                    {"scaling", {{"on", o_.scale_agents},
                                 {"why", o_.scale_agents ? (app.scale_why.empty() ? "not measured yet" : app.scale_why)
                                                         : "fixed: the agents the application asked for (no --scale-agents)"},
                                 {"changes", app.scale_changes},
                                 {"agent_bps", app.agent_bps},
                                 {"retiring", std::vector<uint64_t>(app.retiring.begin(), app.retiring.end())}}},
                    {"bytes_drained", drained},
                    {"registered_s_ago", now - app.registered}});
  }
  doc["applications"] = apps;
  doc["scale_up"] = {{"command", o_.scale_up_command}, {"runs", scale_up_runs_}, {"state", scale_up_state_}};
  return doc.dump();
}

}  // namespace cairn::service
