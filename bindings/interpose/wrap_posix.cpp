// The POSIX calls the interposer answers for matching paths (docs/interpose.md lists them): the open
// family (and glibc's fortified __open_2 entry points), close, the stat family (the glibc 2.33+ symbols
// and the older __xstat ones that binaries built against older glibc call), statx, access, unlink,
// rename, truncate and dup. A file descriptor handed out is a real descriptor of the file's node-local
// copy, so read, write, pread, pwrite(v), lseek, fstat, fsync, ftruncate and mmap need no wrapper.
// Anything that is not ours goes to the C library unchanged.
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "libc_real.hpp"
#include "vfs.hpp"

using cairn::interpose::vfs;
namespace real = cairn::interpose::real;

namespace {

mode_t mode_arg(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

// A path relative to a directory descriptor, made absolute ("" when the descriptor cannot be read).
std::string at_path(int dirfd, const char* path) {
  if (!path) return {};
  if (path[0] == '/' || dirfd == AT_FDCWD) return path;
  char link[64], dir[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
  ssize_t n = readlink(link, dir, sizeof dir - 1);
  if (n <= 0) return {};
  dir[n] = '\0';
  return std::string(dir) + "/" + path;
}

int do_open(const char* path, int flags, mode_t mode) {
  if (vfs().active())
    if (auto r = vfs().open(path, flags, mode)) return *r;
  return real::open(path, flags, mode);
}

int do_openat(int dirfd, const char* path, int flags, mode_t mode) {
  if (vfs().active()) {
    std::string p = at_path(dirfd, path);
    if (!p.empty())
      if (auto r = vfs().open(p.c_str(), flags, mode)) return *r;
  }
  return real::openat(dirfd, path, flags, mode);
}

// stat and friends on the node-local copy of our files; `follow` = stat, not lstat (ours are no links).
int do_stat(int dirfd, const char* path, struct stat* st, int flags) {
  if (vfs().active()) {
    std::string p = at_path(dirfd, path);
    if (!p.empty())
      if (auto backing = vfs().resolve(p.c_str())) return real::stat(backing->c_str(), st);
  }
  return real::fstatat(dirfd, path, st, flags);
}

int do_access(int dirfd, const char* path, int mode, int flags) {
  if (vfs().active()) {
    std::string p = at_path(dirfd, path);
    if (!p.empty())
      if (auto backing = vfs().resolve(p.c_str())) return real::access(backing->c_str(), mode);
  }
  return real::faccessat(dirfd, path, mode, flags);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return do_open(path, flags, mode);
}
__attribute__((visibility("default"))) int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return do_open(path, flags, mode);
}
__attribute__((visibility("default"))) int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return do_openat(dirfd, path, flags, mode);
}
__attribute__((visibility("default"))) int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return do_openat(dirfd, path, flags, mode);
}
// What _FORTIFY_SOURCE builds call for open without a mode.
__attribute__((visibility("default"))) int __open_2(const char* path, int flags) { return do_open(path, flags, 0); }
__attribute__((visibility("default"))) int __open64_2(const char* path, int flags) { return do_open(path, flags, 0); }
__attribute__((visibility("default"))) int __openat_2(int dirfd, const char* path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}
__attribute__((visibility("default"))) int __openat64_2(int dirfd, const char* path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}
__attribute__((visibility("default"))) int creat(const char* path, mode_t mode) {
  return do_open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}
