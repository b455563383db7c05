// `cairn interval --mtbf T --checkpoint-cost C [--restart-cost R] [--work W] [--levels C1:M1,...]
// [--write FILE] [--json]`: how often to checkpoint, from Young's and Daly's formulas (src/policy/interval.hpp).
#include <fcntl.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "policy/interval.hpp"
#include "format.hpp"

namespace cairn::tool {
namespace {

using policy::format_duration;

struct IntervalOptions {
  std::string mtbf, checkpoint_cost, restart_cost, work, levels, write;
  bool json = false;
};

// The multilevel plan in cairn's knobs: two levels are the cache with its redundancy and the flush
// (l2_every = 1); three are the cache, the redundancy and the flush. flush_every counts versions, so it
// is the product of the ratios up to level 3.
struct PlanKnobs {
  double interval_seconds = 0;
  uint64_t l2_every = 1, flush_every = 1;
};
Result<PlanKnobs> plan_knobs(const policy::MultilevelPlan& plan) {
  const size_t n = plan.levels.size();
  if (n < 2 || n > 3)
    return make_error(Code::ERR_INVALID_ARG,
                      "--levels gives %zu level(s): cairn's knobs take a plan of 2 (cache with redundancy, file "
                      "system) or 3 (cache, redundancy, file system)",
                      n);
  PlanKnobs k;
  k.interval_seconds = std::round(plan.levels[0].period * 10) / 10;
  if (n == 2) {
    k.flush_every = plan.levels[1].every;
  } else {
    k.l2_every = plan.levels[1].every;
    k.flush_every = plan.levels[1].every * plan.levels[2].every;
  }
  return k;
}

std::string knobs_toml(const PlanKnobs& k, const std::string& levels) {
  char buf[512];
  snprintf(buf, sizeof buf,
           "# cairn interval --levels \"%s\" (docs/intervals.md)\ninterval = \"fixed\"\ninterval_seconds = %.1f\n"
           "l2_every = %llu\nflush_every = %llu\n",
           levels.c_str(), k.interval_seconds, static_cast<unsigned long long>(k.l2_every),
           static_cast<unsigned long long>(k.flush_every));
  return buf;
}

// What was asked, parsed and checked.
struct Inputs {
  std::optional<policy::FailureModel> model;  // --mtbf and --checkpoint-cost
  std::optional<double> work;
  std::optional<std::vector<policy::LevelCost>> levels;
};

struct Estimate {
  const char* key;   // JSON
  const char* name;  // text
  double interval;
  double efficiency;
};

// A duration option: "" when not given; an error names the option.
Result<std::optional<double>> duration_option(const std::string& text, const char* option, bool positive) {
  if (text.empty()) return std::optional<double>();
  auto d = policy::parse_duration(text);
  if (!d) return d.status().prefixed(option);
  if (positive && d.value() <= 0)
    return Status(Code::ERR_INVALID_ARG, std::string(option) + ": must be more than 0 (got '" + text + "')");
  return std::optional<double>(d.value());
}

Result<Inputs> parse_inputs(const IntervalOptions& o) {
  Inputs in;
  auto mtbf = duration_option(o.mtbf, "--mtbf", true);
  if (!mtbf) return mtbf.status();
  auto cost = duration_option(o.checkpoint_cost, "--checkpoint-cost", true);
  if (!cost) return cost.status();
  auto restart = duration_option(o.restart_cost, "--restart-cost", false);
  if (!restart) return restart.status();
  auto work = duration_option(o.work, "--work", true);
  if (!work) return work.status();
  if (mtbf.value().has_value() != cost.value().has_value())
    return Status(Code::ERR_INVALID_ARG, "--mtbf and --checkpoint-cost go together: give both");
  if (!mtbf.value() && (restart.value() || work.value()))
    return Status(Code::ERR_INVALID_ARG, std::string(work.value() ? "--work" : "--restart-cost") +
                                             " needs --mtbf and --checkpoint-cost");
  if (!mtbf.value() && o.levels.empty())
    return Status(Code::ERR_INVALID_ARG,
                  "what to compute? give --mtbf and --checkpoint-cost (e.g. --mtbf 24h --checkpoint-cost 5m), "
                  "--levels, or both");
  if (mtbf.value()) in.model = policy::FailureModel{*cost.value(), *mtbf.value(), restart.value().value_or(0)};
  in.work = work.value();
  if (!o.levels.empty()) {
    auto levels = policy::parse_levels(o.levels);
    if (!levels) return levels.status().prefixed("--levels");
    in.levels = levels.value();
  }
  return in;
}

std::vector<Estimate> estimates(const policy::FailureModel& m) {
  std::vector<Estimate> out;
  auto add = [&](const char* key, const char* name, Result<double> tau) {
    double efficiency = tau ? policy::expected_efficiency(tau.value(), m).value() : 0;
    out.push_back({key, name, tau.value(), efficiency});
  };
  add("young", "Young", policy::young_interval(m.checkpoint_cost, m.mtbf));
  add("daly_first_order", "Daly, first order",
      policy::daly_first_order_interval(m.checkpoint_cost, m.mtbf, m.restart_cost));
  add("daly_higher_order", "Daly, higher order", policy::daly_interval(m.checkpoint_cost, m.mtbf));
  add("daly_model_optimum", "Daly's model, exact", policy::daly_model_optimum(m.checkpoint_cost, m.mtbf));
  return out;
}

// The fixed-work answer: the best count, and the count Daly's interval implies, for comparison.
struct WorkAnswer {
  policy::CheckpointCount best;
  uint64_t daly_checkpoints = 0;
  double daly_expected_time = 0;
};

Result<WorkAnswer> work_answer(double work, const policy::FailureModel& m) {
  WorkAnswer a;
  auto best = policy::optimal_checkpoint_count(work, m);
  if (!best) return best.status();
  a.best = best.value();
  double tau = policy::daly_interval(m.checkpoint_cost, m.mtbf).value();
  double segments = std::max(1.0, std::round(work / tau));
  a.daly_checkpoints = static_cast<uint64_t>(segments) - 1;
  auto t = policy::expected_time_with_checkpoints(work, a.daly_checkpoints, m);
  if (!t) return t.status();
  a.daly_expected_time = t.value();
  return a;
}

std::string percent(double fraction) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f %%", 100 * fraction);
  return buf;
}

// "7001.4 s (116.7 min)"; below two minutes the seconds alone.
std::string seconds_and_human(double s) {
  char buf[96];
  if (s < 120)
    snprintf(buf, sizeof buf, "%.1f s", s);
  else
    snprintf(buf, sizeof buf, "%.1f s (%s)", s, format_duration(s).c_str());
  return buf;
}

void print_text(const Inputs& in, const std::vector<Estimate>& est, const std::optional<WorkAnswer>& work,
                const std::optional<policy::MultilevelPlan>& plan) {
  if (in.model) {
    const auto& m = *in.model;
    printf("Checkpoint cost %s, MTBF %s, restart cost %s; failures exponential (Daly's model).\n\n",
           format_duration(m.checkpoint_cost).c_str(), format_duration(m.mtbf).c_str(),
           format_duration(m.restart_cost).c_str());
    printf("%-22s %-28s %s\n", "optimum", "interval (computation)", "efficiency");
    for (const auto& e : est)
      printf("%-22s %-28s %s\n", e.name, seconds_and_human(e.interval).c_str(), percent(e.efficiency).c_str());
    if (m.checkpoint_cost >= 2 * m.mtbf)
      printf("note: the checkpoint costs at least twice the MTBF; Daly's estimate is then the MTBF itself "
             "and checkpointing barely pays.\n");
  }
  if (work) {
    printf("\nFixed work of %s:\n", seconds_and_human(*in.work).c_str());
    printf("  best number of checkpoints   %llu (one every %s of computation)\n",
           static_cast<unsigned long long>(work->best.checkpoints), format_duration(work->best.segment).c_str());
    printf("  expected time                %s, efficiency %s\n", seconds_and_human(work->best.expected_time).c_str(),
           percent(*in.work / work->best.expected_time).c_str());
    printf("  at Daly's interval           %llu checkpoints, expected time %s\n",
           static_cast<unsigned long long>(work->daly_checkpoints),
           seconds_and_human(work->daly_expected_time).c_str());
  }
  if (plan) {
    printf("%sMultilevel plan (first-order model, docs/intervals.md):\n", in.model ? "\n" : "");
    const auto& lv = *in.levels;
    for (size_t i = 0; i < lv.size(); ++i) {
      const auto& p = plan->levels[i];
      printf("  level %zu (cost %s, MTBF %s): ", i + 1, format_duration(lv[i].checkpoint_cost).c_str(),
             format_duration(lv[i].mtbf).c_str());
      if (i == 0)
        printf("a checkpoint every %s of computation\n", seconds_and_human(p.period).c_str());
      else if (p.every == 1)
        printf("at every checkpoint (level %zu is never taken alone), i.e. every %s\n", i,
               format_duration(p.period).c_str());
      else
        printf("one in %llu checkpoints of level >= %zu, i.e. every %s\n", static_cast<unsigned long long>(p.every),
               i, format_duration(p.period).c_str());
    }
    printf("  expected efficiency %s (first-order overhead %s)\n", percent(plan->efficiency).c_str(),
           percent(plan->first_order_overhead).c_str());
    if (plan->at_search_bound)
      printf("note: a ratio reached the largest value searched (%llu); a larger one might do slightly better.\n",
             static_cast<unsigned long long>(plan->ratio_limit));
  }
}

nlohmann::json to_json(const Inputs& in, const std::vector<Estimate>& est, const std::optional<WorkAnswer>& work,
                       const std::optional<policy::MultilevelPlan>& plan) {
  nlohmann::json j = nlohmann::json::object();
  if (in.model) {
    j["checkpoint_cost_seconds"] = in.model->checkpoint_cost;
    j["mtbf_seconds"] = in.model->mtbf;
    j["restart_cost_seconds"] = in.model->restart_cost;
    for (const auto& e : est) j[e.key] = {{"interval_seconds", e.interval}, {"efficiency", e.efficiency}};
  }
  if (work)
    j["work"] = {{"work_seconds", *in.work},
                 {"checkpoints", work->best.checkpoints},
                 {"segment_seconds", work->best.segment},
                 {"expected_seconds", work->best.expected_time},
                 {"efficiency", *in.work / work->best.expected_time},
                 {"daly_checkpoints", work->daly_checkpoints},
                 {"daly_expected_seconds", work->daly_expected_time}};
  if (plan) {
    nlohmann::json levels = nlohmann::json::array();
    for (size_t i = 0; i < plan->levels.size(); ++i)
      levels.push_back({{"level", i + 1},
                        {"checkpoint_cost_seconds", (*in.levels)[i].checkpoint_cost},
                        {"mtbf_seconds", (*in.levels)[i].mtbf},
                        {"every", plan->levels[i].every},
                        {"period_seconds", plan->levels[i].period}});
    j["multilevel"] = {{"levels", levels},
                       {"base_interval_seconds", plan->base_interval},
                       {"first_order_interval_seconds", plan->first_order_interval},
                       {"equivalent_cost_seconds", plan->equivalent_cost},
                       {"equivalent_mtbf_seconds", plan->equivalent_mtbf},
                       {"first_order_overhead", plan->first_order_overhead},
                       {"efficiency", plan->efficiency},
                       {"ratio_limit", plan->ratio_limit},
                       {"at_search_bound", plan->at_search_bound}};
  }
  return j;
}

}  // namespace

