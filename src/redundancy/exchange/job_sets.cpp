// A job's L2 sets over MPI (job_sets.hpp).
#include "redundancy/exchange/job_sets.hpp"

#include <cstring>

#include "base/log.hpp"
#include "mpi/mpi_util.hpp"

namespace cairn::redundancy {

Status place_job_sets(MPI_Comm comm, MPI_Comm split_from, const std::string& node, Redundancy scheme, int set_size,
                      int rs_parity, JobSets* out) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  constexpr int kNameLen = 256;
  std::vector<char> names(static_cast<size_t>(nranks) * kNameLen, 0);
  char mine[kNameLen] = {0};
  strncpy(mine, node.c_str(), kNameLen - 1);
  CAIRN_MPI(MPI_Allgather(mine, kNameLen, MPI_CHAR, names.data(), kNameLen, MPI_CHAR, comm));
  out->node_of_rank.assign(static_cast<size_t>(nranks), "");
  for (int r = 0; r < nranks; ++r) out->node_of_rank[static_cast<size_t>(r)] = std::string(&names[static_cast<size_t>(r) * kNameLen]);
  std::vector<std::string> warnings;
  out->placement = place_sets(out->node_of_rank, scheme, set_size, rs_parity, rank, &warnings);
  if (rank == 0)
    for (const auto& w : warnings) LOG_WARN("%s", w.c_str());
  const auto& p = out->placement;
  CAIRN_MPI(MPI_Comm_split(split_from, p.enabled ? p.my_set : MPI_UNDEFINED, p.my_member, &out->set_comm));
  if (p.enabled) {
    auto code = SetCode::make(scheme, static_cast<int>(p.members[static_cast<size_t>(p.my_set)].size()), p.m);
    CAIRN_TRY(agree(comm, code.is_ok() ? Status::ok() : code.status()));
    out->code = std::move(code).value();
  }
  return Status::ok();
}

}  // namespace cairn::redundancy
