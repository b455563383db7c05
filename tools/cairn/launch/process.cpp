#include "launch/process.hpp"

#include "base/fsutil.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <map>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace cairn::tool {
namespace {

constexpr int kRelayed[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
std::atomic<unsigned> g_pending{0};  // bit per signal number (all < 32)

void on_signal(int sig) { g_pending.fetch_or(1u << sig); }

// The launcher's environment with `extra` set (replacing variables of the same name).
std::vector<std::string> child_environment(const EnvAssignments& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& kv : extra) replaced = replaced || kv.first == name;
    if (!replaced) out.push_back(std::move(entry));
  }
  for (const auto& [name, value] : extra) out.push_back(name + "=" + value);
  return out;
}

bool launcher_owns_terminal() {
  return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
}

}  // namespace

Result<Child> spawn(const std::vector<std::string>& argv, const EnvAssignments& env, bool own_group) {
  return spawn(argv, env, own_group, -1, -1);
}

Result<Child> spawn(const std::vector<std::string>& argv, const EnvAssignments& env, bool own_group, int stdin_fd,
                    int stdout_fd, int stderr_fd) {
  if (argv.empty()) return make_error(Code::ERR_INVALID_ARG, "spawn: empty command");
  // Build everything the child needs before fork: the child only calls async-signal-safe functions.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings = child_environment(env);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exec_failed = "cairn: cannot run " + argv[0] + "\n";
  Child child;
  child.own_group = own_group;
  child.owns_terminal = own_group && launcher_owns_terminal();

  pid_t pid = fork();
  if (pid < 0) return posix_error("fork", argv[0], errno);
  if (pid == 0) {
    if (own_group) {
      setpgid(0, 0);
      if (child.owns_terminal) tcsetpgrp(STDIN_FILENO, getpid());  // SIGTTOU is still ignored here
    }
    for (int sig : kRelayed) signal(sig, SIG_DFL);
    signal(SIGTTOU, SIG_DFL);
    if (stdin_fd >= 0) dup2(stdin_fd, STDIN_FILENO);
    if (stdout_fd >= 0) dup2(stdout_fd, STDOUT_FILENO);
    if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
    execvpe(args[0], args.data(), envp.data());
    int err = errno;
    ssize_t ignored = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)ignored;
    _exit(err == ENOENT ? 127 : 126);
  }
  child.pid = pid;
  if (own_group) {
    setpgid(pid, pid);  // also here, so the group exists whichever process runs first
    if (child.owns_terminal) tcsetpgrp(STDIN_FILENO, pid);
  }
  return child;
}

bool try_reap(const Child& child, int* wait_status) {
  for (;;) {
    pid_t r = waitpid(child.pid, wait_status, WNOHANG);
    if (r == child.pid) return true;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {  // not our child any more (should not happen): report it as failed
      *wait_status = 1 << 8;
      return true;
    }
    return false;
  }
}

int wait_for(const Child& child) {
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0) {
    if (errno != EINTR) return 1 << 8;
  }
  return status;
}

void release_terminal(const Child& child) {
  if (child.owns_terminal) tcsetpgrp(STDIN_FILENO, getpgrp());
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return "killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : std::string());
  }
  return "unknown wait status " + std::to_string(wait_status);
}

void install_signal_relay() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kRelayed) sigaction(sig, &sa, nullptr);
  signal(SIGTTOU, SIG_IGN);
}

int take_relayed_signal() {
  unsigned pending = g_pending.load();
  for (int sig : kRelayed)
    if (pending & (1u << sig)) {
      g_pending.fetch_and(~(1u << sig));
      return sig;
    }
  return 0;
}

std::vector<pid_t> descendants_of(pid_t pid) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  auto names = fs::list_dir("/proc");
  for (const auto& n : names ? *names : std::vector<std::string>{}) {
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
    // "pid (comm) state ppid ...": comm may hold anything. /proc files report no size: read by stream.
    std::ifstream in("/proc/" + n + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2)
      children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(atoi(n.c_str())));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{pid};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [a, b] = children.equal_range(p);
    for (auto it = a; it != b; ++it) out.push_back(it->second), todo.push_back(it->second);
  }
  return out;
}

}  // namespace cairn::tool
