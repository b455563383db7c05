#include "service/placement.hpp"

#include <algorithm>

namespace cairn::service {

Result<Policy> parse_policy(const std::string& text) {
  if (text == "stacking") return Policy::stacking;
  return make_error(Code::ERR_INVALID_ARG, "unknown placement policy '%s' (this release has: stacking)", text.c_str());
}

const char* policy_name(Policy) { return "stacking"; }

std::vector<AgentPlace> place_agents(Policy, const std::vector<NodeLoad>& nodes, uint32_t count) {
  std::vector<AgentPlace> out;
  std::vector<uint32_t> load;
  for (const auto& n : nodes) load.push_back(n.agents);
  for (uint32_t i = 0; i < count; ++i) {
    size_t chosen = nodes.size();
    for (size_t n = 0; n < nodes.size(); ++n)
      if (load[n] < nodes[n].capacity) {
        chosen = n;
        break;
      }
    if (chosen == nodes.size()) break;  // every node is full
    ++load[chosen];
    AgentPlace p;
    p.manager_id = nodes[chosen].manager_id;
    p.why = "stacking: " + std::string(chosen == 0 ? "the first" : "the first not full") + " checkpoint node (" +
            nodes[chosen].name + ", agent " + std::to_string(load[chosen]) + " of " +
            std::to_string(nodes[chosen].capacity) + ")";
    out.push_back(p);
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
