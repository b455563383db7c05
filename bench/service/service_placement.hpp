// cairn-bench --service --placement, shared by the parent (service_placement.cpp: the daemons, the three
// jobs of each run, the report) and the application (service_placement_child.cpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "service/service_bench.hpp"

namespace cairn::bench {

using ojson = nlohmann::ordered_json;

struct AppSpec {
  double size_factor;  // of --size, per rank
  double interval_s;   // compute time between checkpoints
};
// Large and frequent, small and frequent, middling and rare.
constexpr AppSpec kApps[3] = {{1.0, 0.5}, {0.25, 0.5}, {0.5, 1.5}};

// Each agent's buffer pool (the applications' service_buffer_pool). An agent that was idle may move one
// pool's worth at once, above its --agent-bandwidth; a small pool keeps that burst small beside a version,
// so that the limit is what a version's drain meets.
constexpr const char* kBufferPool = "1M";

inline uint64_t app_size(const ServiceOptions& o, int i) {
  uint64_t s = static_cast<uint64_t>(static_cast<double>(o.size) * kApps[i].size_factor);
  return std::max<uint64_t>(s & ~uint64_t(3), 65536);
}

inline ojson r3(double x) { return std::isfinite(x) ? ojson(std::round(x * 1000.0) / 1000.0) : ojson(nullptr); }

}  // namespace cairn::bench
