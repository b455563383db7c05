#include "launch/cluster_hosts.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace cairn::tool {
namespace {

constexpr size_t kMaxHosts = 100000;
constexpr size_t kMaxOutput = 64 * 1024;

// One "a-b" or "a" of a bracket's ranges into the names prefix+number+suffix, zero padding kept.
Status expand_range(const std::string& range, const std::string& prefix, const std::string& suffix,
                    std::vector<std::string>* out) {
  auto dash = range.find('-');
  std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(lo) || !digits(hi))
    return make_error(Code::ERR_INVALID_ARG, "'%s' is not a number or a range of numbers", range.c_str());
  long a = std::stol(lo), b = std::stol(hi);
  if (b < a) return make_error(Code::ERR_INVALID_ARG, "range '%s' runs backwards", range.c_str());
  if (static_cast<size_t>(b - a) + out->size() >= kMaxHosts)
    return make_error(Code::ERR_INVALID_ARG, "more than %zu hosts", kMaxHosts);
  const size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;  // "08" keeps two digits
  for (long v = a; v <= b; ++v) {
    std::string num = std::to_string(v);
    if (num.size() < width) num.insert(0, width - num.size(), '0');
    out->push_back(prefix + num + suffix);
  }
  return Status::ok();
}

// One comma-free item of a host list, with at most one bracket per level expanded (recursively, so
// "r[1-2]n[1-2]" gives four names).
Status expand_item(const std::string& item, std::vector<std::string>* out) {
  auto open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos) return make_error(Code::ERR_INVALID_ARG, "']' without '['");
    out->push_back(item);
    return Status::ok();
  }
  auto close = item.find(']', open);
  if (close == std::string::npos) return make_error(Code::ERR_INVALID_ARG, "'[' without ']'");
  const std::string prefix = item.substr(0, open), inside = item.substr(open + 1, close - open - 1),
                    rest = item.substr(close + 1);
  if (inside.empty()) return make_error(Code::ERR_INVALID_ARG, "empty brackets");
  std::vector<std::string> heads;
  std::stringstream ranges(inside);
  for (std::string r; std::getline(ranges, r, ',');) CAIRN_TRY(expand_range(r, prefix, "", &heads));
  for (const auto& head : heads) CAIRN_TRY(expand_item(head + rest, out));
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  std::string item;
  int depth = 0;
  auto flush = [&]() -> Status {
    if (item.empty()) return Status::ok();
    Status st = expand_item(item, &hosts);
    item.clear();
    return st;
  };
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return make_error(Code::ERR_INVALID_ARG, "host list '%s': ']' without '['", list.c_str());
    if ((c == ',' || c == ' ') && depth == 0) {
      if (Status st = flush(); !st) return make_error(Code::ERR_INVALID_ARG, "host list '%s': %s", list.c_str(), st.message().c_str());
      continue;
    }
    item += c;
  }
  if (depth != 0) return make_error(Code::ERR_INVALID_ARG, "host list '%s': '[' without ']'", list.c_str());
  if (Status st = flush(); !st) return make_error(Code::ERR_INVALID_ARG, "host list '%s': %s", list.c_str(), st.message().c_str());
  return hosts;
}

Result<std::vector<std::string>> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(Code::ERR_INVALID_ARG, "hostfile %s cannot be read", path.c_str());
  std::vector<std::string> hosts;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string host;
    if (!(words >> host)) continue;
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  if (hosts.empty()) return make_error(Code::ERR_INVALID_ARG, "hostfile %s names no host", path.c_str());
  return hosts;
}

Result<std::vector<std::string>> mpirun_hosts(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    for (const char* opt : {"--hostfile", "-hostfile", "--machinefile", "-machinefile"}) {
      const std::string o = opt;
      if (w == o && i + 1 < args.size()) return read_hostfile(args[i + 1]);
      if (w.rfind(o + "=", 0) == 0) return read_hostfile(w.substr(o.size() + 1));
    }
    for (const char* opt : {"--host", "-host", "-H"}) {
      const std::string o = opt;
      std::string list;
      if (w == o && i + 1 < args.size()) list = args[i + 1];
      else if (w.rfind(o + "=", 0) == 0) list = w.substr(o.size() + 1);
      else continue;
      std::vector<std::string> hosts;
      std::stringstream items(list);
      for (std::string h; std::getline(items, h, ',');) {
        h = h.substr(0, h.find(':'));
        if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
      }
      return hosts;
    }
  }
  return std::vector<std::string>{};
}

