// Small helpers every cairn-bench mode uses: the median of repetitions, the machine's load, the type of
// file system a directory is on.
#pragma once

#include <sys/statfs.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace cairn::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The 1-minute load average: other work on the machine makes every figure lower.
inline double loadavg_1m() {
  double l = -1;
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  return l;
}

inline const char* fs_type_name(const std::string& path) {
  struct statfs s {};
  if (statfs(path.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0x01021994: return "tmpfs";
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x6969: return "nfs";
    case 0x0BD00BD0: return "lustre";
    case 0x47504653: return "gpfs";
    case 0x794c7630: return "overlayfs";
    case 0x2FC12FC1: return "zfs";
  }
  return "other";
}

}  // namespace cairn::bench
