// The events of a running job, and the one place that writes them: rank 0 writes the job state file and
// the job history (docs/format.md) and logs a failed version; every other rank does nothing. The
// pipeline reports its versions' progress here (EventSink); the runtime its start, restarts, exit
// requests and end.
#pragma once

#include <atomic>
#include <string>

#include "base/job_state.hpp"
#include "pipeline/events.hpp"

namespace cairn::pipeline {

class JobEvents final : public EventSink {
 public:
  // `state` is borrowed; `prefix` names the L3 directory in messages.
  JobEvents(JobState* state, int rank, std::string prefix) : state_(state), rank_(rank), prefix_(std::move(prefix)) {}

  void sealed(const Version& v) override;
  void local(const Version& v, uint64_t all_bytes, uint64_t all_copied) override;
  void protected_l2(const Version& v, double start_s, const L2Bytes& all, const char* scheme) override;
  void flush_began(uint64_t v, bool at_finalize) override;
  void flushed(const Version& v, const char* via) override;
  void failed(uint64_t v, int level, const std::string& why) override;

  // The job began (the history's start line) and computes (the state file's phase and description).
  void began(const history::StartInfo& info);
  void computing(int nranks, const char* redundancy, uint64_t version, const std::string& cache);
  // cairn_restart_available (or cairn_have_restart) found a version: the restart's clock starts.
  void restart_found();
  // Version v is restored from `level` (1..3); `via`: who read an L3 version ("agents", "application"),
  // nullptr when not said. The restart call began at start_ns (the history's clock).
  void restart_level(uint64_t v, int level);
  void restart_via(const char* via);
  void restarted(uint64_t v, int level, int64_t start_ns);
  void restart_rejected(uint64_t v, int level);
  // Checkpoints exist but none can be rebuilt and verified: phase=unrecoverable and the reason, so that
  // the launcher stops relaunching a job that would meet the same checkpoints (docs/format.md); until
  // the application, going on regardless, seals a version (phase=compute again).
  void unrecoverable(const std::string& why);
  // ... and with if_unrecoverable = start_over, the versions passed over: started_over=<what and why>.
  void started_over(const std::string& what);
  // The application passed valid = 0 for version v (cairn_complete_output).
  void discarded(uint64_t v, const std::string& why);
  void exit_requested(const std::string& why);
  // cairn_finalize: the phase and the history's end line.
  void finalized(const std::string& status, uint64_t versions, bool exit_requested);

 private:
  bool writer() const { return rank_ == 0; }
  std::atomic<bool> unrecoverable_{false};  // set by the application's thread, read by the pipeline's
  JobState* state_;
  int rank_;
  std::string prefix_;
};

}  // namespace cairn::pipeline
