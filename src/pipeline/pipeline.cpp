// The engine: the queue of versions in flight, the worker thread, slot lending, and the waits the
// application's calls make. The stages themselves are in stages.cpp.
#include "pipeline/pipeline.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "base/background_thread.hpp"
#include "base/clock.hpp"
#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "cache/slot_choice.hpp"
#include "l3/l3_store.hpp"

namespace cairn::pipeline {

Pipeline::Pipeline(PipelineConfig config, CacheStore* cache, Team* team, Protector* protector, Flusher* flusher,
                   EventSink* events, Snapshotter* snapshot)
    : cfg_(std::move(config)),
      cache_(cache),
      team_(team),
      protector_(protector),
      flusher_(flusher),
      events_(events),
      snapshot_(snapshot),
      lender_(cache->nslots()) {
  rank0_ = team_ != nullptr && team_->rank() == 0;
  worker_ = std::thread([this] { worker_loop(); });
  if (cfg_.mpi_in_worker) team_thread_ = std::thread([this] { team_loop(); });
}

Pipeline::~Pipeline() { stop(); }

void Pipeline::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (team_thread_.joinable()) team_thread_.join();
  // Only now may the pruner stop: the worker asks for a prune after a version left, so it may ask after
  // stop() began. A prune asked for runs to its end first.
  {
    std::lock_guard<std::mutex> lock(mu_);
    pruner_stop_ = true;
  }
  cv_.notify_all();
  if (pruner_.joinable()) pruner_.join();
  // Rank 0 (the one that prunes): what its prunes put into the recycle pool, and what a job before left
  // there, has no later writer in this job; it is space the prefix need not hold. Deleting those files
  // costs what one prune's deletions did before there was a pool (and a prune asked for at finalize was
  // waited for just the same).
  if (rank0_) {
    Status d = l3::drop_recycled(cfg_.layout);
    if (!d.is_ok()) LOG_WARN("emptying the L3 recycle pool: %s", d.message().c_str());
  }
}

Marks Pipeline::marks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return marks_;
}

void Pipeline::set_marks(const Marks& m) {
  std::lock_guard<std::mutex> lock(mu_);
  marks_ = m;
}

Flusher* Pipeline::flusher() const {
  std::lock_guard<std::mutex> lock(mu_);
  return flusher_;
}

void Pipeline::set_flusher(Flusher* flusher) {
  std::lock_guard<std::mutex> lock(mu_);
  flusher_ = flusher;
}

// Waiters test the flags under mu_; setting them under mu_ too means no wake-up is lost.
void Pipeline::set_flag(std::atomic<bool>& flag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flag = true;
  }
  cv_.notify_all();
}

// How this rank writes L3 (docs/config.md: files_per_node, turnstile_width, data_prefixes, compress).
// Offset counters of versions already flushed everywhere may be cleaned.
l3::WriteOptions Pipeline::l3_options() const {
  l3::WriteOptions o = cfg_.l3;
  std::lock_guard<std::mutex> lock(mu_);
  o.clean_below = marks_.flushed + 1;
  return o;
}

void Pipeline::wait_flag(const std::atomic<bool>& flag) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return flag.load(); });
}

std::shared_ptr<Version> Pipeline::next_after(uint64_t after, std::unique_lock<std::mutex>& lock) {
  auto next = [&] {
    for (auto& q : queue_)
      if (q->number > after) return q;
    return std::shared_ptr<Version>();
  };
  cv_.wait(lock, [&] { return stop_ || next() != nullptr; });
  return next();  // null: stopped, nothing left
}

void Pipeline::worker_loop() {
  become_background_thread();  // woken by cairn_checkpoint, it must not take the application's core
  uint64_t last = 0;
  for (;;) {
    std::shared_ptr<Version> v;
    {
      std::unique_lock<std::mutex> lock(mu_);
      v = next_after(last, lock);
      if (!v) return;
    }
    last = v->number;
    land(*v);
    seal(*v);
    if (!cfg_.mpi_in_worker && v->flush) flush(*v);  // needs no team: the team's stages wait for it in drive()
  }
}

