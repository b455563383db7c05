#include "base/signal_names.hpp"

#include <signal.h>

#include <cctype>
#include <charconv>

namespace cairn {
namespace {
struct SignalName {
  const char* name;
  int number;
};
// The signals that may ask for an exit (see parse_exit_signal).
const SignalName kExitSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"ALRM", SIGALRM}, {"TERM", SIGTERM},     {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
#ifdef SIGPWR
    {"PWR", SIGPWR},
#endif
};

}  // namespace

int parse_exit_signal(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  int number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) {
    for (const auto& s : kExitSignals)
      if (s.number == number) return number;
    return number >= SIGRTMIN && number <= SIGRTMAX ? number : 0;
  }
  std::string name;
  for (char c : text) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (const auto& s : kExitSignals)
    if (name == s.name) return s.number;
  return 0;
}

std::string signal_name(int sig) {
  for (const auto& s : kExitSignals)
    if (s.number == sig) return std::string("SIG") + s.name;
  return "signal " + std::to_string(sig);
}

const char* exit_signal_choices() {
  return "USR1, USR2, TERM, INT, HUP, QUIT, ALRM, URG, XCPU, XFSZ, VTALRM, PROF, WINCH, PWR (SIG prefix "
         "optional), or a number (those, or SIGRTMIN..SIGRTMAX)";
}

}  // namespace cairn
