#include "redundancy/exchange/set_rebuild.hpp"

#include <algorithm>

#include "mpi/mpi_util.hpp"
#include "redundancy/exchange/set_exchange.hpp"

namespace cairn::redundancy {

Result<SetRebuildPlan> share_set_record(MPI_Comm comm, int first_survivor, const std::string& record_bytes,
                                        const std::optional<SetExpectation>& expect, uint64_t version) {
  int me = 0, n = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  std::string bytes = me == first_survivor ? record_bytes : std::string();
  unsigned long long len = bytes.size();
  CAIRN_MPI(MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, first_survivor, comm));
  bytes.resize(len);
  if (len) CAIRN_MPI(MPI_Bcast(bytes.data(), static_cast<int>(len), MPI_CHAR, first_survivor, comm));
  const std::string what = "set record of version " + std::to_string(version);
  auto rec = decode_set_record(bytes);
  if (!rec) return rec.status().prefixed(what);
  SetRebuildPlan plan;
  plan.record = std::move(rec).value();
  if (plan.record.n != static_cast<uint32_t>(n) || plan.record.manifests.size() != static_cast<size_t>(n))
    return make_error(Code::ERR_UNRECOVERABLE, "%s: %u members recorded, %d rebuilding", what.c_str(), plan.record.n, n);
  if (expect) {
    bool same = plan.record.scheme == expect->scheme && plan.record.m == static_cast<uint32_t>(expect->m) &&
                expect->members.size() == static_cast<size_t>(n);
    for (int i = 0; same && i < n; ++i)
      same = plan.record.ranks[static_cast<size_t>(i)] == static_cast<uint32_t>(expect->members[static_cast<size_t>(i)]);
    if (!same)
      return make_error(Code::ERR_UNRECOVERABLE, "version %llu was protected with other sets or another scheme",
                        static_cast<unsigned long long>(version));
  }
  for (int i = 0; i < n; ++i) {
    const std::string& mb = plan.record.manifests[static_cast<size_t>(i)];
    auto mi = decode_manifest(mb.data(), mb.size());
    if (!mi) return mi.status().prefixed(what);
    plan.lens.push_back(mi->total_size);
    if (i == me) plan.mine = std::move(mi).value();
  }
  auto code = SetCode::make(plan.record.scheme, n, static_cast<int>(plan.record.m));
  if (!code) return code.status().prefixed(what);
  plan.redundancy_len = std::max<size_t>(code->redundancy_len(*std::max_element(plan.lens.begin(), plan.lens.end())), 1);
  return plan;
}

Status rebuild_members(MPI_Comm comm, const SetCode& code, const std::vector<bool>& lost, const SetRebuildPlan& plan,
                       const Status& ready, uint8_t* data, uint8_t* red, size_t exchange_chunk, const std::string& what,
                       bool verify_lost, RebuildPart part, bool gentle, const Place& place) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  CAIRN_TRY(agree(comm, ready));  // the whole set exchanges, or none of it
  CAIRN_TRY(rebuild_set(comm, code, lost, data, plan.lens, red, exchange_chunk, part, gentle, place));
  if (verify_lost && lost[static_cast<size_t>(me)])
    CAIRN_TRY(verify_stream(plan.mine, data, plan.mine.total_size).prefixed(what));
  return Status::ok();
}

}  // namespace cairn::redundancy
