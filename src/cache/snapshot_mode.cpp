#include "cache/snapshot_mode.hpp"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "cache/cow/cow_snapshot.hpp"

namespace cairn {

CpuShare this_process_cpus(int ranks_on_node) {
  CpuShare c;
  cpu_set_t set;
  CPU_ZERO(&set);
  c.online = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  c.usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : c.online;
  c.ranks_on_node = std::max(1, ranks_on_node);
  return c;
}

std::string no_spare_core(const CpuShare& c) {
  const bool bound = c.usable < c.online;
  if (bound ? c.usable >= 2 : c.usable >= 2 * c.ranks_on_node) return {};
  if (bound)
    return "this rank may run on " + std::to_string(c.usable) +
           " CPU only (its affinity): the background copy would take turns with the application on it "
           "(give each rank a CPU to spare, e.g. mpirun --bind-to none or --map-by slot:PE=2, for copy-on-write)";
  return "this node's " + std::to_string(c.online) + " CPUs run " + std::to_string(c.ranks_on_node) +
         " ranks: no core is left for a background copier per rank (copy-on-write wants two CPUs per rank)";
}

bool writer_outran_copier(const SnapshotReport& r, uint64_t fault_block) {
  // Against the whole state a copy would take (an incremental snapshot protects only what changed).
  return r.protected_bytes > 0 && r.faults * fault_block * 4 >= r.protected_bytes + r.unchanged_bytes;
}

bool writer_rewrote_most(const SnapshotReport& r) {
  return r.written_known && r.protected_bytes > 0 && r.written_bytes * 2 >= r.bytes;
}

double cow_application_wait(const SnapshotReport& r) {
  return r.blocking_seconds + r.fault_wait_seconds + r.unprotect_wait_seconds;
}

bool auto_prefers_cow(double cow_wait_s, double copy_blocking_s) { return cow_wait_s < copy_blocking_s; }

namespace {

std::string fmt_ms(double s) {
  char b[32];
  snprintf(b, sizeof b, "%.1f", s * 1e3);
  return b;
}

// snapshot = auto once cow was chosen: cow until three snapshots in a row show a writer that outran the
// copier or had rewritten most of its state since the snapshot before; then two versions with copy, to
// measure it (kTrialCopies); then, for the rest of the run, whichever of the two auto_prefers_cow
// favours. Every switch happens between snapshots (complete() of one, begin() of the next), never with
// one in flight.
class AutoSnapshotter final : public Snapshotter {
 public:
  explicit AutoSnapshotter(std::unique_ptr<Snapshotter> cow)
      : cow_(std::move(cow)), copy_(make_copy_snapshotter()), used_(cow_.get()), next_(cow_.get()) {}
  const char* name() const override { return used_.load()->name(); }
  Status begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) override {
    used_ = next_.load();
    return used_.load()->begin(regions, slot);
  }
  Status complete() override {
    Snapshotter* used = used_.load();
    Status st = used->complete();
    const SnapshotReport r = phase_ == Phase::watching ? cow_->report() : SnapshotReport{};
    const bool outran = phase_ == Phase::watching && writer_outran_copier(r, CowOptions{}.fault_block);
    const bool heavy = phase_ == Phase::watching && (outran || writer_rewrote_most(r));
    if (heavy)
      heavy_waits_.push_back(cow_application_wait(r));
    else
      heavy_waits_.clear();
    if (heavy && heavy_waits_.size() >= kHeavyToTry) {
      std::sort(heavy_waits_.begin(), heavy_waits_.end());
      cow_wait_s_ = heavy_waits_[heavy_waits_.size() / 2];
      const double mib = 1 << 20;
      if (outran)
        LOG_INFO("snapshot = auto: the next two checkpoints copy, to weigh a copy against copy-on-write: during the "
                 "last snapshot the application wrote %llu blocks of %.0f MiB of its %.0f MiB of protected memory "
                 "before the copier reached them, each waiting for its copy; %zu snapshots in a row of a writer that "
                 "outran the copier or rewrote most of its state (%.1f ms waited in each, the median)",
                 static_cast<unsigned long long>(r.faults), static_cast<double>(CowOptions{}.fault_block) / mib,
                 static_cast<double>(r.protected_bytes) / mib, heavy_waits_.size(), cow_wait_s_ * 1e3);
      else
        LOG_INFO("snapshot = auto: the next two checkpoints copy, to weigh a copy against copy-on-write: the "
                 "application wrote %.0f MiB of its %.0f MiB between the last two snapshots, each block costing it a "
                 "wait for its copy or its un-protection; %zu snapshots in a row of a writer that outran the copier "
                 "or rewrote most of its state (%.1f ms waited in each, the median)",
                 static_cast<double>(r.written_bytes) / mib, static_cast<double>(r.bytes) / mib,
                 heavy_waits_.size(), cow_wait_s_ * 1e3);
      phase_ = Phase::trying_copy;
      next_ = copy_.get();                // report() still answers for the snapshot just completed
      cow_->forget(nullptr, UINT64_MAX);  // all of it: its write tracking lets the memory go
    } else if (phase_ == Phase::trying_copy && used == copy_.get()) {
      trial_copies_.push_back(copy_->report().blocking_seconds);
      if (st.is_ok() && trial_copies_.size() < kTrialCopies) return st;  // the next version copies too
      const double copy_s = *std::min_element(trial_copies_.begin(), trial_copies_.end());
      std::string copies;
      for (double c : trial_copies_) copies += (copies.empty() ? "" : ", ") + fmt_ms(c);
      if (st.is_ok() && auto_prefers_cow(cow_wait_s_, copy_s)) {
        LOG_INFO("snapshot = auto: copy-on-write again, for the rest of the run: with it the application waited "
                 "%.1f ms in a version (the protection, the copies its writes waited for, its first writes "
                 "un-protected), with a copy %.1f ms (the faster of the trial copies: %s ms)",
                 cow_wait_s_ * 1e3, copy_s * 1e3, copies.c_str());
        next_ = cow_.get();
      } else {
        LOG_INFO("snapshot = auto: copy for the rest of the run: with it the application waited %.1f ms in a "
                 "version (the faster of the trial copies: %s ms), with copy-on-write %.1f ms (the protection, the "
                 "copies its writes waited for, its first writes un-protected): a writer that rewrites its state "
                 "right after a checkpoint, or most of it between two, loses less with a plain copy",
                 copy_s * 1e3, copies.c_str(), cow_wait_s_ * 1e3);
      }
      phase_ = Phase::decided;
    }
    return st;
  }
  SnapshotReport report() const override { return used_.load()->report(); }
  void wait_copied() override { used_.load()->wait_copied(); }
  void forget(const void* base, uint64_t len) override {
    copy_->forget(base, len);
    cow_->forget(base, len);
  }
  void set_chunking(uint32_t chunk_size, uint64_t stream_len) override {
    copy_->set_chunking(chunk_size, stream_len);
    cow_->set_chunking(chunk_size, stream_len);
  }
  // For the snapshot about to begin.
  void set_previous(std::vector<uint64_t> previous, uint64_t generation) override {
    next_.load()->set_previous(std::move(previous), generation);
  }
  bool tracks_writes() const override { return next_.load()->tracks_writes(); }

