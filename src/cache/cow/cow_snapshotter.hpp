// The copy-on-write snapshotter's insides, shared by its two files: cow_snapshot.cpp (begin, complete
// and the write tracking's lifecycle) and cow_faults.cpp (the copier and the fault handler). Its
// contract and mechanism are cow_snapshot.hpp's; nothing outside these two files includes this.
#pragma once

#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.hpp"
#include "cache/cow/cow_snapshot.hpp"
#include "cache/cow/userfault.hpp"
#include "cache/cow/write_tracker.hpp"

namespace cairn::cow {

inline double now() { return steady_seconds(); }

// A page's way through one snapshot. Only the thread that moved it pending -> copying copies it, and
// only while it is still write-protected; it is un-protected before it becomes done.
enum : uint8_t { kPending = 0, kCopying = 1, kDone = 2 };

// The most pages a thread claims and copies in one run (256 KiB of 4 KiB pages) while tracking writes
// (the copy then un-protects nothing): the copier and the fault handler share the block a writer waits
// for, run by run, and neither holds its CPU long in one system call (a kernel without preemption does
// not take the CPU from a thread inside one).
constexpr uint64_t kRunPages = 64;

#ifdef MADV_COLLAPSE
constexpr int kMadvCollapse = MADV_COLLAPSE;
#else
constexpr int kMadvCollapse = 25;  // Linux 6.1; older headers lack it, older kernels answer EINVAL
#endif

// Transparent huge pages allowed here at all ("always" or "madvise"; not "never").
bool thp_allowed();

// Why a snapshot failed, recorded by whichever thread saw it first (no allocation: the message is
// written in complete()).
enum class Failure : int { none = 0, unmapped, removed, remapped, unreadable, protect };

// One protected range of one snapshot: its pages are pages_[first_page, first_page + pages).
struct Tracked {
  uint64_t start = 0, end = 0;
  uint8_t* dst = nullptr;  // where `start` goes in the slot
  uint64_t first_page = 0;
  size_t region = 0;
  uint64_t stream_off = 0;  // where `start` is in the stream (the region's offset + its distance from src)
};


// Run f with every signal blocked, so that the threads it starts never run the application's handlers
// (a handler writing protected memory on the fault handler's own thread could never be served).
template <class F>
inline void with_signals_blocked(F f) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  f();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

class CowSnapshotter final : public Snapshotter {
 public:
  CowSnapshotter(Userfault uffd, const CowOptions& o)
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
  void set_chunking(uint32_t chunk_size, uint64_t stream_len) override {
    std::lock_guard<std::mutex> lock(mu_);
    chunk_size_ = chunk_size;
    stream_len_ = stream_len;
    previous_.clear();
    previous_gen_ = 0;
  }
  void set_previous(std::vector<uint64_t> previous, uint64_t generation) override {
    std::lock_guard<std::mutex> lock(mu_);
    previous_ = std::move(previous);
    previous_gen_ = generation;
  }
  bool tracks_writes() const override { return opt_.track_writes; }
  void forget(const void* base, uint64_t len) override;

 private:
  // both background threads
  uint64_t copy_pages(size_t t, uint64_t p0, uint64_t p1, bool handler);
  void fail(Failure how, size_t region, int err);
  const Tracked* tracked_at(uint64_t addr) const;
  // copier
  void copier_loop();
  void copy_all();
  void copy_ahead();
  void copy_block(uint64_t addr, bool handler, uint64_t* copied);
  void gather_huge_pages();
  void regather_after_tracking();
  void serve_waiting_writers();
  // fault handler
  void handler_loop();
  void handle(const uffd_msg& m);
  void serve_fault(uint64_t addr);
  void drain();
  size_t handle_pending();
  struct Release;
  bool release_if_copied(const Release& r);
  void finish_releases();
  void note_unmapped(uint64_t start, uint64_t end, Failure how);
  // write tracking
  void unprotect_from_handler(uint64_t start, uint64_t len, size_t region);
  struct Ahead;
  template <class F>
  void ahead_pieces(const Ahead& h, F f) const;
  bool pages_done(size_t t, uint64_t x, uint64_t y) const;
  void unprotect_ahead(const Ahead& h);
  void copy_next_ahead(size_t t, uint64_t addr);
  void stop_tracking();
  // begin()
  void log_fallbacks(const std::vector<SnapshotFallback>& fallbacks);
  Status fail_begin(const std::string& why, size_t registered);

  Userfault uffd_;
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
  std::atomic<uint64_t> faults_{0}, fault_bytes_{0}, fault_wait_ns_{0};
  // Writes that waited only for their un-protection (tracking), since the last begin() (which moves
  // them into its report).
  std::atomic<uint64_t> unprotect_faults_{0}, unprotect_wait_ns_{0};
  // Writes the copier served for a late handler thread, since the last complete() (which reports them).
  std::atomic<uint64_t> late_faults_{0};
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

  // Tracking, the blocks this snapshot un-protects as soon as they are copied (CowOptions::
  // unprotect_ahead; WriteTracker::blocks_to_unprotect_ahead): [a, b) of tracked_[t], in order. Written
  // by begin() under handler_mu_, before the copy is asked for; the copier goes through them first.
  struct Ahead {
    size_t t;
    uint64_t a, b;
  };
  std::vector<Ahead> ahead_;
  std::atomic<uint64_t> ahead_blocks_{0};  // un-protected ahead in this snapshot

  // Tracking, the writers whose pages the copier was copying when their faults were served: each goes
  // once pages [q0, q1) are done, with [u0, u1) noted and un-protected (finish_releases, by whichever
  // thread holds handler_mu_ next) rather than by a thread that sleeps on them holding handler_mu_: a
  // sleeping thread may wake behind the copier on the copier's core, and every writer then waits until
  // the copy is over. Past kReleases writers at once, the handler waits for the pages itself.
  struct Release {
    size_t t;
    uint64_t q0, q1, u0, u1;
    double t0;
    bool was_done;
  };
  static constexpr size_t kReleases = 64;
  Release releases_[kReleases];
  size_t releases_n_ = 0;
  // A write on the descriptor for this long is served by the copier (serve_waiting_writers): about what
  // the handler thread's wake-up takes (docs/performance.md), far shorter than a scheduler tick.
  static constexpr double kLateSeconds = 150e-6;
  double waiting_since_ = 0;  // when the copier first saw a write waiting (0: none); copier only

  // Held by whichever thread serves faults (the handler, or the copier between its runs) while it reads
  // tracked_ and the descriptor.
  std::mutex handler_mu_;
  static constexpr size_t kStash = 256;
  uint64_t stash_[kStash];  // fault addresses read while draining events (under handler_mu_)
  size_t stashed_ = 0;
  int stop_fd_ = -1;
  std::thread copier_, handler_;

  // Write tracking (CowOptions::track_writes; the header says what it is). tracking_: tracked_ stays
  // registered (tracker_.ranges(), in the same order) and every page of it that tracker_ does not know
  // as written is write-protected. gen_: the snapshot begun last. All under handler_mu_; tracking_ is
  // read by the copier while a snapshot is active too.
  std::atomic<bool> tracking_{false};
  bool track_broken_ = false;  // an unmap, remove or remap reached a tracked range
  uint64_t gen_ = 0;
  WriteTracker tracker_;
  // Told before the next begin() (under mu_).
  uint32_t chunk_size_ = 0;
  uint64_t stream_len_ = 0;
  std::vector<uint64_t> previous_;
  uint64_t previous_gen_ = 0;
};

}  // namespace cairn::cow
