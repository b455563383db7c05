// What the stages report as a version moves: one sink, so that the job state file and the job history
// are written in one place (pipeline/job_events), and the stages carry no rank-0 checks of their own.
// Every rank calls every method; an implementation decides who writes (the job's rank 0).
#pragma once

#include <cstdint>
#include <string>

#include "pipeline/version.hpp"

namespace cairn::pipeline {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // The worker began with version v (sealed on this rank).
  virtual void sealed(const Version& v) = 0;
  // Complete at L1 on every rank; all_bytes over every rank, all_copied of them copied into the slots (an
  // incremental snapshot leaves the unchanged ones in place); both known on rank 0.
  virtual void local(const Version& v, uint64_t all_bytes, uint64_t all_copied) = 0;
  // What L2 held and moved for a version, over every rank (known on rank 0): the redundancy data, the
  // bytes the exchanges sent, and those full exchanges would have sent (both 0: not counted).
  struct L2Bytes {
    uint64_t redundancy = 0, sent = 0, full = 0;
  };
  // Protected at L2 on every rank; the protect stage began at start_s (seconds since the epoch).
  virtual void protected_l2(const Version& v, double start_s, const L2Bytes& all, const char* scheme) = 0;
  // Rank 0's flusher begins with version v (at_finalize: the flush of cairn_finalize).
  virtual void flush_began(uint64_t v, bool at_finalize) = 0;
  // Committed in L3; `via` is the flusher's name.
  virtual void flushed(const Version& v, const char* via) = 0;
  // Version v failed at `level` (1: discarded, 2: not protected, 3: not flushed) for the reason given.
  virtual void failed(uint64_t v, int level, const std::string& why) = 0;
};

}  // namespace cairn::pipeline
