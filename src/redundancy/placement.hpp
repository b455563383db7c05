// Failure groups -> L2 redundancy sets: a pure function of where every rank runs, so that every rank
// computes the same sets from the same gathered node names, and the rule can be tested on its own.
//
// For every "local index" (the i-th rank of a node), the ranks with that index are taken in node order
// (the order in which nodes first appear in rank order) and cut into sets of set_size nodes; a short
// tail joins the previous set. Ranks of one node never share a set, so a node loss costs a set one
// member. L2 is off with fewer than two nodes, with redundancy single, or when some local index has a
// single rank (unequal ranks per node). rs parity is capped below the smallest set.
#pragma once

#include <string>
#include <vector>

#include "base/redundancy_scheme.hpp"

namespace cairn::redundancy {

struct SetPlacement {
  bool enabled = false;                   // L2 active for the job
  std::vector<int> set_of_rank;           // set id per job rank; -1 when L2 is off
  std::vector<std::vector<int>> members;  // job ranks of each set, in member order
  int my_set = -1, my_member = -1;        // this rank's set and place in it
  int m = 0;                              // parity members per set (xor 1, rs rs_parity capped, partner 1)
};

// node_of_rank: every rank's failure group. `warnings` receives what a user should read (L2 off and why,
// parity capped); the caller logs them once.
SetPlacement place_sets(const std::vector<std::string>& node_of_rank, Redundancy scheme, int set_size,
                        int rs_parity, int my_rank, std::vector<std::string>* warnings);

}  // namespace cairn::redundancy
