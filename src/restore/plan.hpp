// The restart's plan: which version to restore and from which level, decided from what every rank holds
// (restore/inventory.hpp) and the L2 placement, before any data is read. Pure functions: no MPI, no
// files; every rank passes the same inputs and gets the same plan. The runtime gathers the inventory,
// asks for the plan and carries it out (core/restart_inplace.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/redundancy_scheme.hpp"
#include "base/status.hpp"
#include "redundancy/placement.hpp"
#include "restore/inventory.hpp"

namespace cairn::restore {

// The values of enum cairn_level (and of history's level numbers); none: nothing to restore.
enum class RestoreLevel : int { none = 0, l1 = 1, l2 = 2, l3 = 3 };

// Whether every redundancy set that lost members can rebuild them: good[r] != 0 where job rank r still
// holds the version, flags[r] its inventory flags (kProtected). A set with losses needs every survivor
// protected and a code (scheme, its size, sets.m) that tolerates the losses. ok, or ERR_UNRECOVERABLE
// whose message is l1_text followed by "; L2 incomplete (rank R never finished its redundancy)" or
// "; L2 cannot rebuild set S (SCHEME tolerates fewer losses)", naming the first set that fails.
// lost_per_set, when given: resized to the sets, each the job ranks it lost, in member order (filled up to
// the first set that fails). Reads sets.members and sets.m only (not enabled, not this rank's set).
Status l2_can_rebuild(const redundancy::SetPlacement& sets, Redundancy scheme, const std::vector<int>& good,
                      const std::vector<uint64_t>& flags, const std::string& l1_text,
                      std::vector<std::vector<int>>* lost_per_set = nullptr);

// What the plan is decided from; the same on every rank. Borrowed, not owned: they outlive the call.
struct RestoreInputs {
  int nranks = 0;
  const RestartInventory& inventory;          // every rank's (version, flags), L3's versions, the candidates
  const redundancy::SetPlacement& placement;  // L2's sets and their parity m; enabled = false: no L2
  Redundancy scheme = Redundancy::single;     // the sets' code
};

struct RestorePlan {
  uint64_t version = 0;  // 0 with level none: no candidate is restorable from the inventory alone
  RestoreLevel level = RestoreLevel::none;
  std::vector<uint64_t> flags;  // every rank's inventory flags for the version
  bool in_l3 = false;           // committed in L3 too
  int label_root = 0;           // the rank that reads the label: the lowest holding the version; 0 for L3
  // L2: per set, the job ranks it lost (empty: the set lost nothing). Empty at L1 and L3.
  std::vector<std::vector<int>> lost_per_set;
  // The newer candidates passed over, newest first, each "version V: why" (L1, L2, L3 in turn).
  std::vector<std::string> passed_over;

  bool chosen() const { return level != RestoreLevel::none; }
};

// For each candidate, newest first: L1 if every rank has it (kHasL1); else L2 if placement is enabled, some
// rank has it and l2_can_rebuild; else L3 if committed; else the next candidate. Rejected versions are
// already out of inventory.candidates. Never fails: an empty or hopeless inventory gives level none.
RestorePlan plan_restore(const RestoreInputs& in);

// A restart on another rank count from L2 (redistribute/exec/reshape_l2.cpp): an old redundancy set as
// its survivors' set records give it, keyed by its first member.
struct OldSet {
  Redundancy scheme = Redundancy::single;
  int m = 0;
  std::vector<int> members;    // old ranks, member order
  std::vector<uint64_t> lens;  // each member's stream length
};

// Which old sets rebuild lost members, and which current rank hosts each old rank.
struct ReshapeL2Plan {
  std::string reason;            // not empty: the version cannot be rebuilt at L2, and why
  std::vector<int> to_rebuild;   // the sets with losses (their first members), in key order
  std::vector<int> host_of_old;  // old rank -> current rank hosting it (-1: none)
};

// good[k]: old rank k survives (its host holds it, verified or about to be); set_of[k]: the first member
// of the set some survivor reported k in (-1: none did); host_of_old: the survivors' hosts. A lost member
// is hosted by a rank that hosts no other member of its set, taken round-robin over the nranks current
// ranks across the sets. The reason names the first failure: an old rank lost that no set reports, a set
// naming an old rank the version does not have, a set that lost more than its code tolerates, or one
// larger than the job. The same inputs give the same plan on every rank.
ReshapeL2Plan plan_reshape_l2(const std::vector<bool>& good, const std::vector<int>& set_of,
                              const std::map<int, OldSet>& sets, std::vector<int> host_of_old, int nranks);

// Where each old rank of a version can be read whole without a decode, for a restart on another rank
// count from L2: a survivor from its own slot; a lost one from the copy that a survivor of its set keeps
// in its redundancy data (redundancy::SetCode::copies_of: partner, and xor or rs sets whose parity row is
// a copy), where that survivor's version was protected, so that its redundancy data is complete.
struct CopySource {
  int holder = -1;      // the old rank keeping the copy; -1: the old rank itself (it survives)
  uint64_t offset = 0;  // of the copy in the holder's redundancy data
};
struct L2CopyPlan {
  std::string reason;               // not empty: some lost old rank has no copy to read, and why
  std::vector<CopySource> sources;  // per old rank
};
// held[k]: old rank k's slot is hosted; prot[k]: its version was protected at L2; set_of and sets as
// for plan_reshape_l2. The first copy the code names whose holder qualifies is taken.
L2CopyPlan plan_l2_copies(const std::vector<bool>& held, const std::vector<bool>& prot, const std::vector<int>& set_of,
                          const std::map<int, OldSet>& sets);

}  // namespace cairn::restore
