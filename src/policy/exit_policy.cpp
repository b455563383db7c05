#include "policy/exit_policy.hpp"

#include <signal.h>

#include <atomic>
#include <cstring>

namespace cairn::policy {
namespace {
std::atomic<int> g_signal{0};
struct sigaction g_old_exit, g_old_term;
int g_exit_signal = 0;  // installed: the exit signal (0: none)
bool g_installed_term = false;

extern "C" void on_signal(int sig) { g_signal.store(sig); }

bool install_one(int sig, struct sigaction* old) {
  struct sigaction cur;
  if (sigaction(sig, nullptr, &cur) != 0) return false;
  if (cur.sa_handler != SIG_DFL) return false;  // the application handles it: leave it alone
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  return sigaction(sig, &sa, old) == 0;
}
}  // namespace

bool install_signal_handlers(int exit_signal) {
  g_signal.store(0);
  if (exit_signal == SIGTERM) exit_signal = 0;  // caught below anyway
  if (g_exit_signal == 0 && exit_signal != 0 && install_one(exit_signal, &g_old_exit)) g_exit_signal = exit_signal;
  if (!g_installed_term) g_installed_term = install_one(SIGTERM, &g_old_term);
  return exit_signal == 0 ? g_installed_term : g_exit_signal == exit_signal;
}

void restore_signal_handlers() {
  if (g_exit_signal != 0) sigaction(g_exit_signal, &g_old_exit, nullptr);
  if (g_installed_term) sigaction(SIGTERM, &g_old_term, nullptr);
  g_exit_signal = 0;
  g_installed_term = false;
}

int caught_signal() { return g_signal.load(); }

bool end_time_reached(int64_t end_time, double halt_seconds, double now) {
  return end_time > 0 && now >= static_cast<double>(end_time) - halt_seconds;
}

bool interval_due(double interval_seconds, double since) {
  return interval_seconds > 0 && since >= interval_seconds;
}

Decision decide(const Observation& o, bool checkpoint_since_request) {
  Decision d;
  if (o.halt_exit_now) {
    d.should_exit = true;
  } else if (o.exit_requested()) {
    d.should_exit = checkpoint_since_request;
    d.need_checkpoint = !checkpoint_since_request;
  } else {
    d.need_checkpoint = o.interval_due;
  }
  return d;
}

std::string describe(const Observation& o) {
  std::string s;
  auto add = [&](const char* what) { s += s.empty() ? what : std::string(", ") + what; };
  if (o.signal) add("a termination signal");
  if (o.halt_file || o.halt_exit_now) add("the halt file");
  if (o.end_time) add("the job's end time");
  if (o.migrate) add("a migration request");
  if (o.interval_due) add("the checkpoint interval");
  return s.empty() ? "nothing" : s;
}

}  // namespace cairn::policy