void Pipeline::team_loop() {
  become_background_thread();
  uint64_t last = 0;
  for (;;) {
    std::shared_ptr<Version> v;
    {
      std::unique_lock<std::mutex> lock(mu_);
      v = next_after(last, lock);
      if (!v) return;
      cv_.wait(lock, [&] { return v->landed.load(); });
    }
    last = v->number;
    Status st = run_team_stages(*v);
    if (!st.is_ok()) LOG_ERROR("version %llu: %s", static_cast<unsigned long long>(v->number), st.message().c_str());
  }
}

void Pipeline::drive() {
  if (cfg_.mpi_in_worker) return;
  for (;;) {
    std::shared_ptr<Version> v;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (queue_.empty()) return;
      v = queue_.front();
      cv_.wait(lock, [&] { return v->landed.load(); });
    }
    Status st = run_team_stages(*v);
    if (!st.is_ok()) LOG_ERROR("version %llu: %s", static_cast<unsigned long long>(v->number), st.message().c_str());
  }
}

// Before a new version takes a slot, the versions in flight must be decided at L2: otherwise the slot of
// the newest protected version could be overwritten while the version after it is not yet protected, and
// a node lost at that moment would leave nothing in L1/L2. With cache_versions = 2 a checkpoint therefore
// waits for the previous version's L2 (documented in docs/architecture.md).
void Pipeline::wait_for_l2() {
  drive();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    for (auto& q : queue_)
      if (!q->l2_decided) return false;
    return true;
  });
}

// The slot a new version overwrites (cache/slot_choice): what each slot holds, from the L1 records and
// the loans, and the version that must survive.
int Pipeline::choose_slot() {
  std::vector<uint64_t> occupant = lender_.lent_versions();
  occupant.resize(static_cast<size_t>(cache_->nslots()), 0);
  uint64_t newest_record = 0, newest_protected = 0;
  for (uint64_t v : cache_->versions()) {
    auto rec = cache_->read_record(v);
    if (!rec) continue;
    occupant[rec->slot] = std::max(occupant[rec->slot], v);
    newest_record = std::max(newest_record, v);
    if (protector_ && cache_->is_protected(v)) newest_protected = std::max(newest_protected, v);
  }
  Marks m = marks();
  uint64_t keep = newest_protected ? newest_protected : m.local ? m.local : newest_record;
  return cairn::choose_slot(occupant, keep);
}

int Pipeline::slot_for_rebuild() { return choose_slot(); }

bool incremental_pays(int unchanged_permille, double copy_ns_per_byte, double hash_ns_per_byte) {
  return unchanged_permille >= 0 && copy_ns_per_byte > 0 && hash_ns_per_byte > 0 &&
         static_cast<double>(unchanged_permille) / 1000.0 * copy_ns_per_byte > hash_ns_per_byte;
}

// The chunk hashes of the stream `slot` holds, when this process sealed it there (its version still the
// one the slot's record names: nothing rebuilt or wrote another version into it since) and chunked as
// `next` will be; empty otherwise. The slot is about to be written: what was known of it is forgotten.
Pipeline::Sealed Pipeline::held(int slot, const Manifest& next) {
  Sealed s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<size_t>(slot) < sealed_.size()) std::swap(s, sealed_[static_cast<size_t>(slot)]);
  }
  if (s.version == 0 || s.chunk_size != next.chunk_size || s.total_size != next.total_size) return {};
  // Its record still names the slot (another version written there would have dropped it first): one
  // record read on the blocking path, not the directory's.
  auto rec = cache_->read_record(s.version);
  if (!rec.is_ok() || static_cast<int>(rec->slot) != slot) return {};
  return s;
}

Pipeline::Sealed Pipeline::delta_base(int slot, const Manifest& next) {
  // The candidates, newest first; the protected marker is a file, read outside the lock.
  std::vector<std::pair<uint64_t, int>> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t s = 0; s < sealed_.size(); ++s) {
      const Sealed& c = sealed_[s];
      if (static_cast<int>(s) == slot || c.version == 0 || c.version >= next.version) continue;
      if (c.chunk_size != next.chunk_size || c.total_size != next.total_size) continue;
      candidates.emplace_back(c.version, static_cast<int>(s));
    }
  }
  std::sort(candidates.rbegin(), candidates.rend());
  for (const auto& [version, s] : candidates) {
    if (!cache_->is_protected(version)) continue;  // l2_every > 1, or its L2 failed: an older one may do
    std::lock_guard<std::mutex> lock(mu_);
    Sealed best = sealed_[static_cast<size_t>(s)];
    if (best.version != version) return {};
    best.slot = s;
    return best;
  }
  return {};
}

