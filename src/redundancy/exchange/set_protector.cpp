#include "redundancy/exchange/set_protector.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "mpi/mpi_util.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_record.hpp"

namespace cairn::redundancy {

Status SetProtector::exchange(const pipeline::Version& v, const Status& landed) {
  exchanged_ = v.number;
  red_bytes_ = 0;
  steps_ = skipped_ = 0, sent_ = full_ = 0, delta_from_ = 0;  // no note of an earlier version's exchange
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
    DeltaBase base;
    CAIRN_ASSIGN_OR_RETURN(how, plan(v, lens, red_len, &changed, &base));
    EncodeReport report;
    Status st = encode_set(comm_, *code_, v.data, v.manifest.total_size, lens, red->data(), exchange_chunk_,
                           how.only ? &changed : nullptr, &report, how.delta ? &base : nullptr);
    steps_ = report.steps, skipped_ = report.skipped, sent_ = report.sent, full_ = report.full;
    delta_from_ = report.delta ? v.base_version : 0;  // encode_set takes the delta only where it pays
    return st;
  }();
  return exchange_status_.code() == Code::ERR_MPI ? exchange_status_ : Status::ok();
}

namespace {

// Every member's changed chunks (this member's `bits`) into *out.
Status gather_changed(MPI_Comm comm, const std::vector<size_t>& lens, uint64_t cs, std::vector<uint8_t> bits,
                      ChangedChunks* out) {
  // Per member, its number of chunks, and where they start in the gathered bits.
  const size_t n = lens.size();
  std::vector<int> counts(n), displs(n);
  int total = 0;
  for (size_t x = 0; x < n; ++x) {
    counts[x] = static_cast<int>((lens[x] + cs - 1) / cs);
    displs[x] = total;
    total += counts[x];
  }
  std::vector<uint8_t> gathered(static_cast<size_t>(total) + 1);
  CAIRN_MPI(MPI_Allgatherv(bits.data(), static_cast<int>(bits.size()), MPI_BYTE, gathered.data(), counts.data(),
                           displs.data(), MPI_BYTE, comm));
  out->chunk_size = static_cast<uint32_t>(cs);
  out->chunks.clear();
  for (size_t x = 0; x < n; ++x)
    out->chunks.emplace_back(gathered.begin() + displs[x], gathered.begin() + displs[x] + counts[x]);
  return Status::ok();
}

}  // namespace

