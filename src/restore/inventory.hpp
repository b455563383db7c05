// What every rank holds for a restart: gathered once by the runtime (core/restart_search.cpp, over MPI) and
// read by the plan (plan.hpp) and the full search. No MPI here: the gathered arrays only.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

namespace cairn::restore {

constexpr int kMaxInventory = 128;  // versions per rank considered (cache_versions <= 64)
constexpr uint64_t kHasL1 = 1;      // the rank's L1 record of the version, for this rank count, readable
constexpr uint64_t kProtected = 2;  // its protected marker

struct RestartInventory {
  std::vector<uint64_t> all;  // every rank's kMaxInventory (version, flags) pairs, in rank order
  std::vector<uint64_t> l3;   // committed versions of this rank count (rank 0's listing, shared)
  std::set<uint64_t, std::greater<>> candidates;  // newest first, rejected ones removed

  // Every rank's flags for version v.
  std::vector<uint64_t> flags_of(uint64_t v, int nranks) const {
    std::vector<uint64_t> flags(static_cast<size_t>(nranks), 0);
    const size_t stride = 2 * static_cast<size_t>(kMaxInventory);
    for (size_t r = 0; r < flags.size(); ++r)
      for (size_t i = 0; i < stride; i += 2)
        if (all[r * stride + i] == v) flags[r] = all[r * stride + i + 1];
    return flags;
  }
  bool in_l3(uint64_t v) const {
    for (uint64_t x : l3)
      if (x == v) return true;
    return false;
  }
};

}  // namespace cairn::restore
