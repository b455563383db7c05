// The restart that applications take, carried out in place. plan_restart gathers what every rank holds
// (records, protected markers, committed L3 versions; no data read) and has restore::plan_restore decide
// which version to restore and from which level; carry_out reads it straight into the regions, verifying
// every chunk as it lands:
//
//   L1  every rank reads its slot file into its regions, piece by piece (pread, or a copy out of a
//       mapping, as slot_read_way measured on this machine) and hashes each chunk while it is in cache.
//   L2  the ranks that hold the version do the same; every redundancy set with lost members shares its
//       set record and rebuilds the lost ranks' data only, into their regions (where these are one
//       stretch of memory: each piece received into a buffer that stays in the CPU cache and copied into
//       the regions from there, hashed as it is copied; else into staging memory, copied out verifying),
//       while the survivors read their own slots beside the exchange. When cairn_restart has nothing
//       left to do, each such set exchanges once more, whole, on a background thread (background MPI
//       progress), and the lost ranks write the version back into their cache (write-back), so that it
//       is protected again without the application waiting for it. Without MPI_THREAD_MULTIPLE the one
//       exchange is whole, into staging memory, and only the write-back is left to a thread.
//   L3  every rank reads its file into its regions (try_l3 with restart_in_place_).
//
// Nothing is written before every rank knows its regions fit the version. A chunk that fails anywhere
// makes carry_out report not done, and cairn_restart runs the full search (restart_search.cpp). The
// phases are logged with their times at log = info on rank 0.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "base/fsutil.hpp"
#include "base/history.hpp"
#include "base/log.hpp"
#include "base/stream_reader.hpp"
#include "core/runtime.hpp"
#include "mpi/mpi_util.hpp"
#include "l3/l3_store.hpp"
#include "restore/inventory.hpp"
#include "restore/mpi/set_rebuild.hpp"
#include "restore/plan.hpp"

namespace cairn {
using restore::kHasL1;
using restore::RestartInventory;

namespace {
using ull = unsigned long long;

// Whether the extents are one stretch of memory in stream order (a single region, the usual case).
bool contiguous(const std::vector<StreamExtent>& extents) {
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].size && extents[i].dst != extents[0].dst + extents[i].offset) return false;
  return true;
}

// A version the in-place paths cannot restore into the regions protected now: they give way to the full
// search, which restores it or says what does not match.
Status regions_unfit() {
  return make_error(Code::ERR_NOT_SUPPORTED, "the version's regions are not this rank's memory regions");
}

int all_ok(MPI_Comm comm, const Status& mine, Status* mpi) {
  int ok = mine.is_ok() ? 1 : 0, all = 0;
  *mpi = mpi_status(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce", __FILE__, __LINE__);
  return mpi->is_ok() ? all : 0;
}
}  // namespace

