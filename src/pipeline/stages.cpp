// The stages of a version (their order and threads: pipeline/version.hpp). Each stage decides what its
// outcome means for the version on every rank through the team, reports to the events sink, and
// remembers the first failure for cairn_wait.
#include <algorithm>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/xxh.hpp"
#include "l3/l3_store.hpp"
#include "pipeline/pipeline.hpp"

namespace cairn::pipeline {

// Every chunk's xxh3: those the snapshotter hashed while they landed (device pieces) taken from its
// report, the rest hashed here.
std::vector<uint64_t> hashes_of_slot(const uint8_t* data, uint64_t len, uint32_t chunk_size, const SnapshotReport& r) {
  if (chunk_size == 0 || len == 0) return {};
  const uint64_t n = (len + chunk_size - 1) / chunk_size;
  if (r.chunk_known.size() != n || r.chunk_hashes.size() != n) return chunk_hashes(data, len, chunk_size);
  std::vector<uint64_t> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t off = i * chunk_size;
    out[i] = r.chunk_known[i] ? r.chunk_hashes[i] : XXH3_64bits(data + off, std::min<uint64_t>(chunk_size, len - off));
  }
  return out;
}

void Pipeline::fail(const Version& v, int level, const Status& why) {
  events_->failed(v.number, level, why.message());
  std::lock_guard<std::mutex> lock(mu_);
  if (first_failure_.is_ok()) first_failure_ = why.prefixed("version " + std::to_string(v.number));
}

// Wait for the snapshot: from here on the slot's bytes are final, and L2's exchange may read them.
void Pipeline::land(Version& v) {
  const double t0 = now_seconds();
  if (v.snapshot_begun) {  // even when the version failed after begin(): the next begin() needs it
    Status done = snapshot_->complete();
    v.snapshot = snapshot_->report();
    if (v.local_status.is_ok()) v.local_status = done;
  }
  v.landed_status = v.local_status;
  v.t_seal = now_seconds() - t0;  // the seal's time counts the wait for the snapshot
  set_flag(v.landed);
}

// Hash every chunk of the slot, write the L1 record.
void Pipeline::seal(Version& v) {
  const double t0 = now_seconds();
  if (v.local_status.is_ok()) {
    const double h0 = now_seconds();
    v.manifest.chunk_hashes = hashes_of_slot(v.data, v.manifest.total_size, v.manifest.chunk_size, v.snapshot);
    // A plain copy's costs per byte, for l1_incremental = auto (the copy's own: not cow's, nor device's).
    // A copy that hashed as it copied measured hashing alone once (SnapshotReport::hash_ns_per_byte);
    // otherwise the seal's hashing just now is the measure.
    const double per_byte = 1e9 / static_cast<double>(std::max<uint64_t>(v.manifest.total_size, 1));
    if (!v.view && v.snapshot.protected_bytes == 0 && v.snapshot.device_bytes == 0 &&
        v.manifest.total_size >= (1u << 20)) {
      if (v.snapshot.hashed_copy) {
        if (v.snapshot.hash_ns_per_byte > 0) hash_ns_per_byte_ = v.snapshot.hash_ns_per_byte;
        copy_ns_per_byte_ = v.snapshot.blocking_seconds * per_byte;
      } else if (v.snapshot.chunk_hashes.empty()) {
        hash_ns_per_byte_ = (now_seconds() - h0) * per_byte;
        copy_ns_per_byte_ = v.snapshot.blocking_seconds * per_byte;
      }
    }
    const auto& now = v.manifest.chunk_hashes;
    if (!now.empty() && v.held_hashes.size() == now.size()) {  // for l1_incremental = auto's next choice
      size_t same = 0;
      for (size_t i = 0; i < now.size(); ++i) same += now[i] == v.held_hashes[i];
      v.unchanged = static_cast<double>(same) / static_cast<double>(now.size());
      last_unchanged_permille_ = static_cast<int>(same * 1000 / now.size());
    }
    v.local_status = cache_->write_record(v.number, L1Record{static_cast<uint32_t>(v.slot), v.manifest});
    if (v.local_status.is_ok() && !v.view && !now.empty()) {  // the whole stream is in the slot
      std::lock_guard<std::mutex> lock(mu_);
      if (sealed_.size() <= static_cast<size_t>(v.slot)) sealed_.resize(static_cast<size_t>(v.slot) + 1);
      sealed_[static_cast<size_t>(v.slot)] =
          Sealed{v.number, v.manifest.total_size, v.manifest.chunk_size, now, v.snapshot.generation};
    }
  }
  v.t_seal += now_seconds() - t0;
  events_->sealed(v);
  set_flag(v.sealed);
}

