// What cairn_need_checkpoint and cairn_should_exit decide from, kept on every rank between the calls:
// the halt file's watcher (rank 0), the measured checkpoint cost for interval = auto, the time of the
// last checkpoint and whether an exit was requested. Each call reads this rank's observations (local),
// the runtime combines every rank's by a max-allreduce, and decide turns the combined reading into the
// same decision on every rank. No MPI here: the reduction is the caller's.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/config.hpp"
#include "base/layout.hpp"
#include "policy/exit_policy.hpp"
#include "policy/halt.hpp"
#include "policy/interval.hpp"

namespace cairn::policy {

// The job's end time from Slurm, when inside a Slurm job (docs/halt.md), logged; 0 otherwise.
int64_t end_time_from_slurm();

// The failures interval = "auto" plans for, from the knobs: mtbf_seconds, l3_mtbf_seconds, and the
// periods of the levels they go back to (l2_every where level 2 is on, flush_every).
FailureRates failure_rates(const Config& cfg);

class Observer {
 public:
  // One rank's observations, combined over the ranks by a max-reduction (MPI_DOUBLE, MPI_MAX):
  // a caught signal, the halt file's HaltAction (rank 0), the end time reached, the seconds since the
  // last checkpoint, the measured checkpoint cost, a migration request (rank 0).
  using Reading = std::array<double, 6>;

  // The computation is timed from `now` (cairn_init, a restart).
  void compute_from(double now) { last_checkpoint_time_ = now; }
  // A version was taken: the application thread spent `cost` seconds on it (interval = auto), and it
  // returned at `now`.
  void checkpoint_taken(double cost, double now);

  // This rank's reading at `now`. Rank 0 (`rank0`) also looks at the halt and migrate files of
  // `layout`; `newest_version` and `any_taken` (a version taken by this run) go into the halt file's
  // conditions.
  Reading local(const Config& cfg, const Layout& layout, bool rank0, uint64_t newest_version, bool any_taken,
                double now);
  // The decision from the readings of every rank combined. An exit request seen for the first time
  // sets *new_request to what asked ("migrate", "halt file", "SIGTERM", ...), else leaves it empty; rank 0
  // logs it and the interval = auto changes.
  Decision decide(const Reading& all, const Config& cfg, bool rank0, std::string* new_request);

  bool exit_requested() const { return exit_requested_; }
  // The exit request came from `cairn migrate` alone: the final flush is left to the launcher.
  bool exit_for_migration() const { return exit_for_migration_; }

 private:
  HaltWatcher halt_watcher_;  // rank 0's reading of the halt file
  double last_checkpoint_time_ = 0;
  // interval = auto: what checkpoints cost the application thread (Runtime::take_version, plus the
  // pipeline stages run on that thread since the previous one).
  CheckpointCostAverage checkpoint_cost_;
  uint64_t auto_interval_logged_ = 0;  // cost samples when the interval was last logged
  bool exit_requested_ = false;
  bool checkpoint_since_request_ = false;
  bool exit_for_migration_ = false;
};

}  // namespace cairn::policy
