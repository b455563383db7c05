#include "redundancy/exchange/set_protector.hpp"

#include <algorithm>
#include <cstdio>

#include "mpi/mpi_util.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_record.hpp"

namespace cairn::redundancy {

Status SetProtector::exchange(const pipeline::Version& v, const Status& landed) {
  exchanged_ = v.number;
  red_bytes_ = 0;
  steps_ = skipped_ = 0, sent_ = full_ = 0;  // no note of an earlier version's exchange
  exchange_status_ = [&]() -> Status {
    const size_t n = members_.size();
    // Every member's length: the manifests (with the hashes, not ready yet) follow in protect().
    uint64_t mine = v.manifest.total_size;
    std::vector<uint64_t> lens64(n);
    CAIRN_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, lens64.data(), 1, MPI_UINT64_T, comm_));
    std::vector<size_t> lens(lens64.begin(), lens64.end());
    const size_t max_len = *std::max_element(lens.begin(), lens.end());
    const uint64_t red_len = code_->redundancy_len(max_len);
    Status ready = landed;
    MappedFile* red = nullptr;
    if (ready.is_ok()) {
      auto r = cache_->red(v.slot, std::max<uint64_t>(red_len, 1));
      if (r.is_ok()) red = *r;
      ready = r.status();
    }
    // The whole set enters the exchange or none of it does: a member without its bytes or its buffer
    // must not leave the others waiting inside encode_set.
    CAIRN_TRY(agree(comm_, ready));
    red_bytes_ = red_len;
    ChangedChunks changed;
    CAIRN_ASSIGN_OR_RETURN(only, changes_only(v, lens, &changed));
    EncodeReport report;
    Status st = encode_set(comm_, *code_, v.data, v.manifest.total_size, lens, red->data(), exchange_chunk_,
                                       only ? &changed : nullptr, &report);
    steps_ = report.steps, skipped_ = report.skipped, sent_ = report.sent, full_ = report.full;
    return st;
  }();
  return exchange_status_.code() == Code::ERR_MPI ? exchange_status_ : Status::ok();
}

// The encode may move only what changed when, on every member: the slot held the same version, protected
// at L2 (so the slot's redundancy data is that version's, whole), and this version's snapshot knows its
// changed chunks before the seal: an incremental copy reported every chunk's hash, or copy-on-write's
// write tracking the chunks written since. Then each member's changed chunks are gathered. A failure half-way leaves the redundancy data
// a mix, but of this version's own slot only: the version does not count, and the newest protected one
// lies in another slot with its own (docs/architecture.md).
Result<bool> SetProtector::changes_only(const pipeline::Version& v, const std::vector<size_t>& lens,
                                        ChangedChunks* changed) {
  // Which chunks changed: the snapshot's hashes of every chunk against the held ones (an incremental
  // copy), or the chunks written since the held version (copy-on-write's write tracking).
  const auto& now = v.snapshot.chunk_hashes;
  const auto& written = v.snapshot.chunk_changed;
  const bool hashed = !now.empty() && now.size() == v.held_hashes.size() && v.snapshot.chunk_known.size() == now.size() &&
                      std::all_of(v.snapshot.chunk_known.begin(), v.snapshot.chunk_known.end(), [](uint8_t k) { return k; });
  const bool tracked = !written.empty() && written.size() == v.held_hashes.size();
  const bool known = hashed || tracked;
  const uint64_t mine[2] = {known && v.held_protected ? v.held_version : 0, v.manifest.chunk_size};
  const size_t n = members_.size();
  std::vector<uint64_t> all(2 * n);
  CAIRN_MPI(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm_));
  for (size_t x = 0; x < n; ++x)
    if (all[2 * x] == 0 || all[2 * x] != all[0] || all[2 * x + 1] != all[1] || all[1] == 0) return false;
  const uint64_t cs = all[1];
  std::vector<int> counts(n), displs(n);
  int total = 0;
  for (size_t x = 0; x < n; ++x) {
    counts[x] = static_cast<int>((lens[x] + cs - 1) / cs);
    displs[x] = total;
    total += counts[x];
  }
  std::vector<uint8_t> bits = written, gathered(static_cast<size_t>(total) + 1);
  if (hashed) {
    bits.resize(now.size());
    for (size_t i = 0; i < now.size(); ++i) bits[i] = now[i] != v.held_hashes[i];
  }
  CAIRN_MPI(MPI_Allgatherv(bits.data(), static_cast<int>(bits.size()), MPI_BYTE, gathered.data(), counts.data(),
                           displs.data(), MPI_BYTE, comm_));
  changed->chunk_size = static_cast<uint32_t>(cs);
  changed->chunks.clear();
  for (size_t x = 0; x < n; ++x)
    changed->chunks.emplace_back(gathered.begin() + displs[x], gathered.begin() + displs[x] + counts[x]);
  return true;
}

std::string SetProtector::exchange_note() const {
  if (steps_ == 0 || (skipped_ == 0 && sent_ >= full_)) return "";  // a full exchange
  char sent[96];
  snprintf(sent, sizeof sent, ", %.2f of %.2f MiB sent", static_cast<double>(sent_) / (1 << 20),
           static_cast<double>(full_) / (1 << 20));
  return ", changes only: " + std::to_string(steps_ - skipped_) + " of " + std::to_string(steps_) + " steps" + sent;
}

Status SetProtector::protect(const pipeline::Version& v, uint64_t* redundancy_bytes) {
  if (exchanged_ != v.number) CAIRN_TRY(exchange(v, Status::ok()));  // nobody exchanged it ahead
  CAIRN_TRY(exchange_status_);
  *redundancy_bytes = red_bytes_;
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
  SetRecord rec;
  rec.scheme = code_->scheme();
  rec.n = static_cast<uint32_t>(n);
  rec.m = static_cast<uint32_t>(code_->m());
  for (int i = 0; i < n; ++i) {
    rec.ranks.push_back(static_cast<uint32_t>(members_[static_cast<size_t>(i)]));
    rec.manifests.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]),
                                       static_cast<size_t>(mlen[static_cast<size_t>(i)])));
  }
  return cache_->write_set(v.number, encode_set_record(rec));
}

}  // namespace cairn::redundancy
