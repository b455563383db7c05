#include "service/controller/placement.hpp"

#include <algorithm>
#include <cstdio>

namespace cairn::service {

Result<Policy> parse_policy(const std::string& text) {
  if (text == "stacking") return Policy::stacking;
  if (text == "bandwidth") return Policy::bandwidth;
  if (text == "interval") return Policy::interval;
  return make_error(Code::ERR_INVALID_ARG, "unknown placement policy '%s' (stacking, bandwidth or interval)",
                    text.c_str());
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::bandwidth: return "bandwidth";
    case Policy::interval: return "interval";
    default: return "stacking";
  }
}

double AppDemand::per_agent_bps() const {
  if (bytes_per_version <= 0 || interval_s <= 0) return 0;
  return bytes_per_version / interval_s / std::max<uint32_t>(agents, 1);
}

std::string rate_text(double bps) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MB/s", bps / 1e6);
  return buf;
}

namespace {

std::string slot_text(const NodeLoad& n, uint32_t agents) {
  return n.name + ", agent " + std::to_string(agents) + " of " + std::to_string(n.capacity);
}

// The best node with room by `better` (a strict order; ties: fewer agents, then join order), or size().
template <class Better>
size_t best(const std::vector<NodeLoad>& n, Better better) {
  size_t chosen = n.size();
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i].agents >= n[i].capacity) continue;
    if (chosen == n.size() || better(n[i], n[chosen]) ||
        (!better(n[chosen], n[i]) && n[i].agents < n[chosen].agents))
      chosen = i;
  }
  return chosen;
}

// The runner-up's figure, for the reason ("; the next best m0, 3.0 MB/s").
template <class Better, class Figure>
std::string next_best(const std::vector<NodeLoad>& n, size_t chosen, Better better, Figure figure) {
  size_t other = n.size();
  for (size_t i = 0; i < n.size(); ++i)
    if (i != chosen && n[i].agents < n[i].capacity && (other == n.size() || better(n[i], n[other]))) other = i;
  return other == n.size() ? "; no other node has room" : "; next " + n[other].name + ", " + rate_text(figure(n[other]));
}

}  // namespace

std::vector<AgentPlace> place_agents(Policy p, const std::vector<NodeLoad>& nodes, uint32_t count,
                                     const AppDemand& app) {
  std::vector<AgentPlace> out;
  std::vector<NodeLoad> n = nodes;
  const double mine = app.per_agent_bps();
  double known_sum = 0;
  int known = 0;
  for (const auto& x : n)
    if (x.bandwidth_bps > 0) known_sum += x.bandwidth_bps, ++known;
  const double mean = known ? known_sum / known : 0;
  auto free_bw = [&](const NodeLoad& x) { return (x.bandwidth_bps > 0 ? x.bandwidth_bps : mean) - x.demand_bps; };
  auto more_free = [&](const NodeLoad& a, const NodeLoad& b) { return free_bw(a) > free_bw(b); };
  auto less_traffic = [](const NodeLoad& a, const NodeLoad& b) { return a.demand_bps < b.demand_bps; };
  auto fewer_agents = [](const NodeLoad& a, const NodeLoad& b) { return a.agents < b.agents; };
  for (uint32_t i = 0; i < count; ++i) {
    size_t c = n.size();
    std::string why;
    switch (p) {
      case Policy::stacking:
        for (size_t k = 0; k < n.size() && c == n.size(); ++k)
          if (n[k].agents < n[k].capacity) c = k;
        if (c < n.size())
          why = "stacking: " + std::string(c == 0 ? "the first" : "the first not full") + " checkpoint node (" +
                slot_text(n[c], n[c].agents + 1) + ")";
        break;
      case Policy::bandwidth:
        if (known) {
          c = best(n, more_free);
          if (c < n.size())
            why = "bandwidth: the most free bandwidth, " + rate_text(free_bw(n[c])) + " (" +
                  (n[c].bandwidth_bps > 0 ? rate_text(n[c].bandwidth_bps) + " measured"
                                          : "not measured: the mean " + rate_text(mean)) +
                  ", less " + rate_text(n[c].demand_bps) + " of checkpoint traffic) on " + slot_text(n[c], n[c].agents + 1) +
                  next_best(n, c, more_free, free_bw);
        } else {
          c = best(n, fewer_agents);
          if (c < n.size())
            why = "bandwidth: no node measured yet, the fewest agents (" + slot_text(n[c], n[c].agents + 1) + ")";
        }
        break;
      case Policy::interval:
        c = best(n, less_traffic);
        if (c < n.size())
          why = "interval: the least checkpoint traffic, " + rate_text(n[c].demand_bps) + " of bytes per interval (" +
                slot_text(n[c], n[c].agents + 1) + "; this agent adds " + rate_text(mine) + ")" +
                next_best(n, c, less_traffic, [](const NodeLoad& x) { return x.demand_bps; });
        break;
    }
    if (c == n.size()) break;  // every node is full
    ++n[c].agents;
    n[c].demand_bps += mine;
    out.push_back(AgentPlace{n[c].manager_id, why});
  }
  return out;
}

uint32_t agents_for(uint32_t wanted, uint32_t nranks, uint32_t max_per_app) {
  return std::max<uint32_t>(1, std::min({wanted, std::max<uint32_t>(nranks, 1), std::max<uint32_t>(max_per_app, 1)}));
}

uint32_t slot_of_rank(uint32_t rank, uint32_t nranks, uint32_t k) {
  if (nranks == 0 || k == 0) return 0;
  return static_cast<uint32_t>(static_cast<uint64_t>(rank) * k / nranks);
}

}  // namespace cairn::service
