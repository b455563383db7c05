// A manager: one per checkpoint node. It joins the controller (and keeps trying while the controller
// is away), starts an agent process for each start_agent it is given -- the same cairnd executable,
// `cairnd agent`, its assignment written to the agent's stdin -- and reports what becomes of them:
// agent_up when one listens, agent_stats every half second, agent_exit when one ends. An agent dies
// with its manager (PR_SET_PDEATHSIG, and its stdin closes). When the controller connection breaks, the
// manager stops its agents (their applications fall back to their embedded flushers and register again
// with the controller that comes back) and reconnects.
#pragma once

#include <cstdint>
#include <string>

#include "wire/socket.hpp"

namespace cairn::service {

struct ManagerOptions {
  wire::HostPort controller;
  std::string listen_host = "127.0.0.1";  // the address its agents listen on (and open their fabric endpoints at)
  std::string name;                       // default: the host name
  uint32_t agents = 4;                    // capacity: agents at most
  std::string work_dir;                   // agents' logs and turnstiles; default /tmp/cairnd-manager-<name>
  std::string token;                      // the deployment's shared secret, if the controller wants one
  double agent_bandwidth_mbs = 0;         // each agent moves at most this many MB/s (0: no limit)
  std::string log_level = "info";
  std::string exe;                        // the cairnd executable for agents (default /proc/self/exe)
};

int run_manager(const ManagerOptions& o);

}  // namespace cairn::service
