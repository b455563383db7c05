// The copy-on-write snapshotter's two threads (cow_snapshotter.hpp): the copier, which fills the slot
// in the background, and the fault handler, which serves the writes that reach a protected page.
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/background_thread.hpp"
#include "base/log.hpp"
#include "cache/cow/cow_snapshotter.hpp"

namespace cairn::cow {

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
// runs of consecutive pages (of at most kRunPages while tracking writes): read while protected,
// un-protect (not tracking), then done. Returns the bytes copied.
uint64_t CowSnapshotter::copy_pages(size_t t, uint64_t p0, uint64_t p1, bool handler) {
  const Tracked& tr = tracked_[t];
  auto claim = [&](uint64_t i) {
    uint8_t want = kPending;
    return pages_[i].load(std::memory_order_relaxed) == kPending &&
           pages_[i].compare_exchange_strong(want, kCopying, std::memory_order_acq_rel);
  };
  // Not tracking writes, each run is un-protected once copied: a run is then as long as it gets, so that
  // a huge page is un-protected whole (a part would split it).
  const uint64_t max_run = tracking_.load(std::memory_order_relaxed) ? kRunPages : p1 - p0;
  uint64_t copied = 0;
  for (uint64_t i = p0; i < p1;) {
    if (!claim(i)) {
      ++i;
      continue;
    }
    uint64_t j = i + 1;
    while (j < p1 && j - i < max_run && claim(j)) ++j;
    uint64_t off = (i - tr.first_page) * page_, len = (j - i) * page_;
    iovec local{tr.dst + off, len}, remote{reinterpret_cast<void*>(tr.start + off), len};
    ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n != static_cast<ssize_t>(len)) {
      int err = n < 0 ? errno : EFAULT;  // EFAULT: readable at begin(), gone now
      fail(err == EFAULT ? Failure::unmapped : Failure::unreadable, tr.region, err);
    }
    // Tracking writes, the pages stay protected: a write to them is noted, and un-protects them, then.
    for (; !tracking_.load(std::memory_order_relaxed);) {
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
    if (!handler) serve_waiting_writers();
  }
  return copied;
}

// The copier, between two runs: the writers whose pages are copied now let go, and the writes that
// have waited on the descriptor for kLateSeconds served, unless the handler thread is at it. The
// handler thread is woken for each fault, but the scheduler may queue it behind the copier on the
// copier's core rather than on the writer's, now idle, and leave it there until the copy is over: a
// writer then waited for the whole copy instead of its block (docs/performance.md, "The writer that
// waited for the whole copy"). A write the handler thread reads in time is its own: it copies beside
// the copier.
void CowSnapshotter::serve_waiting_writers() {
  pollfd fd{uffd_.fd(), POLLIN, 0};
  const bool waiting = poll(&fd, 1, 0) == 1 && (fd.revents & POLLIN);
  const double t = waiting ? now() : 0;
  if (!waiting || waiting_since_ == 0) waiting_since_ = t;
  const bool late = waiting && t - waiting_since_ >= kLateSeconds;
  std::unique_lock<std::mutex> hl(handler_mu_, std::try_to_lock);
  if (!hl.owns_lock()) return;
  if (late) {
    late_faults_.fetch_add(handle_pending(), std::memory_order_relaxed);
    waiting_since_ = 0;
  }
  finish_releases();
}

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
      handle_pending();
      finish_releases();  // every page is done: every writer goes
      active_ = false;
      hot_.assign(written_, written_ + written_count_);  // within the reserved capacity
      std::sort(hot_.begin(), hot_.end());
      hot_.erase(std::unique(hot_.begin(), hot_.end()), hot_.end());
      written_count_ = 0;
    }
    t_copied_ = now();
    if (!tracking_)
      for (const auto& t : tracked_) (void)uffd_.unregister(t.start, t.end - t.start);
    // Pending again for the next snapshot, here rather than on its blocking path.
    for (uint64_t i = 0; i < total_pages_; ++i) pages_[i].store(kPending, std::memory_order_relaxed);
    if (huge_pages_) {
      // Tracking writes, only the blocks written since this snapshot began can be un-protected now:
      // every other block is protected, so the kernel would find it huge already or refuse it
      // (gather_huge_pages), and it is not asked (each call costs, and the writer's next passes run
      // beside them). Not tracking, every range is un-protected now, and all of it is asked.
      collapse_.clear();
      // No allocation while the handler waits for this lock (a writer it serves may hold malloc's).
      collapse_.reserve(tracked_.size() + total_pages_ * page_ / opt_.fault_block + 1);
      std::lock_guard<std::mutex> hl(handler_mu_);
      if (tracking_)
        tracker_.blocks_written_in(gen_, [&](size_t, uint64_t a, uint64_t b) {
          if (!collapse_.empty() && collapse_.back().second == a)
            collapse_.back().second = b;
          else
            collapse_.emplace_back(a, b);
        });
      else
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
      serve_waiting_writers();  // a write the handler thread has not read yet, between two blocks
      // EINVAL: not for this range (MADV_NOHUGEPAGE, or a kernel before 6.1), or not for this block: the
      // kernel refuses write-protected 4 KiB pages (6.18 does: every block right after the first tracked
      // snapshot). Tracking writes, the blocks not written since the snapshot stay protected, and the
      // written ones after them are gathered all the same. Other errors: this block only.
      if (madvise(reinterpret_cast<void*>(a), kHuge, kMadvCollapse) != 0 && errno == EINVAL && !tracking_) break;
    }
  }
}

