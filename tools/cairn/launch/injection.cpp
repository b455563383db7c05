#include "launch/injection.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/fsutil.hpp"

namespace cairn::tool {
namespace {

enum class Owner { ours, gone, foreign, unknown };

// /proc files report size 0, so read until EOF (fs::read_file trusts the size).
bool read_proc_file(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

// Whether `pid` is a rank of this injection: its environment names our directory.
Owner owner_of(pid_t pid, const std::string& dir) {
  if (pid <= 1 || pid == getpid()) return Owner::foreign;
  if (!fs::exists("/proc/self/environ")) return Owner::unknown;  // no procfs: trust the fresh directory
  std::string env;
  if (!read_proc_file("/proc/" + std::to_string(pid) + "/environ", &env))
    return fs::exists("/proc/" + std::to_string(pid)) ? Owner::foreign : Owner::gone;
  if (env.empty()) return Owner::gone;  // a zombie: dead, not yet reaped
  const std::string want = "CAIRN_INJECT_DIR=" + dir;
  size_t start = 0;
  while (start < env.size()) {
    size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    if (env.compare(start, end - start, want) == 0) return Owner::ours;
    start = end + 1;
  }
  return Owner::foreign;
}

bool parse_pid(const std::string& text, pid_t* pid) {
  size_t b = text.find_first_not_of(" \t\r\n");
  size_t e = text.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) return false;
  long v = 0;
  auto [end, ec] = std::from_chars(text.data() + b, text.data() + e + 1, v);
  if (ec != std::errc() || end != text.data() + e + 1 || v <= 0) return false;
  *pid = static_cast<pid_t>(v);
  return true;
}

}  // namespace

Status InjectionRendezvous::reset() const {
  CAIRN_TRY(fs::remove_tree(dir_));
  return fs::make_dirs(dir_);
}

bool InjectionRendezvous::reached() const {
  auto names = fs::list_dir(dir_);
  if (!names) return false;
  return std::any_of(names->begin(), names->end(),
                     [](const std::string& n) { return n.rfind("reached.", 0) == 0; });
}

bool InjectionRendezvous::pids_written(const std::vector<int>& ranks) const {
  return std::all_of(ranks.begin(), ranks.end(),
                     [&](int r) { return fs::exists(dir_ + "/pid." + std::to_string(r)); });
}

InjectionRendezvous::KillReport InjectionRendezvous::kill_ranks(const std::vector<int>& expected_ranks,
                                                                double grace_seconds) const {
  KillReport report;
  std::vector<int> pending = expected_ranks;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  for (;;) {
    for (auto it = pending.begin(); it != pending.end();) {
      std::string path = dir_ + "/pid." + std::to_string(*it);
      auto text = fs::read_file(path);
      pid_t pid = 0;
      if (!text || !parse_pid(*text, &pid)) {  // not written yet
        ++it;
        continue;
      }
      Owner owner = owner_of(pid, dir_);
      if (owner == Owner::ours || owner == Owner::unknown) {
        if (::kill(pid, SIGKILL) != 0 && errno != ESRCH)
          fprintf(stderr, "cairn run: warning: kill %d (rank %d): %s\n", static_cast<int>(pid), *it, strerror(errno));
        report.killed.push_back(*it);
      } else if (owner == Owner::gone) {
        report.killed.push_back(*it);
      } else {
        fprintf(stderr, "cairn run: warning: %s names pid %d, which is not a rank of this job; not killed\n",
                path.c_str(), static_cast<int>(pid));
        report.missing.push_back(*it);
      }
      it = pending.erase(it);
    }
    if (pending.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  report.missing.insert(report.missing.end(), pending.begin(), pending.end());
  std::sort(report.killed.begin(), report.killed.end());
  std::sort(report.missing.begin(), report.missing.end());
  return report;
}

void InjectionRendezvous::remove() const { fs::remove_tree(dir_).ignore(); }

}  // namespace cairn::tool
