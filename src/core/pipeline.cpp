// The progress engine: moves each version through its stages after cairn_checkpoint returned.
//
//   seal           hash every chunk of the slot, write the L1 record             (worker, no MPI)
//   agree_local    every rank sealed? else the version is discarded everywhere    (MPI)
//   encode         L2 redundancy within the set, set record, agree, protected    (MPI)
//   l3_write       the rank's data and manifest to the prefix                    (worker, no MPI)
//   agree_flushed  every rank wrote? rank 0 commits and prunes                   (MPI)
//
// With MPI_THREAD_MULTIPLE the worker thread runs every stage, on its own communicators. Otherwise
// the worker runs only the stages without MPI, and the MPI stages run inside the application's next
// cairn call (drive()), in version order on every rank.
#include <algorithm>

#include "base/log.hpp"
#include "mpi/mpi_util.hpp"
#include "core/runtime.hpp"
#include "pfs/l3_store.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_record.hpp"

namespace cairn {

void Runtime::worker_loop() {
  uint64_t last = 0;
  for (;;) {
    std::shared_ptr<VersionJob> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        if (stop_) return true;
        for (auto& j : jobs_)
          if (j->version > last) return true;
        return false;
      });
      for (auto& j : jobs_)
        if (j->version > last) {
          job = j;
          break;
        }
      if (!job) return;  // stop_ and nothing left
    }
    last = job->version;
    run_local_stages(*job);
    if (mpi_in_worker_) {
      Status st = run_mpi_stages(*job);
      if (!st.is_ok()) LOG_ERROR("version %llu: %s", static_cast<unsigned long long>(job->version), st.message().c_str());
    }
  }
}

// How this rank writes L3 (docs/config.md: files_per_node, turnstile_width, data_prefixes, compress).
// Offset counters of versions already flushed everywhere may be cleaned.
l3::WriteOptions Runtime::l3_options() {
  l3::WriteOptions o = l3_base_;
  std::lock_guard<std::mutex> lock(mu_);
  o.clean_below = last_flushed_version_ + 1;
  return o;
}

// Waiters test these flags under mu_; setting them under mu_ too means no wake-up is lost.
void Runtime::set_flag(std::atomic<bool>& flag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flag = true;
  }
  cv_.notify_all();
}

// seal (and, when MPI runs elsewhere, the L3 write too: it needs no MPI).
void Runtime::run_local_stages(VersionJob& job) {
  double t0 = now_seconds();
  if (job.local_status.is_ok()) {
    job.manifest.chunk_hashes = chunk_hashes(job.data, job.manifest.total_size, job.manifest.chunk_size);
    job.local_status = cache_.write_record(job.version, L1Record{static_cast<uint32_t>(job.slot), job.manifest});
  }
  job.t_seal = now_seconds() - t0;
  if (rank_ == 0) state_.set("version", std::to_string(job.version));  // off the application's path
  set_flag(job.sealed);
  if (!mpi_in_worker_ && job.flush) {
    if (rank_ == 0) state_.history().l3_began(job.version, false);
    double t1 = now_seconds();
    const l3::WriteOptions opts = l3_options();
    job.l3_status = job.local_status.is_ok()
                        ? l3::write_rank(layout_, job.manifest, job.data,
                                         [&] { inject_.point("flush", job.version); }, &opts)
                        : job.local_status;
    job.t_l3 = now_seconds() - t1;
    set_flag(job.l3_written);
  }
}

Status Runtime::run_mpi_stages(VersionJob& job) {
  Status st = stage_agree_local(job);
  if (st.is_ok() && job.local_ok) st = stage_encode(job);
  set_flag(job.l2_decided);
  if (st.is_ok() && job.local_ok) inject_.point("compute", job.version);
  if (st.is_ok() && job.flush) {
    if (mpi_in_worker_) {
      if (rank_ == 0) state_.history().l3_began(job.version, false);
      double t1 = now_seconds();
      const l3::WriteOptions opts = l3_options();
      job.l3_status = job.local_ok ? l3::write_rank(layout_, job.manifest, job.data,
                                                    [&] { inject_.point("flush", job.version); }, &opts)
                                   : make_error(Code::ERR_INVALID_VERSION, "version was discarded");
      job.t_l3 = now_seconds() - t1;
      set_flag(job.l3_written);
    } else {
      wait_job(job);
    }
    if (job.local_ok) st = stage_agree_flushed(job);
  }
  log_summary(job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.is_ok() && bg_error_.is_ok()) bg_error_ = st;
    job.done = true;
    jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(), [&](auto& j) { return j.get() == &job; }), jobs_.end());
  }
  cv_.notify_all();
  if (job.prune) prune_l3();
  return st;
}

