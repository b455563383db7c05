#include "device/pinned.hpp"

#include <unistd.h>

#include "cache/unmap_hook.hpp"

namespace cairn::device {
namespace {
void on_unmap(const void* base, uint64_t len) { pinned_ranges().forget(base, len); }
}  // namespace

PinnedRanges& pinned_ranges() {
  static PinnedRanges* ranges = [] {
    auto* r = new PinnedRanges();  // never destroyed: the hook may run during exit
    set_unmap_hook(&on_unmap);
    return r;
  }();
  return *ranges;
}

bool PinnedRanges::covers(const void* p, uint64_t len) const {
  auto b = reinterpret_cast<uintptr_t>(p), e = b + len;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& r : ranges_)
    if (r.begin <= b && e <= r.end) return true;
  return false;
}

size_t PinnedRanges::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ranges_.size();
}

void PinnedRanges::drop_overlapping(uintptr_t begin, uintptr_t end) {
  for (size_t i = 0; i < ranges_.size();) {
    Range& r = ranges_[i];
    if (r.begin < end && begin < r.end) {
      if (make_current(*r.driver, r.ctx).is_ok())
        (void)r.driver->api().cuMemHostUnregister(reinterpret_cast<void*>(r.begin));
      ranges_.erase(ranges_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

void PinnedRanges::forget(const void* p, uint64_t len) {
  auto b = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ranges_.empty()) drop_overlapping(b, b + len);
}

Status PinnedRanges::ensure(const Driver& driver, CUcontext ctx, const void* p, uint64_t len, bool* pinned,
                            std::string* why) {
  *pinned = true;
  if (len == 0 || covers(p, len)) return Status::ok();
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t b = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  uintptr_t e = (reinterpret_cast<uintptr_t>(p) + len + page - 1) & ~(page - 1);
  std::lock_guard<std::mutex> lock(mu_);
  drop_overlapping(b, e);
  CAIRN_TRY(make_current(driver, ctx));
  CUresult rc = driver.api().cuMemHostRegister(reinterpret_cast<void*>(b), e - b, CU_MEMHOSTREGISTER_PORTABLE);
  if (rc != CUDA_SUCCESS) {
    *pinned = false;
    *why = "cuMemHostRegister of " + std::to_string(e - b) + " bytes: " + driver.error_text(rc);
    return Status::ok();
  }
  ranges_.push_back({b, e, &driver, ctx});
  return Status::ok();
}

}  // namespace cairn::device
