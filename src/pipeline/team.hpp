// The ranks of the job, as the pipeline's stages see them: every decision about a version is made by
// all of them together. The MPI implementation (pipeline/mpi/team_mpi) runs on the pipeline's own
// communicator; tests use one that plays the other ranks.
#pragma once

#include <cstdint>

#include "base/status.hpp"

namespace cairn::pipeline {

class Team {
 public:
  virtual ~Team() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank passes its outcome; every rank gets the first failure (the lowest failing rank's code and
  // message, prefixed with its rank) or success. ERR_MPI: the agreement itself broke.
  virtual Status agree(const Status& mine) = 0;
  // The sums of every rank's mine[0..n), element by element, on rank 0 (sum[] is 0 elsewhere): one
  // reduction for all the figures of a stage.
  virtual Status sum_at_root(const uint64_t* mine, uint64_t* sum, int n) = 0;
  Status sum_at_root(uint64_t mine, uint64_t* sum) { return sum_at_root(&mine, sum, 1); }
  // Rank 0's *flag, on every rank.
  virtual Status broadcast_flag(int* flag) = 0;
};

}  // namespace cairn::pipeline
