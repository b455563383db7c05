// Optimum checkpoint intervals (Young 1974; Daly 2006) and the searches built on Daly's model.
// Derivations and assumptions: docs/intervals.md.
#include "policy/interval.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/units.hpp"

namespace cairn::policy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxLevels = 8;
// Leaves of the multilevel search: each level past the first gets ratios up to budget^(1/(L-1)).
constexpr double kRatioSearchBudget = 1 << 21;

Status check_positive(const char* what, double v) {
  if (std::isfinite(v) && v > 0) return Status::ok();
  return make_error(Code::ERR_INVALID_ARG, "%s must be a positive, finite number of seconds (got %g)", what, v);
}

Status check_not_negative(const char* what, double v) {
  if (std::isfinite(v) && v >= 0) return Status::ok();
  return make_error(Code::ERR_INVALID_ARG, "%s must be a finite number of seconds >= 0 (got %g)", what, v);
}

Status check_model(const FailureModel& m) {
  CAIRN_TRY(check_positive("checkpoint cost", m.checkpoint_cost));
  CAIRN_TRY(check_positive("MTBF", m.mtbf));
  return check_not_negative("restart cost", m.restart_cost);
}

// log(e^x - 1) for x > 0, without overflow for large x.
double log_expm1(double x) { return x + std::log(-std::expm1(-x)); }

