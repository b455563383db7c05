// What the three daemons of cairnd share: a log file with time-stamped, tagged lines, signals as a
// file descriptor for their poll loops (SIGTERM and SIGINT stop cleanly), and the address file a
// daemon started on port 0 writes so that scripts and tests learn where it listens.
#pragma once

#include <string>

#include "base/fsutil.hpp"
#include "base/status.hpp"

namespace cairn::service {

// Route the process's log lines and stderr (libfabric's warnings included) to `path`, appended ("-":
// stay on stderr). `tag` starts every line ("cairnd controller"); `level` is error|warn|info|debug.
Status open_daemon_log(const std::string& path, const std::string& tag, const std::string& level);
// Say `line` on the stderr the daemon was started with, when its log went to a file (the log has it
// too): for what ends the daemon at its start, which the person who started it must see.
void tell_console(const std::string& line);

// Block SIGTERM, SIGINT (and SIGCHLD when `children`) and return a signalfd that reports them; SIGPIPE
// is ignored (a peer that went away is a failed write, not a dead daemon).
Result<fs::Fd> open_signal_fd(bool children);
// The next pending signal's number, or 0.
int read_signal(int fd);

// Write "HOST:PORT\n" to `path` atomically (no-op for an empty path).
Status write_address_file(const std::string& path, const std::string& address);

// This host's name (gethostname).
std::string host_name();

}  // namespace cairn::service
