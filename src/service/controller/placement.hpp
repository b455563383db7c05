// Where an application's agents run, and which agent serves which rank: pure functions of the
// checkpoint nodes (managers, in the order they joined) and their load, so every decision can be
// tested and explained (`cairn status` prints the reason beside each agent).
//
// Three policies (iCheck's, the controller's --placement), each deciding agent by agent, adding each
// placed agent's load before the next, and saying why:
//   stacking   fill one checkpoint node to its capacity before the next (join order). It keeps the other
//              nodes free for the next application and an application's agents together.
//   bandwidth  the node with the most free bandwidth: its measured drain bandwidth less the checkpoint
//              traffic of the agents it runs. A node not measured yet counts as the mean of the measured
//              ones; with none measured, the node with the fewest agents.
//   interval   the node carrying the least checkpoint traffic: each application weighs its bytes per
//              checkpoint interval (bytes per version / interval, shared by its agents), so the heavy
//              ones spread and the light ones fill in.
// Ties: fewer agents, then join order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::service {

enum class Policy { stacking, bandwidth, interval };
Result<Policy> parse_policy(const std::string& text);
const char* policy_name(Policy p);

// One checkpoint node as placement sees it.
struct NodeLoad {
  uint64_t manager_id = 0;
  std::string name;
  uint32_t capacity = 0;  // agents it may run
  uint32_t agents = 0;    // agents it runs (or is starting) now
  double bandwidth_bps = 0;  // measured drain bandwidth (bytes/s; 0: not measured yet)
  double demand_bps = 0;     // checkpoint traffic of its agents: per agent, its application's bytes per
                             // version / interval / agents (bytes/s)
};

// The application whose agents are placed: its checkpoint traffic (0 when not known yet).
struct AppDemand {
  double bytes_per_version = 0;
  double interval_s = 0;
  uint32_t agents = 1;
  double per_agent_bps() const;
};

struct AgentPlace {
  uint64_t manager_id = 0;
  std::string why;  // shown by `cairn status`
};

// Places `count` new agents on `nodes` (in join order). Returns fewer than `count` places when the nodes
// are full; never more agents on a node than its capacity.
std::vector<AgentPlace> place_agents(Policy p, const std::vector<NodeLoad>& nodes, uint32_t count,
                                     const AppDemand& app = {});
// "12.5 MB/s": rates as `cairn status` and the reasons print them.
std::string rate_text(double bps);

// Agents an application gets: what it asked for, at most one per rank and at most max_per_app (>= 1).
uint32_t agents_for(uint32_t wanted, uint32_t nranks, uint32_t max_per_app);

// Which of an application's k agents serves `rank`: ranks are cut into k blocks of consecutive ranks
// (rank r -> floor(r * k / nranks)), so one agent's ranks tend to share nodes, as MPI places them.
uint32_t slot_of_rank(uint32_t rank, uint32_t nranks, uint32_t k);

}  // namespace cairn::service
