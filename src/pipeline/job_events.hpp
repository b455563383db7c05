// The events sink of a running job: rank 0 writes the job state file and the job history (and logs a
// failed version); every other rank does nothing.
#pragma once

#include <string>

#include "base/job_state.hpp"
#include "pipeline/events.hpp"

namespace cairn::pipeline {

class JobEvents final : public EventSink {
 public:
  // `state` is borrowed; `prefix` names the L3 directory in messages.
  JobEvents(JobState* state, int rank, std::string prefix) : state_(state), rank_(rank), prefix_(std::move(prefix)) {}

  void sealed(const Version& v) override;
  void local(const Version& v, uint64_t all_bytes) override;
  void protected_l2(const Version& v, double start_s, uint64_t all_redundancy_bytes, const char* scheme) override;
  void flush_began(uint64_t v, bool at_finalize) override;
  void flushed(const Version& v, const char* via) override;
  void failed(uint64_t v, int level, const std::string& why) override;

 private:
  bool writer() const { return rank_ == 0; }
  JobState* state_;
  int rank_;
  std::string prefix_;
};

}  // namespace cairn::pipeline
