#include "pipeline/mpi/team_mpi.hpp"

#include <algorithm>

#include "mpi/mpi_util.hpp"

namespace cairn::pipeline {

MpiTeam::MpiTeam(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Status MpiTeam::agree(const Status& mine) { return cairn::agree(comm_, mine); }

Status MpiTeam::sum_at_root(const uint64_t* mine, uint64_t* sum, int n) {
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "MPI_UNSIGNED_LONG_LONG holds a uint64_t");
  CAIRN_MPI(MPI_Reduce(mine, sum, n, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, comm_));
  if (rank_ != 0) std::fill(sum, sum + n, 0);
  return Status::ok();
}

Status MpiTeam::broadcast_flag(int* flag) {
  CAIRN_MPI(MPI_Bcast(flag, 1, MPI_INT, 0, comm_));
  return Status::ok();
}

}  // namespace cairn::pipeline
