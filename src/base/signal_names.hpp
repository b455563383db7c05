// The names of the signals that may ask a job to checkpoint and exit (the exit_signal knob). In the
// bottom layer because the config parser validates the knob with them; the policy installs the handlers.
#pragma once

#include <string>
#include <string_view>

namespace cairn {

// The exit_signal knob: "USR1", "SIGUSR2", "term" (any case, SIG optional) or a number ("12").
// Returns the signal, or 0 for one that cannot ask for an exit: unknown, uncatchable (KILL, STOP), a
// fault (SEGV, BUS, FPE, ILL, TRAP, ABRT, SYS), or one the MPI runtime or the shell uses for other
// things (CHLD, PIPE, CONT, TSTP, TTIN, TTOU).
int parse_exit_signal(std::string_view text);
// "SIGUSR1"; "signal 40" for one without a name.
std::string signal_name(int sig);
// What parse_exit_signal accepts, for messages and the docs.
const char* exit_signal_choices();

}  // namespace cairn
