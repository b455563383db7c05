// The parts of `cairn run` (docs/launcher.md), one file each: the command, its options and the attempt
// loop (run.cpp); one attempt of the job (run_attempt.cpp); what happens between attempts
// (run_between.cpp); the scavenge and the summary at the end (run_summary.cpp); the launcher's side of
// process migration (run_migration.hpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/layout.hpp"
#include "base/state_file.hpp"
#include "launch/launch_plan.hpp"
#include "migrate/migration.hpp"
#include "policy/failure_schedule.hpp"

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
  bool nodes_given = false;  // --nodes was given (refused in a multi-host allocation)
  int ntasks_per_node = 0;   // --ntasks-per-node: ranks per host in a multi-host allocation; 0: blocks
  int min_hosts = 0;         // --min-hosts: fewest hosts a relaunch may run on; 0: the first launch's
  std::string fail_at;    // --fail-at: failures at times from the first launch (TIME:KIND[:TARGET],...)
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
  std::optional<policy::ScheduledFailure> failure;  // --fail-at: the failure that struck this attempt
  std::string failure_text;           // "node node1 (ranks 2,3) at 12.5 s (due 12.4 s)"
  std::optional<state_file::State> state;      // the job state file, when this attempt wrote it
  std::string hosts_text;             // cluster mode: "lost n2 (sinfo: down*); spare n5 took its ranks 4-5"
  std::string srun_stderr_tail;       // srun: the end of its standard error (copied through as it came)
};

// Cluster mode (docs/launcher.md, "On a cluster"): `cairn run` inside a multi-host allocation, where
// each host is a failure group of its own.
struct ClusterRun {
  bool active = false;
  std::string source;                  // "SLURM_JOB_NODELIST=n[1-6]"
  std::vector<std::string> hosts;      // the allocation's, in its order
  std::vector<std::string> spares;     // spare hosts not used yet, in the order they will be
  std::vector<std::string> lost;       // hosts found down and left out, in order
  std::vector<std::string> spares_used;  // "n5 for n2 (attempt 2)"
  int min_hosts = 0;                   // fewest hosts a relaunch may run on
  std::string sinfo;                   // sinfo's path (next to srun, else PATH); empty: not found
  std::vector<std::string> kill_exec;  // CAIRN_KILL_HOST_EXEC split: how --kill-node loses a host
};