Command add_interval_command(CLI::App& root) {
  auto opts = std::make_shared<IntervalOptions>();
  CLI::App* app = root.add_subcommand("interval", "How often to checkpoint: Young's and Daly's optima.");
  app->add_option("--mtbf", opts->mtbf, "Mean time between failures of the whole job")->type_name("DURATION");
  app->add_option("--checkpoint-cost", opts->checkpoint_cost, "Time the application loses per checkpoint")
      ->type_name("DURATION");
  app->add_option("--restart-cost", opts->restart_cost, "Time from a failure until computing resumes (default 0)")
      ->type_name("DURATION");
  app->add_option("--work", opts->work, "Computation the run must do: the best number of checkpoints for it")
      ->type_name("DURATION");
  app->add_option("--levels", opts->levels,
                  "Per-level checkpoint cost and MTBF of the failures needing that level or higher, cheapest "
                  "level first: the multilevel plan")
      ->type_name("C1:M1,C2:M2,...");
  app->add_option("--write", opts->write,
                  "With --levels: write the plan's knobs (interval_seconds, l2_every, flush_every) to FILE, a\n"
                  "new config file (TOML; an existing file is not overwritten)")
      ->type_name("FILE");
  app->add_flag("--json", opts->json, "Print one JSON object (times in seconds)");
  app->footer("Durations: a number of seconds or with a unit, e.g. 250ms, 90s, 15m, 1.5h, 2d, 1w.\n"
              "Formulas and assumptions: docs/intervals.md. Exit status: 0, or 2 for bad input.");

  return {app, [opts](const Invocation&) {
    auto in = parse_inputs(*opts);
    if (!in) {
      print_error("interval", in.status().message());
      return kExitUsage;
    }
    std::vector<Estimate> est;
    std::optional<WorkAnswer> work;
    std::optional<policy::MultilevelPlan> plan;
    if (in->model) est = estimates(*in->model);
    if (in->work) {
      auto a = work_answer(*in->work, *in->model);
      if (!a) {
        print_error("interval", a.status().message());
        return kExitUsage;
      }
      work = a.value();
    }
    if (in->levels) {
      auto p = policy::multilevel_plan(*in->levels);
      if (!p) {
        print_error("interval", "--levels: " + p.status().message());
        return kExitUsage;
      }
      plan = p.value();
    }
    std::optional<PlanKnobs> knobs;
    if (plan) {
      auto k = plan_knobs(*plan);
      if (k) knobs = *k;
      else if (!opts->write.empty()) {
        print_error("interval", k.status().message());
        return kExitUsage;
      }
    } else if (!opts->write.empty()) {
      print_error("interval", "--write needs --levels: it writes the multilevel plan's knobs");
      return kExitUsage;
    }
    if (!opts->write.empty()) {
      // Never over a user's config: a new file, created exclusively.
      if (fs::exists(opts->write)) {
        print_error("interval", "--write " + opts->write + ": the file exists; give a new one");
        return kExitFailure;
      }
      auto fd = fs::open_file(opts->write, O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (!fd) {
        print_error("interval", "--write " + opts->write + ": " + fd.status().message());
        return kExitFailure;
      }
      const std::string text = knobs_toml(*knobs, opts->levels);
      Status st = fs::pwrite_all(fd->get(), text.data(), text.size(), 0, opts->write);
      if (!st.is_ok()) {
        print_error("interval", st.message());
        return kExitFailure;
      }
    }
    if (opts->json) {
      nlohmann::json j = to_json(in.value(), est, work, plan);
      if (knobs)
        j["config"] = {{"interval_seconds", knobs->interval_seconds},
                       {"l2_every", knobs->l2_every},
                       {"flush_every", knobs->flush_every}};
      printf("%s\n", j.dump(2).c_str());
    } else {
      print_text(in.value(), est, work, plan);
      if (knobs)
        printf("\nAs cairn's knobs%s:\n%s", opts->write.empty() ? " (--write FILE writes them)" : (" (written to " + opts->write + ")").c_str(),
               knobs_toml(*knobs, opts->levels).c_str());
    }
    return kExitOk;
  }};
}

}  // namespace cairn::tool