// Chunk by chunk (copy_chunk-aligned addresses), in order, from where the fault handler last pointed
// it; the pages the handler claimed are its own. Ends when every page is done.
void CowSnapshotter::copy_all() {
  // First the blocks to un-protect ahead of the writer, then those written before the copier last
  // time, then everything in order.
  copy_ahead();
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
      if (claimed_since_wrap == 0) {  // what is left, the handler is copying
        serve_waiting_writers();
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
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

// Tracking writes, the blocks written between each of the last snapshots (ahead_): each copied, then
// un-protected and noted written before the application writes it again, so that its next write waits
// for nothing. One block at a time: a writer close behind meets each block as soon as it can.
// The lock is tried, as in serve_waiting_writers: while the fault handler holds it, the blocks copied
// wait (a few at most) for the next block's turn rather than the copier for the handler.
void CowSnapshotter::copy_ahead() {
  constexpr size_t kWaiting = 8;
  size_t waiting[kWaiting], n = 0;
  for (size_t k = 0; k < ahead_.size(); ++k) {
    uint64_t copied = 0;
    copy_block(ahead_[k].a, false, &copied);
    waiting[n++] = k;
    std::unique_lock<std::mutex> hl(handler_mu_, std::try_to_lock);
    if (!hl.owns_lock() && n < kWaiting && k + 1 < ahead_.size()) continue;
    if (!hl.owns_lock()) hl.lock();
    for (size_t i = 0; i < n; ++i) unprotect_ahead(ahead_[waiting[i]]);
    n = 0;
    finish_releases();  // the writers woken, and any fault an un-protection's drain read meanwhile
  }
}

// Where ahead_ block h is to be un-protected: f(x, y) for each piece, where the last generation's
// writes un-protected it (with huge pages one piece, from the first page they reached up, as a write
// does; else the written chunks' pages). Nothing when a write has reached it in this generation (its
// fault un-protected it). The caller holds handler_mu_.
template <class F>
void CowSnapshotter::ahead_pieces(const Ahead& h, F f) const {
  if (tracker_.block_noted(h.t, h.a, gen_)) return;
  uint64_t first = h.b;
  tracker_.noted_runs(h.t, h.a, h.b, gen_ - 1, page_, [&](uint64_t x, uint64_t y) {
    if (huge_pages_)
      first = std::min(first, x);
    else
      f(x, y);
  });
  if (huge_pages_ && first < h.b) f(first, h.b);
}

bool CowSnapshotter::pages_done(size_t t, uint64_t x, uint64_t y) const {
  const Tracked& tr = tracked_[t];
  for (uint64_t p = tr.first_page + (x - tr.start) / page_; p < tr.first_page + (y - tr.start) / page_; ++p)
    if (pages_[p].load(std::memory_order_acquire) != kDone) return false;
  return true;
}

// Ahead_ block h, if copied: un-protected and noted written (ahead_pieces), unless a thread is still
// copying some of it (a write there is served as ever). The caller holds handler_mu_.
void CowSnapshotter::unprotect_ahead(const Ahead& h) {
  if (!tracking_.load(std::memory_order_relaxed) || gen_ < 2) return;
  bool any = false;
  ahead_pieces(h, [&](uint64_t x, uint64_t y) {
    if (!pages_done(h.t, x, y)) return;
    tracker_.note_ahead(h.t, x, y, gen_);
    unprotect_from_handler(x, y - x, tracked_[h.t].region);
    any = true;
  });
  if (any) ahead_blocks_.fetch_add(1, std::memory_order_relaxed);
}

// The fault handler, a writer served at `addr` of tracked_[t] and let go, no other write waiting: the
// next block of ahead_ above it in the same range -- where that writer, sweeping its part of the state,
// goes next -- copied if still pending, and un-protected ahead, so that the writer waits there for
// nothing (the caller holds handler_mu_).
void CowSnapshotter::copy_next_ahead(size_t t, uint64_t addr) {
  auto it = std::upper_bound(ahead_.begin(), ahead_.end(), std::make_pair(t, addr),
                             [](const std::pair<size_t, uint64_t>& k, const Ahead& h) { return k < std::make_pair(h.t, h.a); });
  if (it == ahead_.end() || it->t != t) return;
  pollfd fd{uffd_.fd(), POLLIN, 0};
  if (poll(&fd, 1, 0) == 1 && (fd.revents & POLLIN)) return;  // another write waits: it goes first
  uint64_t copied = 0;
  copy_block(it->a, true, &copied);
  fault_bytes_.fetch_add(copied, std::memory_order_relaxed);
  unprotect_ahead(*it);
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

void CowSnapshotter::handler_loop() {
  // A writer waits while this thread sleeps for the copier's pages of its block: 20 µs, not the
  // 50 µs more that the default timer slack would add to each.
  (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
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
    ssize_t n = read(uffd_.fd(), msgs, sizeof msgs);  // EAGAIN: a spurious wake-up
    for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof(uffd_msg)); ++i) handle(msgs[i]);
    finish_releases();  // and the faults stashed meanwhile
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
// the copier's un-protect (tracking writes: by ours, once the copier is done with the block). Between
// snapshots, tracking writes: note the block as written and un-protect it.
void CowSnapshotter::serve_fault(uint64_t addr) {
  const double t0 = now();
  addr &= ~(page_ - 1);
  const bool tracking = tracking_.load(std::memory_order_relaxed);
  const Tracked* tr = active_ || tracking ? tracked_at(addr) : nullptr;
  if (!tr) {
    (void)uffd_.wake(addr, page_);  // a late message of a finished snapshot
    return;
  }
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
  // Tracking, what a write un-protects is the chunk it is in (its pages), so the next snapshot copies
  // that; where memory is gathered into huge pages, the fault block it is in from the written page up
  // (every chunk with a byte there counts as written): un-protecting part of a huge page splits it, and
  // every later protection and un-protection of it walks 4 KiB entries (each far dearer than the one
  // entry of a 2 MiB page), so a block is split only where that keeps most of it out of the next copy.
  uint64_t u0 = 0, u1 = 0;
  if (tracking && huge_pages_) {
    u0 = tr->start + (p0 - tr->first_page) * page_;
    u1 = next;
    // The block's first write in this generation lifts its protection from the written page up only:
    // a writer that sweeps upward needs no more, and a block that the writes reach only at its top (a
    // region not aligned to 2 MiB, whose first page is a written block's last) is not copied whole next
    // time. A second write to the block lifts the rest: two faults a block at most.
    if (addr > u0 && !tracker_.block_noted(t, addr, gen_)) u0 = addr;
  } else if (tracking) {
    tracker_.chunk_span(t, addr, page_, &u0, &u1);
  }
  auto took = [&](std::atomic<uint64_t>& ns) { ns.fetch_add(static_cast<uint64_t>((now() - t0) * 1e9), std::memory_order_relaxed); };
  if (!active_) {
    tracker_.note(t, u0, u1, gen_);
    unprotect_from_handler(u0, u1 - u0, tr->region);
    unprotect_faults_.fetch_add(1, std::memory_order_relaxed);
    return took(unprotect_wait_ns_);
  }
  uint64_t page = tr->first_page + (addr - tr->start) / page_;
  bool was_done = pages_[page].load(std::memory_order_acquire) == kDone;
  // Tracking, a write to a page copied already (or left in the slot) waited for no copy.
  if (!tracking || !was_done) {
    faults_.fetch_add(1, std::memory_order_relaxed);
    if (written_count_ < kHotBlocks) written_[written_count_++] = addr & ~(opt_.fault_block - 1);
  }
  uint64_t copied = copy_pages(t, p0, p1, true);
  // Nothing of the block was left to claim: the copier is on it (its un-protect wakes the writer).
  // The writer comes next to the following block it wrote last time, or, sweeping its state, to the
  // next one: copy that one meanwhile, so two threads copy ahead of it.
  uint64_t n0 = p0, n1 = p1;
  bool ahead = false;  // [n0, n1) is a block to copy ahead of the writer
  if (copied == 0 && !was_done) {
    auto hot = std::upper_bound(hot_.begin(), hot_.end(), addr);
    if (hot != hot_.end() && tracked_at(*hot) == tr) next = *hot;
    if (next < tr->end) {
      block(next, &n0, &n1);
      ahead = true;
    }
  }
  if (!tracking || !was_done) hint_ = n1 + 1;  // not for a write behind the copier, or to a chunk left in place
  if (!tracking) {
    if (ahead) copied = copy_pages(t, n0, n1, true);
    fault_bytes_.fetch_add(copied, std::memory_order_relaxed);
    if (was_done) (void)uffd_.wake(addr, page_);
    return took(fault_wait_ns_);
  }
  // Tracking, the copier leaves what it copies protected: the writer goes when this thread un-protects
  // the chunk's pages, once they are copied (by this thread now, or by the copier, which never waits for
  // this thread). The block ahead is copied in pieces meanwhile, and the writer let go between two of
  // them as soon as the copier is through its pages, not after the whole block.
  const uint64_t q0 = tr->first_page + (u0 - tr->start) / page_, q1 = tr->first_page + (u1 - tr->start) / page_;
  copied += copy_pages(t, q0, q1, true);
  const Release writer{t, q0, q1, u0, u1, t0, was_done};
  bool released = false;
  for (uint64_t a = n0; ahead && a < n1; a += kRunPages) {  // a look at the writer's pages between two runs
    if (!released) released = release_if_copied(writer);
    copied += copy_pages(t, a, std::min(a + kRunPages, n1), true);
  }
  fault_bytes_.fetch_add(copied, std::memory_order_relaxed);
  if (was_done) unprotect_faults_.fetch_add(1, std::memory_order_relaxed);
  if (!released) released = release_if_copied(writer);
  // The copier is copying some of the pages: it lets the writer go after its run (finish_releases).
  if (!released && releases_n_ < kReleases)
    releases_[releases_n_++] = writer;
  else
    while (!released && !(released = release_if_copied(writer))) std::this_thread::sleep_for(std::chrono::microseconds(20));
  if (released && releases_n_ == 0 && stashed_ == 0 && !ahead_.empty()) copy_next_ahead(t, addr);
}

// Lets the writer go if its pages are all done: its range noted, then un-protected (the caller holds
// handler_mu_).
bool CowSnapshotter::release_if_copied(const Release& r) {
  for (uint64_t k = r.q0; k < r.q1; ++k)
    if (pages_[k].load(std::memory_order_acquire) != kDone) return false;
  tracker_.note(r.t, r.u0, r.u1, gen_);
  unprotect_from_handler(r.u0, r.u1 - r.u0, tracked_[r.t].region);
  (r.was_done ? unprotect_wait_ns_ : fault_wait_ns_)
      .fetch_add(static_cast<uint64_t>((now() - r.t0) * 1e9), std::memory_order_relaxed);
  return true;
}

// The writers whose pages are all done now let go (the caller holds handler_mu_). An un-protection
// that had to drain the descriptor may have stashed faults: those are served here too, not left for
// the next event.
void CowSnapshotter::finish_releases() {
  size_t kept = 0;
  for (size_t i = 0; i < releases_n_; ++i)
    if (!release_if_copied(releases_[i])) releases_[kept++] = releases_[i];
  releases_n_ = kept;
  while (stashed_ > 0) serve_fault(stash_[--stashed_]);
}

void CowSnapshotter::unprotect_from_handler(uint64_t start, uint64_t len, size_t region) {
  for (;;) {
    int err = uffd_.unprotect(start, len);
    if (err != EAGAIN) {
      if (err != 0) {
        if (active_) fail(Failure::protect, region, err);
        track_broken_ = true;
        (void)uffd_.wake(start, len);
      }
      return;
    }
    drain();
  }
}

// Everything on the descriptor now, and the faults stashed, handled (the caller holds handler_mu_).
// Returns how many writes it read from the descriptor.
size_t CowSnapshotter::handle_pending() {
  uffd_msg msgs[16];
  size_t writes = 0;
  for (ssize_t n; (n = read(uffd_.fd(), msgs, sizeof msgs)) > 0;)
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(uffd_msg); ++i) {
      writes += msgs[i].event == UFFD_EVENT_PAGEFAULT;
      handle(msgs[i]);
    }
  while (stashed_ > 0) serve_fault(stash_[--stashed_]);
  return writes;
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
  if (tracking_)
    for (const auto& t : tracked_)
      if (start < t.end && t.start < end) track_broken_ = true;  // its bytes change unseen: copy all next time
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

}  // namespace cairn::cow