void Pipeline::read_base(const Version& v, int delta) {
  if (v.base_slot < 0) return;
  std::lock_guard<std::mutex> lock(base_mu_);
  if (base_readers_.size() <= static_cast<size_t>(v.base_slot)) base_readers_.resize(static_cast<size_t>(v.base_slot) + 1);
  base_readers_[static_cast<size_t>(v.base_slot)] += delta;
}

bool Pipeline::base_read(int slot) {
  std::lock_guard<std::mutex> lock(base_mu_);
  return static_cast<size_t>(slot) < base_readers_.size() && base_readers_[static_cast<size_t>(slot)] > 0;
}

void Pipeline::prepare_slots(uint64_t size, uint64_t red_size) {
  cache_->prepare(size, red_size, [this](int s) { return lender_.is_lent(s) || base_read(s); });
}

Status Pipeline::take(Manifest manifest, bool flush, const std::vector<SnapshotRegion>& regions,
                      const std::vector<FileSource>& files, const Status& failed, double* blocking_seconds) {
  const uint64_t number = manifest.version;
  const double t_enter = now_seconds();
  wait_for_l2();
  const double t_l2 = now_seconds();
  int slot = choose_slot();
  const double t_chosen = now_seconds();
  lender_.lend(slot, number);  // waits until an older version reading it has left
  const double t_lent = now_seconds();
  double t_dropped = t_lent;
  auto v = std::make_shared<Version>();
  v->number = number;
  v->slot = slot;
  v->flush = flush;
  v->protect = cfg_.l2_every > 0 && number % static_cast<uint64_t>(cfg_.l2_every) == 0;
  *blocking_seconds = 0;
  Status local = [&]() -> Status {
    CAIRN_TRY(failed);
    // What the slot holds, for an incremental copy (read before the record goes); then the previous
    // occupant of the slot stops counting at L1 before its bytes are overwritten.
    if (files.empty()) {
      Sealed h = held(slot, manifest);
      v->held_version = h.version;
      v->held_protected = h.version != 0 && cache_->is_protected(h.version);
      v->held_hashes = std::move(h.hashes);
      v->held_generation = h.generation;
      if (protector_) {
        Sealed b = delta_base(slot, manifest);
        v->base_version = b.version;
        v->base_slot = b.version != 0 ? b.slot : -1;
        v->base_hashes = std::move(b.hashes);
        read_base(*v, +1);
      }
    }
    CAIRN_TRY(cache_->release_slot(slot));
    double t0 = t_dropped = now_seconds();
    uint64_t memory_bytes = 0;  // the slot holds the memory regions only
    for (const auto& r : regions) memory_bytes = std::max(memory_bytes, r.offset + r.size);
    const uint64_t slot_bytes = files.empty() ? manifest.total_size : file_region_offset(memory_bytes);
    CAIRN_ASSIGN_OR_RETURN(mapped, cache_->slot(slot, slot_bytes));
    // The other slots' preparation waits until the copy is over (it shares the rank's core).
    CacheStore::PrepareHold hold(*cache_);
    v->data = mapped->data();
    // Chunks that land whole from device memory are hashed as they arrive (device/device_snapshot.hpp).
    snapshot_->set_chunking(files.empty() ? manifest.chunk_size : 0, manifest.total_size);
    // A snapshotter that tracks writes (cow) finds the unchanged chunks for nothing; a copy hashes them.
    const bool incremental = cfg_.l1_incremental == L1Incremental::on ||
                             (cfg_.l1_incremental == L1Incremental::automatic &&
                              (snapshot_->tracks_writes() ||
                               incremental_pays(last_unchanged_permille_, copy_ns_per_byte_, hash_ns_per_byte_)));
    if (incremental && !v->held_hashes.empty()) snapshot_->set_previous(v->held_hashes, v->held_generation);
    CAIRN_TRY(snapshot_->begin(regions, mapped->data()));
    v->snapshot_begun = true;
    if (!files.empty()) {
      // The stream's bytes between the memory regions and the first file are zero (version_view.hpp).
      if (slot_bytes > memory_bytes) memset(mapped->data() + memory_bytes, 0, slot_bytes - memory_bytes);
      std::vector<VersionView::File> in_view;
      for (const auto& f : files) in_view.push_back({f.path, f.offset, f.size});
      CAIRN_ASSIGN_OR_RETURN(view, VersionView::map(cache_->slot_path(slot), memory_bytes, in_view, manifest.total_size));
      v->view = std::move(view);
      v->data = v->view->data();
    }
    *blocking_seconds = now_seconds() - t0;
    if (cfg_.inject) cfg_.inject->point("checkpoint", number);
    return Status::ok();
  }();
  v->manifest = std::move(manifest);
  v->t_copy = *blocking_seconds;
  v->local_status = local;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(v);
  }
  const double t_queued = now_seconds();
  cv_.notify_all();
  LOG_DEBUG("version %llu taken in %.3f ms: earlier versions' L2 %.3f, slot choice %.3f, slot loan %.3f, old record %.3f, "
            "snapshot %.3f, hand-over %.3f, wake-up %.3f",
            static_cast<unsigned long long>(number), (now_seconds() - t_enter) * 1e3, (t_l2 - t_enter) * 1e3,
            (t_chosen - t_l2) * 1e3, (t_lent - t_chosen) * 1e3, (t_dropped - t_lent) * 1e3, *blocking_seconds * 1e3,
            (t_queued - t_dropped - *blocking_seconds) * 1e3, (now_seconds() - t_queued) * 1e3);
  return local;
}