// Rank 0, after a commit: remove the versions beyond keep_flushed. Deleting every rank's file of an
// old version takes time on some file systems, so it runs after the version counts as flushed.
void Runtime::prune_l3() {
  Status p = l3::prune(layout_, cfg_.keep_flushed);
  if (!p.is_ok()) LOG_WARN("pruning old L3 versions: %s", p.message().c_str());
}

// Funneled mode: the L3 write of a job runs on the worker; wait for it.
void Runtime::wait_job(VersionJob& job) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return job.l3_written.load(); });
}

Status Runtime::stage_agree_local(VersionJob& job) {
  Status all = agree(bg_comm_, job.local_status);
  if (all.code() == Code::ERR_MPI) return all;
  unsigned long long bytes = job.manifest.total_size, all_bytes = 0;  // over every rank, for the history
  CAIRN_MPI(MPI_Reduce(&bytes, &all_bytes, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, bg_comm_));
  job.local_ok = all.is_ok();
  if (!job.local_ok) {
    // A version that is not whole everywhere must not count anywhere: remove this rank's record.
    cache_.drop(job.version).ignore();
    if (rank_ == 0)
      LOG_ERROR("version %llu discarded: %s", static_cast<unsigned long long>(job.version), all.message().c_str());
    if (rank_ == 0) state_.history().failed(job.version, 1, all.message());
    std::lock_guard<std::mutex> lock(mu_);
    if (bg_error_.is_ok()) bg_error_ = all.prefixed("version " + std::to_string(job.version));
    return Status::ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_local_version_ = job.version;
  }
  if (rank_ == 0) state_.set("l1", std::to_string(job.version));
  if (rank_ == 0)
    state_.history().l1(job.version, job.manifest.created_unix_ns, job.t_copy, job.t_seal, all_bytes,
                        job.manifest.total_size);
  return Status::ok();
}

Status Runtime::stage_encode(VersionJob& job) {
  if (!placement_.enabled) return Status::ok();
  double t0 = now_seconds();
  const auto& members = placement_.members[static_cast<size_t>(placement_.my_set)];
  int n = static_cast<int>(members.size());
  unsigned long long red_bytes = 0;  // this rank's redundancy data, for the history
  Status local = [&]() -> Status {
    // Every member's manifest and length, replicated across the set.
    std::string mine = encode_manifest(job.manifest);
    int my_len = static_cast<int>(mine.size());
    std::vector<int> mlen(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
    CAIRN_MPI(MPI_Allgather(&my_len, 1, MPI_INT, mlen.data(), 1, MPI_INT, set_comm_));
    int total = 0;
    for (int i = 0; i < n; ++i) displs[i] = total, total += mlen[i];
    std::string all(static_cast<size_t>(total), '\0');
    CAIRN_MPI(MPI_Allgatherv(mine.data(), my_len, MPI_CHAR, all.data(), mlen.data(), displs.data(), MPI_CHAR, set_comm_));
    redundancy::SetRecord rec;
    rec.scheme = cfg_.redundancy;
    rec.n = static_cast<uint32_t>(n);
    rec.m = static_cast<uint32_t>(code_->m());
    std::vector<size_t> lens;
    for (int i = 0; i < n; ++i) {
      rec.ranks.push_back(static_cast<uint32_t>(members[i]));
      rec.manifests.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(mlen[i])));
      auto m = decode_manifest(rec.manifests.back().data(), rec.manifests.back().size());
      if (!m) return m.status();
      lens.push_back(m->total_size);
    }
    size_t max_len = *std::max_element(lens.begin(), lens.end());
    auto red = cache_.red(job.slot, std::max<size_t>(code_->redundancy_len(max_len), 1));
    red_bytes = code_->redundancy_len(max_len);
    // The whole set enters the exchange or none of it does: a member that could not set up its buffer
    // must not leave the others waiting inside encode_set.
    CAIRN_TRY(agree(set_comm_, red.status()));
    CAIRN_TRY(redundancy::encode_set(set_comm_, *code_, job.data, job.manifest.total_size, lens, (*red)->data(),
                                     cfg_.exchange_chunk));
    return cache_.write_set(job.version, redundancy::encode_set_record(rec));
  }();
  if (local.code() == Code::ERR_MPI) return local;
  Status all = agree(bg_comm_, local);
  if (all.code() == Code::ERR_MPI) return all;
  unsigned long long all_red_bytes = 0;
  CAIRN_MPI(MPI_Reduce(&red_bytes, &all_red_bytes, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, bg_comm_));
  job.protected_ok = all.is_ok();
  job.t_l2 = now_seconds() - t0;
  if (!job.protected_ok) {
    if (rank_ == 0)
      LOG_ERROR("version %llu not protected at L2: %s", static_cast<unsigned long long>(job.version), all.message().c_str());
    if (rank_ == 0) state_.history().failed(job.version, 2, all.message());
    std::lock_guard<std::mutex> lock(mu_);
    if (bg_error_.is_ok()) bg_error_ = all;
    return Status::ok();
  }
  // The marker is written only now that every rank of the job has its redundancy data.
  // Only once every rank's marker is down does the version count as protected: a failure after this
  // point finds the marker on every survivor.
  Status marked = agree(bg_comm_, cache_.mark_protected(job.version));
  if (marked.code() == Code::ERR_MPI) return marked;
  if (!marked.is_ok()) {
    job.protected_ok = false;
    if (rank_ == 0) LOG_ERROR("version %llu: %s", static_cast<unsigned long long>(job.version), marked.message().c_str());
    if (rank_ == 0) state_.history().failed(job.version, 2, marked.message());
    return Status::ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_protected_version_ = job.version;
  }
  if (rank_ == 0) state_.set("l2", std::to_string(job.version));
  if (rank_ == 0)
    state_.history().l2(job.version, static_cast<int64_t>(t0 * 1e9), all_red_bytes, redundancy_name(cfg_.redundancy));
  return Status::ok();
}

