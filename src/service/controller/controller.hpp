// The controller: one per cluster or allocation. It keeps the registry -- checkpoint nodes (managers),
// agents, applications -- and makes the decisions: where an application's agents run (placement.hpp),
// which agent serves which rank, a replacement when an agent or a whole manager is lost, and the end of
// an application's agents when its ranks are gone. It never touches checkpoint data. Everything it
// knows, `cairn status` shows (status_report.cpp).
//
// One thread, one poll loop over TCP connections. A connection's first message says what it is: a
// rank (register_rank), a manager (manager_hello) or a client (status_request). Any malformed or
// unexpected message is refused with an error message, logged with its peer, and the connection is
// closed; the controller keeps running.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "service/controller/placement.hpp"
#include "wire/control_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::service {

struct ControllerOptions {
  wire::HostPort listen;
  std::string address_file;                 // written with the bound HOST:PORT once listening
  std::string token;                        // managers must present it (empty: any manager is accepted)
  std::vector<std::string> allow_prefixes;  // applications' prefixes must lie under one (empty: anywhere)
  Policy policy = Policy::stacking;
  uint32_t max_agents_per_app = 64;
  std::map<std::string, std::string> chains;  // application name ("*": the others) -> its agents' chain
  // Dynamic agents (scaling.hpp): scale each application's agents so that a version drains within
  // scale_fraction of its interval (off: each application keeps the agents it asked for).
  bool scale_agents = false;
  double scale_fraction = 0.5;
  // Run (sh -c) when a new agent finds every manager full, to ask for one more checkpoint node; at most
  // once per scale_up_interval_s while the need lasts (empty: never).
  std::string scale_up_command;
  double scale_up_interval_s = 60;
  // The chain of application `name`: its own, else "*"'s, else the default (agent/stage_chain.hpp).
  std::string chain_for(const std::string& name) const;
};

int run_controller(const ControllerOptions& o);

class Controller {
 public:
  explicit Controller(ControllerOptions o) : o_(std::move(o)) {}
  int run();

 private:
  static constexpr uint32_t kMaxFailedStarts = 3;  // a slot whose agent fails to start this often in a row gets no more
  enum class Role { unknown, rank, manager, client };
  struct Peer {
    uint64_t id = 0;
    std::unique_ptr<wire::Connection> conn;
    Role role = Role::unknown;
    uint64_t app = 0, manager = 0;
    uint32_t rank = 0;
    bool closing = false;  // close once the output is written
  };
  // stopping: asked to stop (a dropped slot no rank uses, an application that left); it holds its place on
  // its manager until the manager reports its exit, and then the place goes to a slot that found no room.
  enum class AgentState { starting, up, stopping, gone };
  struct AgentRec {
    uint64_t id = 0, app = 0, manager = 0;
    uint32_t slot = 0;
    AgentState state = AgentState::starting;
    uint32_t pid = 0;
    std::string address, why;
    wire::AgentStats stats;
    double started = 0;
  };
  struct ManagerRec {
    uint64_t id = 0, peer = 0;
    std::string name, host;
    uint32_t capacity = 0, pid = 0;
    double joined = 0;
    double peak_bps = 0;  // the highest drain bandwidth its agents showed together (placement: bandwidth)
  };
  struct AppRec {
    uint64_t id = 0;
    wire::RegisterRank reg;  // the first rank's registration: name, key, prefix, transfer settings
    uint32_t agents = 1;     // k
    std::vector<uint64_t> slot_agent;           // slot -> current agent (0: none)
    std::vector<uint32_t> slot_failures;        // consecutive failed starts per slot
    std::map<uint32_t, uint64_t> rank_peer;     // connected ranks
    std::map<uint32_t, uint64_t> rank_bytes;
    double interval_s = 0;  // measured by rank 0 (its last two versions), else registered
    std::map<uint32_t, std::set<uint64_t>> waiting;  // slot -> peers waiting for its agent
    double registered = 0;
    // dynamic agents (controller_scale.cpp)
    std::map<uint32_t, uint64_t> rank_agent;         // the agent each rank took (its last answer)
    std::map<uint32_t, std::set<uint64_t>> offered;  // slot -> peers to offer its agent once it is up
    std::set<uint64_t> retiring;                     // agents of dropped slots, stopped once no rank uses them
    double agent_bps = 0;                            // one agent's measured drain bandwidth
    double last_scaled = 0;
    uint32_t scale_changes = 0;
    std::string scale_why;
  };