Status Runtime::plan_restart() {
  const double t0 = now_seconds();
  RestartInventory inv;
  CAIRN_TRY(gather_inventory(&inv));
  const uint64_t newest_own = inv.candidates.empty() ? 0 : *inv.candidates.begin();
  // A version of another rank count newer than every one of this count: the reshaping restart. Asked by
  // cairn_restart_available, it is only named, from the records (no data read), so that cairn_restart
  // searches and reads it with the regions at hand: straight into them where they fit (reshaper.hpp).
  if (!restart_in_place_) {
    const ReshapeJob job = reshape_job();
    ReshapeProbe probe;
    CAIRN_TRY(Reshaper(job, regions_.table(), false, rejected_).probe(newest_own, UINT64_MAX, &probe));
    if (probe.version) {
      RestartPlan p;
      p.version = probe.version;
      p.level = probe.level;
      p.label = probe.label;
      p.p_old = probe.p_old;
      if (rank_ == 0)
        LOG_INFO("restart: search %.1f ms: version %llu ('%s', written by %d ranks) at %s or below, read by cairn_restart",
                 (now_seconds() - t0) * 1e3, static_cast<ull>(p.version), p.label.c_str(), p.p_old,
                 history::level_name(p.level));
      plan_ = std::move(p);
      return Status::ok();
    }
    // None that the records allow: find_reshaped would find none either (it tries the same levels), so
    // the plan of this rank count follows.
  } else {
    RestartChoice c;
    std::string why;
    Status newer = find_reshaped(&c, &why, newest_own, UINT64_MAX);
    if (newer.code() == Code::ERR_MPI) return newer;
    if (newer.is_ok()) {
      pending_ = std::move(c);
      return Status::ok();
    }
  }
  // Which version from which level: decided by the inventory alone (restore/plan.cpp), the same on every rank.
  const restore::RestorePlan chosen = restore::plan_restore({nranks_, inv, placement_, cfg_.redundancy});
  if (rank_ == 0)
    for (const auto& why : chosen.passed_over) LOG_DEBUG("restart: plan passes over %s", why.c_str());
  if (chosen.chosen()) {
    const uint64_t v = chosen.version;
    RestartPlan p;
    p.version = v;
    p.level = static_cast<int>(chosen.level);
    p.flags = chosen.flags;
    p.in_l3 = chosen.in_l3;
    // The label, from the lowest rank holding the version (its record), or rank 0 (COMMIT).
    const int root = chosen.label_root;
    char label[256] = {0};
    if (rank_ == root) {
      if (p.level == CAIRN_LEVEL_L3) {
        auto c = l3::read_commit(layout_, v);
        if (c) snprintf(label, sizeof label, "%s", c->label.c_str());
      } else {
        auto r = cache_.read_record(v);
        if (r) snprintf(label, sizeof label, "%s", r->manifest.label.c_str());
      }
    }
    CAIRN_MPI(MPI_Bcast(label, sizeof label, MPI_CHAR, root, app_comm_));
    p.label = label;
    if (rank_ == 0)
      LOG_INFO("restart: search %.1f ms: version %llu ('%s') at %s", (now_seconds() - t0) * 1e3, static_cast<ull>(v),
               p.label.c_str(), history::level_name(p.level));
    plan_ = std::move(p);
    return Status::ok();
  }
  // Nothing restorable by the inventory alone: the full search says what there is (an older version of
  // another rank count) or why nothing can be rebuilt.
  RestartChoice c;
  CAIRN_TRY(find_restart(&c));
  pending_ = std::move(c);
  return Status::ok();
}

Status Runtime::carry_out(const RestartPlan& plan, bool* done, bool* unsuited) {
  *done = false;
  *unsuited = false;
  switch (plan.level) {
    case CAIRN_LEVEL_L1: return read_l1_in_place(plan, done, unsuited);
    case CAIRN_LEVEL_L2: return restore_l2_in_place(plan, done, unsuited);
    case CAIRN_LEVEL_L3: {
      RestartChoice c;
      Status st = try_l3(plan.version, &c);
      if (st.code() == Code::ERR_MPI) return st;
      if (!st.is_ok()) return Status::ok();
      c.in_l3 = true;
      CAIRN_TRY(apply_restart(c));
      *done = true;
      return Status::ok();
    }
  }
  return Status::ok();
}

// Restart from L3 served by the service's agents (service_restart = agents; docs/service.md): every rank
// reads its manifest, checks its regions fit, and has its agent read, verify and fi_write its bytes into
// the regions; then hashes what landed against the manifest. Done only when every rank's bytes verified;
// else (no service, an agent lost or refusing, a chunk that fails) the ranks read the version themselves
// (carry_out writes every region again), so nothing unverified is ever restored.
Status Runtime::restore_through_agents(const RestartPlan& plan, bool* done) {
  *done = false;
  const uint64_t v = plan.version;
  const double t0 = now_seconds();
  Manifest m;
  auto read = l3::read_manifest(layout_, v, static_cast<uint32_t>(rank_));
  if (read) m = std::move(*read);
  Status mine = !read ? read.status() : regions_.fit(m, rank_, nranks_) ? Status::ok() : regions_unfit();
  if (mine.is_ok()) {
    std::vector<pipeline::RestoreTarget> targets;
    for (const auto& e : m.regions) targets.push_back({e.name, static_cast<uint8_t*>(regions_.table().at(e.name).ptr), e.size});
    mine = flusher_->restore(v, targets);
  }
  // What landed, hashed against the manifest in place (the agent verified what it read; this checks what arrived).
  if (mine.is_ok())
    mine = read_verified(m, regions_.extents(m), [](uint64_t, uint64_t, uint8_t*) { return Status::ok(); })
               .prefixed("what the agent wrote");
  if (!mine.is_ok())
    LOG_WARN("restart: version %llu through the agents: %s", static_cast<ull>(v), mine.message().c_str());
  Status mpi;
  const bool all = all_ok(app_comm_, mine, &mpi);
  CAIRN_TRY(mpi);
  if (!all) {
    events_->restart_via("application");
    if (rank_ == 0) {
      LOG_INFO("restart: version %llu from L3 is read by the ranks themselves (the agents could not serve every rank)",
               static_cast<ull>(v));
    }
    return Status::ok();
  }
  restored_files_.clear();
  restored(v, CAIRN_LEVEL_L3, m.label, true);
  events_->restart_via("agents");
  if (rank_ == 0) {
    LOG_INFO("restarted from version %llu ('%s') at L3, served by the agents (read, verified, written into the "
             "regions and verified again in %.1f ms on rank 0)", static_cast<ull>(v), m.label.c_str(),
             (now_seconds() - t0) * 1e3);
  }
  *done = true;
  return Status::ok();
}

