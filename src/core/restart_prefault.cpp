#include "core/restart_prefault.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/log.hpp"

namespace cairn {
namespace {

#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;  // Linux 5.14; older kernels answer EINVAL and nothing is done
#endif
// Small enough that finish() stops soon, large enough that the calls cost nothing beside the faults.
constexpr size_t kPiece = size_t{8} << 20;

}  // namespace

void RestartPrefault::start(std::vector<std::pair<void*, size_t>> ranges) {
  if (thread_.joinable() || ranges.empty()) return;
  stop_ = false;
  faulted_ = 0;
  thread_ = std::thread([this, r = std::move(ranges)]() mutable { run(std::move(r)); });
}

size_t RestartPrefault::finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return faulted_;
}

void RestartPrefault::run(std::vector<std::pair<void*, size_t>> ranges) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const auto& [ptr, bytes] : ranges) {
    // madvise takes whole pages: those inside the region (a partial page at either end is left to the
    // restart's writes).
    uintptr_t begin = (reinterpret_cast<uintptr_t>(ptr) + page - 1) / page * page;
    uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + bytes) / page * page;
    for (uintptr_t at = begin; at < end && !stop_; at += kPiece) {
      size_t n = std::min<uintptr_t>(kPiece, end - at);
      if (madvise(reinterpret_cast<void*>(at), n, kPopulateWrite) != 0) {
        // EINVAL: a kernel without it, or memory it does not apply to (a device mapping, VM_PFNMAP, a
        // userfaultfd-registered range); the restart's writes fault the pages in as before.
        LOG_DEBUG("restart: prefault of the regions stopped: madvise(MADV_POPULATE_WRITE): %s", strerror(errno));
        return;
      }
      faulted_ += n / page;
    }
  }
}

}  // namespace cairn
