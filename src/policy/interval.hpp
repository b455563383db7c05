// How often to checkpoint: Young's and Daly's optimum intervals, Daly's model of the expected run time
// under exponential failures, the best number of checkpoints for a fixed amount of work, a plan for
// several levels, and the decision behind `interval = "auto"`. Pure functions, no MPI; every time is
// in seconds. The formulas, their sources and the models' assumptions are in docs/intervals.md.
//
// Names: δ (checkpoint_cost) is the time the application loses per checkpoint, M (mtbf) the mean
// time between failures, R (restart_cost) the time from a failure until computing resumes, τ
// (interval) the computation between two checkpoints, W (work) the computation a run must do.
// Every function is thread-safe. Bad inputs (not positive, not finite) are ERR_INVALID_ARG with a
// message that names the quantity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::policy {

// ---- one level ---------------------------------------------------------------------------------

// Young (1974): sqrt(2·δ·M).
Result<double> young_interval(double checkpoint_cost, double mtbf);

// Daly (2006), first-order model: sqrt(2·δ·(M + R)). Young's value when R = 0. restart_cost >= 0.
Result<double> daly_first_order_interval(double checkpoint_cost, double mtbf, double restart_cost);

// Daly (2006), higher-order estimate (his eq. 37):
//   sqrt(2δM)·[1 + (1/3)·sqrt(δ/2M) + (1/9)·(δ/2M)] − δ   for δ < 2M,   M otherwise.
// Always below Young's value for δ < 2M (it equals Young − 2δ/3 + (δ/9)·sqrt(δ/2M)); note the jump from
// 8M/9 to M at δ = 2M, which is in Daly's piecewise definition.
Result<double> daly_interval(double checkpoint_cost, double mtbf);

// The exact minimiser of Daly's expected wall time (below): τ = M·(1 + W0(−e^{−(δ/M + 1)})), W0 the
// principal branch of Lambert's function, solved numerically. Daly's eq. 37 is its series expansion.
Result<double> daly_model_optimum(double checkpoint_cost, double mtbf);

// Daly's model: failures come one at a time with exponential inter-arrival times (mean M), may strike
// during computation, checkpoint and restart alike, and cost R to restart plus the work since the last
// checkpoint. restart_cost may be 0.
struct FailureModel {
  double checkpoint_cost = 0;
  double mtbf = 0;
  double restart_cost = 0;
};

// Daly's expected wall time of `work` seconds of computation checkpointed every `interval` seconds
// (one checkpoint per interval, work/interval of them):  M·e^{R/M}·(e^{(τ+δ)/M} − 1)·W/τ.
// May be +infinity when the interval is many times M.
Result<double> expected_wall_time(double work, double interval, const FailureModel& model);
// work / expected_wall_time: independent of the work, in (0, 1).
Result<double> expected_efficiency(double interval, const FailureModel& model);

// ---- a fixed amount of work ------------------------------------------------------------------

// The work cut into checkpoints + 1 equal segments with a checkpoint between two segments and none
// after the last (the run ends by writing its results). Expected time in Daly's model, segment by
// segment: M·e^{R/M}·[n·(e^{(W/(n+1) + δ)/M} − 1) + (e^{W/((n+1)M)} − 1)]. May be +infinity.
Result<double> expected_time_with_checkpoints(double work, uint64_t checkpoints, const FailureModel& model);

struct CheckpointCount {
  uint64_t checkpoints = 0;  // the number minimising the expected time
  double segment = 0;        // work between two checkpoints: work / (checkpoints + 1)
  double expected_time = 0;  // expected wall time with that number
};
// The integer number of checkpoints minimising expected_time_with_checkpoints (Pliris' use of
// Daly's model): a search over integers around work / daly_model_optimum().
Result<CheckpointCount> optimal_checkpoint_count(double work, const FailureModel& model);

// ---- several levels ---------------------------------------------------------------------------

// Level i (1 = cheapest, cache) costs checkpoint_cost to take; failures of class i arrive with mean
// time `mtbf` between them, independently of the other classes, and need a checkpoint of level i or
// higher to recover from.
struct LevelCost {
  double checkpoint_cost = 0;
  double mtbf = 0;
};

struct LevelPlan {
  uint64_t every = 1;  // a checkpoint of this level or higher every `every` checkpoints of the level
                       // below or higher (1 for level 1; 1 also means "every time", the level below
                       // is then never taken alone)
  double period = 0;   // computation between two checkpoints of this level or higher (s)
};

