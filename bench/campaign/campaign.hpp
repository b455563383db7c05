// cairn-bench --campaign (docs/performance.md, "Efficiency under failures"): what failures cost a job end
// to end. A synthetic application of a set amount of work (examples/synthetic with --need-checkpoint: a
// state per rank, a compute time per step) runs under `cairn run` on simulated nodes, once without
// failures or checkpoints (the failure-free time) and then once per policy -- interval = auto, fixed
// intervals around Daly's optimum, one level (L3 only) -- each time under the same failures: a schedule
// drawn from a seed at a chosen MTBF and mix of kinds (policy/failure_schedule.hpp) that `cairn run
// --fail-at` strikes, with the launcher's retries and spares. For each policy: the useful fraction
// (failure-free time / wall time), the time lost per failure broken down (re-done work, the launcher's
// teardown, the new job's start-up, the restart), the checkpoint time, the level each restart came from,
// and Daly's prediction from the costs measured in the same run, beside it.
//
// The parent (campaign.cpp) runs the jobs; campaign_analysis.cpp turns what one run left (the launcher's
// run record, the job history, the application's log) into its figures; campaign_report.cpp prints the
// table or the JSON and draws the plot through `cairn plot --campaign`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/failure_schedule.hpp"

#include "options.hpp"

namespace cairn::bench {

using json = nlohmann::ordered_json;

// The common options (bench.hpp) with the campaign's defaults: 4 ranks of 16 MiB.
struct CampaignOptions : CommonOptions {
  CampaignOptions() { ranks = 4, size_text = "16M", size = 16ull << 20; }
  int nodes = 4;
  int spares = 1;
  double step_ms = 20;            // compute time per step
  double work = 40;               // seconds of failure-free computation
  double mtbf = 10;               // mean time between failures of the whole job (s)
  std::string mix_text = "node:2,rank:1,job:1";
  policy::FailureMix mix;
  uint64_t seed = 1;
  std::vector<double> factors = {0.5, 0.71, 1, 1.41, 2};  // fixed intervals, times Daly's optimum
  bool l3_only = true;            // also the one-level policy
  int flush_every = 10;           // multilevel policies: every N-th version to L3
  std::string cairn;              // the cairn tool; "": beside cairn-bench or in the build tree
  std::string app;                // the synthetic application; "": likewise
  std::string plot;               // draw the useful fraction per policy into this file (cairn plot --campaign)
  bool keep = false;              // keep the work directory (each run's prefix and log)
  bool schedule_only = false;     // print the failure schedule the seed gives and stop
  std::string from;               // report again from a saved --json report (the figures recomputed)
  bool reanalyse = false;         // with from: each run analysed again from the report's kept work directory
};

// The command line is cairn-bench's one (main.cpp), which fills `o` from its options. Checks `o` and
// completes it from the texts of --size, --mix and --factors; 0, or 2 after a line on stderr that names
// the option.
int check_campaign_options(CampaignOptions& o, const std::string& size_text, const std::string& factors_text);
// The campaign of a checked `o` (or its report again, with --from, each run analysed again with
// --reanalyse); the exit status.
int run_campaign(CampaignOptions o);

// ---- one policy's run, analysed (campaign_analysis.cpp) --------------------------------------------

struct FailureLoss {
  double at_s = 0, due_s = 0;      // when it struck and when it was due, from the first launch
  std::string kind;                // node, rank, job
  double redone = 0;               // computation since the state the restart returned to
  double teardown = 0;             // the strike until the launcher started the next attempt
  double startup = 0;              // the next attempt's launch until cairn_init was done
  double restart = 0;              // cairn_init until the restart returned (search, read, verify)
  double total() const { return redone + teardown + startup + restart; }
  std::string level;               // L1, L2, L3, or "none" (started afresh); "" when the next failure came first
  uint64_t version = 0;            // the version restored
  bool cut_short = false;          // the next failure struck before the recovery was done
};

struct RunFigures {
  double wall = 0;                 // cairn run started until the job ended (its last cairn_finalize returned)
  int attempts = 0;
  std::vector<FailureLoss> failures;
  uint64_t checkpoints = 0;        // cairn_checkpoint calls that returned (every attempt)
  double checkpoint_time = 0;      // the time they blocked the application (rank 0)
  double mean_interval = 0;        // computation between two checkpoints (rank 0's clock), mean
  // A step's wall time as the application had it (rank 0): between checkpoints, the computation since the
  // last one over its iterations; without checkpoints (the failure-free run), the loop less nothing; 0
  // when neither is in the log.
  double step = 0;
  bool finished = false;           // the job printed its result
  std::string result;              // the job's result hash (same for every run of one campaign)
};

// From a run's prefix (its .cairn/run-record and .cairn/history), the application's log (the lines of
// synthetic --print-checkpoints and its result) and when cairn run was started (Unix ns). Errors name
// what is missing.
Result<RunFigures> analyse_run(const std::string& prefix, const std::string& app_log, int64_t started_ns);

// ---- the report (campaign_report.cpp) -------------------------------------------------------------

// Fills each policy's model and target fields and the campaign's comparisons into `report`.
void complete_report(json& report);
void print_table(const json& report);

}  // namespace cairn::bench
