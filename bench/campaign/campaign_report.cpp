// cairn-bench --campaign: the report (campaign.hpp). Each policy's useful fraction beside Daly's model
// fed the costs measured in the same run (the checkpoint cost and interval it had, the mean time a
// recovery took, the failures it met), the loss per failure broken down, and the campaign's targets:
// interval = auto within 5 % of the best fixed interval, the model within 2 points, multilevel's gain
// over L3 only with its causes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "campaign.hpp"
#include "policy/interval.hpp"

namespace cairn::bench {
namespace {

const char* const kParts[] = {"redone", "teardown", "startup", "restart"};

double num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// Daly's model's expected re-done work per failure: a failure that strikes within a segment of s =
// τ + δ (exponential, mean M) comes on average M − s/(e^{s/M} − 1) into it.
double expected_redone(double segment, double mtbf) {
  if (!(mtbf > 0) || !std::isfinite(mtbf)) return segment / 2;
  return mtbf - segment / std::expm1(segment / mtbf);
}

// Daly's model per level (docs/performance.md, "Efficiency under failures"): a failure goes back to the
// newest version of the level that recovers it, not always to the newest checkpoint. A node or rank
// failure of a multilevel job goes back to the newest version (L1 or L2: a segment of τ + δ); a failure
// of the whole job to the newest L3 version, taken every flush_every-th (a segment of q·(τ + δ)). First
// order, with each class's rate as met (n_c / wall) and its recovery as measured (teardown + start-up +
// restart, mean over the class's recoveries that were not cut short), and the steps as slowed as they were
// measured (the background work of checkpoints -- hashing, the L2 exchange, the L3 write -- shares the
// cores with the computation: a step of s against the failure-free run's s0):
//   fraction = (1 − Σ_c n_c·(R_c + r_c) / wall) / (1 + δ/τ) · s0/s,   r_c = expected re-done work of a segment
json multilevel_model(const json& p, double interval, double cost, double recovery) {
  json m;
  const json& fs = p["failures"];
  const double wall = num(p, "wall_s");
  const double q = std::max(1.0, num(p, "flush_every", 1));
  const double mtbf = fs.empty() ? std::numeric_limits<double>::infinity() : wall / static_cast<double>(fs.size());
  struct Class {
    int n = 0, whole = 0;
    double recovery = 0, redone = 0;
  };
  std::map<std::string, Class> classes;
  for (const auto& f : fs) {
    Class& c = classes[f.value("kind", "")];
    ++c.n;
    c.redone += num(f, "redone_s");
    if (!f.value("cut_short", false)) c.recovery += num(f, "teardown_s") + num(f, "startup_s") + num(f, "restart_s"), ++c.whole;
  }
  double loss = 0;
  json per = json::object();
  for (auto& [kind, c] : classes) {
    const double segment = (kind == "job" ? q : 1.0) * (interval + cost);
    const double r = c.whole ? c.recovery / c.whole : recovery;
    const double redone = expected_redone(segment, mtbf);
    loss += c.n * (r + redone);
    per[kind] = {{"failures", c.n}, {"segment_s", segment}, {"recovery_s", r}, {"expected_redone_s", redone},
                 {"redone_s", c.n ? c.redone / c.n : 0.0}};
  }
  m["classes"] = per;
  if (!(cost > 0) || !(interval > 0) || !(wall > 0)) {
    m["fraction"] = nullptr;
    return m;
  }
  const double step = num(p, "step_s"), free_step = num(p, "failure_free_step_s");
  const double pace = step > 0 && free_step > 0 ? free_step / step : 1.0;  // s0/s
  m["steps_slower"] = 1 / pace - 1;
  const double fraction = std::clamp((1 - loss / wall) / (1 + cost / interval) * pace, 0.0, 1.0);
  const double measured = num(p, "useful_fraction");
  m["fraction"] = fraction;
  m["difference_points"] = (measured - fraction) * 100;
  m["within_2_points"] = std::fabs(measured - fraction) * 100 <= 2;
  // What it leaves out, in points of the wall time: the time outside checkpoints and failures, and the
  // re-done work beyond each class's expectation.
  double beyond = 0;
  for (auto& [kind, c] : classes) beyond += c.redone - c.n * num(per[kind], "expected_redone_s");
  m["redone_beyond_model_points"] = beyond / wall * 100;
  // The time the slowed steps took beyond the failure-free pace (in the model since it is measured), and
  // what is left outside checkpoints and failures.
  const double computing = wall - num(p, "checkpoint_time_s") - num(p, "lost_s");
  const double slowed = computing * (1 - pace);
  m["slowed_steps_points"] = slowed / wall * 100;
  m["outside_model_points"] = (num(p, "other_s") - slowed) / wall * 100;
  return m;
}

json model_of(json& p, double set_mtbf) {
  json m;
  const double wall = num(p, "wall_s"), cost = num(p, "checkpoint_cost_s");
  double interval = num(p, "mean_interval_s");
  if (!(interval > 0)) interval = num(p, "interval_s");
  const json& fs = p["failures"];
  const size_t n = fs.size();
  double recovery = 0;
  size_t whole = 0;
  for (const auto& f : fs)
    if (!f.value("cut_short", false)) recovery += num(f, "teardown_s") + num(f, "startup_s") + num(f, "restart_s"), ++whole;
  recovery = whole ? recovery / static_cast<double>(whole) : 0;
  const double realized = n ? wall / static_cast<double>(n) : std::numeric_limits<double>::infinity();
  m["checkpoint_cost_s"] = cost;
  m["interval_s"] = interval;
  m["restart_cost_s"] = recovery;
  m["mtbf_s"] = n ? json(realized) : json();
  m["mtbf_set_s"] = set_mtbf;
  if (!(cost > 0) || !(interval > 0)) {
    m["fraction"] = nullptr;
    m["note"] = "no checkpoint was measured: the model needs a cost and an interval";
    return m;
  }
  auto at = [&](double mtbf) -> double {
    if (!std::isfinite(mtbf)) return interval / (interval + cost);
    auto e = policy::expected_efficiency(interval, policy::FailureModel{cost, mtbf, recovery});
    return e ? e.value() : 0.0;
  };
  const double fraction = at(realized), measured = num(p, "useful_fraction");
  m["fraction"] = fraction;
  m["fraction_at_set_mtbf"] = at(set_mtbf);
  m["difference_points"] = (measured - fraction) * 100;
  m["within_2_points"] = std::fabs(measured - fraction) * 100 <= 2;
  // What the model does not account for, in points of the wall time: more failures than it expects over
  // its own run time (a short campaign's draw), more loss per failure than its R + expected re-done work
  // (re-done work past the newest checkpoint, lost with its level; recoveries cut short), and the time
  // outside checkpoints and failures (background checkpoint work slowing the steps, noise).
  const double free_wall = num(p, "failure_free_s");
  const double model_wall = fraction > 0 ? free_wall / fraction : 0;
  const double expected_failures = std::isfinite(realized) ? model_wall / realized : 0;
  const double per_failure = n ? num(p, "lost_s") / static_cast<double>(n) : 0;
  const double model_per_failure = recovery + expected_redone(interval + cost, realized);
  double redone = 0;
  for (const auto& f : fs) redone += num(f, "redone_s");
  m["expected_failures"] = expected_failures;
  m["expected_redone_per_failure_s"] = expected_redone(interval + cost, realized);
  m["loss_per_failure_s"] = model_per_failure;
  m["failures_beyond_model_points"] = (static_cast<double>(n) - expected_failures) * per_failure / wall * 100;
  m["loss_per_failure_beyond_model_points"] = static_cast<double>(n) * (per_failure - model_per_failure) / wall * 100;
  m["redone_beyond_model_points"] =
      (redone - static_cast<double>(n) * expected_redone(interval + cost, realized)) / wall * 100;
  m["outside_model_points"] = num(p, "other_s") / wall * 100;
  // The model again with the loss per failure measured (R taken as the measured loss less the expected
  // re-done work): when that closes the gap, the loss per failure is the cost the model misses.
  const double with_loss = [&] {
    if (!std::isfinite(realized)) return fraction;
    auto e = policy::expected_efficiency(
        interval, policy::FailureModel{cost, realized, std::max(per_failure - expected_redone(interval + cost, realized), 0.0)});
    return e ? e.value() : 0.0;
  }();
  m["fraction_with_measured_loss_per_failure"] = with_loss;
  m["multilevel"] = multilevel_model(p, interval, cost, recovery);
  if (!m["within_2_points"].get<bool>()) {
    int cut = 0;
    for (const auto& f : fs) cut += f.value("cut_short", false) ? 1 : 0;
    char why[512];
    const double gap = std::fabs(measured - fraction), rest = std::fabs(measured - with_loss);
    if (rest * 100 <= 2 || rest < gap / 2)
      snprintf(why, sizeof why,
               "the loss per failure: %.2f s measured against the model's R + expected re-done work %.2f s (re-done "
               "%.2f s per failure against %.2f s; %d of %zu recoveries cut short by the next failure); with it the "
               "model gives %.3f",
               per_failure, model_per_failure, n ? redone / static_cast<double>(n) : 0.0,
               expected_redone(interval + cost, realized), cut, n, with_loss);
    else if (std::fabs(num(m, "outside_model_points")) * 2 >= gap * 100)
      snprintf(why, sizeof why, "time outside checkpoints and failures: %.1f points (background checkpoint work "
               "slowing the steps, noise)", num(m, "outside_model_points"));
    else
      snprintf(why, sizeof why, "the failures met: %zu against the %.1f the model expects over its own run time "
               "(a short campaign's draw); with the measured loss per failure it gives %.3f", n, expected_failures, with_loss);
    m["misses"] = why;
  }
  return m;
}

}  // namespace

void complete_report(json& report) {
  const double free_wall = num(report["failure_free"], "wall_s");
  const double set_mtbf = num(report["campaign"], "mtbf_s");
  for (json& p : report["policies"]) {
    const double wall = num(p, "wall_s");
    p["useful_fraction"] = wall > 0 ? free_wall / wall : 0.0;
    std::map<std::string, double> parts;
    std::map<std::string, int> levels = {{"L1", 0}, {"L2", 0}, {"L3", 0}, {"none", 0}};
    double lost = 0;
    for (const auto& f : p["failures"]) {
      for (const char* part : kParts) parts[part] += num(f, (std::string(part) + "_s").c_str());
      lost += num(f, "total_s");
      const std::string level = f.value("level", "");
      if (!level.empty()) ++levels[level];
    }
    json breakdown;
    std::string largest;
    for (const char* part : kParts) {
      breakdown[std::string(part) + "_s"] = parts[part];
      if (largest.empty() || parts[part] > parts[largest]) largest = part;
    }
    p["lost_s"] = lost;
    p["lost_breakdown_s"] = breakdown;
    p["largest_part"] = p["failures"].empty() ? json() : json(largest);
    p["lost_per_failure_s"] = p["failures"].empty() ? 0.0 : lost / static_cast<double>(p["failures"].size());
    p["restart_levels"] = levels;
    p["other_s"] = wall - free_wall - num(p, "checkpoint_time_s") - lost;
    p["failure_free_s"] = free_wall;
    p["failure_free_step_s"] = num(report["failure_free"], "step_s");
    p["model"] = model_of(p, set_mtbf);
  }

  json targets;
  const json* autop = nullptr;
  const json* best = nullptr;
  const json* one = nullptr;
  int within = 0, modelled = 0, multilevel_within = 0;
  for (const json& p : report["policies"]) {
    const std::string name = p.value("name", "");
    if (name == "auto") autop = &p;
    if (name == "L3 only") one = &p;
    if (p.value("interval", "") == "fixed" && (!best || num(p, "useful_fraction") > num(*best, "useful_fraction"))) best = &p;
    if (p["model"]["fraction"].is_number()) {
      ++modelled;
      within += p["model"]["within_2_points"].get<bool>() ? 1 : 0;
      const json& ml = p["model"]["multilevel"];
      multilevel_within += ml.value("within_2_points", false) ? 1 : 0;
    }
  }
  if (autop && best) {
    const double ratio = num(*autop, "useful_fraction") / num(*best, "useful_fraction");
    targets["auto_against_best_fixed"] = {{"auto", num(*autop, "useful_fraction")},
                                          {"best_fixed", best->value("name", "")},
                                          {"best_fixed_fraction", num(*best, "useful_fraction")},
                                          {"ratio", ratio},
                                          {"within_5_percent", ratio >= 0.95}};
  }
  targets["model_within_2_points"] = {{"policies", modelled}, {"within", within}, {"multilevel_within", multilevel_within}};
  if (autop && one) {
    auto per = [](const json& p, const char* part) {
      size_t n = p["failures"].size();
      return n ? num(p["lost_breakdown_s"], part) / static_cast<double>(n) : 0.0;
    };
    json causes;
    for (const char* part : kParts) {
      std::string key = std::string(part) + "_s";
      causes[std::string(part) + "_per_failure_s"] = {{"multilevel", per(*autop, key.c_str())}, {"l3_only", per(*one, key.c_str())}};
    }
    causes["checkpoint_cost_s"] = {{"multilevel", num(*autop, "checkpoint_cost_s")}, {"l3_only", num(*one, "checkpoint_cost_s")}};
    causes["checkpoint_time_s"] = {{"multilevel", num(*autop, "checkpoint_time_s")}, {"l3_only", num(*one, "checkpoint_time_s")}};
    targets["multilevel_against_l3_only"] = {
        {"multilevel", num(*autop, "useful_fraction")},
        {"l3_only", num(*one, "useful_fraction")},
        {"gain_points", (num(*autop, "useful_fraction") - num(*one, "useful_fraction")) * 100},
        {"gain_relative", num(*autop, "useful_fraction") / num(*one, "useful_fraction") - 1},
        {"causes", causes}};
  }
  report["targets"] = targets;
}

void print_table(const json& r) {
  const json& c = r["campaign"];
  printf("cairn-bench --campaign: %d ranks on %d nodes (+%d spares), %.0f MiB per rank, %.0f s of work in %ld steps "
         "of %.0f ms\n",
         c["ranks"].get<int>(), c["nodes"].get<int>(), c["spares"].get<int>(), num(c, "size_bytes") / 1048576,
         num(c, "work_s"), c["iterations"].get<long>(), num(c, "step_s") * 1000);
  printf("failures: MTBF %.1f s, mix %s, seed %llu (%zu scheduled); load %.2f -> %.2f on %d cores\n", num(c, "mtbf_s"),
         c["mix"].get<std::string>().c_str(), static_cast<unsigned long long>(c["seed"].get<uint64_t>()),
         c["schedule"].size(), num(r["run"], "loadavg_1m_start"), num(r["run"], "loadavg_1m_end"),
         r["run"]["cores_online"].get<int>());
  printf("failure-free run (no checkpoint): %.2f s; Daly's optimum %.2f s for the cost auto measured (%.4f s)\n\n",
         num(r["failure_free"], "wall_s"), num(r["optimum"], "daly_interval_s"), num(r["optimum"], "checkpoint_cost_s"));
  printf("%-12s %8s %8s %7s %7s %6s %7s %6s %4s %8s %7s %7s %7s %7s %7s %8s %6s %s\n", "policy", "interval", "wall",
         "useful", "daly", "diff", "multi", "diff", "fail", "lost", "redone", "teardn", "startup", "restart", "other", "ckpt", "cost", "L1/L2/L3/none");
  for (const json& p : r["policies"]) {
    const json& m = p["model"];
    const json& b = p["lost_breakdown_s"];
    char model[16] = "-", diff[16] = "-", multi[16] = "-", mdiff[16] = "-";
    if (m["fraction"].is_number()) {
      snprintf(model, sizeof model, "%.3f", num(m, "fraction"));
      snprintf(diff, sizeof diff, "%+.1f", num(m, "difference_points"));
    }
    if (m.contains("multilevel") && m["multilevel"]["fraction"].is_number()) {
      snprintf(multi, sizeof multi, "%.3f", num(m["multilevel"], "fraction"));
      snprintf(mdiff, sizeof mdiff, "%+.1f", num(m["multilevel"], "difference_points"));
    }
    const json& l = p["restart_levels"];
    printf("%-12s %7.2fs %7.1fs %7.3f %7s %6s %7s %6s %4zu %7.1fs %6.1fs %6.1fs %6.1fs %6.1fs %6.1fs %7.2fs %5.3fs %d/%d/%d/%d\n",
           p.value("name", "").c_str(), num(p, "mean_interval_s"), num(p, "wall_s"), num(p, "useful_fraction"), model,
           diff, multi, mdiff, p["failures"].size(), num(p, "lost_s"), num(b, "redone_s"), num(b, "teardown_s"), num(b, "startup_s"),
           num(b, "restart_s"), num(p, "other_s"), num(p, "checkpoint_time_s"), num(p, "checkpoint_cost_s"),
           l["L1"].get<int>(), l["L2"].get<int>(), l["L3"].get<int>(), l["none"].get<int>());
  }
  printf("\n(interval: the computation between checkpoints the job had, mean; lost = redone + teardown + startup + "
         "restart over every failure; other = wall - failure-free - checkpoint time - lost; daly: Daly's model, fed "
         "this policy's cost, interval, mean recovery and the failures it met; multi: the same per level, each "
         "failure going back to the newest version of the level that recovers it, a job failure to the last L3 "
         "version, and the steps as slow as measured beside the failure-free run's)\n");
  for (const json& p : r["policies"]) {
    const json& slow = p["model"].contains("multilevel") ? p["model"]["multilevel"] : json();
    if (slow.is_object() && slow.contains("steps_slower"))
      printf("  %s: steps %+.1f %% against the failure-free run's (background checkpoint work): %.1f points\n",
             p.value("name", "").c_str(), num(slow, "steps_slower") * 100, num(slow, "slowed_steps_points"));
    if (p["model"].contains("misses"))
      printf("  %s: Daly's model misses %s\n", p.value("name", "").c_str(), p["model"]["misses"].get<std::string>().c_str());
    const json& ml = p["model"].contains("multilevel") ? p["model"]["multilevel"] : json();
    if (ml.is_object() && ml["fraction"].is_number() && !ml.value("within_2_points", false))
      printf("  %s: per level, the model misses %.1f points of time outside checkpoints and failures and %.1f of "
             "re-done work beyond its expectation\n",
             p.value("name", "").c_str(), num(ml, "outside_model_points"), num(ml, "redone_beyond_model_points"));
  }
  const json& t = r["targets"];
  if (t.contains("auto_against_best_fixed")) {
    const json& a = t["auto_against_best_fixed"];
    printf("interval = auto: %.3f, the best fixed interval (%s) %.3f: %.1f %% of it (target: within 5 %%: %s)\n",
           num(a, "auto"), a["best_fixed"].get<std::string>().c_str(), num(a, "best_fixed_fraction"),
           num(a, "ratio") * 100, a["within_5_percent"].get<bool>() ? "met" : "NOT met");
  }
  printf("model within 2 points of the measured fraction: Daly's %d of %d policies, per level %d of %d\n",
         t["model_within_2_points"]["within"].get<int>(), t["model_within_2_points"]["policies"].get<int>(),
         t["model_within_2_points"].value("multilevel_within", 0), t["model_within_2_points"]["policies"].get<int>());
  if (t.contains("multilevel_against_l3_only")) {
    const json& g = t["multilevel_against_l3_only"];
    const json& k = g["causes"];
    printf("multilevel (auto) %.3f against L3 only %.3f: %+.1f points (%+.0f %%); per failure: re-done %.2f s against "
           "%.2f s, restart %.2f s against %.2f s; checkpoint cost %.4f s against %.4f s\n",
           num(g, "multilevel"), num(g, "l3_only"), num(g, "gain_points"), num(g, "gain_relative") * 100,
           num(k["redone_per_failure_s"], "multilevel"), num(k["redone_per_failure_s"], "l3_only"),
           num(k["restart_per_failure_s"], "multilevel"), num(k["restart_per_failure_s"], "l3_only"),
           num(k["checkpoint_cost_s"], "multilevel"), num(k["checkpoint_cost_s"], "l3_only"));
  }
  if (r.contains("plot")) printf("plot: %s\n", r["plot"].get<std::string>().c_str());
}

}  // namespace cairn::bench
