#include "cache/cow/cow_snapshot.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "base/background_thread.hpp"
#include "base/log.hpp"
#include "cache/cow/plan.hpp"
#include "cache/cow/userfault.hpp"

namespace cairn {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

// A page's way through one snapshot. Only the thread that moved it pending -> copying copies it, and
// only while it is still write-protected; it is un-protected before it becomes done.
enum : uint8_t { kPending = 0, kCopying = 1, kDone = 2 };

#ifdef MADV_COLLAPSE
constexpr int kMadvCollapse = MADV_COLLAPSE;
#else
constexpr int kMadvCollapse = 25;  // Linux 6.1; older headers lack it, older kernels answer EINVAL
#endif

// Transparent huge pages allowed here at all ("always" or "madvise"; not "never").
bool thp_allowed() {
  char buf[128] = {};
  int fd = ::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 && strstr(buf, "[never]") == nullptr;
}

// Why a snapshot failed, recorded by whichever thread saw it first (no allocation: the message is
// written in complete()).
enum class Failure : int { none = 0, unmapped, removed, remapped, unreadable, protect };

// One protected range of one snapshot: its pages are pages_[first_page, first_page + pages).
struct Tracked {
  uint64_t start = 0, end = 0;
  uint8_t* dst = nullptr;  // where `start` goes in the slot
  uint64_t first_page = 0;
  size_t region = 0;
};

// Run f with every signal blocked, so that the threads it starts never run the application's handlers
// (a handler writing protected memory on the fault handler's own thread could never be served).
template <class F>
void with_signals_blocked(F f) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  f();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

class CowSnapshotter final : public Snapshotter {
 public:
  CowSnapshotter(cow::Userfault uffd, const CowOptions& o)
      : uffd_(std::move(uffd)), opt_(o), page_(static_cast<uint64_t>(sysconf(_SC_PAGESIZE))), pid_(getpid()),
        huge_pages_(o.huge_pages && thp_allowed()) {}
  ~CowSnapshotter() override;
  Status start();

  const char* name() const override { return "cow"; }
  Status begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) override;
  Status complete() override;
  void wait_copied() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !in_flight_ || copied_; });
  }
  SnapshotReport report() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return report_;
  }

 private:
  // both background threads
  uint64_t copy_pages(size_t t, uint64_t p0, uint64_t p1, bool handler);
  void fail(Failure how, size_t region, int err);
  const Tracked* tracked_at(uint64_t addr) const;
  // copier
  void copier_loop();
  void copy_all();
  void copy_block(uint64_t addr, bool handler, uint64_t* copied);
  void gather_huge_pages();
  // fault handler
  void handler_loop();
  void handle(const uffd_msg& m);
  void serve_fault(uint64_t addr);
  void drain();
  void note_unmapped(uint64_t start, uint64_t end, Failure how);
  // begin()
  void log_fallbacks(const std::vector<SnapshotFallback>& fallbacks);
  Status fail_begin(const std::string& why, size_t registered);

  cow::Userfault uffd_;
  const CowOptions opt_;
  const uint64_t page_;
  const pid_t pid_;

  // One snapshot. tracked_ and the page states are written by begin() only, under handler_mu_ and
  // before any page is protected; the threads read them while active_.
  std::vector<Tracked> tracked_;
  std::vector<std::string> names_;
  std::unique_ptr<std::atomic<uint8_t>[]> pages_;
  uint64_t pages_cap_ = 0, total_pages_ = 0;
  std::atomic<uint64_t> done_pages_{0};
  std::atomic<uint64_t> hint_{0};  // 1 + the page the copier goes on from (set by the fault handler)
  std::atomic<bool> active_{false};
  std::atomic<int> failure_{0}, failed_region_{0}, failed_errno_{0};
  std::atomic<uint64_t> faults_{0}, fault_bytes_{0};
  double t_begin_ = 0;
  std::atomic<double> t_copied_{0};

  mutable std::mutex mu_;  // the snapshot's lifecycle
  std::condition_variable cv_;
  bool in_flight_ = false, copy_requested_ = false, copied_ = false, stop_ = false;
  SnapshotReport report_;
  std::map<std::string, std::string> logged_fallback_;  // region -> reason last logged

  // Whether to gather protected memory into huge pages between snapshots (THP not "never" here); the
  // ranges of the last snapshot, the copier's own copy.
  bool huge_pages_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> collapse_;

  // The blocks (fault_block-aligned addresses) that writes reached before the copier in this snapshot
  // (handler thread; read by the copier under handler_mu_ once the snapshot is over), and, sorted, those
  // of the last snapshot: the copier copies them first (a solver writes the same part of its state
  // between checkpoints), and the handler copies the next of them while the copier is on a writer's
  // block. Fixed capacity: neither thread allocates while a write may wait.
  static constexpr size_t kHotBlocks = 4096;
  uint64_t written_[kHotBlocks];
  size_t written_count_ = 0;
  std::vector<uint64_t> hot_;  // capacity kHotBlocks, reserved in start()

  std::mutex handler_mu_;  // the fault handler holds it while it reads tracked_
  static constexpr size_t kStash = 256;
  uint64_t stash_[kStash];  // fault addresses read while draining events (handler thread only)
  size_t stashed_ = 0;
  int stop_fd_ = -1;
  std::thread copier_, handler_;
};

