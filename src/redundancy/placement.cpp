#include "redundancy/placement.hpp"

#include <algorithm>
#include <map>

namespace cairn::redundancy {

SetPlacement place_sets(const std::vector<std::string>& node_of, Redundancy scheme, int set_size, int rs_parity,
                        int my_rank, std::vector<std::string>* warnings) {
  const int nranks = static_cast<int>(node_of.size());
  std::vector<std::string> node_order;
  std::vector<int> local_index(static_cast<size_t>(nranks));
  std::map<std::string, int> count;
  for (int r = 0; r < nranks; ++r) {
    const std::string& n = node_of[static_cast<size_t>(r)];
    if (!count.count(n)) node_order.push_back(n);
    local_index[static_cast<size_t>(r)] = count[n]++;
  }
  SetPlacement p;
  p.set_of_rank.assign(static_cast<size_t>(nranks), -1);
  int parity = scheme == Redundancy::rs ? rs_parity : 1;
  constexpr int kMinMembers = 2;
  bool possible = scheme != Redundancy::single && node_order.size() >= 2;
  if (scheme != Redundancy::single && node_order.size() < 2 && nranks > 0)
    warnings->push_back(std::string("redundancy ") + redundancy_name(scheme) +
                        " needs at least 2 failure groups (nodes); all " + std::to_string(nranks) + " ranks are on '" +
                        node_order[0] + "': L2 is off");
  int max_local = 0;
  for (auto& [n, c] : count) max_local = std::max(max_local, c);
  for (int li = 0; possible && li < max_local; ++li) {
    std::vector<int> ranks;
    for (const auto& n : node_order)
      for (int r = 0; r < nranks; ++r)
        if (node_of[static_cast<size_t>(r)] == n && local_index[static_cast<size_t>(r)] == li) ranks.push_back(r);
    if (static_cast<int>(ranks.size()) < kMinMembers) {
      possible = false;
      warnings->push_back(std::string("redundancy ") + redundancy_name(scheme) + ": rank " + std::to_string(ranks[0]) +
                          " has no rank on another node to protect it (unequal ranks per node); L2 is off, versions "
                          "are protected by L3 only");
      break;
    }
    size_t first = p.members.size();
    for (size_t i = 0; i < ranks.size(); i += static_cast<size_t>(set_size))
      p.members.emplace_back(ranks.begin() + static_cast<long>(i),
                             ranks.begin() + static_cast<long>(std::min(ranks.size(), i + static_cast<size_t>(set_size))));
    if (p.members.size() - first >= 2 && static_cast<int>(p.members.back().size()) < kMinMembers) {
      auto tail = p.members.back();
      p.members.pop_back();
      p.members.back().insert(p.members.back().end(), tail.begin(), tail.end());
    }
  }
  if (!possible) p.members.clear();
  p.enabled = possible;
  int smallest = 1 << 30;
  for (size_t s = 0; s < p.members.size(); ++s) {
    smallest = std::min(smallest, static_cast<int>(p.members[s].size()));
    for (size_t i = 0; i < p.members[s].size(); ++i) {
      int r = p.members[s][i];
      p.set_of_rank[static_cast<size_t>(r)] = static_cast<int>(s);
      if (r == my_rank) p.my_set = static_cast<int>(s), p.my_member = static_cast<int>(i);
    }
  }
  if (p.enabled && parity >= smallest) {
    warnings->push_back("rs_parity " + std::to_string(parity) + " needs sets of more than " + std::to_string(parity) +
                        " nodes; using " + std::to_string(smallest - 1) + " parity shard(s)");
    parity = smallest - 1;
  }
  p.m = parity;
  return p;
}

}  // namespace cairn::redundancy
