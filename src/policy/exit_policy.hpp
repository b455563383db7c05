// When to checkpoint and when to exit: pure decisions from local observations. The runtime combines
// every rank's observations (a max-allreduce) so all ranks decide alike.
#pragma once

#include <cstdint>
#include <string>

namespace cairn::policy {

// Catch SIGUSR1 and SIGTERM (only where the application left the default action): a caught signal
// asks for a checkpoint at the next chance and an exit after it.
void install_signal_handlers();
void restore_signal_handlers();
// The signal caught since start, or 0.
int caught_signal();

struct Observation {
  bool signal = false;        // a termination signal was caught
  bool halt_file = false;     // <prefix>/.cairn/halt exists
  bool end_time = false;      // now >= end_time - halt_seconds
  bool interval_due = false;  // interval_seconds of compute since the last checkpoint
  bool exit_requested() const { return signal || halt_file || end_time; }
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
Decision decide(const Observation& o, bool checkpoint_since_request);

// A short human description: "halt file", "SIGTERM", "end time", ...
std::string describe(const Observation& o);

}  // namespace cairn::policy
