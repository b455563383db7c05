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

// auto: cow when the kernel and the permissions allow it and the node has no RDMA device; else copy.
// cow: cow when possible (with a warning on a node with RDMA devices), else copy with a warning.
// `service` (the service knob is set) changes no choice, only the reason: the service registers and
// reads the L1 slots, which are never write-protected, and only after complete() (docs/architecture.md,
// "Snapshots and the checkpoint service"). `sysfs` is where RDMA devices are looked for (tests pass
// their own).
SnapshotChoice choose_snapshotter(SnapshotMode mode, bool service = false, const std::string& sysfs = "/sys");

// The RDMA devices of this node (/sys/class/infiniband, which holds InfiniBand, RoCE, iWARP and EFA
// devices, and /sys/class/cxi, Slingshot's), by name.
std::vector<std::string> rdma_devices(const std::string& sysfs = "/sys");

}  // namespace cairn