// Threads per rank for reading into the regions (restart_threads; 0: this host's cores over its ranks,
// at most 4). Collective over the job when restart_threads is 0.
Status Runtime::restart_read_threads(int* threads) {
  if (cfg_.restart_threads > 0) {
    *threads = cfg_.restart_threads;
    return Status::ok();
  }
  HostShare share;
  CAIRN_TRY(host_share(app_comm_, &share));
  *threads = share.threads_per_rank(4);
  return Status::ok();
}

// This rank's slot of version v into its regions, verified, in one pass by `threads` threads, the way
// slot_read_way measured fastest on this machine: pread, piece by piece; out of the cache's own mapping of
// the slot (always where the file system hands out huge pages), which the cache keeps (populated, as the
// preparation would have made it) for the checkpoints that later write the slot; or out of a new read-only
// mapping, its pages faulted in as they are read, dropped after. Out of a mapping, each piece is hashed
// where it lies and copied on (read_verified_in_memory). Where the probe chose a mapping, pread is still
// tried into these regions, part by part (read_verified_tried): the probe read into new memory, and the
// regions may be pages the kernel has written before, into which pread is several times faster.
Status Runtime::read_slot_into_regions(const L1Record& rec, int threads, double* seconds, std::string* how) {
  std::string unused;
  if (!how) how = &unused;
  *how = "copies into device memory";
  if (staged_ && !staged_->empty()) return read_slot_into_device(rec, seconds);
  const Manifest& m = rec.manifest;
  const int slot = static_cast<int>(rec.slot);
  std::string path = cache_.slot_path(slot);
  double t0 = now_seconds();
  CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(path, O_RDONLY));
  struct stat sb;
  if (fstat(fd.get(), &sb) != 0) return posix_error("fstat", path, errno);
  if (static_cast<uint64_t>(sb.st_size) < m.total_size)
    return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", path.c_str());
  const uint8_t* mapped = nullptr;
  std::optional<MappedFile> own;
  SlotReadRates rates;
  double mapped_gbps = 0;  // the probe's figure for the mapping read, 0 where not measured
  const SlotRead way = slot_read_way(static_cast<uint64_t>(sb.st_blksize), fd.get(), m.total_size, &rates);
  switch (way) {
    case SlotRead::cache_mapping:
      if (auto mm = cache_.slot(slot, m.total_size); mm && (*mm)->size() >= m.total_size) mapped = (*mm)->data();
      mapped_gbps = rates.cache_mapping;
      break;
    case SlotRead::own_mapping:
      if (auto mm = MappedFile::open_ro(path, /*populate=*/false); mm && mm->size() >= m.total_size) {
        own = std::move(mm).value();
        mapped = own->data();
      }
      mapped_gbps = rates.own_mapping;
      break;
    case SlotRead::pread:
      break;
  }
  const auto extents = regions_.extents(m);
  const StreamSource by_pread = pread_source(fd.get(), 0, path);
  Status st = Status::ok();
  if (mapped && mapped_gbps > 0 && rates.pread > 0) {
    // The probe read into new memory; these regions may be pages the kernel has written before (read_verified_tried).
    TriedRead tried;
    st = read_verified_tried(m, extents, mapped, by_pread, mapped_gbps, threads, &tried);
    auto mib = [](uint64_t b) {
      char t[32];
      snprintf(t, sizeof t, "%.1f MiB", static_cast<double>(b) / (1 << 20));
      return std::string(t);
    };
    *how = tried.memory_bytes == 0 ? std::string("pread")
                                   : "pread (" + mib(tried.source_bytes) + ") and " + slot_read_name(way) + " (" +
                                         mib(tried.memory_bytes) + ")";
    LOG_DEBUG("restart: %llu MiB of the slot read with pread (%.2f-%.2f GB/s a part), %llu MiB out of the mapping "
              "(the probe's %.2f GB/s)", static_cast<ull>(tried.source_bytes >> 20), tried.source_gbps_min,
              tried.source_gbps_max, static_cast<ull>(tried.memory_bytes >> 20), mapped_gbps);
  } else {
    st = mapped ? read_verified_in_memory(m, extents, mapped, threads) : read_verified(m, extents, by_pread, threads);
    *how = mapped ? slot_read_name(way) : "pread";
  }
  *seconds = now_seconds() - t0;
  return st.prefixed(path);
}

