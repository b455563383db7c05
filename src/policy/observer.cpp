// The policy observer (observer.hpp): this rank's observations, and the decision from everyone's.
#include "policy/observer.hpp"

#include <algorithm>
#include <vector>

#include "base/fsutil.hpp"
#include "base/log.hpp"

namespace cairn::policy {

int64_t end_time_from_slurm() {
  auto found = slurm_end_time(process_env(), [](const std::vector<std::string>& argv) {
    return run_command(argv, 10.0);
  });
  if (found.end_time > 0)
    LOG_INFO("end time %s from Slurm (%s)", format_time(found.end_time).c_str(), found.source.c_str());
  else if (!found.problem.empty())
    LOG_WARN("inside a Slurm job, but its end time is unknown: %s; set end_time (CAIRN_END_TIME) to "
             "checkpoint before the time limit", found.problem.c_str());
  return found.end_time;
}

FailureRates failure_rates(const Config& cfg) {
  FailureRates r;
  r.mtbf = cfg.mtbf_seconds;
  r.l3_mtbf = cfg.l3_mtbf_seconds;
  r.l2_period = cfg.redundancy != Redundancy::single && cfg.l2_every > 1 ? static_cast<uint64_t>(cfg.l2_every) : 1;
  r.l3_period = cfg.flush_every > 0 ? static_cast<uint64_t>(cfg.flush_every) : 1;
  return r;
}

void Observer::checkpoint_taken(double cost, double now) {
  last_checkpoint_time_ = now;
  checkpoint_cost_.add(cost);
  if (exit_requested_) checkpoint_since_request_ = true;
}

Observer::Reading Observer::local(const Config& cfg, const Layout& layout, bool rank0, uint64_t newest_version,
                                  bool any_taken, double now) {
  // The halt file's verdict as a HaltAction value, for the max-reduction (rank 0 only).
  double halt = 0.0;
  if (rank0) {
    std::vector<std::string> messages;
    HaltVerdict v = halt_watcher_.observe(layout.halt_file(), {now, cfg.end_time, cfg.halt_seconds, newest_version,
                                          any_taken ? last_checkpoint_time_ : 0.0}, &messages);
    for (const auto& m : messages) LOG_WARN("%s", m.c_str());
    halt = static_cast<double>(static_cast<int>(v.action));
  }
  // A migration request (`cairn migrate`, docs/migration.md): rank 0 looks for the file, one stat().
  double migrate = rank0 && fs::exists(layout.migrate_file()) ? 1.0 : 0.0;
  return {caught_signal() != 0 ? 1.0 : 0.0, halt, end_time_reached(cfg.end_time, cfg.halt_seconds, now) ? 1.0 : 0.0,
          now - last_checkpoint_time_, checkpoint_cost_.value(), migrate};
}

// The computation since the last checkpoint and the measured checkpoint cost come combined (the largest
// of any rank), so every rank computes the same interval from the same inputs.
Decision Observer::decide(const Reading& all, const Config& cfg, bool rank0, std::string* new_request) {
  double interval = cfg.interval_seconds;
  if (cfg.interval == IntervalMode::automatic) {
    const FailureRates rates = failure_rates(cfg);
    const double mtbf = equivalent_mtbf(rates);
    interval = auto_interval(all[4], mtbf, cfg.interval_seconds);
    if (rank0 && checkpoint_cost_.samples() != auto_interval_logged_) {
      auto_interval_logged_ = checkpoint_cost_.samples();
      char levels[160] = "";
      if (mtbf != cfg.mtbf_seconds)
        snprintf(levels, sizeof levels, " (level 3 only: %.3g s, every %llu versions; as one level: %.3g s)",
                 cfg.l3_mtbf_seconds, static_cast<unsigned long long>(rates.l3_period), mtbf);
      LOG_INFO("interval auto: checkpoint cost %.3f s (mean of the last %d, slowest rank), MTBF %.3g s%s: "
               "next checkpoint after %.3g s of computation",
               all[4], static_cast<int>(std::min<uint64_t>(auto_interval_logged_, CheckpointCostAverage::kWindow)),
               cfg.mtbf_seconds, levels, interval);
    }
  }
  Observation o{all[0] != 0, all[1] != 0, all[2] != 0, interval_due(interval, all[3])};
  o.halt_file = all[1] == static_cast<int>(HaltAction::checkpoint_then_exit);
  o.halt_exit_now = all[1] == static_cast<int>(HaltAction::exit_now);
  o.migrate = all[5] != 0;
  if (o.exit_requested() && !exit_requested_) {
    exit_requested_ = true;
    checkpoint_since_request_ = false;
    // Only a migration alone leaves the final flush to the launcher (the snapshots move to the spare).
    exit_for_migration_ = o.migrate && !o.signal && !o.halt_file && !o.end_time;
    if (rank0) LOG_WARN("exit requested by %s: checkpoint at the next chance, then exit", describe(o).c_str());
    *new_request = exit_for_migration_ ? "migrate" : describe(o);
  }
  o.signal = o.signal || exit_requested_;
  return policy::decide(o, checkpoint_since_request_);
}

}  // namespace cairn::policy
