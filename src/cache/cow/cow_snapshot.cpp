#include "cache/cow/cow_snapshot.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "cache/cow/cow_snapshotter.hpp"
#include "cache/cow/plan.hpp"

namespace cairn {
namespace cow {

bool thp_allowed() {
  char buf[128] = {};
  int fd = ::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 && strstr(buf, "[never]") == nullptr;
}

// ---- begin / complete --------------------------------------------------------------------------------

Status CowSnapshotter::start() {
  hot_.reserve(kHotBlocks);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) return posix_error("eventfd", "(cow snapshotter)", errno);
  with_signals_blocked([&] {
    copier_ = std::thread([this] { copier_loop(); });
    handler_ = std::thread([this] { handler_loop(); });
  });
  // Named as top -H, gdb and perf show them (here, so that the names are there when start() returns).
  (void)pthread_setname_np(copier_.native_handle(), "cairn-cow-copy");
  (void)pthread_setname_np(handler_.native_handle(), "cairn-cow-fault");
  return Status::ok();
}

CowSnapshotter::~CowSnapshotter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (in_flight_) cv_.wait(lock, [&] { return copied_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (copier_.joinable()) copier_.join();
  const bool tracked = tracking_;
  if (tracked) stop_tracking();  // while the handler still serves the writers
  uint64_t one = 1;
  if (stop_fd_ >= 0 && write(stop_fd_, &one, sizeof one) != sizeof one) LOG_ERROR("cow snapshotter: cannot stop its fault handler");
  if (handler_.joinable()) handler_.join();
  if (stop_fd_ >= 0) close(stop_fd_);
  if (tracked && huge_pages_ && !track_broken_) regather_after_tracking();
}

// The tracked memory, the application's alone again, gathered back into transparent huge pages where
// the tracking split them: a block first written above its first page is un-protected from that page
// up, which splits its huge page, and a block left write-protected cannot be gathered while tracking.
// Left so, the state would stay in 4 KiB pages for the rest of the process: a restart into it in the
// same process ran at half the speed of one into huge pages on this guest (performance.md, "An
// incremental version's bytes over every rank"). Not after an unmap or a discard reached a tracked
// range (the caller skips it): the addresses may be another mapping's now, and gathering would fill
// the discarded holes. Block by block, each asked whatever the one before answered: a call over many
// blocks gives up the rest when the kernel cannot get or charge a huge page, and its EINVAL also stands
// for one block of the wrong kind (a range that can never be gathered, MADV_NOHUGEPAGE or a kernel
// before 6.1, fails each call at once). A 64 MiB call per piece left the incremental cow L3 restart at
// 0.48 of a full one's, where block by block gave 0.91 (performance.md).
void CowSnapshotter::regather_after_tracking() {
  constexpr uint64_t kHuge = 2 << 20;
  const double t0 = now();
  uint64_t blocks = 0, failed = 0;
  for (const Tracked& t : tracked_)
    for (uint64_t p = (t.start + kHuge - 1) & ~(kHuge - 1); p + kHuge <= t.end; p += kHuge, ++blocks)
      if (madvise(reinterpret_cast<void*>(p), kHuge, kMadvCollapse) != 0) ++failed;
  LOG_DEBUG("cow snapshotter: the tracked memory gathered into huge pages again (%llu blocks of 2 MiB asked, %llu refused) in %.1f ms",
            static_cast<unsigned long long>(blocks), static_cast<unsigned long long>(failed), (now() - t0) * 1e3);
}

Status CowSnapshotter::begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) {
  std::unique_lock<std::mutex> lock(mu_);
  if (in_flight_)
    return make_error(Code::ERR_SEQUENCE, "snapshot begin: the previous snapshot is still in flight (complete it first)");
  t_begin_ = now();
  report_ = {};
  std::vector<uint64_t> previous = std::move(previous_);
  const uint64_t previous_gen = previous_gen_;
  previous_.clear();
  previous_gen_ = 0;
  CAIRN_ASSIGN_OR_RETURN(plan, plan_snapshot(regions, page_, opt_.eager_below));
  const double t_planned = now();

  std::vector<Watched> watched;
  for (const auto& p : plan.protect)
    watched.push_back({p.start, p.end, regions[p.region].offset + (p.start - reinterpret_cast<uint64_t>(regions[p.region].src))});
  const uint64_t n = chunk_size_ && stream_len_ ? (stream_len_ + chunk_size_ - 1) / chunk_size_ : 0;
  bool go_on = false;
  uint64_t tracked_blocks = 0;
  if (tracking_) {
    {
      // What the descriptor holds now is noted first (an unmap reported ends the tracking).
      std::lock_guard<std::mutex> hl(handler_mu_);
      handle_pending();
      go_on = !track_broken_ && tracker_.same_layout(watched, chunk_size_, stream_len_);
      tracked_blocks = tracker_.blocks();
    }
    if (!go_on) stop_tracking();
  }

  // Register the ranges to protect (tracked ranges are still registered); one the kernel refuses is
  // copied instead.
  std::vector<ProtectedRange> protect;
  for (const auto& p : plan.protect) {
    int err = go_on ? 0 : uffd_.register_wp(p.start, p.end - p.start);
    if (err == 0) {
      protect.push_back(p);
      continue;
    }
    const SnapshotRegion& r = regions[p.region];
    plan.eager.push_back({p.region, 0, r.size});
    plan.fallbacks.push_back({r.name, err == EBUSY ? "already registered with another userfaultfd"
                                                   : std::string("userfaultfd refused it: ") + strerror(err)});
  }
  std::vector<uint8_t> changed;  // the chunks to copy, when known (empty: all)
  uint64_t G = 0;
  ahead_.clear();
  if (go_on) ahead_.reserve(tracked_blocks);  // at most one entry a block, before handler_mu_ is taken
  {
    std::lock_guard<std::mutex> hl(handler_mu_);
    tracked_.clear();
    names_.clear();
    uint64_t pages = 0;
    for (const auto& r : regions) names_.push_back(r.name);
    for (const auto& p : protect) {
      const SnapshotRegion& r = regions[p.region];
      const uint64_t off = p.start - reinterpret_cast<uint64_t>(r.src);
      tracked_.push_back({p.start, p.end, slot + r.offset + off, pages, p.region, r.offset + off});
      pages += (p.end - p.start) / page_;
    }
    if (pages > pages_cap_) {  // zero: pending (the copier resets them after each snapshot)
      pages_.reset(new std::atomic<uint8_t>[pages]());
      pages_cap_ = pages;
    }
    total_pages_ = pages;
    done_pages_ = 0;
    hint_ = 0;
    failure_ = 0;
    faults_ = 0;
    fault_bytes_ = 0;
    fault_wait_ns_ = 0;
    report_.unprotect_faults = unprotect_faults_.exchange(0);  // since the previous begin()
    report_.unprotect_wait_seconds = static_cast<double>(unprotect_wait_ns_.exchange(0)) * 1e-9;
    G = ++gen_;
    const bool track = opt_.track_writes && n > 0 && !tracked_.empty() && protect.size() == plan.protect.size();
    if (track && !go_on) {  // tracking starts with this snapshot: every page is protected below
      tracker_.start(watched, chunk_size_, stream_len_, G, opt_.fault_block);
      track_broken_ = false;
    }
    tracking_ = track;
    if (go_on && previous.size() == n) changed = tracker_.changed_since(previous_gen, G);
    ahead_blocks_ = 0;
    if (go_on)
      tracker_.blocks_to_unprotect_ahead(G, opt_.unprotect_ahead, [&](size_t r, uint64_t a, uint64_t b) { ahead_.push_back({r, a, b}); });
    if (!changed.empty()) {
      uint64_t done = 0;
      for (uint64_t c = 0; c < n; ++c) {
        if (changed[c]) continue;
        report_.unchanged_bytes += tracker_.chunk_len(c);
        tracker_.pages_of(c, c + 1, page_, true, [&](size_t r, uint64_t p0, uint64_t p1) {
          for (uint64_t k = p0; k < p1; ++k) pages_[tracked_[r].first_page + k].store(kDone, std::memory_order_relaxed);
          done += p1 - p0;
        });
      }
      // A changed chunk is copied only in the blocks written since: where it straddles one that was
      // not (the region need not be aligned to the blocks, and a huge page's write marks all of it),
      // the slot holds that part's bytes already. Only the changed chunks' pages are looked at here.
      for (uint64_t c0 = 0; c0 < n;) {
        if (!changed[c0]) {
          ++c0;
          continue;
        }
        uint64_t c1 = c0 + 1;
        while (c1 < n && changed[c1]) ++c1;
        tracker_.unwritten_pages(c0, c1, previous_gen, page_, [&](size_t r, uint64_t p0, uint64_t p1) {
          for (uint64_t k = tracked_[r].first_page + p0; k < tracked_[r].first_page + p1; ++k)
            if (pages_[k].load(std::memory_order_relaxed) != kDone) {
              pages_[k].store(kDone, std::memory_order_relaxed);
              ++done;
            }
        });
        c0 = c1;
      }
      done_pages_ = done;
    }
    active_ = !tracked_.empty();
  }
  const double t_registered = now();
  if (!go_on) {
    for (const auto& t : tracked_) {
      int err = uffd_.protect(t.start, t.end - t.start);
      if (err != 0) return fail_begin(std::string("UFFDIO_WRITEPROTECT: ") + strerror(err), tracked_.size());
    }
  } else {
    // Only what was written since the last snapshot lost its protection: those chunks' pages.
    int err = 0;
    report_.written_known = true;
    for (const auto& [c0, c1] : tracker_.written_in(G - 1)) {
      for (uint64_t c = c0; c < c1; ++c) report_.written_bytes += tracker_.chunk_len(c);
      tracker_.pages_of(c0, c1, page_, false, [&](size_t r, uint64_t p0, uint64_t p1) {
        const Tracked& tr = tracked_[r];
        uint64_t a = tr.start + p0 * page_, b = tr.start + p1 * page_;
        if (huge_pages_) {  // whole fault blocks: what the handler un-protects is one or its top part
          a = std::max(a & ~(opt_.fault_block - 1), tr.start);
          b = std::min((b + opt_.fault_block - 1) & ~(opt_.fault_block - 1), tr.end);
        }
        if (err == 0) err = uffd_.protect(a, b - a);
      });
    }
    if (err != 0) return fail_begin(std::string("UFFDIO_WRITEPROTECT: ") + strerror(err), tracked_.size());
  }
  const double t_protected = now();
  for (const auto& e : plan.eager) {
    const SnapshotRegion& r = regions[e.region];
    memcpy(slot + r.offset + e.from, static_cast<const uint8_t*>(r.src) + e.from, e.len);
  }
  for (const auto& r : regions) report_.bytes += r.size;
  report_.protected_bytes = (total_pages_ - done_pages_.load()) * page_;
  report_.fallbacks = plan.fallbacks;
  report_.generation = tracking_ ? G : 0;
  if (!changed.empty()) {
    report_.chunk_known.resize(n);
    for (uint64_t c = 0; c < n; ++c) report_.chunk_known[c] = !changed[c];
    report_.chunk_changed = std::move(changed);
    report_.chunk_hashes = std::move(previous);
  }
  log_fallbacks(plan.fallbacks);
  in_flight_ = true;
  copied_ = tracked_.empty();
  t_copied_ = now();
  copy_requested_ = !copied_;
  report_.blocking_seconds = now() - t_begin_;
  LOG_DEBUG("snapshot begin: %.3f ms (plan %.3f, register %.3f, protect %.3f, copy %.3f) for %llu protected, %llu copied, %llu unchanged bytes",
            report_.blocking_seconds * 1e3, (t_planned - t_begin_) * 1e3, (t_registered - t_planned) * 1e3,
            (t_protected - t_registered) * 1e3, (t_begin_ + report_.blocking_seconds - t_protected) * 1e3,
            static_cast<unsigned long long>(report_.protected_bytes),
            static_cast<unsigned long long>(report_.bytes - total_pages_ * page_),
            static_cast<unsigned long long>(report_.unchanged_bytes));
  lock.unlock();
  cv_.notify_all();
  return Status::ok();
}

// Protection failed half way (not expected: the ranges were registered): undo it; this snapshot fails.
Status CowSnapshotter::fail_begin(const std::string& why, size_t registered) {
  for (size_t i = 0; i < registered; ++i) {
    (void)uffd_.unprotect(tracked_[i].start, tracked_[i].end - tracked_[i].start);
    (void)uffd_.unregister(tracked_[i].start, tracked_[i].end - tracked_[i].start);
  }
  std::lock_guard<std::mutex> hl(handler_mu_);
  active_ = false;
  tracking_ = false;
  tracked_.clear();
  return make_error(Code::ERR_IO, "snapshot begin: %s", why.c_str());
}

Status CowSnapshotter::complete() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!in_flight_) return make_error(Code::ERR_SEQUENCE, "snapshot complete: no snapshot in flight (call begin first)");
  cv_.wait(lock, [&] { return copied_; });
  in_flight_ = false;
  report_.copy_seconds = t_copied_.load() - t_begin_;
  report_.faults = faults_.load();
  report_.fault_bytes = fault_bytes_.load();
  report_.fault_wait_seconds = static_cast<double>(fault_wait_ns_.load()) * 1e-9;
  report_.late_faults = late_faults_.exchange(0);
  report_.unprotected_ahead = ahead_blocks_.load();
  auto how = static_cast<Failure>(failure_.load());
  if (how == Failure::none) return Status::ok();
  {
    std::lock_guard<std::mutex> hl(handler_mu_);
    track_broken_ = true;  // the next snapshot copies everything
  }
  const std::string& region = names_[static_cast<size_t>(failed_region_.load())];
  const char* what = how == Failure::unmapped   ? "was unmapped (munmap, or free of a large block)"
                     : how == Failure::removed  ? "was discarded (madvise MADV_DONTNEED or MADV_REMOVE)"
                     : how == Failure::remapped ? "was moved (mremap, or realloc of a large block)"
                                                : "could not be read";
  if (how == Failure::unreadable || how == Failure::protect)
    return make_error(Code::ERR_IO, "copy-on-write snapshot of region '%s': the region %s: %s", region.c_str(), what,
                      strerror(failed_errno_.load()));
  return make_error(Code::ERR_SEQUENCE,
                    "copy-on-write snapshot of region '%s': the region %s while its snapshot was in flight; the "
                    "version is discarded (call cairn_unprotect, which waits, before freeing a protected region)",
                    region.c_str(), what);
}