// Everything one invocation of `cairn run` works from, resolved and checked.
struct RunContext {
  RunOptions options;
  LaunchSpec spec;
  Layout layout;
  std::string run_id;       // this run's CAIRN_RUN_ID, which every rank of every attempt carries
  std::string inject_text;  // "checkpoint:5"
  int next_spare = 0;       // the number of the next unused spare node
  int last_spare = -1;      // the number of the last spare node
  MigrationSettings migration;            // the job's migrate_* knobs, service and provider (migration.hpp)
  std::vector<std::string> migrate_exec;  // CAIRN_MIGRATE_EXEC, split on whitespace: how to start a process on a node
  ClusterRun cluster;                     // cluster mode, when active
  std::vector<policy::ScheduledFailure> failures;  // --fail-at, checked against the job's shape
  size_t next_failure = 0;                          // the first of `failures` not yet applied
  std::chrono::steady_clock::time_point epoch;      // the first launch: --fail-at's times count from it
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

// ---- failures at chosen times (run_failures.cpp) --------------------------------------------------------

class InjectionRendezvous;
// <prefix>/.cairn/run-record: with --fail-at, a line per attempt launched and per failure struck
// (docs/format.md, "The run record"). record_attempt_launch starts it afresh at attempt 1.
std::string run_record_path(const Layout& layout);
void record_attempt_launch(const RunContext& ctx, int attempt);
// --fail-at: parses the list against the job's shape and has every rank write its pid file (the
// injection variables, with a point no checkpoint reaches), so that any node can be struck.
Status prepare_timed_failures(RunContext& ctx);
// Within an attempt, polled: when the next failure is due and its ranks are up, kills them (a node's, one
// rank, or every rank), records the failure in the job history and in `attempt`; true when it struck.
bool strike_due_failure(const RunContext& ctx, const InjectionRendezvous& rendezvous, pid_t launcher_pid,
                        Attempt& attempt);
// After the attempt a failure struck: the lost caches deleted (the node's; every node's for a job
// failure), a lost node replaced (the next spare, else a fresh node of the same name). Says why the job
// cannot go on; empty: it can.
std::string after_timed_failure(RunContext& ctx, const policy::ScheduledFailure& failure);

// After killed nodes (ctx.options.kill_nodes): a spare takes each one's ranks while there is one; then,
// with --no-spare, the job continues on the survivors; else a fresh node of the same name (run.cpp).
// Empty: ok; else why the job cannot go on.
std::string replace_killed_nodes(RunContext& ctx);

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

// ---- cluster mode (run_hosts.cpp) ----------------------------------------------------------------------

struct AllocationHosts;
// Inside a multi-host allocation: checks the options against it, leaves out hosts already down, places
// the ranks on the first hosts (--ntasks-per-node, else blocks) and keeps --spares hosts back.
Status prepare_cluster(RunContext& ctx, const AllocationHosts& hosts);
// After a failed attempt: which of the job's hosts and free spares are down (sinfo's state, then a
// bounded probe step on each host sinfo calls up); `how` gets one reason per host ("n2 (sinfo: down*)").
// When Slurm refuses every step of the allocation (not one host's) past CAIRN_SLURM_COMMAND_TIMEOUT,
// nothing is returned and `refused` says so: no relaunch can run in this allocation.
std::vector<std::string> find_down_hosts(const RunContext& ctx, std::string* how, std::string* refused);
// Seconds any one Slurm command may take (sinfo, a probe step), and how long a step refused for the
// whole allocation (kStepsRefused) is asked again: CAIRN_SLURM_COMMAND_TIMEOUT, else 30.
double slurm_timeout();
// What `cairn run` says when Slurm went on refusing every new step for slurm_timeout(), `why` being the
// last refusal (a probe's, or the relaunch's own srun's): what happened and what to do.
std::string steps_refused_text(const std::string& why);
// Waits (bounded) until the failed attempt's step (named cairn-run) has left every host: a relaunch while
// its step still tears down on some host can hang the new step's PMIx exchange.
void wait_for_step_end(const RunContext& ctx);
// Why the allocation cannot run steps any more (it ended: cancelled, timed out, or killed with a host
// when allocated without --no-kill); "" while it runs.
std::string allocation_gone(const RunContext& ctx);
// Leaves the down hosts out for good and puts spares in their place (shrinks with --no-spare=shrink
// when none is left, down to --min-hosts); "" when the job can go on, else why not.
std::string replace_lost_hosts(RunContext& ctx, const std::vector<std::string>& down, Attempt& attempt);
// --kill-node in cluster mode: the injected hosts lost (CAIRN_KILL_HOST_EXEC per host), else their ranks
// SIGKILLed by pid where this machine sees them.
void kill_injected_hosts(const RunContext& ctx);
// The spare that takes the next node's or host's place ("" when none is left), and taking it (`for_what`:
// "n2 (migration)", for the summary).
std::string next_spare(const RunContext& ctx);
void take_spare(RunContext& ctx, const std::string& for_what);
// A step on `host` that removes its directory of the job's cache (a host that left the job by migration).
Status remove_host_cache(const RunContext& ctx, const std::string& host);
// The hosts lost and the spares used, for the summary.
void print_host_summary(const RunContext& ctx);

// ---- the end of the run (run_summary.cpp) -------------------------------------------------------------

// SCR's scavenge: the newest version complete in the surviving caches to L3, unless L3 holds it. Each
// returns what it said (its last line, without the tag).
std::string scavenge(const RunContext& ctx);
// The same on the caches under ctx.layout.cache_job as this machine sees them.
std::string scavenge_caches(const RunContext& ctx);
// Cluster mode (run_hosts.cpp): one step per surviving host copies its cache into the prefix, where
// scavenge_caches() flushes the newest version, rebuilding a lost host's ranks from L2.
std::string scavenge_hosts(const RunContext& ctx);
void print_summary(const RunContext& ctx, const std::vector<Attempt>& attempts);
// --json FILE: the summary as one JSON document (docs/launcher.md), written to FILE ("-": stdout, after
// the job's own output). `exit_status` is cairn run's; `last_words` why it stopped early, if it did.
void write_summary_json(const RunContext& ctx, const std::vector<Attempt>& attempts, int exit_status,
                        const std::string& last_words, const std::string& scavenge_text);

}  // namespace cairn::tool
