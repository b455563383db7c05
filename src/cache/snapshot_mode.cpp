#include "cache/snapshot_mode.hpp"

#include <dirent.h>

#include <algorithm>

#include "cache/cow/cow_snapshot.hpp"

namespace cairn {

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

SnapshotChoice choose_snapshotter(SnapshotMode mode, bool service, const std::string& sysfs) {
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
  auto cow = make_cow_snapshotter();
  if (!cow.is_ok()) {
    c.snapshotter = make_copy_snapshotter();
    c.why = asked + ": copy, because " + cow.status().message();
    c.warn = mode == SnapshotMode::cow;
    return c;
  }
  c.snapshotter = std::move(cow).value();
  c.why = asked + ": copy-on-write (userfaultfd write-protect; the application waits only for the protection)";
  if (service)
    c.why += "; the checkpoint service reads the L1 slots only, never a protected region, once the snapshot is complete";
  if (!rdma.empty()) {
    c.why += "; this node has RDMA devices (" + rdma +
             "): a transfer that writes a protected region by DMA while a snapshot is in flight is not seen";
    c.warn = true;
  }
  return c;
}

}  // namespace cairn
