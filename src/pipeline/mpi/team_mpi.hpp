// The pipeline's team over an MPI communicator (the pipeline's own duplicate of the job's).
#pragma once

#include <mpi.h>

#include "pipeline/team.hpp"

namespace cairn::pipeline {

class MpiTeam final : public Team {
 public:
  explicit MpiTeam(MPI_Comm comm);  // borrowed
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status agree(const Status& mine) override;
  using Team::sum_at_root;
  Status sum_at_root(const uint64_t* mine, uint64_t* sum, int n) override;
  Status broadcast_flag(int* flag) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace cairn::pipeline
