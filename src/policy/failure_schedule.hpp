// Failures at chosen times, for campaigns that measure what failures cost (`cairn run --fail-at`,
// `cairn-bench --campaign`; docs/launcher.md, docs/performance.md). A schedule is a list of failures,
// each at a time (seconds from the start of a run) of one kind: a node lost (its ranks killed, its
// cache deleted), one rank killed (its node's cache survives), or the whole job lost (every rank killed,
// every cache deleted: only L3 serves). draw_failures makes one with exponentially distributed times
// between failures (a constant failure rate, the assumption of Young's and Daly's models) from a seed;
// the same seed, MTBF, mix and shape always give the same schedule, on any platform (the generator and
// the transforms are written out here, not taken from <random>'s distributions, whose results differ
// between standard libraries). Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::policy {

enum class FailureKind { node, rank, job };

// "node", "rank", "job".
const char* failure_kind_name(FailureKind kind);

struct ScheduledFailure {
  double at = 0;                       // seconds from the start of the run
  FailureKind kind = FailureKind::node;
  int target = 0;                      // node: the job's k-th node; rank: the rank; job: 0 (unused)
  bool operator==(const ScheduledFailure&) const = default;
};

// Relative weights of the kinds; at least one above 0.
struct FailureMix {
  double node = 1, rank = 0, job = 0;
};

// "node:3,rank:1,job:1" (weights >= 0, any order, each kind at most once; a kind not named weighs 0).
Result<FailureMix> parse_failure_mix(const std::string& text);
std::string format_failure_mix(const FailureMix& mix);

// Failures over [0, horizon): the gaps between them exponential with mean `mtbf`, each one's kind drawn
// by the weights, the target node uniform over 0..nodes-1 and the target rank over 0..ranks-1.
// ERR_INVALID_ARG for mtbf or horizon not positive and finite, nodes or ranks below 1, a mix of no weight.
Result<std::vector<ScheduledFailure>> draw_failures(uint64_t seed, double mtbf, const FailureMix& mix,
                                                    double horizon, int nodes, int ranks);

// "12.5:node:1,30.25:rank:3,41:job" (times to the millisecond). parse_failures reads it back (times in
// seconds, >= 0 and not decreasing; "job" may carry no target) and checks the targets against the shape
// given (nodes, ranks; 0: unchecked).
std::string format_failures(const std::vector<ScheduledFailure>& failures);
Result<std::vector<ScheduledFailure>> parse_failures(const std::string& text, int nodes = 0, int ranks = 0);

}  // namespace cairn::policy
