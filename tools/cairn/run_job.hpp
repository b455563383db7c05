// The parts of `cairn run` (docs/launcher.md), one file each: the command, its options and the attempt
// loop (run.cpp); one attempt of the job (run_attempt.cpp); what happens between attempts
// (run_between.cpp); the scavenge and the summary at the end (run_summary.cpp); the launcher's side of
// process migration (run_migration.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/layout.hpp"
#include "base/state_file.hpp"
#include "launch_plan.hpp"
#include "migration.hpp"

namespace cairn::tool {

struct RunOptions {
  int nranks = 0;
  int nnodes = 1;
  std::vector<int> kill_nodes;
  std::vector<uint64_t> at_checkpoints;  // attempt k is killed at the k-th entry
  bool kill_every_attempt = false;       // attempts past the list are killed at its last entry
  int retries = -1;                      // relaunches after failed attempts; -1: the default
  int spares = 0;                        // spare nodes node<K>..node<K+S-1>
  bool scavenge = true;                  // flush the newest version complete in cache at the end
  uint64_t at_checkpoint = 0;            // the current attempt's (set per attempt)
  std::string phase = "checkpoint";
  std::string config_path;
  std::string between_attempts;
  bool no_relaunch = false;
  std::string no_spare;   // --no-spare[=MODE] once no spare is left: "shrink" (the surviving nodes' ranks
                          // only) or "oversubscribe" (every rank, the lost nodes' on the survivors); "": neither
  double stall = 0;       // --stall: end an attempt without a checkpoint or progress for this long; 0: never
  std::string launcher;   // --launcher: auto, mpirun or srun; empty: CAIRN_LAUNCHER, else auto
  std::string json_path;  // --json FILE: the summary as JSON there ("-": stdout); empty: none
  std::vector<std::string> stray;  // words before "--" that are no option: a forgotten "--"
};

struct Attempt {
  int number = 0;
  int wait_status = 0;
  bool injected = false;              // ran with the injection variables
  bool reached = false;               // the injection point was reached and the node(s) killed
  bool interrupted = false;           // the launcher was asked to stop (SIGINT/SIGTERM/SIGHUP)
  bool stalled = false;               // ended by --stall: no checkpoint or progress for that long
  std::string stalled_text;           // "stalled: no checkpoint/progress for 5 s (last: ...)"
  uint64_t at_checkpoint = 0;         // where this attempt was to be killed (0: not injected)
  std::string killed_text;            // "node1 (ranks 2,3)" when killed
  double wall_seconds = 0;            // how long the attempt ran
  double restarted_after = -1;        // seconds from the launch until the job had restarted; -1: no restart seen
  std::string migrated_text;          // "node1 to node4 (...)" when the job exited for a migration
  std::optional<state_file::State> state;      // the job state file, when this attempt wrote it
};

// Everything one invocation of `cairn run` works from, resolved and checked.
struct RunContext {
  RunOptions options;
  LaunchSpec spec;
  Layout layout;
  std::string inject_text;  // "checkpoint:5"
  int next_spare = 0;       // the number of the next unused spare node
  int last_spare = -1;      // the number of the last spare node
  MigrationSettings migration;            // the job's migrate_* knobs, service and provider (migration.hpp)
  std::vector<std::string> migrate_exec;  // CAIRN_MIGRATE_EXEC, split on whitespace: how to start a process on a node
};

// "0,1,2"
std::string join_ints(const std::vector<int>& values);
// "node1 (ranks 2,3)" for the nodes to kill, and "checkpoint 5, phase flush".
std::string killed_nodes_text(const RunContext& ctx);
std::string injection_point_text(const RunContext& ctx);

// ---- one attempt (run_attempt.cpp) ------------------------------------------------------------------

class MigrationDesk;
// The launcher file: tells `cairn migrate` that this process manages the job, and its nodes and spares.
void write_launcher_file(const RunContext& ctx);
// Starts the job once, kills the chosen nodes at the injection point, watches the state file (the
// restart) and migration requests, and waits for the job to end.
Attempt run_attempt(const RunContext& ctx, int number, bool inject, MigrationDesk& desk);
// A failed attempt: killed, or a non-zero exit.
bool attempt_failed(const Attempt& a);

// ---- between attempts (run_between.cpp) ---------------------------------------------------------------

void delete_killed_caches(const RunContext& ctx);
// Runs the --between-attempts command; true when it succeeded.
bool run_between_attempts(const RunContext& ctx, int finished_attempt);
// --no-spare=oversubscribe: the ranks that lost their cache (rank -> the surviving node they move to) get
// the newest version the survivors' L2 can rebuild, as an L1 copy in their new node's cache, so that the
// relaunch restarts from it at L1 (the version's L2 sets belong to the old placement, which the library's
// restart on the same rank count does not rebuild from). Says what it did; a failure is only reported.
void rebuild_moved_ranks(const RunContext& ctx, const std::map<int, std::string>& moved);
// Why the job cannot go on with fewer ranks (its newest version holds per-rank state); "" when it can.
std::string why_job_cannot_shrink(const RunContext& ctx);

// ---- the end of the run (run_summary.cpp) -------------------------------------------------------------

// SCR's scavenge: the newest version complete in the surviving caches to L3, unless L3 holds it. Returns
// what it said (its last line, without the tag).
std::string scavenge(const RunContext& ctx);
void print_summary(const RunContext& ctx, const std::vector<Attempt>& attempts);
// --json FILE: the summary as one JSON document (docs/launcher.md), written to FILE ("-": stdout, after
// the job's own output). `exit_status` is cairn run's; `last_words` why it stopped early, if it did.
void write_summary_json(const RunContext& ctx, const std::vector<Attempt>& attempts, int exit_status,
                        const std::string& last_words, const std::string& scavenge_text);

}  // namespace cairn::tool
