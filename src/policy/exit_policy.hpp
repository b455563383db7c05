// When to checkpoint and when to exit: pure decisions from local observations. The runtime combines
// every rank's observations (a max-allreduce) so all ranks decide alike.
#pragma once

#include <csignal>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/signal_names.hpp"

namespace cairn::policy {

// The exit_signal knob's names (parse_exit_signal, signal_name, exit_signal_choices) live in
// base/signal_names.hpp: the config parser validates the knob with them.
using ::cairn::exit_signal_choices;
using ::cairn::parse_exit_signal;
using ::cairn::signal_name;

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