 private:
  enum class Phase { watching, trying_copy, decided };

  std::unique_ptr<Snapshotter> cow_, copy_;
  // used_: the snapshotter of the last begin() (report() and wait_copied() may come from any thread);
  // next_: the next begin()'s. Phase and the cow figure belong to the thread calling complete().
  std::atomic<Snapshotter*> used_, next_;
  // What a writer waits for under cow varies by half or more from one snapshot to the next (and the first
  // snapshots find the memory in 4 KiB pages, before it is gathered into huge pages between them): cow's
  // figure is the median over three snapshots in a row of a writer that outran the copier or rewrote most
  // of its state.
  static constexpr size_t kHeavyToTry = 3;
  // The first copy after a run of cow versions is most often the slower, at times by far
  // (docs/performance.md, "The slow copies after cow"): one copy is one sample against cow's median of
  // three, so the trial takes two, the faster weighed.
  static constexpr size_t kTrialCopies = 2;
  Phase phase_ = Phase::watching;
  std::vector<double> heavy_waits_;  // cow_application_wait of each snapshot of the current run of them
  std::vector<double> trial_copies_;  // the blocking of each trial copy
  double cow_wait_s_ = 0;
};

}  // namespace

std::vector<std::string> rdma_devices(const std::string& sysfs) {
  std::vector<std::string> names;
  for (const char* cls : {"/class/infiniband", "/class/cxi"}) {
    DIR* d = opendir((sysfs + cls).c_str());
    if (!d) continue;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

SnapshotChoice choose_snapshotter(SnapshotMode mode, bool service, const std::string& sysfs, const CpuShare& cpus,
                                  bool track_writes) {
  SnapshotChoice c;
  if (mode == SnapshotMode::copy) {
    c.snapshotter = make_copy_snapshotter();
    c.why = "snapshot = copy: the application waits for a copy of its protected memory";
    return c;
  }
  std::string asked = mode == SnapshotMode::cow ? "snapshot = cow" : "snapshot = auto";
  std::string rdma;
  for (const auto& n : rdma_devices(sysfs)) rdma += (rdma.empty() ? "" : ", ") + n;
  if (mode == SnapshotMode::automatic && !rdma.empty()) {
    c.snapshotter = make_copy_snapshotter();
    c.why = asked + ": copy, because this node has RDMA devices (" + rdma +
            "): a network card writing protected memory by DMA during a snapshot bypasses write-protection. "
            "Set snapshot = cow if no RDMA transfer writes a protected region while a snapshot is in flight";
    return c;
  }
  if (mode == SnapshotMode::automatic) {
    std::string no_core = no_spare_core(cpus);
    if (!no_core.empty()) {
      c.snapshotter = make_copy_snapshotter();
      c.why = asked + ": copy, because " + no_core;
      return c;
    }
  }
  // Between snapshots the memory stays write-protected only where no network card can write it unseen:
  // a DMA write between two snapshots would leave its chunk out of every later incremental version.
  CowOptions options;
  options.track_writes = track_writes && rdma.empty();
  auto cow = make_cow_snapshotter(options);
  if (!cow.is_ok()) {
    c.snapshotter = make_copy_snapshotter();
    c.why = asked + ": copy, because " + cow.status().message();
    c.warn = mode == SnapshotMode::cow;
    return c;
  }
  c.snapshotter = std::move(cow).value();
  c.why = asked + ": copy-on-write (userfaultfd write-protect; the application waits only for the protection)";
  if (mode == SnapshotMode::automatic) {
    c.snapshotter = std::make_unique<AutoSnapshotter>(std::move(c.snapshotter));
    c.why += "; after three snapshots in a row in which the application rewrites a quarter of its state before the "
             "copier, or half of it or more between two checkpoints, two versions copy, and the run keeps whichever of "
             "the two kept it waiting less (the faster of the two copies against the median of the three cow "
             "snapshots)";
  }
  if (options.track_writes)
    c.why += "; between snapshots it notes which chunks are written, and a version copies only those (l1_incremental)";
  if (service)
    c.why += "; the checkpoint service reads the L1 slots only, never a protected region, once the snapshot is complete";
  if (!rdma.empty()) {
    c.why += "; this node has RDMA devices (" + rdma +
             "): a transfer that writes a protected region by DMA while a snapshot is in flight is not seen; "
             "writes are not tracked between snapshots (every version copies all)";
    c.warn = true;
  }
  return c;
}

}  // namespace cairn
