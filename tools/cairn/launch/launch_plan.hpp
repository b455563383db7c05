// How `cairn run` lays a job out: simulated nodes, the ranks on each, and the command line that gives
// every rank its node: one MPMD app context per node for mpirun, one line per node of a --multi-prog
// file for srun. Pure functions, except launch_argv(), which writes the --multi-prog file.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"
#include "launch/process.hpp"

namespace cairn::tool {

// "node0", "node1", ...
std::string node_name(int node);

// Ranks spread evenly in contiguous blocks: rank r runs on node floor(r * nnodes / nranks).
// Requires 1 <= nnodes <= nranks; every node gets at least one rank.
std::vector<int> ranks_per_node(int nranks, int nnodes);
// The ranks of `node` under that placement.
std::vector<int> ranks_of_node(const std::vector<int>& ranks_per_node, int node);

// The program that starts the job's ranks.
enum class LauncherKind { mpirun, srun };
const char* launcher_name(LauncherKind kind);  // "mpirun", "srun"

struct LaunchSpec {
  LauncherKind launcher = LauncherKind::mpirun;
  std::string mpirun;                    // mpirun to run (absolute path; CAIRN_MPIRUN)
  std::vector<std::string> mpirun_args;  // words put before the app contexts (CAIRN_MPIRUN_ARGS)
  std::string srun;                      // srun to run (absolute path; CAIRN_SRUN), with launcher srun
  std::vector<std::string> srun_args;    // srun's options before -n (srun_options(CAIRN_SRUN_ARGS))
  std::string multi_prog_file;           // where launch_argv() writes srun's --multi-prog file
  std::vector<int> ranks_per_node;
  std::vector<std::string> node_names;   // the node each entry of ranks_per_node runs on (a spare
                                         // replaces a killed one); empty: node0, node1, ...
  std::vector<std::vector<std::string>> spread;  // per entry, when not empty: its ranks run one by one
                                                 // on these nodes, cyclically (--no-spare=oversubscribe)
  bool real_hosts = false;               // node_names are the allocation's hosts (cluster mode): no
                                         // CAIRN_NODE; srun places every rank on its host from
                                         // host_file (-m arbitrary), mpirun with --host per context
  std::string host_file;                 // where launch_argv() writes one host per rank, for srun
  std::vector<std::string> exclude;      // hosts srun must leave out (-x): found down
  std::vector<std::string> command;      // CMD ARGS
  EnvAssignments job_env;                // given to every rank (CAIRN_CONFIG)
  std::vector<int> inject_nodes;         // nodes whose ranks also get inject_env
  EnvAssignments inject_env;             // CAIRN_INJECT, CAIRN_INJECT_DIR
};

// The number of ranks the job starts with (the sum of ranks_per_node).
int total_ranks(const LaunchSpec& spec);

// MPIRUN ARGS -np c0 env CAIRN_NODE=node0 [job_env] [inject_env] CMD ARGS : -np c1 env ... : ...
// (real hosts: -np c0 --host h0:c0 env [job_env] ... CMD ARGS : ...)
std::vector<std::string> mpirun_argv(const LaunchSpec& spec, bool with_injection);

// What mpirun is started with in its environment, beside the launcher's own: Open MPI's
// odls_base_sigkill_timeout = 0, unless `user_setting` (the launcher's OMPI_MCA_odls_base_sigkill_timeout)
// is set or CAIRN_MPIRUN_ARGS names the parameter. When a rank or a node is lost, Open MPI ends the other
// ranks with SIGTERM and, that many seconds later, SIGKILL; cairn takes SIGTERM as a request to checkpoint
// and exit, which ranks whose peer is gone cannot honour, so without this every failure waited out the
// timeout before the next attempt could start. MPICH's launcher ignores the variable. Empty for srun.
EnvAssignments mpirun_env(const LaunchSpec& spec, const char* user_setting);

// srun's options: the user's words (CAIRN_SRUN_ARGS) after the ones cairn needs, each of which is left
// out when the user gives that option: --mpi=pmix (Open MPI's and MPICH's interface to Slurm),
// --kill-on-bad-exit=1 (a killed rank ends the step, as under mpirun) and --quit-on-interrupt (one
// SIGINT ends the job, as under mpirun).
std::vector<std::string> srun_options(const std::vector<std::string>& user_words);

// SRUN SRUN_ARGS -n NP --multi-prog FILE; with real hosts also -m arbitrary -w HOST_FILE [-x LOST].
std::vector<std::string> srun_argv(const LaunchSpec& spec);
// With real hosts: the host of every rank, one per line, in rank order (srun's arbitrary distribution).
std::string host_file_text(const LaunchSpec& spec);

// The --multi-prog file: one line per node with ranks, its rank range and the same words as the
// node's mpirun app context, quoted for srun where needed:
//   0-1 env CAIRN_NODE=node0 [job_env] [inject_env] CMD ARGS
// An error when a word cannot be passed that way (a newline in it).
Result<std::string> multi_prog_text(const LaunchSpec& spec, bool with_injection);

// One word as srun's --multi-prog parser reads it: as is when it is plain, else in single quotes
// (a quote inside as '\''); '%' is quoted too, or srun would substitute %t and %o.
std::string multi_prog_quote(const std::string& word);

// The command line of one attempt: mpirun_argv(), or srun_argv() after writing multi_prog_text() to
// spec.multi_prog_file (atomically, creating its directory).
Result<std::vector<std::string>> launch_argv(const LaunchSpec& spec, bool with_injection);

// Which launcher runs the job. `requested` is "auto", "mpirun" or "srun" (anything else is an error);
// `requested_from` is put before it in messages ("--launcher ", "CAIRN_LAUNCHER=", or "" for the
// default). auto picks srun inside a Slurm allocation (`slurm_job_id` not empty) when srun was found
// (`srun_path` not empty), else mpirun. An explicit srun outside an allocation, or without srun, is an
// error; `srun_hint` says where srun was looked for.
struct LauncherChoice {
  LauncherKind kind = LauncherKind::mpirun;
  std::string reason;  // "auto: inside Slurm allocation 42", "--launcher mpirun", ...
};
Result<LauncherChoice> choose_launcher(const std::string& requested, const std::string& requested_from,
                                       const std::string& slurm_job_id, const std::string& srun_path,
                                       const std::string& srun_hint);

}  // namespace cairn::tool