// First-order model (docs/intervals.md): with base interval τ between checkpoints and level i taken
// every q_i = every_2·...·every_i checkpoints, the overhead per second of computation is
//   H = A/τ + B·τ,  A = Σ C_i·(1/q_i − 1/q_{i+1}),  B = Σ q_i/(2·M_i)
// (checkpoint time, plus on average half a period of level i lost per failure of class i). For given
// ratios the best τ is sqrt(A/B) with H = 2·sqrt(A·B); the ratios minimising A·B are found by an
// exhaustive search over integers 1..ratio_limit per level. The recommended base interval applies
// Daly's higher-order correction to the equivalent single level (cost A, MTBF 1/(2B)); with one
// level the plan is exactly Daly's.
struct MultilevelPlan {
  std::vector<LevelPlan> levels;     // one per level given, in order
  double base_interval = 0;          // recommended computation between two checkpoints (s)
  double first_order_interval = 0;   // sqrt(A/B)
  double equivalent_cost = 0;        // A: checkpoint time per base interval, averaged over levels
  double equivalent_mtbf = 0;        // 1/(2B)
  double first_order_overhead = 0;   // 2·sqrt(A·B)
  double efficiency = 0;             // Daly's model on the equivalent level at base_interval
  uint64_t ratio_limit = 0;          // the largest ratio searched
  bool at_search_bound = false;      // a ratio equals ratio_limit: a larger one might do better
};
// 1 to 8 levels.
Result<MultilevelPlan> multilevel_plan(const std::vector<LevelCost>& levels);

// ---- interval = "auto" -----------------------------------------------------------------------

// The mean of the last kWindow measured checkpoint costs (seconds). Not thread-safe.
class CheckpointCostAverage {
 public:
  static constexpr int kWindow = 8;
  void add(double seconds);   // negative or non-finite samples are ignored
  double value() const;       // 0 before the first sample
  uint64_t samples() const { return count_; }  // all samples added

 private:
  double ring_[kWindow] = {};
  uint64_t count_ = 0;
};

// Costs below this (timer resolution, empty checkpoints) count as this much, so the interval never
// collapses to zero.
constexpr double kMinMeasuredCost = 1e-3;

// The computation between checkpoints that cairn_need_checkpoint asks for with interval = "auto":
// daly_interval(max(measured_cost, kMinMeasuredCost), mtbf) once a cost is measured
// (measured_cost > 0). Before that, `first_interval` when it is > 0 (the interval_seconds knob),
// else mtbf / 10 (Daly's optimum for a cost of about 0.5 % of the MTBF). mtbf <= 0 or not finite:
// 0 (no interval). Every rank must pass the same agreed values to get the same answer.
double auto_interval(double measured_cost, double mtbf, double first_interval);

// The failures interval = "auto" plans for: all of them (mtbf, seconds), the part of them that only
// level 3 recovers (l3_mtbf; 0: none), and how many checkpoints apart are the versions each kind goes
// back to: l2_period for the others (a lost node goes back to the last version protected at level 2:
// l2_every), l3_period for those (flush_every).
struct FailureRates {
  double mtbf = 0;
  double l3_mtbf = 0;
  uint64_t l2_period = 1;
  uint64_t l3_period = 1;
};
// The MTBF of the one level that loses as much per second of computation as these failures do at a
// checkpoint every τ: a failure that goes back to a version taken every q checkpoints loses q·τ/2 on
// average, so 1/M_eq = (1/M − 1/M3)·q2 + q3/M3 (the model of "Several levels" in docs/intervals.md, with
// the ratios the configuration fixes). Without l3_mtbf (or with l3_mtbf < mtbf, which the configuration
// refuses) and q2 = 1 it is mtbf itself: Daly's one level. mtbf <= 0 or not finite: 0.
double equivalent_mtbf(const FailureRates& rates);

// ---- text --------------------------------------------------------------------------------------

// "90", "90s", "250ms", "15m", "15min", "1.5h", "2d", "1w", "1h30m" -> seconds (>= 0, finite):
// units::parse_duration.
Result<double> parse_duration(const std::string& text);
// "C1:M1,C2:M2,..." (durations as above, C and M > 0) -> one LevelCost per level, cheapest first.
Result<std::vector<LevelCost>> parse_levels(const std::string& text);
// A duration for people, 4 significant digits in the largest fitting unit: "42.5 s", "116.7 min",
// "1.944 h", "3.5 d".
std::string format_duration(double seconds);

}  // namespace cairn::policy
