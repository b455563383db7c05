#include "cache/cow/userfault.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

// Newer than the kernel headers this may be built with; the kernel answers at run time.
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

namespace cairn::cow {
namespace {

constexpr uint64_t kWanted = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED | UFFD_FEATURE_EVENT_UNMAP |
                             UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;

int open_fd(std::string* how, int* syscall_errno) {
  int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  *syscall_errno = fd < 0 ? errno : 0;
  if (fd >= 0) {
    *how = "userfaultfd(2)";
    return fd;
  }
  int dev = ::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev < 0) return -1;
  fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
  int err = errno;
  close(dev);
  errno = err;
  if (fd >= 0) *how = "/dev/userfaultfd";
  return fd;
}

int range_ioctl(int fd, unsigned long request, void* arg) { return ioctl(fd, request, arg) == 0 ? 0 : errno; }

}  // namespace

Userfault::Userfault(Userfault&& o) noexcept { *this = std::move(o); }

Userfault& Userfault::operator=(Userfault&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    opened_by_ = std::move(o.opened_by_);
  }
  return *this;
}

Userfault::~Userfault() {
  if (fd_ >= 0) close(fd_);
}

Result<Userfault> Userfault::open() {
  Userfault u;
  int syscall_errno = 0;
  u.fd_ = open_fd(&u.opened_by_, &syscall_errno);
  if (u.fd_ < 0) {
    int dev_errno = errno;
    if (syscall_errno == ENOSYS)
      return make_error(Code::ERR_NOT_SUPPORTED, "the kernel has no userfaultfd (CONFIG_USERFAULTFD)");
    return make_error(Code::ERR_NOT_SUPPORTED,
                      "userfaultfd is not permitted to this process (userfaultfd(2): %s; /dev/userfaultfd: %s): "
                      "set vm.unprivileged_userfaultfd = 1, or grant access to /dev/userfaultfd",
                      strerror(syscall_errno), strerror(dev_errno));
  }
  // Ask with no feature first: the answer lists what this kernel has, so a refusal can name the
  // missing one instead of failing the handshake with a bare EINVAL.
  uffdio_api probe{};
  probe.api = UFFD_API;
  Userfault test;
  int test_errno = 0;
  test.fd_ = open_fd(&test.opened_by_, &test_errno);
  if (test.fd_ >= 0 && ioctl(test.fd_, UFFDIO_API, &probe) == 0) {
    if (!(probe.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP))
      return make_error(Code::ERR_NOT_SUPPORTED, "the kernel's userfaultfd has no write-protect mode (Linux >= 5.7)");
    if (!(probe.features & UFFD_FEATURE_WP_UNPOPULATED))
      return make_error(Code::ERR_NOT_SUPPORTED,
                        "the kernel's userfaultfd cannot write-protect pages never touched "
                        "(UFFD_FEATURE_WP_UNPOPULATED, Linux >= 6.4)");
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kWanted;
  if (ioctl(u.fd_, UFFDIO_API, &api) != 0)
    return make_error(Code::ERR_NOT_SUPPORTED, "userfaultfd refused the write-protect features: %s", strerror(errno));
  if (!(api.ioctls & (1ull << _UFFDIO_REGISTER)))
    return make_error(Code::ERR_NOT_SUPPORTED, "userfaultfd offers no UFFDIO_REGISTER");
  return u;
}

int Userfault::register_wp(uint64_t start, uint64_t len) const {
  uffdio_register reg{};
  reg.range.start = start;
  reg.range.len = len;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  int err = range_ioctl(fd_, UFFDIO_REGISTER, &reg);
  if (err == 0 && !(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT))) {
    (void)unregister(start, len);
    return EINVAL;
  }
  return err;
}

int Userfault::unregister(uint64_t start, uint64_t len) const {
  uffdio_range r{start, len};
  return range_ioctl(fd_, UFFDIO_UNREGISTER, &r);
}

int Userfault::protect(uint64_t start, uint64_t len) const {
  uffdio_writeprotect wp{};
  wp.range.start = start;
  wp.range.len = len;
  wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  return range_ioctl(fd_, UFFDIO_WRITEPROTECT, &wp);
}

int Userfault::unprotect(uint64_t start, uint64_t len) const {
  uffdio_writeprotect wp{};
  wp.range.start = start;
  wp.range.len = len;
  wp.mode = 0;
  return range_ioctl(fd_, UFFDIO_WRITEPROTECT, &wp);
}

int Userfault::wake(uint64_t start, uint64_t len) const {
  uffdio_range r{start, len};
  return range_ioctl(fd_, UFFDIO_WAKE, &r);
}

}  // namespace cairn::cow
