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

}  // namespace cairn::service
