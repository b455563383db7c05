#include "cache/snapshot_slot.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace cairn {

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    writable_ = o.writable_;
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

Result<MappedFile> MappedFile::open_rw(const std::string& path, uint64_t size, bool prefault) {
  MappedFile f;
  f.path_ = path;
  f.writable_ = true;
  f.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (f.fd_ < 0) return posix_error("open", path, errno);
  struct stat st;
  if (fstat(f.fd_, &st) != 0) return posix_error("fstat", path, errno);
  uint64_t have = static_cast<uint64_t>(st.st_size);
  f.size_ = 0;
  CAIRN_TRY(f.reserve(size > have ? size : have, prefault));
  return f;
}

Result<MappedFile> MappedFile::open_ro(const std::string& path) {
  MappedFile f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) return posix_error("open", path, errno);
  struct stat st;
  if (fstat(f.fd_, &st) != 0) return posix_error("fstat", path, errno);
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, f.fd_, 0);
    if (p == MAP_FAILED) return posix_error("mmap", path, errno);
    f.data_ = static_cast<uint8_t*>(p);
  }
  return f;
}

Result<MappedFile> MappedFile::anonymous(uint64_t size) {
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
  return f;
}

Status MappedFile::reserve(uint64_t size, bool prefault) {
  if (size <= size_ && data_) return Status::ok();
  if (size == 0) return Status::ok();
  struct stat st;
  if (fstat(fd_, &st) != 0) return posix_error("fstat", path_, errno);
  if (static_cast<uint64_t>(st.st_size) < size) {
    // posix_fallocate reserves the pages now, so a full tmpfs fails here with ENOSPC rather than
    // with SIGBUS later in the middle of a copy.
    int rc = posix_fallocate(fd_, 0, static_cast<off_t>(size));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return posix_error("fallocate", path_, rc);
    if (rc != 0 && ftruncate(fd_, static_cast<off_t>(size)) != 0)
      return posix_error("ftruncate", path_, errno);
  }
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  int flags = MAP_SHARED | (prefault ? MAP_POPULATE : 0);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, fd_, 0);
  if (p == MAP_FAILED) {
    size_ = 0;
    return posix_error("mmap", path_, errno);
  }
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  return Status::ok();
}

}  // namespace cairn