// Which chunks changed is known before the seal when this version's snapshot reported every chunk's hash
// (an incremental copy), or copy-on-write's write tracking the chunks written since the slot's version.
//
// The encode may move only what changed since the slot's version when, on every member, the slot held
// the same version, protected at L2 (so the slot's redundancy data is that version's, whole).
//
// A delta update (partner, and xor and rs with k > 1) needs, on every member, the same delta base B (Version::
// base_version): still recorded in its slot and protected, with this version's lengths, and the chunks
// changed since B known: the hashes against B's, or, with write tracking, the chunks written since the
// slot's version plus those where that version and B differ, a superset which the bytes of the two
// slots then make exact.
//
// Either way a failure half-way leaves the redundancy data a mix, but of this version's own slot only: the
// version does not count, and the newest protected one (B, when there is one) lies in another slot with
// its own, which the update only reads (docs/architecture.md).
Result<SetProtector::Plan> SetProtector::plan(const pipeline::Version& v, const std::vector<size_t>& lens,
                                             uint64_t red_len, ChangedChunks* changed, DeltaBase* base) {
  const auto& now = v.snapshot.chunk_hashes;
  const auto& written = v.snapshot.chunk_changed;
  const auto& held = v.held_hashes;
  const bool all_hashed = !now.empty() && v.snapshot.chunk_known.size() == now.size() &&
                          std::all_of(v.snapshot.chunk_known.begin(), v.snapshot.chunk_known.end(), [](uint8_t k) { return k; });
  const bool tracked = !written.empty() && written.size() == held.size();
  auto differ = [](const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
    std::vector<uint8_t> bits(a.size());
    for (size_t i = 0; i < a.size(); ++i) bits[i] = a[i] != b[i];
    return bits;
  };
  std::vector<uint8_t> held_bits, base_bits;
  bool held_known = true;
  if (all_hashed && now.size() == held.size()) held_bits = differ(now, held);
  else if (tracked) held_bits = written;
  else held_known = false;

  bool base_known = false;
  const MappedFile *base_data = nullptr, *base_red = nullptr;
  const auto& bh = v.base_hashes;
  const bool by_delta = code_->scheme() == Redundancy::partner || code_->k() > 1;  // DeltaBase
  if (by_delta && v.base_version != 0 && !bh.empty()) {
    if (all_hashed && now.size() == bh.size()) {
      base_bits = differ(now, bh), base_known = true;
    } else if (tracked && bh.size() == held.size()) {
      base_bits = differ(held, bh), base_known = true;
      for (size_t i = 0; i < written.size(); ++i) base_bits[i] |= written[i];
    }
    const bool superset = base_known && !(all_hashed && now.size() == bh.size());
    // Still B's bytes and parity: its record names the slot, it is protected, and it has these lengths.
    auto rec = cache_->read_record(v.base_version);
    base_known = base_known && rec.is_ok() && static_cast<int>(rec->slot) == v.base_slot &&
                 rec->manifest.total_size == v.manifest.total_size && cache_->is_protected(v.base_version);
    if (base_known) {
      auto d = cache_->slot(v.base_slot, v.manifest.total_size);
      auto r = cache_->red(v.base_slot, std::max<uint64_t>(red_len, 1));
      base_known = d.is_ok() && r.is_ok();
      if (base_known) base_data = *d, base_red = *r;
    }
    // A superset is made exact by comparing the chunks with B's, both on this node: reading them here
    // costs less than sending the deltas of chunks written since the slot's version but not since B.
    if (base_known && superset) {
      const uint64_t cs = v.manifest.chunk_size, total = v.manifest.total_size;
      for (size_t i = 0; i < base_bits.size(); ++i)
        if (base_bits[i] && i * cs < total)
          base_bits[i] = std::memcmp(v.data + i * cs, base_data->data() + i * cs, std::min<uint64_t>(cs, total - i * cs)) != 0;
    }
  }
  const uint64_t mine[3] = {held_known && v.held_protected ? v.held_version : 0, v.manifest.chunk_size,
                            base_known ? v.base_version : 0};
  const size_t n = members_.size();
  std::vector<uint64_t> all(3 * n);
  CAIRN_MPI(MPI_Allgather(mine, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T, comm_));
  Plan p{all[1] != 0, all[1] != 0};
  for (size_t x = 0; x < n; ++x) {
    const uint64_t* a = &all[3 * x];
    if (a[1] != all[1]) p.only = p.delta = false;
    if (a[0] == 0 || a[0] != all[0]) p.only = false;
    if (a[2] == 0 || a[2] != all[2]) p.delta = false;
  }
  if (p.only) CAIRN_TRY(gather_changed(comm_, lens, all[1], held_bits, changed));
  if (p.delta) {
    CAIRN_TRY(gather_changed(comm_, lens, all[1], base_bits, &base->since));
    base->data = base_data->data();
    base->red = base_red->data();
  }
  return p;
}

std::string SetProtector::exchange_note() const {
  if (steps_ == 0 || (skipped_ == 0 && sent_ >= full_)) return "";  // a full exchange
  char sent[96];
  snprintf(sent, sizeof sent, ", %.2f of %.2f MiB sent", static_cast<double>(sent_) / (1 << 20),
           static_cast<double>(full_) / (1 << 20));
  const std::string b = std::to_string(delta_from_);
  const std::string from = delta_from_ == 0 ? ""
                           : code_->scheme() == Redundancy::partner ? ", from version " + b + "'s copy and the changes since it"
                                                                    : ", parity from version " + b + "'s and the deltas";
  return ", changes only: " + std::to_string(steps_ - skipped_) + " of " + std::to_string(steps_) + " steps" + sent + from;
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