__attribute__((visibility("default"))) int creat64(const char* path, mode_t mode) {
  return do_open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

__attribute__((visibility("default"))) int close(int fd) {
  if (vfs().active()) vfs().before_close(fd);
  return real::close(fd);
}

__attribute__((visibility("default"))) int stat(const char* path, struct stat* st) {
  return do_stat(AT_FDCWD, path, st, 0);
}
__attribute__((visibility("default"))) int stat64(const char* path, struct stat64* st) {
  return do_stat(AT_FDCWD, path, reinterpret_cast<struct stat*>(st), 0);
}
__attribute__((visibility("default"))) int lstat(const char* path, struct stat* st) {
  return do_stat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int lstat64(const char* path, struct stat64* st) {
  return do_stat(AT_FDCWD, path, reinterpret_cast<struct stat*>(st), AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return do_stat(dirfd, path, st, flags);
}
__attribute__((visibility("default"))) int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  return do_stat(dirfd, path, reinterpret_cast<struct stat*>(st), flags);
}
// glibc before 2.33 compiled stat() into these (x86_64: one struct layout for all).
__attribute__((visibility("default"))) int __xstat(int, const char* path, struct stat* st) {
  return do_stat(AT_FDCWD, path, st, 0);
}
__attribute__((visibility("default"))) int __xstat64(int, const char* path, struct stat64* st) {
  return do_stat(AT_FDCWD, path, reinterpret_cast<struct stat*>(st), 0);
}
__attribute__((visibility("default"))) int __lxstat(int, const char* path, struct stat* st) {
  return do_stat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int __lxstat64(int, const char* path, struct stat64* st) {
  return do_stat(AT_FDCWD, path, reinterpret_cast<struct stat*>(st), AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int __fxstatat(int, int dirfd, const char* path, struct stat* st, int flags) {
  return do_stat(dirfd, path, st, flags);
}
__attribute__((visibility("default"))) int __fxstatat64(int, int dirfd, const char* path, struct stat64* st,
                                                       int flags) {
  return do_stat(dirfd, path, reinterpret_cast<struct stat*>(st), flags);
}
__attribute__((visibility("default"))) int statx(int dirfd, const char* path, int flags, unsigned int mask,
                                                 struct statx* st) {
  if (vfs().active() && path && *path) {
    std::string p = at_path(dirfd, path);
    if (!p.empty())
      if (auto backing = vfs().resolve(p.c_str())) return real::statx(AT_FDCWD, backing->c_str(), 0, mask, st);
  }
  return real::statx(dirfd, path, flags, mask, st);
}

__attribute__((visibility("default"))) int access(const char* path, int mode) {
  return do_access(AT_FDCWD, path, mode, 0);
}
__attribute__((visibility("default"))) int faccessat(int dirfd, const char* path, int mode, int flags) {
  return do_access(dirfd, path, mode, flags);
}
__attribute__((visibility("default"))) int euidaccess(const char* path, int mode) {
  return do_access(AT_FDCWD, path, mode, AT_EACCESS);
}
__attribute__((visibility("default"))) int eaccess(const char* path, int mode) {
  return do_access(AT_FDCWD, path, mode, AT_EACCESS);
}

__attribute__((visibility("default"))) int unlink(const char* path) {
  if (vfs().active())
    if (auto r = vfs().unlink(path)) return *r;
  return real::unlink(path);
}
__attribute__((visibility("default"))) int unlinkat(int dirfd, const char* path, int flags) {
  if (vfs().active() && !(flags & AT_REMOVEDIR)) {
    std::string p = at_path(dirfd, path);
    if (!p.empty())
      if (auto r = vfs().unlink(p.c_str())) return *r;
  }
  return real::unlinkat(dirfd, path, flags);
}
__attribute__((visibility("default"))) int remove(const char* path) {
  if (vfs().active())
    if (auto r = vfs().unlink(path)) return *r;
  return real::remove(path);
}

__attribute__((visibility("default"))) int rename(const char* from, const char* to) {
  if (vfs().active())
    if (auto r = vfs().rename(from, to)) return *r;
  return real::rename(from, to);
}
__attribute__((visibility("default"))) int renameat(int fromfd, const char* from, int tofd, const char* to) {
  if (vfs().active()) {
    std::string f = at_path(fromfd, from), t = at_path(tofd, to);
    if (!f.empty() && !t.empty())
      if (auto r = vfs().rename(f.c_str(), t.c_str())) return *r;
  }
  return real::renameat(fromfd, from, tofd, to);
}
__attribute__((visibility("default"))) int renameat2(int fromfd, const char* from, int tofd, const char* to,
                                                     unsigned int flags) {
  if (vfs().active() && flags == 0) return renameat(fromfd, from, tofd, to);
  return real::renameat2(fromfd, from, tofd, to, flags);
}

__attribute__((visibility("default"))) int truncate(const char* path, off_t length) {
  if (vfs().active())
    if (auto r = vfs().truncate(path, length)) return *r;
  return real::truncate(path, length);
}
__attribute__((visibility("default"))) int truncate64(const char* path, off64_t length) {
  return truncate(path, static_cast<off_t>(length));
}

__attribute__((visibility("default"))) int dup(int fd) {
  int to = real::dup(fd);
  if (to >= 0 && vfs().active()) vfs().dup(fd, to);
  return to;
}
__attribute__((visibility("default"))) int dup2(int fd, int fd2) {
  if (fd != fd2 && vfs().active()) vfs().before_close(fd2);  // dup2 closes fd2 first
  int to = real::dup2(fd, fd2);
  if (to >= 0 && fd != fd2 && vfs().active()) vfs().dup(fd, to);
  return to;
}
__attribute__((visibility("default"))) int dup3(int fd, int fd2, int flags) {
  if (fd != fd2 && vfs().active()) vfs().before_close(fd2);
  int to = real::dup3(fd, fd2, flags);
  if (to >= 0 && vfs().active()) vfs().dup(fd, to);
  return to;
}

}  // extern "C"