  // connections (controller.cpp)
  void accept_all();
  void on_input(Peer& p);
  void on_frame(Peer& p, const wire::Frame& f);
  template <class M>
  void handle(Peer& p, const wire::Frame& f, std::initializer_list<Role> allowed,
              void (Controller::*handler)(Peer&, const M&));
  void on_status(Peer& p, const wire::StatusRequest& m);
  void refuse(Peer& p, const Status& why);
  void close_peer(uint64_t id, const std::string& why);
  void send(uint64_t peer, const std::string& frame_bytes);
  // managers (controller.cpp)
  void on_manager_hello(Peer& p, const wire::ManagerHello& m);
  void on_agent_up(Peer& p, const wire::AgentUp& m);
  void on_agent_exit(Peer& p, const wire::AgentExit& m);
  void on_agent_stats(Peer& p, const wire::AgentStats& m);
  void manager_lost(uint64_t manager, const std::string& why);
  // applications (controller_apps.cpp)
  void on_register(Peer& p, const wire::RegisterRank& m);
  void on_reassign(Peer& p, const wire::Reassign& m);
  void on_unregister(Peer& p, const wire::Unregister& m);
  void on_usage(Peer& p, const wire::RankUsage& m);
  void rank_gone(Peer& p);
  Status prefix_allowed(const wire::RegisterRank& m) const;
  AppRec* find_app_by_key(const wire::AppKey& key);
  AppRec* own_app(Peer& p, const char* what, uint64_t app_id, uint32_t rank, const wire::AppKey& key);
  void start_slots(AppRec& app, const std::vector<uint32_t>& slots);
  void start_empty_slots();  // every application's slots without an agent, once a place may be free
  void stop_agent(AgentRec& a);
  void agent_lost(AgentRec& a, const std::string& why);
  void answer_waiting(AppRec& app, uint32_t slot);
  void answer_rank(AppRec& app, uint64_t peer, uint32_t rank);
  bool assignment(const AppRec& app, uint32_t slot, wire::Assigned* out) const;
  void retire_app(uint64_t app, const std::string& why);
  std::vector<NodeLoad> node_loads() const;
  // dynamic agents (controller_scale.cpp)
  void rescale(AppRec& app);
  void change_agents(AppRec& app, uint32_t k, const std::string& why);
  bool starving(const AppRec& app) const;  // ranks connected, no agent, and a slot that may still get one
  uint32_t free_places() const;            // on every checkpoint node together
  void give_way();                         // an application without an agent gets one of another's
  bool scale_settled(const AppRec& app) const;
  void offer(AppRec& app, uint64_t peer, uint32_t rank);
  void offer_waiting(AppRec& app, uint32_t slot);
  void stop_unused(AppRec& app);
  void need_node(const std::string& why);
  void reap_scale_up();
  AppDemand demand(const AppRec& app) const;
  // cairn status (status_report.cpp)
  std::string status_json() const;

  ControllerOptions o_;
  fs::Fd listen_, signals_;
  std::string address_;
  double started_ = 0;
  std::map<uint64_t, Peer> peers_;
  std::map<uint64_t, ManagerRec> managers_;
  std::map<uint64_t, AgentRec> agents_;
  std::map<uint64_t, AppRec> apps_;
  std::set<uint64_t> owed_;  // applications without an agent that another gives one up to
  uint64_t next_peer_ = 1, next_manager_ = 1, next_agent_ = 1, next_app_ = 1;
  bool stop_ = false;
  // scale_up_command
  int scale_up_pid_ = 0;
  double scale_up_last_ = -1e9;
  uint32_t scale_up_runs_ = 0;
  std::string scale_up_state_ = "never run";
};

}  // namespace cairn::service
