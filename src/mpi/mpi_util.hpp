// Every MPI call goes through CAIRN_MPI, which turns a failure into an ERR_MPI Status naming the call
// and where it was made.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn {

inline Status mpi_status(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return make_error(Code::ERR_MPI, "%s failed (%s:%d): %.*s", call, file, line, len, text);
}

#define CAIRN_MPI(call) CAIRN_TRY(::cairn::mpi_status((call), #call, __FILE__, __LINE__))

// All ranks agree: every rank passes its Status; all get the first failure's code (lowest rank's
// message, prefixed with its rank) or success.
Status agree(MPI_Comm comm, const Status& mine);

// Every rank's `mine`, concatenated in rank order, on every rank (MPI_Allgather of the lengths, then
// MPI_Allgatherv). Collective over comm.
Status allgather_u64(MPI_Comm comm, const std::vector<uint64_t>& mine, std::vector<uint64_t>* all);

// The ranks of comm on this host and the cores they may run on (the union of their affinity masks).
// Collective over comm.
struct HostShare {
  int ranks = 1;
  int cores = 1;
  bool outnumbered() const { return ranks > cores; }
  // Threads each rank may keep busy without taking a core from another: cores / ranks, in [1, cap].
  int threads_per_rank(int cap) const { return std::clamp(cores / std::max(ranks, 1), 1, std::max(cap, 1)); }
};
Status host_share(MPI_Comm comm, HostShare* out);

}  // namespace cairn