// Every rank holds the version in its own L1 slot (the plan says so): check together that every rank's
// regions fit (nothing read otherwise), then read every slot into its regions.
Status Runtime::read_l1_in_place(const RestartPlan& plan, bool* done, bool* unsuited) {
  *done = false;
  const uint64_t v = plan.version;
  auto rec = cache_.read_record(v);
  Status mine = !rec.is_ok()                                 ? rec.status()
                : regions_.fit(rec->manifest, rank_, nranks_) ? Status::ok()
                                                              : regions_unfit();
  Status mpi;
  if (!all_ok(app_comm_, mine, &mpi)) {
    *unsuited = true;  // files, or regions that differ: the full search restores (or says why not)
    return mpi;
  }
  double read_s = 0;
  int threads = 1;
  std::string how;
  CAIRN_TRY(restart_read_threads(&threads));
  mine = read_slot_into_regions(*rec, threads, &read_s, &how);
  if (!mine.is_ok()) LOG_WARN("restart: version %llu in L1: %s", static_cast<ull>(v), mine.message().c_str());
  if (!all_ok(app_comm_, mine, &mpi)) return mpi;
  restored_files_.clear();
  restored(v, CAIRN_LEVEL_L1, rec->manifest.label, plan.in_l3);
  if (rank_ == 0)
    LOG_INFO("restarted from version %llu ('%s') at L1 (slot read into the regions by %s and verified in %.1f ms on "
             "rank 0, %d thread%s)", static_cast<ull>(v), rec->manifest.label.c_str(), how.c_str(), read_s * 1e3, threads,
             threads == 1 ? "" : "s");
  *done = true;
  return Status::ok();
}