Status CowSnapshotter::start() {
  hot_.reserve(kHotBlocks);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) return posix_error("eventfd", "(cow snapshotter)", errno);
  with_signals_blocked([&] {
    copier_ = std::thread([this] { copier_loop(); });
    handler_ = std::thread([this] { handler_loop(); });
  });
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
  uint64_t one = 1;
  if (stop_fd_ >= 0 && write(stop_fd_, &one, sizeof one) != sizeof one) LOG_ERROR("cow snapshotter: cannot stop its fault handler");
  if (handler_.joinable()) handler_.join();
  if (stop_fd_ >= 0) close(stop_fd_);
}

// ---- begin / complete ------------------------------------------------------------------------------

Status CowSnapshotter::begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) {
  std::unique_lock<std::mutex> lock(mu_);
  if (in_flight_)
    return make_error(Code::ERR_SEQUENCE, "snapshot begin: the previous snapshot is still in flight (complete it first)");
  t_begin_ = now();
  report_ = {};
  CAIRN_ASSIGN_OR_RETURN(plan, cow::plan_snapshot(regions, page_, opt_.eager_below));
  const double t_planned = now();

  // Register the ranges to protect; one the kernel refuses is copied instead.
  std::vector<cow::ProtectedRange> protect;
  for (const auto& p : plan.protect) {
    int err = uffd_.register_wp(p.start, p.end - p.start);
    if (err == 0) {
      protect.push_back(p);
      continue;
    }
    const SnapshotRegion& r = regions[p.region];
    plan.eager.push_back({p.region, 0, r.size});
    plan.fallbacks.push_back({r.name, err == EBUSY ? "already registered with another userfaultfd"
                                                   : std::string("userfaultfd refused it: ") + strerror(err)});
  }
  {
    std::lock_guard<std::mutex> hl(handler_mu_);
    tracked_.clear();
    names_.clear();
    uint64_t pages = 0;
    for (const auto& r : regions) names_.push_back(r.name);
    for (const auto& p : protect) {
      tracked_.push_back({p.start, p.end, slot + regions[p.region].offset + (p.start - reinterpret_cast<uint64_t>(regions[p.region].src)),
                          pages, p.region});
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
    active_ = !tracked_.empty();
  }
  const double t_registered = now();
  for (const auto& t : tracked_) {
    int err = uffd_.protect(t.start, t.end - t.start);
    if (err != 0) return fail_begin(std::string("UFFDIO_WRITEPROTECT: ") + strerror(err), tracked_.size());
  }
  const double t_protected = now();
  for (const auto& e : plan.eager) {
    const SnapshotRegion& r = regions[e.region];
    memcpy(slot + r.offset + e.from, static_cast<const uint8_t*>(r.src) + e.from, e.len);
  }
  for (const auto& r : regions) report_.bytes += r.size;
  report_.protected_bytes = total_pages_ * page_;
  report_.fallbacks = plan.fallbacks;
  log_fallbacks(plan.fallbacks);
  in_flight_ = true;
  copied_ = tracked_.empty();
  t_copied_ = now();
  copy_requested_ = !copied_;
  report_.blocking_seconds = now() - t_begin_;
  LOG_DEBUG("snapshot begin: %.3f ms (plan %.3f, register %.3f, protect %.3f, copy %.3f) for %llu protected, %llu copied bytes",
            report_.blocking_seconds * 1e3, (t_planned - t_begin_) * 1e3, (t_registered - t_planned) * 1e3,
            (t_protected - t_registered) * 1e3, (t_begin_ + report_.blocking_seconds - t_protected) * 1e3,
            static_cast<unsigned long long>(report_.protected_bytes),
            static_cast<unsigned long long>(report_.bytes - report_.protected_bytes));
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
  auto how = static_cast<Failure>(failure_.load());
  if (how == Failure::none) return Status::ok();
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

// ---- copying, shared by the copier and the fault handler --------------------------------------------

const Tracked* CowSnapshotter::tracked_at(uint64_t addr) const {
  auto it = std::upper_bound(tracked_.begin(), tracked_.end(), addr, [](uint64_t a, const Tracked& t) { return a < t.start; });
  if (it == tracked_.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

// The first failure wins, except that an unmap/remove/remap explains a failed read better than the read.
void CowSnapshotter::fail(Failure how, size_t region, int err) {
  int seen = failure_.load();
  for (;;) {
    bool better = seen == 0 || ((seen == static_cast<int>(Failure::unreadable) || seen == static_cast<int>(Failure::protect)) &&
                                how != Failure::unreadable && how != Failure::protect);
    if (!better) return;
    if (failure_.compare_exchange_weak(seen, static_cast<int>(how))) break;
  }
  failed_region_ = static_cast<int>(region);
  failed_errno_ = err;
}

// Copies the pending pages of tracked_[t] among pages [p0, p1) (indices into pages_), claiming each, in
// runs of consecutive pages: read while protected, un-protect, then done. Returns the bytes copied.
uint64_t CowSnapshotter::copy_pages(size_t t, uint64_t p0, uint64_t p1, bool handler) {
  const Tracked& tr = tracked_[t];
  auto claim = [&](uint64_t i) {
    uint8_t want = kPending;
    return pages_[i].load(std::memory_order_relaxed) == kPending &&
           pages_[i].compare_exchange_strong(want, kCopying, std::memory_order_acq_rel);
  };
  uint64_t copied = 0;
  for (uint64_t i = p0; i < p1;) {
    if (!claim(i)) {
      ++i;
      continue;
    }
    uint64_t j = i + 1;
    while (j < p1 && claim(j)) ++j;
    uint64_t off = (i - tr.first_page) * page_, len = (j - i) * page_;
    iovec local{tr.dst + off, len}, remote{reinterpret_cast<void*>(tr.start + off), len};
    ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n != static_cast<ssize_t>(len)) {
      int err = n < 0 ? errno : EFAULT;  // EFAULT: readable at begin(), gone now
      fail(err == EFAULT ? Failure::unmapped : Failure::unreadable, tr.region, err);
    }
    for (;;) {
      int err = uffd_.unprotect(tr.start + off, len);
      if (err != EAGAIN) {
        if (err != 0) fail(Failure::protect, tr.region, err);
        break;
      }
      // An munmap/madvise/mremap is being reported on the descriptor: it must be read first.
      if (handler)
        drain();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    for (uint64_t k = i; k < j; ++k) pages_[k].store(kDone, std::memory_order_release);
    done_pages_.fetch_add(j - i, std::memory_order_acq_rel);
    copied += len;
    i = j;
  }
  return copied;
}

// ---- the copier --------------------------------------------------------------------------------------

void CowSnapshotter::copier_loop() {
  // begin() returns to the application before the copy takes the core (the fault handler keeps the
  // normal policy: writers wait for it).
  become_background_thread();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return copy_requested_ || stop_; });
      if (!copy_requested_) return;
      copy_requested_ = false;
    }
    copy_all();
    {
      // Read what is on the descriptor now: an munmap/madvise/mremap reported so far is then in
      // failure_ (a madvise not reported yet zaps only after it is read: every page is copied by then).
      // From here the handler leaves this snapshot's pages alone.
      std::lock_guard<std::mutex> hl(handler_mu_);
      uffd_msg msgs[16];
      for (ssize_t n; (n = read(uffd_.fd(), msgs, sizeof msgs)) > 0;)
        for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(uffd_msg); ++i) handle(msgs[i]);
      active_ = false;
      hot_.assign(written_, written_ + written_count_);  // within the reserved capacity
      std::sort(hot_.begin(), hot_.end());
      hot_.erase(std::unique(hot_.begin(), hot_.end()), hot_.end());
      written_count_ = 0;
    }
    t_copied_ = now();
    for (const auto& t : tracked_) (void)uffd_.unregister(t.start, t.end - t.start);
    // Pending again for the next snapshot, here rather than on its blocking path.
    for (uint64_t i = 0; i < total_pages_; ++i) pages_[i].store(kPending, std::memory_order_relaxed);
    if (huge_pages_) {
      collapse_.clear();
      for (const auto& t : tracked_) collapse_.emplace_back(t.start, t.end);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      copied_ = true;
    }
    cv_.notify_all();
    if (huge_pages_) gather_huge_pages();
  }
}

