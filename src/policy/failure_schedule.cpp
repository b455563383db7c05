// Failure schedules for campaigns (failure_schedule.hpp).
#include "policy/failure_schedule.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace cairn::policy {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a fixed, portable sequence from any seed.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform over 0..n-1 (n >= 1), without modulo bias.
  int below(int n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % static_cast<uint64_t>(n);
    uint64_t x = next();
    while (x >= limit) x = next();
    return static_cast<int>(x % static_cast<uint64_t>(n));
  }

 private:
  uint64_t state_;
};

bool weight_ok(double w) { return std::isfinite(w) && w >= 0; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = text.find(sep, start);
    out.push_back(trim(text.substr(start, at == std::string::npos ? std::string::npos : at - start)));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

bool parse_kind(const std::string& word, FailureKind* kind) {
  if (word == "node") *kind = FailureKind::node;
  else if (word == "rank") *kind = FailureKind::rank;
  else if (word == "job") *kind = FailureKind::job;
  else return false;
  return true;
}

bool parse_number(const std::string& text, double* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool parse_int(const std::string& text, int* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

const char* failure_kind_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::node: return "node";
    case FailureKind::rank: return "rank";
    case FailureKind::job: return "job";
  }
  return "?";
}

Result<FailureMix> parse_failure_mix(const std::string& text) {
  FailureMix mix{0, 0, 0};
  bool seen[3] = {false, false, false};
  for (const std::string& item : split(text, ',')) {
    size_t colon = item.find(':');
    FailureKind kind{};
    double w = 0;
    if (colon == std::string::npos || !parse_kind(trim(item.substr(0, colon)), &kind) ||
        !parse_number(trim(item.substr(colon + 1)), &w) || !weight_ok(w))
      return make_error(Code::ERR_INVALID_ARG,
                        "failure mix '%s': expected KIND:WEIGHT[,...] with KIND node, rank or job and a weight >= 0 "
                        "(e.g. node:2,rank:1,job:1)",
                        text.c_str());
    int i = static_cast<int>(kind);
    if (seen[i]) return make_error(Code::ERR_INVALID_ARG, "failure mix '%s': %s given twice", text.c_str(), failure_kind_name(kind));
    seen[i] = true;
    (kind == FailureKind::node ? mix.node : kind == FailureKind::rank ? mix.rank : mix.job) = w;
  }
  if (!(mix.node + mix.rank + mix.job > 0))
    return make_error(Code::ERR_INVALID_ARG, "failure mix '%s': every weight is 0", text.c_str());
  return mix;
}

std::string format_failure_mix(const FailureMix& mix) {
  char buf[128];
  snprintf(buf, sizeof buf, "node:%g,rank:%g,job:%g", mix.node, mix.rank, mix.job);
  return buf;
}

Result<std::vector<ScheduledFailure>> draw_failures(uint64_t seed, double mtbf, const FailureMix& mix,
                                                    double horizon, int nodes, int ranks) {
  if (!(std::isfinite(mtbf) && mtbf > 0))
    return make_error(Code::ERR_INVALID_ARG, "MTBF must be a positive, finite number of seconds (got %g)", mtbf);
  if (!(std::isfinite(horizon) && horizon > 0))
    return make_error(Code::ERR_INVALID_ARG, "the horizon must be a positive, finite number of seconds (got %g)", horizon);
  if (nodes < 1 || ranks < 1)
    return make_error(Code::ERR_INVALID_ARG, "a schedule needs at least one node and one rank (got %d, %d)", nodes, ranks);
  const double total = mix.node + mix.rank + mix.job;
  if (!weight_ok(mix.node) || !weight_ok(mix.rank) || !weight_ok(mix.job) || !(total > 0))
    return make_error(Code::ERR_INVALID_ARG, "the failure mix needs weights >= 0, at least one above 0");
  SplitMix64 rng(seed);
  std::vector<ScheduledFailure> out;
  double t = 0;
  for (;;) {
    t += -mtbf * std::log1p(-rng.uniform());  // inverse transform of the exponential distribution
    // Every draw is made whether or not the failure is kept, so the sequence does not depend on the horizon.
    const double pick = rng.uniform() * total;
    const int node = rng.below(nodes), rank = rng.below(ranks);
    if (t >= horizon) break;
    ScheduledFailure f;
    f.at = std::round(t * 1000) / 1000;  // what format_failures writes, so that a schedule reads back equal
    f.kind = pick < mix.node ? FailureKind::node : pick < mix.node + mix.rank ? FailureKind::rank : FailureKind::job;
    if (f.kind == FailureKind::job && mix.job <= 0) f.kind = mix.rank > 0 ? FailureKind::rank : FailureKind::node;
    f.target = f.kind == FailureKind::node ? node : f.kind == FailureKind::rank ? rank : 0;
    out.push_back(f);
  }
  return out;
}

std::string format_failures(const std::vector<ScheduledFailure>& failures) {
  std::string out;
  char buf[64];
  for (const auto& f : failures) {
    if (f.kind == FailureKind::job) snprintf(buf, sizeof buf, "%.3f:job", f.at);
    else snprintf(buf, sizeof buf, "%.3f:%s:%d", f.at, failure_kind_name(f.kind), f.target);
    out += (out.empty() ? "" : ",") + std::string(buf);
  }
  return out;
}

Result<std::vector<ScheduledFailure>> parse_failures(const std::string& text, int nodes, int ranks) {
  std::vector<ScheduledFailure> out;
  if (trim(text).empty()) return make_error(Code::ERR_INVALID_ARG, "empty failure list (expected TIME:KIND[:TARGET],...)");
  for (const std::string& item : split(text, ',')) {
    auto parts = split(item, ':');
    ScheduledFailure f;
    auto bad = [&](const char* why) {
      return make_error(Code::ERR_INVALID_ARG, "failure '%s': %s (expected TIME:node:NODE, TIME:rank:RANK or TIME:job)",
                        item.c_str(), why);
    };
    if (parts.size() < 2 || parts.size() > 3) return bad("not two or three fields");
    if (!parse_number(parts[0], &f.at) || !std::isfinite(f.at) || f.at < 0) return bad("the time is not a number of seconds >= 0");
    if (!parse_kind(parts[1], &f.kind)) return bad("the kind is not node, rank or job");
    if (f.kind == FailureKind::job) {
      if (parts.size() == 3 && parts[2] != "0") return bad("a job failure has no target");
    } else {
      if (parts.size() != 3 || !parse_int(parts[2], &f.target) || f.target < 0) return bad("no target number");
      int limit = f.kind == FailureKind::node ? nodes : ranks;
      if (limit > 0 && f.target >= limit)
        return make_error(Code::ERR_INVALID_ARG, "failure '%s': %s %d does not exist (the job has %d, numbered from 0)",
                          item.c_str(), failure_kind_name(f.kind), f.target, limit);
    }
    if (!out.empty() && f.at < out.back().at)
      return make_error(Code::ERR_INVALID_ARG, "failure '%s': times must not decrease (after %.3f)", item.c_str(), out.back().at);
    out.push_back(f);
  }
  return out;
}

}  // namespace cairn::policy