void CowSnapshotter::log_fallbacks(const std::vector<SnapshotFallback>& fallbacks) {
  for (const auto& f : fallbacks) {
    auto it = logged_fallback_.find(f.region);
    if (it != logged_fallback_.end() && it->second == f.why) continue;
    LOG_INFO("snapshot: region '%s' is copied on the blocking path, not copy-on-write: %s", f.region.c_str(), f.why.c_str());
    logged_fallback_[f.region] = f.why;
  }
}

// Un-protect and unregister every tracked range: the memory is the application's alone again. Not with
// a snapshot active (after begin(), before the copier is done).
void CowSnapshotter::stop_tracking() {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  {
    std::lock_guard<std::mutex> hl(handler_mu_);
    if (!tracking_) return;
    for (const auto& t : tracked_) ranges.emplace_back(t.start, t.end);
  }
  // Piece by piece, the handler free in between: un-protecting memory in 4 KiB pages takes long for a
  // large state, and a write meanwhile must not wait for all of it (it un-protects its own block, as any
  // write while tracking).
  constexpr uint64_t kPiece = 16 << 20;
  for (const auto& [start, end] : ranges)
    for (uint64_t a = start; a < end; a += kPiece) {
      std::lock_guard<std::mutex> hl(handler_mu_);
      for (int err; (err = uffd_.unprotect(a, std::min(kPiece, end - a))) == EAGAIN;) drain();
    }
  std::lock_guard<std::mutex> hl(handler_mu_);
  for (const auto& [start, end] : ranges) (void)uffd_.unregister(start, end - start);
  while (stashed_ > 0) (void)uffd_.wake(stash_[--stashed_] & ~(page_ - 1), page_);
  tracking_ = false;
  tracker_.stop();
}

