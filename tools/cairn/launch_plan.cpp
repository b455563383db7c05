#include "launch_plan.hpp"

#include <algorithm>

namespace cairn::tool {

std::string node_name(int node) { return "node" + std::to_string(node); }

std::vector<int> ranks_per_node(int nranks, int nnodes) {
  std::vector<int> counts(static_cast<size_t>(nnodes), 0);
  for (int r = 0; r < nranks; ++r)
    ++counts[static_cast<size_t>(static_cast<long long>(r) * nnodes / nranks)];
  return counts;
}

std::vector<int> ranks_of_node(const std::vector<int>& counts, int node) {
  int first = 0;
  for (int i = 0; i < node; ++i) first += counts[static_cast<size_t>(i)];
  std::vector<int> ranks;
  for (int k = 0; k < counts[static_cast<size_t>(node)]; ++k) ranks.push_back(first + k);
  return ranks;
}

std::vector<std::string> mpirun_argv(const LaunchSpec& spec, bool with_injection) {
  std::vector<std::string> argv{spec.mpirun};
  argv.insert(argv.end(), spec.mpirun_args.begin(), spec.mpirun_args.end());
  bool first = true;
  for (size_t node = 0; node < spec.ranks_per_node.size(); ++node) {
    if (spec.ranks_per_node[node] == 0) continue;  // a node lost without a spare
    if (!first) argv.push_back(":");
    first = false;
    argv.insert(argv.end(), {"-np", std::to_string(spec.ranks_per_node[node]), "env",
                             "CAIRN_NODE=" + (node < spec.node_names.size() ? spec.node_names[node]
                                                                       : node_name(static_cast<int>(node)))});
    for (const auto& [name, value] : spec.job_env) argv.push_back(name + "=" + value);
    bool killed = std::find(spec.inject_nodes.begin(), spec.inject_nodes.end(), static_cast<int>(node)) !=
                  spec.inject_nodes.end();
    if (with_injection && killed)
      for (const auto& [name, value] : spec.inject_env) argv.push_back(name + "=" + value);
    argv.insert(argv.end(), spec.command.begin(), spec.command.end());
  }
  return argv;
}

}  // namespace cairn::tool