std::vector<std::vector<std::string>> rsh_agents(const std::vector<std::string>& args, const char* env_value) {
  std::string value = env_value && *env_value ? env_value : "ssh : rsh";
  for (size_t i = 0; i + 2 < args.size(); ++i)
    if ((args[i] == "--mca" || args[i] == "-mca") && (args[i + 1] == "plm_rsh_agent" || args[i + 1] == "orte_rsh_agent"))
      value = args[i + 2];  // the last one given wins, as on mpirun's command line
  std::vector<std::vector<std::string>> agents;
  std::stringstream alternatives(value);
  for (std::string alt; std::getline(alternatives, alt, ':');) {
    std::vector<std::string> words;
    std::stringstream split(alt);
    for (std::string w; split >> w;) words.push_back(w);
    if (!words.empty()) agents.push_back(words);
  }
  return agents;
}

Result<AllocationHosts> allocation_hosts(bool under_srun, const std::vector<std::string>& mpirun_args) {
  AllocationHosts out;
  const char* nodelist = getenv("SLURM_JOB_NODELIST");
  if (!nodelist || !*nodelist) nodelist = getenv("SLURM_NODELIST");
  if (getenv("SLURM_JOB_ID") && nodelist && *nodelist) {
    auto hosts = expand_hostlist(nodelist);
    if (!hosts) return hosts.status();
    out.hosts = *hosts;
    out.source = std::string("SLURM_JOB_NODELIST=") + nodelist;
    return out;
  }
  if (under_srun) return out;
  auto hosts = mpirun_hosts(mpirun_args);
  if (!hosts) return make_error(Code::ERR_INVALID_ARG, "CAIRN_MPIRUN_ARGS: %s", hosts.status().message().c_str());
  out.hosts = *hosts;
  if (!out.hosts.empty()) out.source = "CAIRN_MPIRUN_ARGS (its hostfile or --host)";
  return out;
}

bool slurm_state_is_down(const std::string& raw) {
  std::string state = raw;
  while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
  if (state.empty()) return true;  // not reported: the controller does not know it
  if (state.back() == '*') return true;  // not responding
  state.erase(std::remove_if(state.begin(), state.end(), [](char c) { return c == '~' || c == '#' || c == '!' || c == '%' || c == '$' || c == '@' || c == '^' || c == '-'; }),
              state.end());
  for (const char* bad : {"down", "drain", "fail", "future", "power", "unk", "inval", "reboot", "maint", "no_respond"})
    if (state.rfind(bad, 0) == 0) return true;
  return false;
}

StepEnd classify_step_end(int wait_status, const std::string& srun_stderr_tail) {
  if (exit_code_of(wait_status) == 0) return StepEnd::ended;
  return srun_stderr_tail.find(kStepsRefused) != std::string::npos ? StepEnd::refused : StepEnd::ended;
}

std::string refusal_line(const std::string& srun_stderr_tail) {
  const size_t at = srun_stderr_tail.find(kStepsRefused);
  if (at == std::string::npos) return "";
  const size_t nl = srun_stderr_tail.rfind('\n', at);
  const size_t from = nl == std::string::npos ? 0 : nl + 1;
  const size_t to = srun_stderr_tail.find('\n', at);
  return srun_stderr_tail.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

void OutputTail::append(const char* data, size_t n) {
  if (n >= capacity_) {
    text_.assign(data + (n - capacity_), capacity_);
    return;
  }
  text_.append(data, n);
  if (text_.size() > capacity_) text_.erase(0, text_.size() - capacity_);
}

std::string join_hosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : ",") + h;
  return out;
}

BoundedRun run_bounded(const std::vector<std::string>& argv, const EnvAssignments& env, double seconds) {
  BoundedRun run;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    run.started = false;
    run.output = "cannot make a pipe";
    return run;
  }
  std::vector<std::string> words{"/bin/sh", "-c", "exec \"$@\" 2>&1 </dev/null", "sh"};
  words.insert(words.end(), argv.begin(), argv.end());
  auto child = spawn(words, env, /*own_group=*/false, -1, fds[1]);
  close(fds[1]);
  if (!child) {
    close(fds[0]);
    run.started = false;
    run.output = child.status().message();
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool open = true, reaped = false;
  while (!reaped) {
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        char buf[4096];
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n > 0 && run.output.size() < kMaxOutput) run.output.append(buf, static_cast<size_t>(n));
        if (n == 0) open = false;
      }
    } else {
      usleep(20000);
    }
    reaped = try_reap(*child, &run.wait_status);
    if (!reaped && std::chrono::steady_clock::now() > deadline) {
      ::kill(child->pid, SIGKILL);
      run.wait_status = wait_for(*child);
      run.timed_out = true;
      reaped = true;
    }
  }
  if (open) {  // what the command wrote just before it ended (a process it left holding the pipe: not waited for)
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
      if (run.output.size() < kMaxOutput) run.output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  return run;
}

}  // namespace cairn::tool