void CowSnapshotter::forget(const void* base, uint64_t len) {
  wait_copied();
  std::lock_guard<std::mutex> lock(mu_);
  if (!tracking_) return;
  const auto a = reinterpret_cast<uint64_t>(base), b = a + len;
  bool watched = false;
  {
    std::lock_guard<std::mutex> hl(handler_mu_);
    for (const auto& t : tracked_) watched = watched || (a < t.end && t.start < b);
  }
  if (watched) stop_tracking();
}

}  // namespace cow

namespace {
bool power_of_two(uint64_t x) { return x && !(x & (x - 1)); }
}  // namespace

std::string cow_unsupported_reason() {
  auto uffd = cow::Userfault::open();
  if (!uffd.is_ok()) return uffd.status().message();
  // The copier reads the application's memory with process_vm_readv (a region unmapped under it is an
  // error, not a crash); a seccomp filter may refuse it.
  uint64_t a = 42, b = 0;
  iovec local{&b, sizeof b}, remote{&a, sizeof a};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != sizeof b || b != a)
    return std::string("process_vm_readv on this process is refused: ") + strerror(errno);
  return {};
}

Result<std::unique_ptr<Snapshotter>> make_cow_snapshotter(const CowOptions& options) {
  auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (!power_of_two(options.copy_chunk) || !power_of_two(options.fault_block) || options.copy_chunk < page ||
      options.fault_block < page)
    return make_error(Code::ERR_INVALID_ARG, "cow snapshotter: copy_chunk (%llu) and fault_block (%llu) must be powers of two of at least a page",
                      static_cast<unsigned long long>(options.copy_chunk), static_cast<unsigned long long>(options.fault_block));
  std::string why = cow_unsupported_reason();
  if (!why.empty()) return make_error(Code::ERR_NOT_SUPPORTED, "%s", why.c_str());
  CAIRN_ASSIGN_OR_RETURN(uffd, cow::Userfault::open());
  auto s = std::make_unique<cow::CowSnapshotter>(std::move(uffd), options);
  CAIRN_TRY(s->start());
  return std::unique_ptr<Snapshotter>(std::move(s));
}

}  // namespace cairn