void Pipeline::flush(Version& v, bool report_start) {
  // With the team's stages on the worker, a version is flushed only once every rank has it; otherwise
  // the flush runs right after the seal, and a version discarded later was written for nothing (it is
  // never committed).
  const bool whole = cfg_.mpi_in_worker ? v.local_ok : v.local_status.is_ok();
  if (!whole) {
    v.l3_status = cfg_.mpi_in_worker ? make_error(Code::ERR_INVALID_VERSION, "version was discarded") : v.local_status;
  } else {
    if (report_start) events_->flush_began(v.number, /*at_finalize=*/false);
    double t0 = now_seconds();
    FlushRequest req;
    req.version = v.number;
    req.manifest = &v.manifest;
    req.data = v.data;
    req.slot = v.slot;
    req.slot_path = cache_->slot_path(v.slot);
    const FaultInjector* inject = cfg_.inject;
    const uint64_t number = v.number;
    req.after_data = [inject, number] {
      if (inject) inject->point("flush", number);
    };
    Flusher* f = flusher();
    v.via = f->name();
    req.via = &v.via;
    v.l3_written = Version::kUnknownBytes;
    req.written = &v.l3_written;
    auto ticket = f->post(req);
    v.l3_status = ticket.is_ok() ? f->wait(*ticket) : ticket.status();
    v.t_l3 = now_seconds() - t0;
  }
  set_flag(v.l3_done);
}

Status Pipeline::run_team_stages(Version& v) {
  const bool l2 = protector_ != nullptr && v.protect;  // l2_every: the others stay L1-only
  Status st = l2 ? exchange(v) : Status::ok();
  wait_flag(v.sealed);  // the worker is done with the slot and the record
  if (st.is_ok()) st = agree_local(v);
  if (st.is_ok() && v.local_ok && l2) st = protect(v);
  set_flag(v.l2_decided);
  if (st.is_ok() && v.local_ok && cfg_.inject) cfg_.inject->point("compute", v.number, v.protected_ok ? "l2" : "l1");
  if (st.is_ok() && v.flush) {
    if (cfg_.mpi_in_worker) {
      flush(v);
    } else {
      std::unique_lock<std::mutex> lock(mu_);  // the worker flushes it
      cv_.wait(lock, [&] { return v.l3_done.load(); });
    }
    if (v.local_ok) st = agree_flushed(v);
  }
  log_summary(v);
  if (!st.is_ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_failure_.is_ok()) first_failure_ = st;
  }
  leave(v);
  if (v.prune) prune_l3();
  return st;
}

// Beside the seal: the set moves and encodes the bytes (Protector::exchange). Whatever it wrote does not
// count until protect() has agreed on it; a failure other than ERR_MPI waits for protect() too.
Status Pipeline::exchange(Version& v) {
  v.l2_start = now_seconds();
  return protector_->exchange(v, v.landed_status);
}

