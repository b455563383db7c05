#include "pipeline/mpi/team_mpi.hpp"

#include "mpi/mpi_util.hpp"

namespace cairn::pipeline {

MpiTeam::MpiTeam(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

// The pipeline's thread reaches each agreement when its own stage is done, often before the other ranks:
// it waits gently (mpi_util.hpp), not in a blocking call that would spin a core the application computes
// on.
Status MpiTeam::agree(const Status& mine) { return cairn::agree(comm_, mine, Waiting::gently); }

Status MpiTeam::sum_at_root(uint64_t mine, uint64_t* sum) {
  unsigned long long in = mine, out = 0;
  MPI_Request req;
  CAIRN_MPI(MPI_Ireduce(&in, &out, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, comm_, &req));
  CAIRN_TRY(wait_gently(&req, "MPI_Ireduce"));
  *sum = rank_ == 0 ? out : 0;
  return Status::ok();
}

Status MpiTeam::broadcast_flag(int* flag) {
  MPI_Request req;
  CAIRN_MPI(MPI_Ibcast(flag, 1, MPI_INT, 0, comm_, &req));
  CAIRN_TRY(wait_gently(&req, "MPI_Ibcast"));
  return Status::ok();
}

}  // namespace cairn::pipeline
