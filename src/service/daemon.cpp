#include "service/daemon.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/log.hpp"

namespace cairn::service {
namespace {
int g_console = -1;  // the stderr the daemon was started with, once its log went to a file
}  // namespace

void tell_console(const std::string& line) {
  if (g_console < 0) return;
  std::string text = line + "\n";
  ssize_t n = ::write(g_console, text.data(), text.size());
  (void)n;  // nothing more to do when the terminal is gone
}

Status open_daemon_log(const std::string& path, const std::string& tag, const std::string& level) {
  log::Level l;
  if (!log::parse_level(level, &l))
    return make_error(Code::ERR_INVALID_ARG, "log level '%s': use error, warn, info or debug", level.c_str());
  log::set_level(l);
  log::set_tag(tag);
  log::set_timestamps(true);
  if (path.empty() || path == "-") return Status::ok();
  std::string dir = fs::dirname(fs::absolute(path));
  CAIRN_TRY(fs::make_dirs(dir));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return posix_error("open", path, errno);
  if (g_console < 0) g_console = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (dup2(fd, STDERR_FILENO) < 0) {
    int err = errno;
    close(fd);
    return posix_error("dup2", path, err);
  }
  close(fd);
  setvbuf(stderr, nullptr, _IOLBF, 0);  // whole lines, in order, even when the daemon is killed
  return Status::ok();
}

Result<fs::Fd> open_signal_fd(bool children) {
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (children) sigaddset(&set, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return posix_error("sigprocmask", "(daemon)", errno);
  int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return posix_error("signalfd", "(daemon)", errno);
  return fs::Fd(fd);
}

int read_signal(int fd) {
  signalfd_siginfo info{};
  ssize_t n = read(fd, &info, sizeof info);
  return n == static_cast<ssize_t>(sizeof info) ? static_cast<int>(info.ssi_signo) : 0;
}

Status write_address_file(const std::string& path, const std::string& address) {
  if (path.empty()) return Status::ok();
  return fs::write_file_atomic(path, address + "\n", true);
}

std::string host_name() {
  char buf[256] = "";
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace cairn::service
