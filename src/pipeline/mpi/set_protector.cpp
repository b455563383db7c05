#include "pipeline/mpi/set_protector.hpp"

#include <algorithm>

#include "mpi/mpi_util.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_record.hpp"

namespace cairn::pipeline {

Status SetProtector::protect(const Version& v, uint64_t* redundancy_bytes) {
  const int n = static_cast<int>(members_.size());
  // Every member's manifest and length, replicated across the set.
  std::string mine = encode_manifest(v.manifest);
  int my_len = static_cast<int>(mine.size());
  std::vector<int> mlen(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  CAIRN_MPI(MPI_Allgather(&my_len, 1, MPI_INT, mlen.data(), 1, MPI_INT, comm_));
  int total = 0;
  for (int i = 0; i < n; ++i) displs[static_cast<size_t>(i)] = total, total += mlen[static_cast<size_t>(i)];
  std::string all(static_cast<size_t>(total), '\0');
  CAIRN_MPI(MPI_Allgatherv(mine.data(), my_len, MPI_CHAR, all.data(), mlen.data(), displs.data(), MPI_CHAR, comm_));
  redundancy::SetRecord rec;
  rec.scheme = code_->scheme();
  rec.n = static_cast<uint32_t>(n);
  rec.m = static_cast<uint32_t>(code_->m());
  std::vector<size_t> lens;
  for (int i = 0; i < n; ++i) {
    rec.ranks.push_back(static_cast<uint32_t>(members_[static_cast<size_t>(i)]));
    rec.manifests.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]),
                                       static_cast<size_t>(mlen[static_cast<size_t>(i)])));
    auto m = decode_manifest(rec.manifests.back().data(), rec.manifests.back().size());
    if (!m) return m.status();
    lens.push_back(m->total_size);
  }
  size_t max_len = *std::max_element(lens.begin(), lens.end());
  auto red = cache_->red(v.slot, std::max<size_t>(code_->redundancy_len(max_len), 1));
  *redundancy_bytes = code_->redundancy_len(max_len);
  // The whole set enters the exchange or none of it does: a member that could not set up its buffer
  // must not leave the others waiting inside encode_set.
  CAIRN_TRY(agree(comm_, red.status()));
  CAIRN_TRY(redundancy::encode_set(comm_, *code_, v.data, v.manifest.total_size, lens, (*red)->data(), exchange_chunk_));
  return cache_->write_set(v.number, redundancy::encode_set_record(rec));
}

}  // namespace cairn::pipeline