void Pipeline::leave(Version& v) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    v.done = true;
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](auto& q) { return q.get() == &v; }), queue_.end());
  }
  read_base(v, -1);
  lender_.give_back(v.slot);
  cv_.notify_all();
}

Status Pipeline::wait_all() {
  drive();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty(); });
  }
  std::lock_guard<std::mutex> lock(mu_);
  Status st = first_failure_;
  first_failure_ = Status::ok();
  return st;
}

// Rank 0, after a commit: remove the versions beyond keep_flushed. Deleting every rank's file of an old
// version takes time on some file systems (an unlink of a 256 MiB file, tens of ms), so it runs on a
// thread of its own: neither cairn_wait nor the next version's seal and write wait for it. The device
// work of freeing the blocks would still slow the next version's write, so with recycle_flushed the data
// files go to the recycle pool, where the next writers overwrite them (l3_store.hpp). Requests
// that arrive while a prune runs fold into one more pass. l3::prune never removes the newest committed
// version nor a directory newer than it (a version being written), whatever the pipeline does meanwhile.
void Pipeline::prune_l3() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    prune_requested_ = true;
    if (!pruner_.joinable()) pruner_ = std::thread([this] { pruner_loop(); });
  }
  cv_.notify_all();
}

void Pipeline::pruner_loop() {
  become_background_thread();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return prune_requested_ || pruner_stop_; });
    if (!prune_requested_) return;  // stopped, nothing asked: a prune asked for runs to its end first
    prune_requested_ = false;
    lock.unlock();
    Status p = l3::prune(cfg_.layout, cfg_.keep_flushed, cfg_.recycle_flushed);
    if (!p.is_ok()) LOG_WARN("pruning old L3 versions: %s", p.message().c_str());
    lock.lock();
  }
}

// At finalize: the newest version to L3 when the periodic flush has not taken it. The pipeline is idle,
// so the application thread may use the team.
Status Pipeline::flush_now(uint64_t number) {
  Version v;
  v.number = number;
  v.flush = true;
  v.local_ok = true;
  auto rec = cache_->read_record(number);
  Status local = rec.is_ok() ? Status::ok() : rec.status();
  if (local.is_ok()) {
    v.manifest = rec->manifest;
    v.slot = static_cast<int>(rec->slot);
    auto slot = cache_->slot(v.slot, rec->manifest.total_size);
    if (slot.is_ok()) v.data = (*slot)->data();
    else local = slot.status();
  }
  v.local_status = local;
  events_->flush_began(number, /*at_finalize=*/true);
  if (local.is_ok()) flush(v, /*report_start=*/false);
  else v.l3_status = local;
  CAIRN_TRY(agree_flushed(v));
  if (v.prune) prune_l3();
  if (!v.flushed_ok)
    return make_error(Code::ERR_IO, "flush of version %llu at finalize failed", static_cast<unsigned long long>(number));
  if (team_->rank() == 0)
    LOG_INFO("version %llu flushed to %s at finalize", static_cast<unsigned long long>(number), cfg_.layout.prefix.c_str());
  return Status::ok();
}

}  // namespace cairn::pipeline
