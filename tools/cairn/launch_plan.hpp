// How `cairn run` lays a job out: simulated nodes, the ranks on each, and the mpirun command line that
// gives every rank its node (one MPMD app context per node). Pure functions.
#pragma once

#include <string>
#include <vector>

#include "process.hpp"

namespace cairn::tool {

// "node0", "node1", ...
std::string node_name(int node);

// Ranks spread evenly in contiguous blocks: rank r runs on node floor(r * nnodes / nranks).
// Requires 1 <= nnodes <= nranks; every node gets at least one rank.
std::vector<int> ranks_per_node(int nranks, int nnodes);
// The ranks of `node` under that placement.
std::vector<int> ranks_of_node(const std::vector<int>& ranks_per_node, int node);

struct LaunchSpec {
  std::string mpirun;                    // the launcher to run (absolute path)
  std::vector<std::string> mpirun_args;  // words put before the app contexts (CAIRN_MPIRUN_ARGS)
  std::vector<int> ranks_per_node;
  std::vector<std::string> node_names;   // the node each entry of ranks_per_node runs on (a spare
                                         // replaces a killed one); empty: node0, node1, ...
  std::vector<std::string> command;      // CMD ARGS
  EnvAssignments job_env;                // given to every rank (CAIRN_CONFIG)
  std::vector<int> inject_nodes;         // nodes whose ranks also get inject_env
  EnvAssignments inject_env;             // CAIRN_INJECT, CAIRN_INJECT_DIR
};

// MPIRUN ARGS -np c0 env CAIRN_NODE=node0 [job_env] [inject_env] CMD ARGS : -np c1 env ... : ...
std::vector<std::string> mpirun_argv(const LaunchSpec& spec, bool with_injection);

}  // namespace cairn::tool
