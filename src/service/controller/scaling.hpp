// How many agents an application gets when the controller scales them (--scale-agents): a pure function
// of the application's metrics, so that every decision can be tested and explained (`cairn status`).
//
// The rule: a version must drain within `fraction` of one checkpoint interval. With B bytes per version
// (the sum of the ranks' rank_usage), an interval of T seconds (rank 0's measured interval, else the one
// registered) and a drain bandwidth of W bytes/s per agent (measured: the application's agents' bytes
// over their busy time),
//
//   need(B) = ceil(B / (W * fraction * T)),   bounded to [1, min(nranks, max_per_app)].
//
// Up at once: need(B) > k gives need(B) agents. Down with headroom, so that a size that wobbles does not
// flap: only when need(1.5 * B) < k, and then to need(1.5 * B). Nothing measured yet (B, T or W zero):
// k stays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cairn::service {

struct ScaleInputs {
  double bytes_per_version = 0;
  double interval_s = 0;
  double agent_bps = 0;  // drain bandwidth of one agent (bytes/s)
  uint32_t current = 1;
  uint32_t nranks = 1;
  uint32_t max_per_app = 64;
  double fraction = 0.5;  // of the interval a version may take to drain
};

struct ScaleDecision {
  uint32_t agents = 1;
  std::string why;  // shown by `cairn status`
};

constexpr double kScaleDownHeadroom = 1.5;

ScaleDecision scale_agents(const ScaleInputs& in);

// Fairness between applications: one that has no agent gets one before another keeps more than one.
struct AppShare {
  uint64_t app = 0;
  uint32_t agents = 0;   // its k
  bool settled = false;  // its last change is through (every slot's agent up, every rank moved)
};
// The application that gives up an agent to one that has none: of the settled ones with two agents or
// more, the one with the most (ties: the one registered last, the highest id). 0: none can.
uint64_t pick_donor(const std::vector<AppShare>& apps);

// How far a scale-up from `current` to `wanted` agents goes, with `free` places on the checkpoint nodes:
// not at all while an application waits for its first agent (`starving`); else to `wanted` when a new
// node can come (`may_grow`: a scale-up command is set, the slots without room wait for it), or to what
// the free places allow.
uint32_t cap_scale_up(uint32_t current, uint32_t wanted, uint32_t free, bool starving, bool may_grow);

}  // namespace cairn::service