double log_add(double a, double b) {
  double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

// log of expected_time_with_checkpoints (finite even when the time itself overflows).
double log_time_with_checkpoints(double work, uint64_t n, const FailureModel& m) {
  double segment = work / (static_cast<double>(n) + 1);
  double last = log_expm1(segment / m.mtbf);  // the last segment, no checkpoint after it
  double inner = last;
  if (n > 0)
    inner = log_add(std::log(static_cast<double>(n)) + log_expm1((segment + m.checkpoint_cost) / m.mtbf), last);
  return std::log(m.mtbf) + m.restart_cost / m.mtbf + inner;
}

// Exhaustive search over the ratios of levels 2..L (see multilevel_plan).
struct RatioSearch {
  const std::vector<LevelCost>* levels = nullptr;
  uint64_t limit = 1;
  std::vector<uint64_t> ratios, best_ratios;
  double best_product = kInf;

  // Levels [0, i) are placed; q: checkpoints per checkpoint of level i-1 or higher; a, b: the sums
  // of A and B so far.
  void run(size_t i, double q, double a, double b) {
    const auto& lv = *levels;
    if (i == lv.size()) {
      if (a * b < best_product) best_product = a * b, best_ratios = ratios;
      return;
    }
    for (uint64_t k = 1; k <= limit; ++k) {
      double qi = q * static_cast<double>(k);
      ratios[i] = k;
      run(i + 1, qi, a + (lv[i].checkpoint_cost - lv[i - 1].checkpoint_cost) / qi, b + qi / (2 * lv[i].mtbf));
    }
  }
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

// ---- one level ---------------------------------------------------------------------------------

Result<double> young_interval(double checkpoint_cost, double mtbf) {
  CAIRN_TRY(check_positive("checkpoint cost", checkpoint_cost));
  CAIRN_TRY(check_positive("MTBF", mtbf));
  return std::sqrt(2 * checkpoint_cost * mtbf);
}

Result<double> daly_first_order_interval(double checkpoint_cost, double mtbf, double restart_cost) {
  CAIRN_TRY(check_model({checkpoint_cost, mtbf, restart_cost}));
  return std::sqrt(2 * checkpoint_cost * (mtbf + restart_cost));
}

Result<double> daly_interval(double checkpoint_cost, double mtbf) {
  CAIRN_TRY(check_positive("checkpoint cost", checkpoint_cost));
  CAIRN_TRY(check_positive("MTBF", mtbf));
  if (checkpoint_cost >= 2 * mtbf) return mtbf;
  double ratio = checkpoint_cost / (2 * mtbf);
  return std::sqrt(2 * checkpoint_cost * mtbf) * (1 + std::sqrt(ratio) / 3 + ratio / 9) - checkpoint_cost;
}

Result<double> daly_model_optimum(double checkpoint_cost, double mtbf) {
  CAIRN_TRY(check_positive("checkpoint cost", checkpoint_cost));
  CAIRN_TRY(check_positive("MTBF", mtbf));
  // d/dτ of (e^{(τ+δ)/M} − 1)/τ = 0  <=>  x + δ/M + log(1 − x) = 0 with x = τ/M. The left side is a
  // at x = 0, decreasing, and −∞ at x = 1: one root in (0, 1), found by bisection.
  double a = checkpoint_cost / mtbf, lo = 0, hi = 1;
  for (int i = 0; i < 200 && lo < hi; ++i) {
    double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    if (mid + a + std::log1p(-mid) > 0)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi) * mtbf;
}

Result<double> expected_wall_time(double work, double interval, const FailureModel& model) {
  CAIRN_TRY(check_positive("work", work));
  CAIRN_TRY(check_positive("interval", interval));
  CAIRN_TRY(check_model(model));
  const double M = model.mtbf;
  return M * std::exp(model.restart_cost / M) * std::expm1((interval + model.checkpoint_cost) / M) * (work / interval);
}

Result<double> expected_efficiency(double interval, const FailureModel& model) {
  CAIRN_TRY(check_positive("interval", interval));
  CAIRN_TRY(check_model(model));
  const double M = model.mtbf;
  double per_work =
      M * std::exp(model.restart_cost / M) * std::expm1((interval + model.checkpoint_cost) / M) / interval;
  return std::isfinite(per_work) ? 1 / per_work : 0.0;
}

// ---- a fixed amount of work ------------------------------------------------------------------

Result<double> expected_time_with_checkpoints(double work, uint64_t checkpoints, const FailureModel& model) {
  CAIRN_TRY(check_positive("work", work));
  CAIRN_TRY(check_model(model));
  return std::exp(log_time_with_checkpoints(work, checkpoints, model));
}

Result<CheckpointCount> optimal_checkpoint_count(double work, const FailureModel& model) {
  CAIRN_TRY(check_positive("work", work));
  CAIRN_TRY(check_model(model));
  auto tau = daly_model_optimum(model.checkpoint_cost, model.mtbf);
  CAIRN_TRY(tau.status());
  // The expected time is unimodal in the count: ternary search on [0, 4x the continuous estimate],
  // then a scan of what is left.
  double estimate = std::max(0.0, work / tau.value() - 1);
  double upper = std::min(4 * (estimate + 1) + 16, 0x1p62);
  uint64_t lo = 0, hi = static_cast<uint64_t>(upper);
  auto f = [&](uint64_t n) { return log_time_with_checkpoints(work, n, model); };
  while (hi - lo > 8) {
    uint64_t m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
    if (f(m1) < f(m2))
      hi = m2;
    else
      lo = m1;
  }
  uint64_t best = lo;
  for (uint64_t n = lo + 1; n <= hi; ++n)
    if (f(n) < f(best)) best = n;
  CheckpointCount out;
  out.checkpoints = best;
  out.segment = work / (static_cast<double>(best) + 1);
  out.expected_time = std::exp(f(best));
  return out;
}

// ---- several levels ---------------------------------------------------------------------------

Result<MultilevelPlan> multilevel_plan(const std::vector<LevelCost>& levels) {
  if (levels.empty() || levels.size() > kMaxLevels)
    return make_error(Code::ERR_INVALID_ARG, "give 1 to %zu levels (got %zu)", kMaxLevels, levels.size());
  for (size_t i = 0; i < levels.size(); ++i) {
    std::string where = "level " + std::to_string(i + 1);
    CAIRN_TRY(check_positive((where + " checkpoint cost").c_str(), levels[i].checkpoint_cost));
    CAIRN_TRY(check_positive((where + " MTBF").c_str(), levels[i].mtbf));
  }
  RatioSearch search;
  search.levels = &levels;
  search.ratios.assign(levels.size(), 1);
  search.best_ratios = search.ratios;
  size_t free_levels = levels.size() - 1;
  if (free_levels > 0)
    search.limit = static_cast<uint64_t>(
        std::clamp(std::floor(std::pow(kRatioSearchBudget, 1.0 / static_cast<double>(free_levels))), 2.0, 1e6));
  search.run(1, 1, levels[0].checkpoint_cost, 1 / (2 * levels[0].mtbf));

  // A and B again for the best ratios, in the same order of summation.
  MultilevelPlan plan;
  plan.ratio_limit = free_levels > 0 ? search.limit : 0;
  double q = 1, a = levels[0].checkpoint_cost, b = 1 / (2 * levels[0].mtbf);
  std::vector<double> q_of(levels.size(), 1);
  for (size_t i = 1; i < levels.size(); ++i) {
    q *= static_cast<double>(search.best_ratios[i]);
    q_of[i] = q;
    a += (levels[i].checkpoint_cost - levels[i - 1].checkpoint_cost) / q;
    b += q / (2 * levels[i].mtbf);
    if (search.best_ratios[i] == search.limit) plan.at_search_bound = true;
  }
  plan.equivalent_cost = a;
  plan.equivalent_mtbf = 1 / (2 * b);
  plan.first_order_interval = std::sqrt(a / b);
  plan.first_order_overhead = 2 * std::sqrt(a * b);
  auto base = daly_interval(plan.equivalent_cost, plan.equivalent_mtbf);
  CAIRN_TRY(base.status());
  plan.base_interval = base.value();
  auto efficiency = expected_efficiency(plan.base_interval, {plan.equivalent_cost, plan.equivalent_mtbf, 0});
  CAIRN_TRY(efficiency.status());
  plan.efficiency = efficiency.value();
  for (size_t i = 0; i < levels.size(); ++i)
    plan.levels.push_back({search.best_ratios[i], plan.base_interval * q_of[i]});
  return plan;
}

// ---- interval = "auto" -----------------------------------------------------------------------

void CheckpointCostAverage::add(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return;
  ring_[count_ % kWindow] = seconds;
  ++count_;
}

double CheckpointCostAverage::value() const {
  uint64_t n = std::min<uint64_t>(count_, kWindow);
  if (n == 0) return 0;
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += ring_[i];
  return sum / static_cast<double>(n);
}

double auto_interval(double measured_cost, double mtbf, double first_interval) {
  if (!std::isfinite(mtbf) || mtbf <= 0) return 0;
  if (!(measured_cost > 0) || !std::isfinite(measured_cost))
    return first_interval > 0 && std::isfinite(first_interval) ? first_interval : mtbf / 10;
  auto tau = daly_interval(std::max(measured_cost, kMinMeasuredCost), mtbf);
  return tau.is_ok() ? tau.value() : 0;
}

double equivalent_mtbf(const FailureRates& r) {
  if (!std::isfinite(r.mtbf) || r.mtbf <= 0) return 0;
  const double all = 1 / r.mtbf;
  const double l3 = std::isfinite(r.l3_mtbf) && r.l3_mtbf >= r.mtbf ? 1 / r.l3_mtbf : 0;
  const double q2 = static_cast<double>(std::max<uint64_t>(r.l2_period, 1));
  const double q3 = static_cast<double>(std::max<uint64_t>(r.l3_period, 1));
  return 1 / ((all - l3) * q2 + l3 * q3);
}

// ---- text --------------------------------------------------------------------------------------

Result<double> parse_duration(const std::string& raw) { return units::parse_duration(raw); }

Result<std::vector<LevelCost>> parse_levels(const std::string& text) {
  std::vector<LevelCost> out;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    std::string where = "level " + std::to_string(out.size() + 1) + " ('" + item + "')";
    size_t colon = item.find(':');
    if (colon == std::string::npos || item.find(':', colon + 1) != std::string::npos)
      return Status(Code::ERR_INVALID_ARG, where + ": expected COST:MTBF, e.g. 2s:6h");
    auto cost = parse_duration(item.substr(0, colon));
    if (!cost) return cost.status().prefixed(where);
    auto mtbf = parse_duration(item.substr(colon + 1));
    if (!mtbf) return mtbf.status().prefixed(where);
    if (cost.value() <= 0 || mtbf.value() <= 0)
      return Status(Code::ERR_INVALID_ARG, where + ": the cost and the MTBF must be more than 0");
    out.push_back({cost.value(), mtbf.value()});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() > kMaxLevels)
    return make_error(Code::ERR_INVALID_ARG, "at most %zu levels (got %zu)", kMaxLevels, out.size());
  return out;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return seconds > 0 ? "inf" : "nan";
  const char* unit = "s";
  double value = seconds;
  if (seconds >= 2 * 86400) value = seconds / 86400, unit = "d";
  else if (seconds >= 2 * 3600) value = seconds / 3600, unit = "h";
  else if (seconds >= 2 * 60) value = seconds / 60, unit = "min";
  char buf[64];
  snprintf(buf, sizeof buf, "%.4g %s", value, unit);
  return buf;
}

}  // namespace cairn::policy
