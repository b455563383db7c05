#include "cache/snapshot_slot.hpp"
#include "cache/unmap_hook.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace cairn {
namespace {
std::atomic<UnmapHook> g_unmap_hook{nullptr};
void unmapping(const void* base, uint64_t len) {
  if (UnmapHook h = g_unmap_hook.load(std::memory_order_acquire)) h(base, len);
}
}  // namespace

void set_unmap_hook(UnmapHook hook) { g_unmap_hook.store(hook, std::memory_order_release); }

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    writable_ = o.writable_;
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    touched_ = std::exchange(o.touched_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_) {
    unmapping(data_, size_);
    munmap(data_, size_);
  }
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  size_ = 0;
  touched_ = 0;
  fd_ = -1;
}

Result<MappedFile> MappedFile::open_rw(const std::string& path, uint64_t size, bool prefault,
                                       const PieceGate& gate) {
  MappedFile f;
  f.path_ = path;
  f.writable_ = true;
  f.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (f.fd_ < 0) return posix_error("open", path, errno);
  struct stat st;
  if (fstat(f.fd_, &st) != 0) return posix_error("fstat", path, errno);
  uint64_t have = static_cast<uint64_t>(st.st_size);
  f.size_ = 0;
  CAIRN_TRY(f.reserve(size > have ? size : have, prefault, gate));
  return f;
}

Result<MappedFile> MappedFile::open_ro(const std::string& path, bool populate) {
  MappedFile f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) return posix_error("open", path, errno);
  struct stat st;
  if (fstat(f.fd_, &st) != 0) return posix_error("fstat", path, errno);
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), f.fd_, 0);
    if (p == MAP_FAILED) return posix_error("mmap", path, errno);
    f.data_ = static_cast<uint8_t*>(p);
  }
  return f;
}

Result<MappedFile> MappedFile::anonymous(uint64_t size, bool populate) {
  MappedFile f;
  uint64_t len = std::max<uint64_t>(size, 1);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return make_error(Code::ERR_NO_MEMORY, "cannot map %llu bytes of staging memory: %s",
                      static_cast<unsigned long long>(len), strerror(errno));
  // 2 MiB pages where the kernel's THP mode is "madvise" (or "always"): 512 times fewer page faults
  // while the stream is read in. Advice only; failure changes nothing.
  (void)madvise(p, len, MADV_HUGEPAGE);
  f.data_ = static_cast<uint8_t*>(p);
  f.size_ = len;
  f.writable_ = true;
  if (populate) {
    int rc = -1;
#ifdef MADV_POPULATE_WRITE
    rc = madvise(p, len, MADV_POPULATE_WRITE);
    if (rc != 0 && errno != EINVAL)
      return make_error(Code::ERR_NO_MEMORY, "cannot fault in %llu bytes of staging memory: %s",
                        static_cast<unsigned long long>(len), strerror(errno));
#endif
    if (rc != 0)  // not in this kernel: a write per page
      for (uint64_t off = 0; off < len; off += 4096) f.data_[off] = 0;
  }
  return f;
}

namespace {
// One load per 4 KiB page of [p, p + len), from this thread, in user mode (MappedFile::touch).
void touch_pages(const uint8_t* p, uint64_t len) {
  uint64_t sink = 0;
  for (uint64_t off = 0; off < len; off += 4096) sink += *static_cast<const volatile uint8_t*>(p + off);
  asm volatile("" : : "r"(sink));
}

Status interrupted(const std::string& path) {
  return make_error(Code::ERR_INTERNAL, "preparing %s: stopped (not an error: a restart needed the cache)", path.c_str());
}
}  // namespace

Status MappedFile::reserve(uint64_t size, bool prefault, const PieceGate& gate) {
  if (size <= size_ && data_) return Status::ok();
  if (size == 0) return Status::ok();
  const bool gated = static_cast<bool>(gate);
  auto stopped = [&gate, gated] { return gated && !gate(); };
  struct stat st;
  if (fstat(fd_, &st) != 0) return posix_error("fstat", path_, errno);
  if (static_cast<uint64_t>(st.st_size) < size) {
    // posix_fallocate reserves the pages now, so a full tmpfs fails here with ENOSPC rather than
    // with SIGBUS later in the middle of a copy. In pieces where it may be stopped.
    uint64_t from = gated ? static_cast<uint64_t>(st.st_size) : 0;
    int rc = 0;
    for (uint64_t off = from; off < size && rc == 0;) {
      if (stopped()) return interrupted(path_);
      uint64_t len = gated ? std::min(kPrefaultPiece, size - off) : size - off;
      rc = posix_fallocate(fd_, static_cast<off_t>(off), static_cast<off_t>(len));
      off += len;
    }
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return posix_error("fallocate", path_, rc);
    if (rc != 0 && ftruncate(fd_, static_cast<off_t>(size)) != 0)
      return posix_error("ftruncate", path_, errno);
  }
  if (data_) {
    unmapping(data_, size_);
    munmap(data_, size_);
  }
  data_ = nullptr;
  // Gated: map, then populate piece by piece (MADV_POPULATE_WRITE, Linux 5.14); where the kernel lacks
  // it, one MAP_POPULATE as without a gate.
  bool pieces = prefault && gated;
#ifndef MADV_POPULATE_WRITE
  pieces = false;
#endif
  int flags = MAP_SHARED | (prefault && !pieces ? MAP_POPULATE : 0);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, fd_, 0);
  if (p == MAP_FAILED) {
    size_ = 0;
    return posix_error("mmap", path_, errno);
  }
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  touched_ = 0;  // a new mapping: its pages not touched from it yet
#ifdef MADV_POPULATE_WRITE
  for (uint64_t off = 0; pieces && off < size; off += kPrefaultPiece) {
    if (stopped()) return interrupted(path_);  // mapped, partly populated: usable as it is
    const uint64_t len = std::min(kPrefaultPiece, size - off);
    if (madvise(data_ + off, len, MADV_POPULATE_WRITE) != 0) {
      if (errno == EINVAL) {  // not in this kernel: the rest in one go
        madvise(data_ + off, size - off, MADV_WILLNEED);
        break;
      }
      return posix_error("madvise(MADV_POPULATE_WRITE)", path_, errno);
    }
  }
#endif
  return Status::ok();
}

Status MappedFile::touch(const PieceGate& gate, const std::function<bool()>& go_on) {
  while (data_ && touched_ < size_) {
    if (gate && !gate()) return interrupted(path_);
    if (go_on && !go_on()) return Status::ok();
    const uint64_t len = std::min(kPrefaultPiece, size_ - touched_);
    touch_pages(data_ + touched_, len);
    touched_ += len;
  }
  return Status::ok();
}

}  // namespace cairn
