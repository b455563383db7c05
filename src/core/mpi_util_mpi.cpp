#include <cstring>
#include <vector>

#include "core/mpi_util.hpp"

namespace cairn {

Status agree(MPI_Comm comm, const Status& mine) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // (failed ? rank : INT_MAX) minimised tells every rank who failed first.
  int candidate = mine.is_ok() ? 0x7fffffff : rank;
  int first = 0;
  CAIRN_MPI(MPI_Allreduce(&candidate, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == 0x7fffffff) return Status::ok();
  int code = mine.c_code();
  CAIRN_MPI(MPI_Bcast(&code, 1, MPI_INT, first, comm));
  char msg[1024] = {0};
  if (rank == first) strncpy(msg, mine.message().c_str(), sizeof msg - 1);
  CAIRN_MPI(MPI_Bcast(msg, sizeof msg, MPI_CHAR, first, comm));
  return Status(static_cast<Code>(code), "rank " + std::to_string(first) + ": " + msg);
}

}  // namespace cairn