// Some ranks lost the version (their cache is gone); their sets rebuild it. See the top of this file.
Status Runtime::restore_l2_in_place(const RestartPlan& plan, bool* done, bool* unsuited) {
  *done = false;
  const uint64_t v = plan.version;
  const bool i_hold = (plan.flags[static_cast<size_t>(rank_)] & kHasL1) != 0;
  std::vector<int> good(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) good[static_cast<size_t>(r)] = (plan.flags[static_cast<size_t>(r)] & kHasL1) ? 1 : 0;
  bool my_set_lost = false;
  CAIRN_TRY(l2_can_rebuild(good, plan.flags, "", &my_set_lost));
  const double t0 = now_seconds();

  // 1. What each rank will restore: a survivor its record's manifest; a member of a set with losses the
  //    set record (shared by the set's first survivor), which gives a lost rank its manifest. Every rank's
  //    regions must fit before anything is written.
  Manifest m;
  std::optional<L1Record> rec;
  std::optional<restore::SetRebuild> set;
  Status mine = Status::ok();
  if (i_hold) {
    auto r = cache_.read_record(v);
    if (r) rec = std::move(r).value(), m = rec->manifest;
    else mine = r.status();
  }
  if (my_set_lost) {
    auto shared = share_my_set(v, good);
    if (shared.status().code() == Code::ERR_MPI) return shared.status();
    if (shared) set = std::move(shared).value();
    else if (mine.is_ok()) mine = shared.status();
    if (set && !i_hold) m = set->plan.mine;
  }
  if (mine.is_ok() && !regions_.fit(m, rank_, nranks_)) mine = regions_unfit();
  Status mpi;
  if (!all_ok(app_comm_, mine, &mpi)) {
    *unsuited = true;
    return mpi;
  }

  int threads = 1;
  CAIRN_TRY(restart_read_threads(&threads));

  // 2. The sets with losses exchange the lost ranks' data only (their redundancy data comes later, off
  //    the application's path): survivors pass their slot and redundancy files (mapped, read by the
  //    exchange only; populated first where they lie on huge pages); a lost rank's data goes into its
  //    regions where they are one stretch of memory in stream order (the usual single region), piece by
  //    piece through the exchange's receive buffer (LandingVerifier::place), else into staging memory.
  //    Without background MPI progress there is no later: the exchange is whole, into staging memory, and
  //    only the write-back is left to a thread.
  const bool later = mpi_in_worker_;
  // A survivor's mapped slot and redundancy files, or a lost rank's staging memory (the rebuild's buffers).
  auto buf = std::make_shared<restore::SetBuffers>();
  const std::vector<StreamExtent> extents = regions_.extents(m);
  const bool staged = !i_hold && (!later || !contiguous(extents));  // a lost rank's data lands in staging memory
  bool survivor_read = false;
  double read_s = 0;
  if (my_set_lost) {
    Status ready = Status::ok();
    if (i_hold)
      ready = restore::survivor_buffers(cache_.slot_path(static_cast<int>(rec->slot)), cache_.red_path(static_cast<int>(rec->slot)),
                                        m.total_size, set->plan.redundancy_len, restore::Populate::where_huge_pages, buf.get());
    else if (staged)  // without a later exchange a lost rank rebuilds its redundancy data now too
      ready = restore::staging_buffers(m.total_size, later ? 0 : set->plan.redundancy_len, buf.get());
    else
      buf->data = extents.empty() ? nullptr : extents.front().dst;  // into the regions (placed)
    // A survivor reads its own slot into its regions meanwhile, on a thread, and waits for its transfers
    // gently (a lost rank pulls the bytes itself where MPI copies once between processes).
    Status own = Status::ok();
    std::optional<LandingVerifier> verifier;  // a lost rank's data into its regions: verified as it is copied in
    if (!i_hold && !staged) verifier.emplace(m, buf->data);
    std::thread reader;
    if (i_hold && ready.is_ok() && !(staged_ && !staged_->empty()))
      reader = std::thread([&] { own = read_slot_into_regions(*rec, threads, &read_s); });
    const bool gentle = reader.joinable();
    mine = later ? set->exchange_data(ready, buf->data, buf->red, gentle, verifier ? &*verifier : nullptr)
                 : set->exchange(ready, buf->data, buf->red, "", /*verify_lost=*/false, redundancy::RebuildPart::all, gentle);
    if (mine.is_ok() && verifier) mine = verifier->result().prefixed("rebuilt data");
    if (reader.joinable()) {
      reader.join();
      survivor_read = true;
      if (mine.is_ok()) mine = own;
    }
    if (mine.code() == Code::ERR_MPI) return mine;
  }
  const double t_exchanged = now_seconds();

  // 3. The ranks not read yet: a survivor in a set without losses (or with device regions) reads its slot
  //    into its regions, hashing each chunk as it lands; a lost rank whose data went to staging memory
  //    copies it into its regions, verifying.
  if (mine.is_ok() && i_hold && !survivor_read) {
    buf->data_file.reset(), buf->red_file.reset();
    mine = read_slot_into_regions(*rec, threads, &read_s);
  }
  if (!mine.is_ok() && i_hold) LOG_WARN("restart: version %llu in L1: %s", static_cast<ull>(v), mine.message().c_str());
  if (mine.is_ok() && my_set_lost && staged)
    mine = read_verified_in_memory(m, extents, buf->data, threads).prefixed("rebuilt data");
  if (!mine.is_ok() && !i_hold) LOG_WARN("restart: version %llu at L2: %s", static_cast<ull>(v), mine.message().c_str());
  if (!all_ok(app_comm_, mine, &mpi)) return mpi;
  const double t_verified = now_seconds();

  // 4. The sets with losses protect the version again beside the application: the lost ranks' data and
  //    redundancy data rebuilt once more and written into their caches (write-back).
  if (my_set_lost && later) {
    start_reprotect(*set, i_hold ? rec->slot : 0, i_hold && buf->red_file ? buf : nullptr);
    buf.reset();  // a survivor's mappings are the re-protection's now: unmapped on its thread
  } else if (my_set_lost && !i_hold) {
    finish_write_back();
    write_back_work_ = [this, slot = pipeline_->slot_for_rebuild(), set = *set, buf, t = now_seconds()] {
      write_back(set, slot, buf->data, buf->red, t);
    };
  }
  restored_files_.clear();
  restored(v, CAIRN_LEVEL_L2, m.label, plan.in_l3);
  if (rank_ == 0) {
    std::string list;
    for (int r = 0; r < nranks_; ++r)
      if (!good[static_cast<size_t>(r)]) list += (list.empty() ? "" : ",") + std::to_string(r);
    LOG_INFO("restarted from version %llu ('%s') at L2, rebuilt for ranks %s: their data exchanged and verified as it "
             "landed %.1f ms, then read and verified %.1f ms on rank 0 (%d thread%s); redundancy data and write-back %s",
             static_cast<ull>(v), m.label.c_str(), list.c_str(), (t_exchanged - t0) * 1e3, (t_verified - t_exchanged) * 1e3,
             threads, threads == 1 ? "" : "s", later ? "in the background" : "rebuilt with the data, written back in the background");
  }
  *done = true;
  return Status::ok();
}