Status Pipeline::agree_local(Version& v) {
  Status all = team_->agree(v.local_status);
  if (all.code() == Code::ERR_MPI) return all;
  // Over every rank, for the history: the version's bytes, and those the snapshot copied into the slots
  // (a version with files copies its memory regions only; an incremental one leaves unchanged chunks).
  const uint64_t copied = v.snapshot.bytes - std::min(v.snapshot.unchanged_bytes, v.snapshot.bytes);
  const uint64_t mine[2] = {v.manifest.total_size, copied};
  uint64_t all_bytes[2] = {0, 0};
  CAIRN_TRY(team_->sum_at_root(mine, all_bytes, 2));
  v.local_ok = all.is_ok();
  if (!v.local_ok) {
    // A version that is not whole everywhere must not count anywhere: remove this rank's record.
    cache_->drop(v.number).ignore();
    lender_.discard(v.slot);
    fail(v, 1, all);
    return Status::ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    marks_.local = v.number;
  }
  events_->local(v, all_bytes[0], all_bytes[1]);
  return Status::ok();
}

Status Pipeline::protect(Version& v) {
  if (!protector_) return Status::ok();
  const double t0 = v.l2_start > 0 ? v.l2_start : now_seconds();
  uint64_t red_bytes = 0;
  Status local = protector_->protect(v, &red_bytes);
  if (local.code() == Code::ERR_MPI) return local;
  Status all = team_->agree(local);
  if (all.code() == Code::ERR_MPI) return all;
  const Protector::Sent sent = protector_->sent_bytes();
  const uint64_t mine[3] = {red_bytes, sent.sent, sent.full};
  uint64_t all_bytes[3] = {0, 0, 0};
  CAIRN_TRY(team_->sum_at_root(mine, all_bytes, 3));
  v.protected_ok = all.is_ok();
  v.t_l2 = now_seconds() - t0;
  if (!v.protected_ok) {
    fail(v, 2, all);
    return Status::ok();
  }
  // The marker is written only now that every rank of the job has its redundancy data. Only once every
  // rank's marker is down does the version count as protected: a failure after this point finds the
  // marker on every survivor.
  Status marked = team_->agree(cache_->mark_protected(v.number));
  if (marked.code() == Code::ERR_MPI) return marked;
  if (!marked.is_ok()) {
    v.protected_ok = false;
    fail(v, 2, marked);
    return Status::ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    marks_.protected_l2 = v.number;
  }
  events_->protected_l2(v, t0, EventSink::L2Bytes{all_bytes[0], all_bytes[1], all_bytes[2]}, protector_->scheme());
  return Status::ok();
}

// Every rank's flusher done? Then rank 0 writes COMMIT, last.
Status Pipeline::agree_flushed(Version& v) {
  Status all = team_->agree(v.l3_status);
  if (all.code() == Code::ERR_MPI) return all;
  // What went into L3 files over every rank (an incremental version writes only its changed chunks),
  // for the history and the summary; unknown if any rank's flusher did not say.
  const bool known = v.l3_written != Version::kUnknownBytes;
  const uint64_t mine[2] = {known ? v.l3_written : 0, known ? 0u : 1u};  // the bytes, and the ranks that did not say
  uint64_t all_written[2] = {0, 0};
  CAIRN_TRY(team_->sum_at_root(mine, all_written, 2));
  v.l3_written_all = all_written[1] ? Version::kUnknownBytes : all_written[0];
  int committed = 0;
  if (all.is_ok() && team_->rank() == 0) {
    Status c = l3::commit(cfg_.layout, v.number, static_cast<uint32_t>(team_->size()), v.manifest.label);
    if (c.is_ok()) {
      committed = 1;
      v.prune = true;  // done once the version is through: nobody waits for the deletions
    } else {
      all = c;
    }
  }
  CAIRN_TRY(team_->broadcast_flag(&committed));
  v.flushed_ok = committed != 0;
  if (!v.flushed_ok) {
    fail(v, 3, all.is_ok() ? make_error(Code::ERR_IO, "L3 commit failed") : all);
    return Status::ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    marks_.flushed = std::max(marks_.flushed, v.number);
  }
  events_->flushed(v, v.via.empty() ? flusher()->name() : v.via.c_str());
  return Status::ok();
}