Status Runtime::stage_agree_flushed(VersionJob& job) {
  Status all = agree(bg_comm_, job.l3_status);
  if (all.code() == Code::ERR_MPI) return all;
  int committed = 0;
  if (all.is_ok() && rank_ == 0) {
    Status c = l3::commit(layout_, job.version, static_cast<uint32_t>(nranks_), job.manifest.label);
    if (c.is_ok()) {
      committed = 1;
      job.prune = true;  // done once the version is through: nobody waits for the deletions
    } else {
      all = c;
    }
  }
  CAIRN_MPI(MPI_Bcast(&committed, 1, MPI_INT, 0, bg_comm_));
  job.flushed_ok = committed != 0;
  if (!job.flushed_ok) {
    if (rank_ == 0)
      LOG_ERROR("version %llu not flushed to %s: %s", static_cast<unsigned long long>(job.version),
                layout_.prefix.c_str(), all.message().c_str());
    if (rank_ == 0) state_.history().failed(job.version, 3, all.is_ok() ? "L3 commit failed" : all.message());
    std::lock_guard<std::mutex> lock(mu_);
    if (bg_error_.is_ok()) bg_error_ = all.is_ok() ? make_error(Code::ERR_IO, "L3 commit failed") : all;
    return Status::ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_flushed_version_ = std::max(last_flushed_version_, job.version);
  }
  if (rank_ == 0) state_.set("l3", std::to_string(job.version));
  if (rank_ == 0) state_.history().l3(job.version, job.t_l3, job.manifest.total_size);
  return Status::ok();
}

void Runtime::drive(bool) {
  for (;;) {
    std::shared_ptr<VersionJob> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (jobs_.empty()) return;
      job = jobs_.front();
      cv_.wait(lock, [&] { return job->sealed.load(); });
    }
    Status st = run_mpi_stages(*job);
    if (!st.is_ok()) LOG_ERROR("version %llu: %s", static_cast<unsigned long long>(job->version), st.message().c_str());
  }
}

// Before a new version takes a slot, the versions in flight must be decided at L2: otherwise the
// slot of the newest protected version could be overwritten while the version after it is not yet
// protected, and a node lost at that moment would leave nothing in L1/L2. With cache_versions = 2 a
// checkpoint therefore waits for the previous version's L2 (documented in docs/architecture.md).
void Runtime::wait_for_l2() {
  if (!mpi_in_worker_) drive(true);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    for (auto& j : jobs_)
      if (!j->l2_decided) return false;
    return true;
  });
}