// Between snapshots: the protected memory gathered into transparent huge pages (MADV_COLLAPSE, Linux
// 6.1), 2 MiB at a time, so that the next begin() write-protects one entry per 2 MiB instead of 512, and
// the page-table walk that dominates the blocking time of a snapshot in 4 KiB pages goes (the figures:
// docs/performance.md, "Copy-on-write snapshots"). Blocks already huge cost nothing; memory the
// application marked MADV_NOHUGEPAGE, or pinned, is left as it is. Stops as soon as a snapshot is asked
// for.
void CowSnapshotter::gather_huge_pages() {
  constexpr uint64_t kHuge = 2 << 20;
  for (const auto& [start, end] : collapse_) {
    for (uint64_t a = (start + kHuge - 1) & ~(kHuge - 1); a + kHuge <= end; a += kHuge) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (copy_requested_ || stop_) return;
      }
      // EINVAL: not for this range (MADV_NOHUGEPAGE, or a kernel before 6.1); the kernel also refuses
      // pages write-protected by a snapshot begun meanwhile. Other errors: this block only.
      if (madvise(reinterpret_cast<void*>(a), kHuge, kMadvCollapse) != 0 && errno == EINVAL) break;
    }
  }
}

// Chunk by chunk (copy_chunk-aligned addresses), in order, from where the fault handler last pointed
// it; the pages the handler claimed are its own. Ends when every page is done.
void CowSnapshotter::copy_all() {
  // First the blocks written before the copier last time, then everything in order.
  for (uint64_t a : hot_) {
    if (done_pages_.load(std::memory_order_acquire) >= total_pages_) return;
    uint64_t copied = 0;
    copy_block(a, false, &copied);
  }
  uint64_t cursor = 0, claimed_since_wrap = 0;
  while (done_pages_.load(std::memory_order_acquire) < total_pages_) {
    if (uint64_t h = hint_.exchange(0)) cursor = h - 1;
    if (cursor >= total_pages_) {
      cursor = 0;
      if (claimed_since_wrap == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));  // the handler's
      claimed_since_wrap = 0;
    }
    auto it = std::upper_bound(tracked_.begin(), tracked_.end(), cursor,
                               [](uint64_t p, const Tracked& t) { return p < t.first_page; });
    size_t t = static_cast<size_t>(it - tracked_.begin()) - 1;
    const Tracked& tr = tracked_[t];
    uint64_t addr = tr.start + (cursor - tr.first_page) * page_;
    uint64_t chunk_end = std::min((addr & ~(opt_.copy_chunk - 1)) + opt_.copy_chunk, tr.end);
    uint64_t p1 = tr.first_page + (chunk_end - tr.start) / page_;
    claimed_since_wrap += copy_pages(t, cursor, p1, false);
    cursor = p1;
  }
}

