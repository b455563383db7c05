#include "levels/copy_bound.hpp"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace cairn::bench {
namespace {

constexpr uint64_t kPiece = 2ull << 20;

double timed_copies(uint8_t* slot, uint8_t* state, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, bool readv,
                    int threads, int reps) {
  std::vector<double> ms;
  for (int r = 0; r < 1 + reps; ++r) {
    barrier();
    const double t0 = now();
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t)
      others.emplace_back([&, t] { copy_ranges(slot, state, ranges, readv, static_cast<size_t>(threads), static_cast<size_t>(t)); });
    copy_ranges(slot, state, ranges, readv, static_cast<size_t>(threads), 0);
    for (auto& t : others) t.join();
    const double s = max_over_ranks(now() - t0);
    clobber(slot);
    if (r > 0) ms.push_back(s * 1e3);
  }
  return *std::min_element(ms.begin(), ms.end());
}

}  // namespace

void copy_ranges(uint8_t* slot, uint8_t* state, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, bool readv,
                 size_t every, size_t first) {
  uint64_t at = 0;
  size_t i = 0;
  for (const auto& [lo, hi] : ranges)
    for (uint64_t off = lo; off < hi; off += kPiece, ++i) {
      const uint64_t n = std::min(kPiece, hi - off);
      if (i % every == first) {
        if (!readv) {
          memcpy(slot + at, state + off, n);
        } else {
          iovec local{slot + at, n}, remote{state + off, n};
          if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n))
            die("process_vm_readv: %s", strerror(errno));
        }
      }
      at += n;
    }
}

CopyBound measure_copy_bound(uint8_t* state, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, int threads,
                             int reps, const std::string& slot_path) {
  CopyBound b;
  for (const auto& [lo, hi] : ranges) b.bytes += hi - lo;
  b.threads = std::max(1, threads);
  uint8_t* slot = map_slot_like(slot_path, b.bytes);
  b.memcpy_ms = timed_copies(slot, state, ranges, false, b.threads, reps);
  b.readv_ms = timed_copies(slot, state, ranges, true, b.threads, reps);
  munmap(slot, b.bytes);
  b.method = b.memcpy_ms <= b.readv_ms ? "memcpy" : "process_vm_readv";
  b.ms = std::min(b.memcpy_ms, b.readv_ms);
  return b;
}

void add_copy_bound(json& t, const CopyBound& b, double loss_ms) {
  t["copy_bound_ms"] = round3(b.ms);
  t["copy_bound"] = {{"bytes", b.bytes}, {"threads", b.threads}, {"method", b.method},
                     {"memcpy_ms", round3(b.memcpy_ms)}, {"process_vm_readv_ms", round3(b.readv_ms)}};
  t["copy_share_of_loss"] = loss_ms > 0 ? round3(b.ms / loss_ms) : json(nullptr);
}

}  // namespace cairn::bench
