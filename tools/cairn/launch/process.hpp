// Starting and watching child processes for the launcher: fork/execvp (no shell), a process group per
// job, the terminal handed to the job while it runs, and the launcher's signals relayed to the job.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace cairn::tool {

using EnvAssignments = std::vector<std::pair<std::string, std::string>>;

struct Child {
  pid_t pid = -1;
  bool own_group = false;      // the child leads its own process group (pgid == pid)
  bool owns_terminal = false;  // the terminal's foreground group was handed to it
};

// Starts argv (argv[0] looked up in PATH) with `env` added to its environment. With `own_group` the
// child leads a new process group; if the launcher is in the terminal's foreground, the terminal goes
// to that group (so the job may read stdin and gets ^C) until release_terminal().
Result<Child> spawn(const std::vector<std::string>& argv, const EnvAssignments& env, bool own_group);
// The same, with the child's stdin, stdout and stderr taken from these descriptors (-1: the launcher's own).
Result<Child> spawn(const std::vector<std::string>& argv, const EnvAssignments& env, bool own_group, int stdin_fd,
                    int stdout_fd, int stderr_fd = -1);

// Non-blocking wait: true (with the wait status) once the child has ended.
bool try_reap(const Child& child, int* wait_status);
// Blocking wait; returns the wait status.
int wait_for(const Child& child);
// Gives the terminal back to the launcher's process group.
void release_terminal(const Child& child);

// A wait status as a shell reports it: the exit status, or 128 + the signal number.
int exit_code_of(int wait_status);
// "exit status 1", "killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

// Every process below `pid` (children, their children, ...), from /proc; none where /proc is not there.
// The ranks mpirun starts lead process groups of their own, so a signal to mpirun's group misses them.
std::vector<pid_t> descendants_of(pid_t pid);

// Catches SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 (to be relayed to the job) and ignores SIGTTOU
// (so the launcher can print and take the terminal back while the job's group is in the foreground).
void install_signal_relay();
// A signal received since the last call (oldest first), or 0.
int take_relayed_signal();

}  // namespace cairn::tool