// What is still pending of the fault_block at `addr`, if a tracked range holds it (tracked_ is stable
// while active_).
void CowSnapshotter::copy_block(uint64_t addr, bool handler, uint64_t* copied) {
  const Tracked* tr = tracked_at(addr);
  if (!tr) return;
  uint64_t b0 = std::max(addr & ~(opt_.fault_block - 1), tr->start);
  uint64_t b1 = std::min((addr & ~(opt_.fault_block - 1)) + opt_.fault_block, tr->end);
  *copied += copy_pages(static_cast<size_t>(tr - tracked_.data()), tr->first_page + (b0 - tr->start) / page_,
                        tr->first_page + (b1 - tr->start) / page_, handler);
}

// ---- the fault handler -------------------------------------------------------------------------------

void CowSnapshotter::handler_loop() {
  pollfd fds[2] = {{uffd_.fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  uffd_msg msgs[64];
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG_ERROR("cow snapshotter: poll: %s; writers now wait for the copier", strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    // Read and handle under handler_mu_: once the copier holds it, every event read so far is noted.
    std::lock_guard<std::mutex> hl(handler_mu_);
    ssize_t n = read(uffd_.fd(), msgs, sizeof msgs);
    if (n <= 0) continue;  // EAGAIN: a spurious wake-up
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(uffd_msg); ++i) handle(msgs[i]);
    while (stashed_ > 0) serve_fault(stash_[--stashed_]);
  }
}

void CowSnapshotter::handle(const uffd_msg& m) {
  switch (m.event) {
    case UFFD_EVENT_PAGEFAULT: serve_fault(m.arg.pagefault.address); break;
    case UFFD_EVENT_UNMAP: note_unmapped(m.arg.remove.start, m.arg.remove.end, Failure::unmapped); break;
    case UFFD_EVENT_REMOVE: note_unmapped(m.arg.remove.start, m.arg.remove.end, Failure::removed); break;
    case UFFD_EVENT_REMAP: note_unmapped(m.arg.remap.from, m.arg.remap.from + m.arg.remap.len, Failure::remapped); break;
    default: break;
  }
}

// A write to a protected page: copy the fault_block around it (what of it is still pending), point the
// copier just past it, and let the writer go. A page that the copier is copying right now is woken by
// the copier's un-protect.
void CowSnapshotter::serve_fault(uint64_t addr) {
  addr &= ~(page_ - 1);
  const Tracked* tr = active_ ? tracked_at(addr) : nullptr;
  if (!tr) {
    (void)uffd_.wake(addr, page_);  // a late message of a finished snapshot
    return;
  }
  faults_.fetch_add(1, std::memory_order_relaxed);
  if (written_count_ < kHotBlocks) written_[written_count_++] = addr & ~(opt_.fault_block - 1);
  const size_t t = static_cast<size_t>(tr - tracked_.data());
  auto block = [&](uint64_t a, uint64_t* p0, uint64_t* p1) {
    uint64_t b0 = std::max(a & ~(opt_.fault_block - 1), tr->start);
    uint64_t b1 = std::min((a & ~(opt_.fault_block - 1)) + opt_.fault_block, tr->end);
    *p0 = tr->first_page + (b0 - tr->start) / page_;
    *p1 = tr->first_page + (b1 - tr->start) / page_;
    return b1;
  };
  uint64_t p0 = 0, p1 = 0;
  uint64_t next = block(addr, &p0, &p1);
  uint64_t page = tr->first_page + (addr - tr->start) / page_;
  bool was_done = pages_[page].load(std::memory_order_acquire) == kDone;
  uint64_t copied = copy_pages(t, p0, p1, true);
  // Nothing of the block was left to claim: the copier is on it (its un-protect wakes the writer).
  // The writer comes next to the following block it wrote last time, or, sweeping its state, to the
  // next one: copy that one meanwhile, so two threads copy ahead of it.
  if (copied == 0 && !was_done) {
    auto hot = std::upper_bound(hot_.begin(), hot_.end(), addr);
    if (hot != hot_.end() && tracked_at(*hot) == tr) next = *hot;
    if (next < tr->end) {
      block(next, &p0, &p1);
      copied = copy_pages(t, p0, p1, true);
    }
  }
  fault_bytes_.fetch_add(copied, std::memory_order_relaxed);
  if (was_done) (void)uffd_.wake(addr, page_);
  hint_ = p1 + 1;
}

// Read what is on the descriptor now (to let an unmap/madvise/mremap in progress finish); faults read
// here are served after the current one.
void CowSnapshotter::drain() {
  uffd_msg msgs[16];
  ssize_t n = read(uffd_.fd(), msgs, sizeof msgs);
  for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof(uffd_msg)); ++i) {
    if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
      handle(msgs[i]);
    else if (stashed_ < kStash)
      stash_[stashed_++] = msgs[i].arg.pagefault.address;
    // else: dropped; that writer is woken when the copier un-protects its page
  }
  if (n <= 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// An unmap/remove/remap of [start, end): the snapshot fails if a page of it was not copied yet (a page
// copied before is correct: a remove zaps only after this read, an unmap's pages not yet copied fail
// the copier's read).
void CowSnapshotter::note_unmapped(uint64_t start, uint64_t end, Failure how) {
  if (!active_) return;
  for (const auto& t : tracked_) {
    uint64_t a = std::max(start, t.start), b = std::min(end, t.end);
    if (a >= b) continue;
    for (uint64_t p = t.first_page + (a - t.start) / page_; p < t.first_page + (b - t.start + page_ - 1) / page_; ++p)
      if (pages_[p].load(std::memory_order_acquire) != kDone) {
        fail(how, t.region, 0);
        break;
      }
  }
}

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
  auto s = std::make_unique<CowSnapshotter>(std::move(uffd), options);
  CAIRN_TRY(s->start());
  return std::unique_ptr<Snapshotter>(std::move(s));
}

}  // namespace cairn
