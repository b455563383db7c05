// When to checkpoint and when to exit: pure decisions from local observations. The runtime combines
// every rank's observations (a max-allreduce) so all ranks decide alike.
#pragma once

#include <csignal>
#include <cstdint>
#include <string>
#include <string_view>

namespace cairn::policy {

// The exit_signal knob: "USR1", "SIGUSR2", "term" (any case, SIG optional) or a number ("12").
// Returns the signal, or 0 for one that cannot ask for an exit: unknown, uncatchable (KILL, STOP), a
// fault (SEGV, BUS, FPE, ILL, TRAP, ABRT, SYS), or one the MPI runtime or the shell uses for other
// things (CHLD, PIPE, CONT, TSTP, TTIN, TTOU).
int parse_exit_signal(std::string_view text);
// "SIGUSR1"; "signal 40" for one without a name.
std::string signal_name(int sig);
// What parse_exit_signal accepts, for messages and the docs.
const char* exit_signal_choices();

// Catch `exit_signal` and SIGTERM, each only where the application left the default action: a
// caught signal asks for a checkpoint at the next chance and an exit after it. Forgets a signal
// caught before. Returns false when `exit_signal` was left alone (the application handles it).
bool install_signal_handlers(int exit_signal = SIGUSR1);
void restore_signal_handlers();
// The signal caught since install_signal_handlers(), or 0.
int caught_signal();

struct Observation {
  bool signal = false;        // a termination signal was caught
  bool halt_file = false;     // <prefix>/.cairn/halt exists
  bool end_time = false;      // now >= end_time - halt_seconds
  bool interval_due = false;  // interval_seconds of compute since the last checkpoint
  // A halt condition that wants no further checkpoint: immediate=1, checkpoints=N used up, after=T
  // passed with a checkpoint since (policy/halt.hpp). Wins over everything else.
  bool halt_exit_now = false;
  // `cairn migrate` asked the launcher to move a node's ranks to a spare (<prefix>/.cairn/migrate):
  // checkpoint, then exit so that the launcher can move the snapshots and relaunch.
  bool migrate = false;
  bool exit_requested() const { return signal || halt_file || end_time || migrate; }
};

// end_time: Unix seconds, 0 = none. now: Unix seconds.
bool end_time_reached(int64_t end_time, double halt_seconds, double now);
// interval <= 0: never due.
bool interval_due(double interval_seconds, double seconds_since_last_checkpoint);

struct Decision {
  bool need_checkpoint = false;
  bool should_exit = false;
};
// checkpoint_since_request: a version was taken after the exit request was first seen.
// halt_exit_now: exit, no checkpoint.
Decision decide(const Observation& o, bool checkpoint_since_request);

// A short human description: "halt file", "SIGTERM", "end time", ...
std::string describe(const Observation& o);

}  // namespace cairn::policy
