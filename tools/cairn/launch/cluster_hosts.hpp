// The hosts of a multi-host allocation, for `cairn run`'s cluster mode (docs/launcher.md, "On a cluster"):
// Slurm's host-list syntax, Open MPI's hostfiles, what a Slurm node state says about a host, and Slurm
// commands run with a bound on their time. Pure functions, except allocation_hosts() (the environment,
// a hostfile) and run_bounded() (a process).
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"
#include "launch/process.hpp"

namespace cairn::tool {

// Slurm's compressed host list, as in SLURM_JOB_NODELIST: "n[1-3,7],gpu[08-09],login" ->
// n1 n2 n3 n7 gpu08 gpu09 login (zero padding kept; the bracket may sit inside a name: "r[1-2]n1").
// An error for unbalanced brackets, a reversed or empty range, or more than 100000 hosts.
Result<std::vector<std::string>> expand_hostlist(const std::string& list);

// The hosts of an Open MPI hostfile ("host [slots=N] [max_slots=M]" per line, # comments), each once,
// in order; an error when it cannot be read or names no host.
Result<std::vector<std::string>> read_hostfile(const std::string& path);
// The hosts named in mpirun's words (CAIRN_MPIRUN_ARGS): --hostfile/--machinefile/-hostfile FILE, or
// --host/-H h1,h2 (a ":slots" suffix dropped). Empty when they name none.
Result<std::vector<std::string>> mpirun_hosts(const std::vector<std::string>& mpirun_args);

// How Open MPI's mpirun reaches a host (its rsh launcher's agent): plm_rsh_agent (or its synonym
// orte_rsh_agent) from mpirun's words (--mca/-mca NAME VALUE, CAIRN_MPIRUN_ARGS), else from `env_value`
// (OMPI_MCA_plm_rsh_agent), else Open MPI's default "ssh : rsh". The alternatives (separated by ':') in
// order, each split on spaces, as Open MPI splits them; mpirun uses the first one found in PATH.
std::vector<std::vector<std::string>> rsh_agents(const std::vector<std::string>& mpirun_args, const char* env_value);

// Where the hosts of this run come from: SLURM_JOB_NODELIST under srun (and mpirun inside an
// allocation), else mpirun's hostfile or --host. `source` says which ("SLURM_JOB_NODELIST=n[1-6]").
struct AllocationHosts {
  std::vector<std::string> hosts;
  std::string source;
};
Result<AllocationHosts> allocation_hosts(bool under_srun, const std::vector<std::string>& mpirun_args);

// A Slurm node state as sinfo's %T prints it ("idle", "mixed", "down*", "drained", "allocated*", ...):
// true when the host cannot run a step: down, drained or draining, failed or failing, powered down or
// not yet up, or not responding (the '*' suffix).
bool slurm_state_is_down(const std::string& state);

// What srun says when the controller refuses a new step of the whole allocation, not of one host
// (ESLURM_ALREADY_DONE): the job is ending, or a step of a failed attempt is left completing on a lost host.
inline constexpr const char* kStepsRefused = "already completing or completed";

// How a step ended, from srun's wait status and the tail of what srun wrote to its standard error:
// `refused` when srun failed and said that Slurm refused the step for the whole allocation
// (kStepsRefused): nothing ran, and asking again may succeed once the old step has completed; `ended`
// otherwise (success, or a failure of the job or of a host, judged by the attempt's other signs).
enum class StepEnd { ended, refused };
StepEnd classify_step_end(int wait_status, const std::string& srun_stderr_tail);
// The line of the tail that holds kStepsRefused ("srun: error: Unable to create step for job 42: Job/step
// already completing or completed"), without its line break; "" when none does.
std::string refusal_line(const std::string& srun_stderr_tail);

// The last `capacity` bytes of a stream appended piece by piece (a launched step's stderr, copied
// through as it comes): what classify_step_end reads, never the whole output.
class OutputTail {
 public:
  explicit OutputTail(size_t capacity = 4096) : capacity_(capacity) {}
  void append(const char* data, size_t n);
  const std::string& text() const { return text_; }

 private:
  size_t capacity_;
  std::string text_;
};

// "n1,n2,n3" (srun's -w and -x take plain lists).
std::string join_hosts(const std::vector<std::string>& hosts);

// A command run to its end or for at most `seconds` (then its process group gets SIGKILL): its wait
// status, whether it timed out, and its standard output and error together (at most 64 KiB kept).
struct BoundedRun {
  int wait_status = 0;
  bool timed_out = false;
  bool started = true;
  std::string output;
};
BoundedRun run_bounded(const std::vector<std::string>& argv, const EnvAssignments& env, double seconds);

}  // namespace cairn::tool