// Version v protected again after an L2 restart that rebuilt the lost ranks' data only: on a thread of
// its own (background MPI progress), on a copy of the set's communicator, the set exchanges once more,
// whole (data and redundancy data), into memory of the lost ranks' own, which they write into their
// cache as a checkpoint would (write_back); survivors read their slot and redundancy files, which no
// checkpoint reuses before finish_write_back. A failure is logged: the version stays restorable from the
// other levels, and the next checkpoint protects the job again.
void Runtime::start_reprotect(const restore::SetRebuild& set, uint32_t my_slot,
                              std::shared_ptr<restore::SetBuffers> mapped) {
  finish_write_back();
  const bool i_lost = set.job.i_lost();
  const int slot = i_lost ? pipeline_->slot_for_rebuild() : -1;  // chosen here, on the application's thread
  MPI_Comm comm = MPI_COMM_NULL;
  if (MPI_Comm_dup(set.job.comm, &comm) != MPI_SUCCESS) comm = MPI_COMM_NULL;
  auto work = [this, set = set, my_slot, i_lost, slot, comm, mapped = std::move(mapped)]() mutable {
    const double t0 = now_seconds();
    const uint64_t v = set.job.version;
    const uint64_t total = set.plan.mine.total_size;
    const size_t red_len = set.plan.redundancy_len;
    restore::SetBuffers buf;
    set.job.comm = comm;
    Status ready = comm == MPI_COMM_NULL ? Status(Code::ERR_MPI, "MPI_Comm_dup of the set's communicator failed")
                   : i_lost ? restore::staging_buffers(total, red_len, &buf)
                   : mapped ? Status::ok()
                            : restore::survivor_buffers(cache_.slot_path(static_cast<int>(my_slot)),
                                                        cache_.red_path(static_cast<int>(my_slot)), total, red_len,
                                                        restore::Populate::yes, &buf);
    if (mapped) buf = std::move(*mapped), mapped.reset();
    Status st = comm == MPI_COMM_NULL ? ready
                                      : set.exchange(ready, buf.data, buf.red, "version " + std::to_string(v) + " rebuilt again");
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    if (!st.is_ok()) {
      LOG_WARN("restart: protecting version %llu again at L2 failed (it stays restorable from the other levels; the "
               "next checkpoint protects the job again): %s", static_cast<ull>(v), st.message().c_str());
      return;
    }
    if (i_lost) write_back(set, slot, buf.data, buf.red, t0);
  };
  write_back_work_ = std::move(work);
}

// The rebuilt version into this rank's cache (restore::SetRebuild::write_back: slot `slot`, which no
// version of the pipeline holds), logged. Runs on the re-protection's thread; the next cairn call that
// uses the cache waits for it.
void Runtime::write_back(const restore::SetRebuild& set, int slot, const uint8_t* data, const uint8_t* red, double t0) {
  const uint64_t v = set.job.version;
  Status st = set.write_back(cache_, slot, data, red);
  if (!st.is_ok())
    LOG_WARN("restart: writing version %llu back into the cache failed (it stays restorable from the other "
             "levels; the next checkpoint protects the job again): %s", static_cast<ull>(v), st.message().c_str());
  else
    LOG_INFO("restart: version %llu rebuilt again and written back into this rank's cache in %.1f ms",
             static_cast<ull>(v), (now_seconds() - t0) * 1e3);
}

void Runtime::start_write_back() {
  if (!write_back_work_) return;
  if (write_back_.joinable()) write_back_.join();  // none runs while work waits (its setter joined it first)
  write_back_ = BackgroundThread(std::move(write_back_work_));
  write_back_work_ = nullptr;
}

void Runtime::finish_write_back() {
  start_write_back();
  if (write_back_.joinable()) write_back_.join();
}

}  // namespace cairn
