// The job state file (<prefix>/.cairn/state), written by rank 0 so that the launcher and `cairn watch`
// know where a job is without talking to it (its codec: base/state_file.hpp); beside it the job history
// (<prefix>/.cairn/history, base/history.hpp), the events of every launch, appended by the same rank;
// and the failure-injection rendezvous used by `cairn run --kill-node` (protocol in docs/launcher.md).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/history.hpp"
#include "base/layout.hpp"

namespace cairn {

class JobState {
 public:
  void open(const Layout& layout, bool writer);  // only rank 0 is a writer (of the history too)
  // Set keys and rewrite the file (atomically; cheap: a few hundred bytes).
  void set(const std::map<std::string, std::string>& kv);
  void set(const std::string& key, const std::string& value) { set({{key, value}}); }
  // The job history; on ranks other than 0 every call on it does nothing.
  history::Writer& history() { return history_; }

 private:
  history::Writer history_;
  std::mutex mu_;
  bool writer_ = false;
  std::string path_;
  std::map<std::string, std::string> kv_;
};

// Failure injection: active only when CAIRN_INJECT=<phase>:<version> and CAIRN_INJECT_DIR are set
// (by `cairn run` for the ranks of the node it kills).
class FaultInjector {
 public:
  // `state_path`: the job state file, read by point() to wait for rank 0's bookkeeping of a version.
  void init(int rank, std::string state_path);
  // At phase `phase` of version v: if it matches, announce it and wait to be killed. With `settled_key`
  // ("l1" or "l2"), first wait (bounded) until rank 0 has recorded the version at that level in the
  // state file, which it does after the history line: the other ranks leave the last collective of a
  // version before rank 0 writes them, and a node killed in that gap would lose lines of a version that
  // is complete, where "compute" promises a failure after the version's bookkeeping is done.
  void point(const char* phase, uint64_t v, const char* settled_key = nullptr) const;

 private:
  void wait_settled(const char* key, uint64_t v) const;

  bool active_ = false;
  std::string phase_, dir_, state_path_;
  uint64_t version_ = 0;
  int rank_ = 0;
};

}  // namespace cairn
