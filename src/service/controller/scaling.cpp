#include "service/controller/scaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "service/controller/placement.hpp"

namespace cairn::service {

namespace {
uint32_t need(double bytes, const ScaleInputs& in, uint32_t top) {
  double per_agent = in.agent_bps * in.fraction * in.interval_s;  // bytes one agent drains in time
  double n = std::ceil(bytes / per_agent);
  if (!(n >= 1)) n = 1;
  return n >= top ? top : static_cast<uint32_t>(n);
}
}  // namespace

ScaleDecision scale_agents(const ScaleInputs& in) {
  uint32_t top = std::max<uint32_t>(1, std::min(in.nranks, in.max_per_app));
  uint32_t k = std::clamp<uint32_t>(in.current, 1, top);
  ScaleDecision d{k, ""};
  char buf[256];
  if (!(in.bytes_per_version > 0) || !(in.interval_s > 0) || !(in.agent_bps > 0) || !(in.fraction > 0)) {
    d.why = "not measured yet: " + std::to_string(k) + " agent(s) as asked";
    return d;
  }
  double fit = in.agent_bps * in.fraction * in.interval_s;
  uint32_t up = need(in.bytes_per_version, in, top);
  uint32_t down = need(in.bytes_per_version * kScaleDownHeadroom, in, top);
  const char* verb = "keeps";
  if (up > k) {
    d.agents = up;
    verb = "up to";
  } else if (down < k) {
    d.agents = down;
    verb = "down to";
  }
  std::snprintf(buf, sizeof buf,
                "%s %u: %.1f MB per version, %.1f s interval, %s per agent -> %.1f MB per agent in %.0f%% of the "
                "interval%s",
                verb, d.agents, in.bytes_per_version / 1e6, in.interval_s, rate_text(in.agent_bps).c_str(), fit / 1e6,
                in.fraction * 100, d.agents == top && up >= top ? " (at the bound)" : "");
  d.why = buf;
  return d;
}

uint64_t pick_donor(const std::vector<AppShare>& apps) {
  const AppShare* best = nullptr;
  for (const auto& a : apps)
    if (a.settled && a.agents >= 2 && (!best || a.agents > best->agents || (a.agents == best->agents && a.app > best->app)))
      best = &a;
  return best ? best->app : 0;
}

uint32_t cap_scale_up(uint32_t current, uint32_t wanted, uint32_t free, bool starving, bool may_grow) {
  if (wanted <= current) return wanted;
  if (starving) return current;
  if (may_grow) return wanted;
  return std::min(wanted, current + free);
}

}  // namespace cairn::service
