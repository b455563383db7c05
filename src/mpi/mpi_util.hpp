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

// How a thread waits for the other ranks. `spin`: inside the blocking call, which polls a core at full
// speed until every rank has arrived (the application's own thread: what an MPI code expects). `gently`:
// a non-blocking collective tested with a short sleep between tests, so that a background thread
// (cairn's pipeline) that reaches an agreement before the other ranks leaves the core to the
// application meanwhile, and MPI's progress lock to the application's own calls.
enum class Waiting { spin, gently };

// Tests `*req` until it completes, sleeping `pause_us` between tests that find it pending. `call` names
// the operation in the error.
Status wait_gently(MPI_Request* req, const char* call, long pause_us = 20);

// agree() with the chosen way of waiting (same result, same collective calls on every rank).
Status agree(MPI_Comm comm, const Status& mine, Waiting how);

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
