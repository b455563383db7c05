// userfaultfd in write-protect mode, as the copy-on-write snapshotter uses it (docs/architecture.md,
// "Snapshots"): private anonymous memory is registered for write-protect faults, write-protected in one
// call, and un-protected piece by piece as the copier gets through it. A write by any thread of the
// process -- or by the kernel on its behalf (read(2), a peer's process_vm_writev) -- to a protected page
// waits until the page is un-protected; the fault is reported on the descriptor.
//
// Errors: open() is ERR_NOT_SUPPORTED with the reason (no userfaultfd, not permitted, a kernel without
// write-protect of unpopulated memory). The range calls return 0 or an errno and never allocate: the
// fault handler calls them while application threads wait. EAGAIN from protect/unprotect means that a
// change of the address space (munmap, madvise, mremap of a registered range) is being reported on the
// descriptor: read it, then retry.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.hpp"

namespace cairn::cow {

class Userfault {
 public:
  Userfault() = default;
  Userfault(const Userfault&) = delete;
  Userfault& operator=(const Userfault&) = delete;
  Userfault(Userfault&& o) noexcept;
  Userfault& operator=(Userfault&& o) noexcept;
  ~Userfault();

  // A non-blocking descriptor with write-protect faults (UFFD_FEATURE_PAGEFAULT_FLAG_WP), protection of
  // pages never touched (UFFD_FEATURE_WP_UNPOPULATED, Linux 6.4) and the unmap, remove and remap events.
  // Tries userfaultfd(2) first, then /dev/userfaultfd (where vm.unprivileged_userfaultfd = 0 refuses
  // the system call to an unprivileged process but the device node grants it).
  static Result<Userfault> open();

  int fd() const { return fd_; }
  const std::string& opened_by() const { return opened_by_; }  // "userfaultfd(2)" or "/dev/userfaultfd"

  // [start, start + len) page aligned. register_wp fails with EBUSY where another userfaultfd already
  // holds the range and EINVAL where the kernel cannot protect it.
  int register_wp(uint64_t start, uint64_t len) const;
  int unregister(uint64_t start, uint64_t len) const;
  int protect(uint64_t start, uint64_t len) const;
  // Un-protect and wake the writers waiting in the range.
  int unprotect(uint64_t start, uint64_t len) const;
  int wake(uint64_t start, uint64_t len) const;

 private:
  int fd_ = -1;
  std::string opened_by_;
};

}  // namespace cairn::cow
