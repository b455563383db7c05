// Which snapshotter a process uses -- the `snapshot` knob (copy | cow | auto) -- and why, decided once
// at cairn_init (docs/architecture.md, "Snapshots").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "cache/snapshot.hpp"

namespace cairn {

struct SnapshotChoice {
  std::unique_ptr<Snapshotter> snapshotter;
  std::string why;    // one line for the log: what was asked, what is used, and why
  bool warn = false;  // the choice differs from an explicit request, or carries a risk worth a warning
};

// What auto knows of the CPUs: this rank may run on `usable` of the node's `online` CPUs (its affinity),
// and `ranks_on_node` ranks of the job run on its node.
struct CpuShare {
  int usable = 1, online = 1, ranks_on_node = 1;
};
// This process's affinity and the node's online CPUs.
CpuShare this_process_cpus(int ranks_on_node);

// A core to spare for the copier, beside the application's: two CPUs of its own where the launcher
// bound the rank to fewer than all of them, else two per rank of the node. Empty when there is one,
// else why not (for the log).
std::string no_spare_core(const CpuShare& cpus);

// After a copy-on-write snapshot: the application's writes reached a quarter or more of the memory it
// took (protected, or left unchanged in the slot by an incremental snapshot) before the copier did (each waited for a block of `fault_block` bytes) -- a writer that
// rewrites its state right after a checkpoint, which waits for the copy block by block and would lose
// less with a plain copy.
bool writer_outran_copier(const SnapshotReport& report, uint64_t fault_block);

// After a copy-on-write snapshot that tracked writes since the one before: the application had written
// half of its state or more between the two (SnapshotReport::written_bytes). Each such block costs it,
// under cow, a wait for its copy or for its un-protection, whenever in the interval it writes it: a
// writer of that kind has copy-on-write's costs without much of its gain, so auto weighs a copy.
bool writer_rewrote_most(const SnapshotReport& report);

// What a copy-on-write snapshot kept the application waiting for, as its report measured it: the
// protection (begin()), the writes that waited for their block's copy, and, tracking writes, the first
// writes since the previous snapshot that waited for their un-protection. It leaves out what the handler
// does not see: the copier's share of the memory bandwidth, the writer's cache refilled.
double cow_application_wait(const SnapshotReport& report);
// auto, after one version of each: cow again when its writers waited less than the copy blocked.
bool auto_prefers_cow(double cow_wait_s, double copy_blocking_s);

// auto: cow when the kernel and the permissions allow it, the node has no RDMA device and `cpus` leave
// a core to spare for the copier; else copy. Once cow was chosen, auto watches every snapshot; after
// three in a row in which the writer outran the copier (writer_outran_copier) or had rewritten most of its
// state since the snapshot before (writer_rewrote_most) the next version copies, and from then on the run
// keeps cow if the median of the three snapshots' cow_application_wait was below the copy's blocking
// time, else copy (auto_prefers_cow), saying which and why at info level.
// cow: cow when possible (with a warning on a node with RDMA devices), else copy with a warning.
// `service` (the service knob is set) changes no choice, only the reason: the service registers and
// reads the L1 slots, which are never write-protected, and only after complete() (docs/architecture.md,
// "Snapshots and the checkpoint service"). `sysfs` is where RDMA devices are looked for (tests pass
// their own). `track_writes`: a cow snapshotter keeps the memory protected between snapshots to learn
// which chunks were written (CowOptions::track_writes; off with l1_incremental = off, and on a node with
// RDMA devices, whose DMA writes it would not see).
SnapshotChoice choose_snapshotter(SnapshotMode mode, bool service = false, const std::string& sysfs = "/sys",
                                  const CpuShare& cpus = this_process_cpus(1), bool track_writes = true);

// The RDMA devices of this node (/sys/class/infiniband, which holds InfiniBand, RoCE, iWARP and EFA
// devices, and /sys/class/cxi, Slingshot's), by name.
std::vector<std::string> rdma_devices(const std::string& sysfs = "/sys");

}  // namespace cairn
