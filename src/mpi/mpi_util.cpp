#include <sched.h>

#include <cstring>
#include <vector>

#include "mpi/mpi_util.hpp"

#include "base/log.hpp"

namespace cairn {

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(n));
}

Status mpi_call_failed(const char* op, const char* call, int rc, int peer) {
  if (peer >= 0)
    return make_error(Code::ERR_MPI, "%s: %s with member %d failed: %s", op, call, peer,
                      mpi_error_text(rc).c_str());
  return make_error(Code::ERR_MPI, "%s: %s failed: %s", op, call, mpi_error_text(rc).c_str());
}

Status ErrorsReturnScope::enter(MPI_Comm comm, const char* op) {
  op_ = op;
  int rc = MPI_Comm_get_errhandler(comm, &saved_);
  if (rc != MPI_SUCCESS) return mpi_call_failed(op, "MPI_Comm_get_errhandler", rc);
  comm_ = comm;
  rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) return mpi_call_failed(op, "MPI_Comm_set_errhandler", rc);
  return Status::ok();
}

ErrorsReturnScope::~ErrorsReturnScope() {
  if (comm_ == MPI_COMM_NULL) return;
  int rc = MPI_Comm_set_errhandler(comm_, saved_);
  if (rc == MPI_SUCCESS) rc = MPI_Errhandler_free(&saved_);
  if (rc != MPI_SUCCESS) LOG_WARN("%s: restoring the error handler failed: %s", op_, mpi_error_text(rc).c_str());
}

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

Status allgather_u64(MPI_Comm comm, const std::vector<uint64_t>& mine, std::vector<uint64_t>* all) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  CAIRN_MPI(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) displs[static_cast<size_t>(r)] = total, total += counts[static_cast<size_t>(r)];
  all->assign(static_cast<size_t>(total), 0);
  CAIRN_MPI(MPI_Allgatherv(mine.data(), n, MPI_UINT64_T, all->data(), counts.data(), displs.data(), MPI_UINT64_T, comm));
  return Status::ok();
}

Status host_share(MPI_Comm comm, HostShare* out, bool busy) {
  MPI_Comm host = MPI_COMM_NULL;
  CAIRN_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int here = 1;
  MPI_Comm_size(host, &here);
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine);
  int rc = MPI_Allreduce(&mine, &all, static_cast<int>(sizeof mine), MPI_BYTE, MPI_BOR, host);
  int me = busy ? 1 : 0, busy_here = 0;
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&me, &busy_here, 1, MPI_INT, MPI_SUM, host);
  // Which ranks of comm share this host: the host communicator's ranks, translated.
  std::vector<int> local(static_cast<size_t>(here)), global(static_cast<size_t>(here), MPI_UNDEFINED);
  for (int i = 0; i < here; ++i) local[static_cast<size_t>(i)] = i;
  MPI_Group host_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
  if (rc == MPI_SUCCESS) rc = MPI_Comm_group(host, &host_group);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_group(comm, &comm_group);
  if (rc == MPI_SUCCESS) rc = MPI_Group_translate_ranks(host_group, here, local.data(), comm_group, global.data());
  if (host_group != MPI_GROUP_NULL) MPI_Group_free(&host_group);
  if (comm_group != MPI_GROUP_NULL) MPI_Group_free(&comm_group);
  MPI_Comm_free(&host);
  CAIRN_MPI(rc);
  std::sort(global.begin(), global.end());
  out->here = std::move(global);
  out->ranks = here;
  out->busy = busy_here;
  out->own_cores = std::max(1, CPU_COUNT(&mine));
  out->cores = std::max(1, CPU_COUNT(&all));
  return Status::ok();
}

}  // namespace cairn