// Which slot a new version overwrites. Never the slot of `keep` -- the newest protected version, or
// without L2 the newest version known whole -- while another slot exists; among the others, first a
// stale record newer than `keep` (a version that never completed), then an empty slot or the oldest.
int Runtime::choose_slot() {
  size_t n = static_cast<size_t>(cache_.nslots());
  std::vector<uint64_t> occupant(n, 0);
  uint64_t newest_record = 0, newest_protected = 0;
  for (uint64_t v : cache_.versions()) {
    auto rec = cache_.read_record(v);
    if (!rec) continue;
    occupant[rec->slot] = std::max(occupant[rec->slot], v);
    newest_record = std::max(newest_record, v);
    if (placement_.enabled && cache_.is_protected(v)) newest_protected = std::max(newest_protected, v);
  }
  uint64_t keep;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& j : jobs_)
      if (!(j->l2_decided && !j->local_ok))  // a discarded version holds nothing worth keeping
        occupant[static_cast<size_t>(j->slot)] = std::max(occupant[static_cast<size_t>(j->slot)], j->version);
    keep = newest_protected ? newest_protected : last_local_version_ ? last_local_version_ : newest_record;
  }
  if (n == 1) return 0;
  int best = -1;
  for (size_t i = 0; i < n; ++i) {
    if (occupant[i] == keep && keep != 0) continue;
    if (occupant[i] > keep) return static_cast<int>(i);  // stale: newer than anything whole
    if (best < 0 || occupant[i] < occupant[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  return best < 0 ? 0 : best;
}

void Runtime::wait_slot_free(int slot) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    for (auto& j : jobs_)
      if (j->slot == slot) return false;
    return true;
  });
}

Status Runtime::wait_all() {
  double t0 = now_seconds();
  if (!mpi_in_worker_) {
    drive(true);
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return jobs_.empty(); });
  }
  pipeline_seconds_on_app_ += now_seconds() - t0;  // the application waited on checkpoints
  std::lock_guard<std::mutex> lock(mu_);
  Status st = bg_error_;
  bg_error_ = Status::ok();
  return st;
}

// At finalize: the newest version to L3 when the periodic flush has not taken it. The pipeline is
// idle, so the application thread may use the pipeline's communicator.
Status Runtime::flush_now(uint64_t v) {
  auto rec = cache_.read_record(v);
  Status local = rec.is_ok() ? Status::ok() : rec.status();
  VersionJob job;
  job.version = v;
  job.flush = true;
  job.local_ok = true;
  if (local.is_ok()) {
    job.manifest = rec->manifest;
    auto slot = cache_.slot(static_cast<int>(rec->slot), rec->manifest.total_size);
    if (slot.is_ok()) {
      if (rank_ == 0) state_.set("phase", "flush");
      if (rank_ == 0) state_.history().l3_began(v, true);
      const l3::WriteOptions opts = l3_options();
      job.l3_status = l3::write_rank(layout_, job.manifest, (*slot)->data(),
                                     [&] { inject_.point("flush", v); }, &opts);
    } else {
      job.l3_status = slot.status();
    }
  } else {
    job.l3_status = local;
  }
  CAIRN_TRY(stage_agree_flushed(job));
  if (job.prune) prune_l3();
  if (!job.flushed_ok) return make_error(Code::ERR_IO, "flush of version %llu at finalize failed", static_cast<unsigned long long>(v));
  if (rank_ == 0) LOG_INFO("version %llu flushed to %s at finalize", static_cast<unsigned long long>(v), layout_.prefix.c_str());
  return Status::ok();
}

void Runtime::log_summary(const VersionJob& job) {
  if (rank_ != 0 || log::level() < log::Level::info) return;
  double mib = static_cast<double>(job.manifest.total_size) / (1 << 20);
  auto bw = [&](double t) { return t > 0 ? static_cast<double>(job.manifest.total_size) / t / 1e9 : 0.0; };
  char l2[128] = "L2 off", l3[128] = "L3 -";
  if (placement_.enabled)
    snprintf(l2, sizeof l2, "L2 %s %.1f ms (%.2f GB/s)%s", redundancy_name(cfg_.redundancy), job.t_l2 * 1e3,
             bw(job.t_l2), job.protected_ok ? "" : " FAILED");
  if (job.flush)
    snprintf(l3, sizeof l3, "L3 %.1f ms (%.2f GB/s)%s", job.t_l3 * 1e3, bw(job.t_l3), job.flushed_ok ? "" : " FAILED");
  LOG_INFO("version %llu: %.2f MiB/rank; L1 copy %.2f ms (%.2f GB/s), seal %.1f ms; %s; %s%s",
           static_cast<unsigned long long>(job.version), mib, job.t_copy * 1e3, bw(job.t_copy), job.t_seal * 1e3,
           l2, l3, job.local_ok ? "" : " [DISCARDED]");
}

}  // namespace cairn
