#include "service/manager/manager.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "service/daemon.hpp"
#include "wire/control_messages.hpp"

namespace cairn::service {
namespace {

struct Child {
  uint64_t agent_id = 0;
  pid_t pid = 0;
  std::unique_ptr<wire::Connection> pipe;  // reads the agent's stdout, writes its stdin
  bool up = false;
};

class Manager {
 public:
  explicit Manager(ManagerOptions o) : o_(std::move(o)) {}
  int run();

 private:
  void connect();
  void on_controller_input();
  void on_frame(const wire::Frame& f);
  void drop_controller(const std::string& why);
  void start_agent(const wire::StartAgent& m, const std::string& raw);
  void on_child_input(Child& c);
  void reap();
  void stop_all(double grace_s);
  void send(const std::string& frame_bytes);

  ManagerOptions o_;
  fs::Fd signals_;
  std::unique_ptr<wire::Connection> ctl_;
  bool welcomed_ = false;
  uint64_t id_ = 0;
  double next_connect_ = 0, backoff_ = 0.2;
  std::map<pid_t, Child> children_;
  bool stop_ = false;
  int exit_status_ = 0;
};

int Manager::run() {
  auto sig = open_signal_fd(true);
  if (!sig) {
    LOG_ERROR("%s", sig.status().message().c_str());
    return 1;
  }
  signals_ = std::move(*sig);
  if (fs::make_dirs(o_.work_dir).is_ok() == false) LOG_WARN("cannot create %s", o_.work_dir.c_str());
  LOG_INFO("manager %s: up to %u agents, listening on %s, controller %s", o_.name.c_str(), o_.agents,
           o_.listen_host.c_str(), o_.controller.str().c_str());
  while (!stop_) {
    if (!ctl_ && wire::monotonic_seconds() >= next_connect_) connect();
    std::vector<pollfd> fds;
    fds.push_back({signals_.get(), POLLIN, 0});
    if (ctl_) fds.push_back({ctl_->fd(), static_cast<short>(POLLIN | (ctl_->wants_write() ? POLLOUT : 0)), 0});
    std::vector<pid_t> pids;
    for (auto& [pid, c] : children_) {
      if (!c.pipe) continue;
      fds.push_back({c.pipe->fd(), POLLIN, 0});
      pids.push_back(pid);
    }
    int n = ::poll(fds.data(), fds.size(), 200);
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      int s = read_signal(signals_.get());
      if (s == SIGTERM || s == SIGINT) {
        LOG_INFO("signal %d: stopping the agents and exiting", s);
        stop_ = true;
      }
    }
    reap();  // SIGCHLD or not: cheap, and no exit goes unnoticed
    size_t at = 1;
    if (ctl_) {
      short ev = fds[at++].revents;
      if (ev & (POLLIN | POLLHUP | POLLERR)) on_controller_input();
      if (ctl_ && ctl_->wants_write()) {
        Status st = ctl_->flush();
        if (!st.is_ok()) drop_controller(st.message());
      }
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      auto it = children_.find(pids[i]);
      if (it != children_.end() && (fds[at + i].revents & (POLLIN | POLLHUP | POLLERR))) on_child_input(it->second);
    }
  }
  stop_all(5);
  LOG_INFO("manager %s stopped", o_.name.c_str());
  return exit_status_;
}

void Manager::connect() {
  auto fd = wire::connect_tcp(o_.controller, 5);
  if (!fd) {
    LOG_DEBUG("controller %s: %s (again in %.1f s)", o_.controller.str().c_str(), fd.status().message().c_str(), backoff_);
    next_connect_ = wire::monotonic_seconds() + backoff_;
    backoff_ = std::min(backoff_ * 2, 5.0);
    return;
  }
  ctl_ = std::make_unique<wire::Connection>(std::move(*fd), o_.controller.str());
  welcomed_ = false;
  wire::ManagerHello h;
  h.name = o_.name;
  h.host = o_.listen_host;
  h.capacity = o_.agents;
  h.pid = static_cast<uint32_t>(getpid());
  h.token = o_.token;
  ctl_->send_message(h);
}

void Manager::drop_controller(const std::string& why) {
  LOG_WARN("lost the controller %s (%s): stopping %zu agent(s), reconnecting", o_.controller.str().c_str(), why.c_str(),
           children_.size());
  ctl_.reset();
  welcomed_ = false;
  backoff_ = 0.2;
  next_connect_ = wire::monotonic_seconds() + backoff_;
  for (auto& [pid, c] : children_) kill(pid, SIGTERM);
}

void Manager::send(const std::string& frame_bytes) {
  if (ctl_ && welcomed_) ctl_->send(frame_bytes);
}

void Manager::on_controller_input() {
  Status st = ctl_->receive();
  Status framing = wire::dispatch_frames(*ctl_, [&](const wire::Frame& f) {
    on_frame(f);
    return ctl_ != nullptr;
  });
  if (!framing.is_ok() && ctl_) {
    LOG_ERROR("refused the controller's message: %s", framing.message().c_str());
    return drop_controller("bad input");
  }
  if (!st.is_ok() && ctl_) drop_controller(st.message());
}

void Manager::on_frame(const wire::Frame& f) {
  auto refuse = [&](const Status& why) {
    LOG_ERROR("refused a %s message from the controller: %s", wire::type_name(uint16_t(f.type)), why.message().c_str());
    drop_controller("bad input");
  };
  if (!welcomed_) {
    auto w = wire::expect<wire::ManagerWelcome>(f);
    if (!w && f.type == wire::Type::error) {
      // The controller refused this manager (its name is taken, its token is wrong): trying again would
      // only be refused again, so it ends here, where the one who started it sees why.
      std::string why = "the controller " + o_.controller.str() + " refused manager " + o_.name + ": " +
                        w.status().message();
      LOG_ERROR("%s", why.c_str());
      tell_console("cairnd manager: " + why);
      ctl_.reset();
      stop_ = true;
      exit_status_ = 1;
      return;
    }
    if (!w) return refuse(w.status());
    welcomed_ = true;
    id_ = w->manager_id;
    backoff_ = 0.2;
    LOG_INFO("joined the controller %s as manager %llu", o_.controller.str().c_str(), static_cast<unsigned long long>(id_));
    return;
  }
  switch (f.type) {
    case wire::Type::start_agent: {
      auto m = wire::decode<wire::StartAgent>(f.payload);
      if (!m) return refuse(m.status());
      return start_agent(*m, wire::encode_frame(f.type, f.payload));
    }
    case wire::Type::stop_agent: {
      auto m = wire::decode<wire::StopAgent>(f.payload);
      if (!m) return refuse(m.status());
      for (auto& [pid, c] : children_)
        if (c.agent_id == m->agent_id) {
          LOG_INFO("stopping agent %llu (pid %d)", static_cast<unsigned long long>(c.agent_id), pid);
          kill(pid, SIGTERM);
        }
      return;
    }
    default:
      return refuse(make_error(Code::ERR_FORMAT, "a manager does not take %s messages", wire::type_name(uint16_t(f.type))));
  }
}

void Manager::start_agent(const wire::StartAgent& m, const std::string& raw) {
  if (children_.size() >= o_.agents) {
    send(wire::frame(wire::AgentExit{m.agent_id, -1, "the manager runs its capacity of agents already"}));
    return;
  }
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return;
  }
  std::string log = o_.work_dir + "/agent-" + std::to_string(m.agent_id) + ".log";
  std::string bw = std::to_string(o_.agent_bandwidth_mbs);
  std::vector<std::string> args = {o_.exe, "agent", "--listen", o_.listen_host, "--log", log, "--log-level",
                                   o_.log_level, "--work-dir", o_.work_dir, "--bandwidth", bw};
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // the agent goes with its manager
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(o_.exe.c_str(), argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (pid < 0) {
    close(in[1]), close(out[0]);
    send(wire::frame(wire::AgentExit{m.agent_id, -1, std::string("fork: ") + strerror(errno)}));
    return;
  }
  Child c;
  c.agent_id = m.agent_id;
  c.pid = pid;
  c.pipe = std::make_unique<wire::Connection>(out[0], in[1], "agent " + std::to_string(m.agent_id));
  c.pipe->send(raw);  // its assignment; the pipe stays open until the agent is to go
  c.pipe->flush_all(5).ignore();
  LOG_INFO("started agent %llu (pid %d) for application %llu (%s), log %s", static_cast<unsigned long long>(m.agent_id),
           pid, static_cast<unsigned long long>(m.app_id), m.app_name.c_str(), log.c_str());
  children_.emplace(pid, std::move(c));
}

void Manager::on_child_input(Child& c) {
  Status st = c.pipe->receive();
  Status framing = wire::dispatch_frames(*c.pipe, [&](const wire::Frame& f) {
    if (f.type == wire::Type::agent_up) {
      auto m = wire::decode<wire::AgentUp>(f.payload);
      if (m && m->agent_id == c.agent_id) {
        c.up = true;
        send(wire::frame(*m));
      }
    } else if (f.type == wire::Type::agent_stats) {
      auto m = wire::decode<wire::AgentStats>(f.payload);
      if (m && m->agent_id == c.agent_id) send(wire::frame(*m));
    }
    return true;
  });
  if (!framing.is_ok()) {
    LOG_ERROR("agent %llu: %s", static_cast<unsigned long long>(c.agent_id), framing.message().c_str());
    kill(c.pid, SIGTERM);
    c.pipe.reset();
    return;
  }
  if (!st.is_ok()) c.pipe.reset();  // its stdout closed: it is exiting; reap() reports it
}

void Manager::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = children_.find(pid);
    if (it == children_.end()) continue;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
    std::string reason = WIFSIGNALED(status) ? std::string("killed by signal ") + std::to_string(WTERMSIG(status))
                                             : "exited with status " + std::to_string(code);
    LOG_INFO("agent %llu (pid %d) %s", static_cast<unsigned long long>(it->second.agent_id), pid, reason.c_str());
    send(wire::frame(wire::AgentExit{it->second.agent_id, code, reason}));
    children_.erase(it);
  }
}

void Manager::stop_all(double grace_s) {
  for (auto& [pid, c] : children_) kill(pid, SIGTERM);
  double deadline = wire::monotonic_seconds() + grace_s;
  while (!children_.empty() && wire::monotonic_seconds() < deadline) {
    reap();
    if (!children_.empty()) usleep(20000);
  }
  for (auto& [pid, c] : children_) {
    LOG_WARN("agent %llu (pid %d) did not stop within %.0f s: killed", static_cast<unsigned long long>(c.agent_id), pid,
             grace_s);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  children_.clear();
  if (ctl_) ctl_->flush_all(1).ignore();
}

}  // namespace

int run_manager(const ManagerOptions& o) {
  Manager m(o);
  return m.run();
}

}  // namespace cairn::service