void Pipeline::log_summary(const Version& v) const {
  if (team_->rank() != 0 || log::level() < log::Level::info) return;
  double mib = static_cast<double>(v.manifest.total_size) / (1 << 20);
  auto bw = [&](double t) { return t > 0 ? static_cast<double>(v.manifest.total_size) / t / 1e9 : 0.0; };
  char l2[192] = "L2 off", l3[160] = "L3 -";
  if (protector_ && !v.protect)
    snprintf(l2, sizeof l2, "L2 - (l2_every)");
  else if (protector_)
    snprintf(l2, sizeof l2, "L2 %s %.1f ms (%.2f GB/s%s)%s", protector_->scheme(), v.t_l2 * 1e3, bw(v.t_l2),
             protector_->exchange_note().c_str(), v.protected_ok ? "" : " FAILED");
  // The bytes written to L3 when they are not the stream's (incremental, compressed): the bandwidth is
  // the stream's, as at the other levels.
  char written[64] = "";
  if (v.l3_written != Version::kUnknownBytes && v.l3_written != v.manifest.total_size)
    snprintf(written, sizeof written, ", %.2f MiB written", static_cast<double>(v.l3_written) / (1 << 20));
  if (v.flush)
    snprintf(l3, sizeof l3, "L3 %.1f ms (%.2f GB/s, %s%s)%s", v.t_l3 * 1e3, bw(v.t_l3),
             v.via.empty() ? flusher()->name() : v.via.c_str(), written, v.flushed_ok ? "" : " FAILED");
  char cow[352] = "", unprot[96] = "", ahead[64] = "", late[64] = "";
  if (v.snapshot.unprotect_faults > 0)
    snprintf(unprot, sizeof unprot, ", first writes un-protected: %llu in %.1f ms",
             static_cast<unsigned long long>(v.snapshot.unprotect_faults), v.snapshot.unprotect_wait_seconds * 1e3);
  if (v.snapshot.unprotected_ahead > 0)
    snprintf(ahead, sizeof ahead, ", blocks un-protected ahead: %llu", static_cast<unsigned long long>(v.snapshot.unprotected_ahead));
  if (v.snapshot.late_faults > 0)
    snprintf(late, sizeof late, ", served by the copier: %llu", static_cast<unsigned long long>(v.snapshot.late_faults));
  if (v.snapshot.protected_bytes > 0 || v.snapshot.generation > 0)
    snprintf(cow, sizeof cow, " (cow: %.0f%% write-protected, complete in %.1f ms, %llu writes waited %.1f ms%s%s%s)",
             100.0 * static_cast<double>(v.snapshot.protected_bytes) / static_cast<double>(std::max<uint64_t>(v.snapshot.bytes, 1)),
             v.snapshot.copy_seconds * 1e3, static_cast<unsigned long long>(v.snapshot.faults),
             v.snapshot.fault_wait_seconds * 1e3, unprot, ahead, late);
  char incr[96] = "";
  if (v.snapshot.unchanged_bytes > 0)
    snprintf(incr, sizeof incr, " (incremental: %.0f%% unchanged, left in place)",
             100.0 * static_cast<double>(v.snapshot.unchanged_bytes) / static_cast<double>(std::max<uint64_t>(v.snapshot.bytes, 1)));
  else if (v.unchanged >= 0)
    snprintf(incr, sizeof incr, " (%.0f%% unchanged)", 100.0 * v.unchanged);
  LOG_INFO("version %llu: %.2f MiB/rank; L1 copy %.2f ms (%.2f GB/s)%s%s, seal %.1f ms; %s; %s%s",
           static_cast<unsigned long long>(v.number), mib, v.t_copy * 1e3, bw(v.t_copy), cow, incr, v.t_seal * 1e3, l2,
           l3, v.local_ok ? "" : " [DISCARDED]");
}

}  // namespace cairn::pipeline
