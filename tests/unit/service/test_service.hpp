// A checkpoint service for one test: a controller on a free port of 127.0.0.1 and some managers, real
// cairnd processes (CAIRND_PATH), with their logs in a scratch directory; stopped with SIGTERM when the
// test ends. And a synchronous flusher writing with l3::write_rank, the fallback of the tests.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"
#include "pipeline/flusher.hpp"
#include "wire/control_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::test {

inline pid_t spawn(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

class TestService {
 public:
  // `manager_args` are added to every manager's command line.
  TestService(const std::string& dir, int managers, std::vector<std::string> manager_args = {}) : dir_(dir) {
    fs::remove_tree(dir).ignore();
    EXPECT_TRUE(fs::make_dirs(dir).is_ok());
    std::string af = dir + "/controller.address";
    controller_ = spawn({CAIRND_PATH, "controller", "--listen", "127.0.0.1:0", "--address-file", af, "--log",
                         dir + "/controller.log", "--log-level", "debug"});
    for (int i = 0; i < 200 && !fs::exists(af); ++i) usleep(20000);
    auto text = fs::read_file(af);
    EXPECT_TRUE(text.is_ok()) << "the controller wrote no address file";
    if (text) address_ = text->substr(0, text->find('\n'));
    for (int m = 0; m < managers; ++m) {
      std::vector<std::string> args = {CAIRND_PATH, "manager", "--controller", address_, "--name", "m" + std::to_string(m),
                                       "--work-dir", dir + "/m" + std::to_string(m), "--log-level", "debug"};
      args.insert(args.end(), manager_args.begin(), manager_args.end());
      managers_.push_back(spawn(args));
    }
    for (int i = 0; i < 250; ++i) {
      auto s = status();
      if (s.is_object() && s["managers"].size() == static_cast<size_t>(managers)) return;
      usleep(20000);
    }
    ADD_FAILURE() << "the managers did not join";
  }
  ~TestService() {
    for (pid_t p : managers_) stop(p);
    stop(controller_);
  }
  static void stop(pid_t p) {
    if (p <= 0) return;
    kill(p, SIGTERM);
    int st = 0;
    waitpid(p, &st, 0);
  }
  const std::string& address() const { return address_; }
  pid_t controller_pid() const { return controller_; }
  pid_t manager_pid(int i) const { return managers_[static_cast<size_t>(i)]; }
  void forget_controller() { controller_ = -1; }
  nlohmann::json status() const {
    auto hp = wire::parse_host_port(address_);
    if (!hp) return {};
    auto fd = wire::connect_tcp(*hp, 2);
    if (!fd) return {};
    wire::Connection c(std::move(*fd), address_);
    auto f = wire::request(c, wire::frame(wire::StatusRequest{}), 5);
    if (!f) return {};
    auto r = wire::expect<wire::StatusReply>(*f);
    if (!r) return {};
    return nlohmann::json::parse(r->json, nullptr, false);
  }
  std::string log(const std::string& name) const {
    auto t = fs::read_file(dir_ + "/" + name);
    return t ? *t : "";
  }

 private:
  std::string dir_, address_;
  pid_t controller_ = -1;
  std::vector<pid_t> managers_;
};

// The tests' fallback: writes at post time with l3::write_rank (the embedded flusher's writer).
class WriteRankFlusher : public pipeline::Flusher {
 public:
  WriteRankFlusher(Layout l, l3::WriteOptions o) : layout_(std::move(l)), opts_(std::move(o)) {}
  const char* name() const override { return "embedded"; }
  Result<pipeline::FlushTicket> post(const pipeline::FlushRequest& r) override {
    outcomes_[next_] = l3::write_rank(layout_, *r.manifest, r.data, r.after_data, &opts_);
    ++posted;
    return next_++;
  }
  Status test(pipeline::FlushTicket t, bool* done) override {
    *done = true;
    return take(t);
  }
  Status wait(pipeline::FlushTicket t) override { return take(t); }
  Status cancel(pipeline::FlushTicket t) override { return take(t); }
  int posted = 0;

 private:
  Status take(pipeline::FlushTicket t) {
    auto it = outcomes_.find(t);
    if (it == outcomes_.end()) return make_error(Code::ERR_INVALID_ARG, "unknown ticket");
    Status st = it->second;
    outcomes_.erase(it);
    return st;
  }
  Layout layout_;
  l3::WriteOptions opts_;
  std::map<pipeline::FlushTicket, Status> outcomes_;
  pipeline::FlushTicket next_ = 1;
};

}  // namespace cairn::test
