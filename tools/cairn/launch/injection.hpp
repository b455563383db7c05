// The launcher's side of the failure-injection rendezvous (docs/launcher.md, "Failure injection").
// The ranks of the nodes to kill get CAIRN_INJECT=<phase>:<checkpoint> and CAIRN_INJECT_DIR=<dir>;
// each writes <dir>/pid.<rank> at cairn_init and, on reaching the point, <dir>/reached.<rank>, then
// waits to be killed. The launcher polls <dir>, and on the first reached.* kills every pid.* process.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::tool {

class InjectionRendezvous {
 public:
  explicit InjectionRendezvous(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // A fresh, empty directory (stale files of an earlier run would name stale pids).
  Status reset() const;
  // True once some rank has written reached.<rank>.
  bool reached() const;
  // True when every rank of `ranks` has written pid.<rank> (it has passed cairn_init).
  bool pids_written(const std::vector<int>& ranks) const;

  struct KillReport {
    std::vector<int> killed;   // ranks sent SIGKILL (or already gone)
    std::vector<int> missing;  // expected ranks whose pid file never appeared or was refused
  };
  // SIGKILLs the process named by pid.<rank> of each expected rank, waiting up to `grace_seconds` for
  // files still missing. A pid is killed only if that process carries CAIRN_INJECT_DIR=<dir> in its
  // environment (where /proc tells), so a stale or reused pid is never hit.
  KillReport kill_ranks(const std::vector<int>& expected_ranks, double grace_seconds) const;

  void remove() const;

 private:
  std::string dir_;
};

}  // namespace cairn::tool
