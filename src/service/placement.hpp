// Where an application's agents run, and which agent serves which rank: pure functions of the
// checkpoint nodes (managers, in the order they joined) and their load, so every decision can be
// tested and explained (`cairn status` prints the reason beside each agent).
//
// One policy in this release, stacking (iCheck's): fill one checkpoint node to its capacity before the
// next. It keeps the other nodes free for the next application and an application's agents together.
// The policies that weigh the nodes' measured bandwidth or the applications' checkpoint intervals plug
// in here as further values of Policy with functions of the same shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::service {

enum class Policy { stacking };
Result<Policy> parse_policy(const std::string& text);
const char* policy_name(Policy p);

// One checkpoint node as placement sees it.
struct NodeLoad {
  uint64_t manager_id = 0;
  std::string name;
  uint32_t capacity = 0;  // agents it may run
  uint32_t agents = 0;    // agents it runs (or is starting) now
};

struct AgentPlace {
  uint64_t manager_id = 0;
  std::string why;  // shown by `cairn status`
};

// Places `count` new agents on `nodes` (in join order). Returns fewer than `count` places when the nodes
// are full; never more agents on a node than its capacity.
std::vector<AgentPlace> place_agents(Policy p, const std::vector<NodeLoad>& nodes, uint32_t count);

// Agents an application gets: what it asked for, at most one per rank and at most max_per_app (>= 1).
uint32_t agents_for(uint32_t wanted, uint32_t nranks, uint32_t max_per_app);

// Which of an application's k agents serves `rank`: ranks are cut into k blocks of consecutive ranks
// (rank r -> floor(r * k / nranks)), so one agent's ranks tend to share nodes, as MPI places them.
uint32_t slot_of_rank(uint32_t rank, uint32_t nranks, uint32_t k);

}  // namespace cairn::service
