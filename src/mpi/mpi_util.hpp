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

// The MPI library's text for an error code ("MPI error <rc>" when it has none).
std::string mpi_error_text(int rc);

inline Status mpi_status(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return Status::ok();
  return make_error(Code::ERR_MPI, "%s failed (%s:%d): %s", call, file, line, mpi_error_text(rc).c_str());
}

#define CAIRN_MPI(call) CAIRN_TRY(::cairn::mpi_status((call), #call, __FILE__, __LINE__))

// For code that names its operation rather than its source line (the L2 exchange): the ERR_MPI Status
// of `call` failing with `rc` during `op`, "op: call [with member peer] failed: text" (peer < 0: none).
Status mpi_call_failed(const char* op, const char* call, int rc, int peer = -1);

// Errors must come back as codes, not abort the job: MPI_ERRORS_RETURN on a communicator from enter()
// until the object is destroyed, which puts the communicator's own handler back.
class ErrorsReturnScope {
 public:
  ErrorsReturnScope() = default;
  ErrorsReturnScope(const ErrorsReturnScope&) = delete;
  ErrorsReturnScope& operator=(const ErrorsReturnScope&) = delete;
  ~ErrorsReturnScope();
  // `op` names the operation in errors and in the warning of a failed restore.
  [[nodiscard]] Status enter(MPI_Comm comm, const char* op);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Errhandler saved_ = MPI_ERRHANDLER_NULL;
  const char* op_ = "";
};

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
  int busy = 1;       // ranks of this host that called host_share with busy = true
  int own_cores = 1;  // the cores of this rank's own affinity mask
  std::vector<int> here;  // the ranks of comm on this host, ascending
  bool outnumbered() const { return ranks > cores; }
  bool on_this_host(int rank) const { return std::binary_search(here.begin(), here.end(), rank); }
  // Threads each rank may keep busy without taking a core from another: cores / ranks, in [1, cap].
  int threads_per_rank(int cap) const { return std::clamp(cores / std::max(ranks, 1), 1, std::max(cap, 1)); }
  // The same where only the busy ranks compute and the others mostly wait: cores / busy, in [1, cap].
  int threads_per_busy_rank(int cap) const { return std::clamp(cores / std::max(busy, 1), 1, std::max(cap, 1)); }
};
// Collective over comm. busy: this rank has work for threads_per_busy_rank (the others' count only in ranks).
Status host_share(MPI_Comm comm, HostShare* out, bool busy = true);

}  // namespace cairn
