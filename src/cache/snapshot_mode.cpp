#include "cache/snapshot_mode.hpp"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

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

namespace {

// snapshot = auto once cow was chosen: cow until a snapshot shows a writer that outran the copier, then
// copy for the rest of the run. The switch happens between snapshots (complete() of one, begin() of the
// next), never with one in flight.
class AutoSnapshotter final : public Snapshotter {
 public:
  explicit AutoSnapshotter(std::unique_ptr<Snapshotter> cow) : cow_(std::move(cow)), copy_(make_copy_snapshotter()) {}
  const char* name() const override { return current()->name(); }
  Status begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) override {
    switch_next_ = false;
    return current()->begin(regions, slot);
  }
  Status complete() override {
    Status st = current()->complete();
    if (!copying_ && writer_outran_copier(cow_->report(), CowOptions{}.fault_block)) {
      const SnapshotReport r = cow_->report();
      LOG_INFO("snapshot = auto: copy from the next checkpoint on, for the rest of the run: during the last snapshot "
               "the application wrote %llu blocks of %.0f MiB of its %.0f MiB of protected memory before the copier "
               "reached them, each waiting for its copy: a writer that rewrites its state right after a checkpoint "
               "loses less with a plain copy",
               static_cast<unsigned long long>(r.faults), static_cast<double>(CowOptions{}.fault_block) / (1 << 20),
               static_cast<double>(r.protected_bytes) / (1 << 20));
      copying_ = switch_next_ = true;  // report() still answers for the snapshot just completed
      cow_->forget(nullptr, UINT64_MAX);  // all of it: its write tracking lets the memory go
    }
    return st;
  }
  SnapshotReport report() const override { return current()->report(); }
  void wait_copied() override { current()->wait_copied(); }
  void forget(const void* base, uint64_t len) override {
    copy_->forget(base, len);
    cow_->forget(base, len);
  }
  void set_chunking(uint32_t chunk_size, uint64_t stream_len) override {
    copy_->set_chunking(chunk_size, stream_len);
    cow_->set_chunking(chunk_size, stream_len);
  }
  void set_previous(std::vector<uint64_t> previous, uint64_t generation) override {
    current()->set_previous(std::move(previous), generation);
  }
  bool tracks_writes() const override { return current()->tracks_writes(); }

 private:
  Snapshotter* current() const { return copying_ && !switch_next_ ? copy_.get() : cow_.get(); }

  std::unique_ptr<Snapshotter> cow_, copy_;
  std::atomic<bool> copying_{false}, switch_next_{false};  // wait_copied() may come from any thread
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
    c.why += "; copy from the first snapshot in which the application rewrites a quarter of its state before the copier";
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
