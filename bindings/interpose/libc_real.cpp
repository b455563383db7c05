// dlsym(RTLD_NEXT) lookups of the C library's functions (libc_real.hpp). A symbol missing from the C
// library (an old glibc without statx) makes its call fail with ENOSYS instead of crashing.
#include "libc_real.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>

namespace cairn::interpose::real {
namespace {

template <class F>
F lookup(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// One cached pointer per function.
#define CAIRN_REAL(ret, name, params, args, fallback)          \
  ret name params {                                            \
    using F = ret(*) params;                                   \
    static std::atomic<F> fn{nullptr};                         \
    F f = fn.load(std::memory_order_acquire);                  \
    if (!f) {                                                  \
      f = lookup<F>(#name);                                    \
      fn.store(f, std::memory_order_release);                  \
    }                                                          \
    if (!f) {                                                  \
      errno = ENOSYS;                                          \
      return fallback;                                         \
    }                                                          \
    return f args;                                             \
  }

}  // namespace

CAIRN_REAL(int, open, (const char* path, int flags, mode_t mode), (path, flags, mode), -1)
CAIRN_REAL(int, openat, (int dirfd, const char* path, int flags, mode_t mode), (dirfd, path, flags, mode), -1)
CAIRN_REAL(int, close, (int fd), (fd), -1)
CAIRN_REAL(FILE*, fopen, (const char* path, const char* mode), (path, mode), nullptr)
CAIRN_REAL(FILE*, freopen, (const char* path, const char* mode, FILE* stream), (path, mode, stream), nullptr)
CAIRN_REAL(int, fclose, (FILE * stream), (stream), EOF)
CAIRN_REAL(int, stat, (const char* path, struct stat* st), (path, st), -1)
CAIRN_REAL(int, fstatat, (int dirfd, const char* path, struct stat* st, int flags), (dirfd, path, st, flags), -1)
CAIRN_REAL(int, statx, (int dirfd, const char* path, int flags, unsigned int mask, struct statx* st),
           (dirfd, path, flags, mask, st), -1)
CAIRN_REAL(int, access, (const char* path, int mode), (path, mode), -1)
CAIRN_REAL(int, faccessat, (int dirfd, const char* path, int mode, int flags), (dirfd, path, mode, flags), -1)
CAIRN_REAL(int, unlink, (const char* path), (path), -1)
CAIRN_REAL(int, unlinkat, (int dirfd, const char* path, int flags), (dirfd, path, flags), -1)
CAIRN_REAL(int, remove, (const char* path), (path), -1)
CAIRN_REAL(int, rename, (const char* from, const char* to), (from, to), -1)
CAIRN_REAL(int, renameat, (int fromfd, const char* from, int tofd, const char* to), (fromfd, from, tofd, to), -1)
CAIRN_REAL(int, renameat2, (int fromfd, const char* from, int tofd, const char* to, unsigned int flags),
           (fromfd, from, tofd, to, flags), -1)
CAIRN_REAL(int, truncate, (const char* path, off_t length), (path, length), -1)
CAIRN_REAL(DIR*, opendir, (const char* path), (path), nullptr)
CAIRN_REAL(struct dirent*, readdir, (DIR * dir), (dir), nullptr)
CAIRN_REAL(struct dirent64*, readdir64, (DIR * dir), (dir), nullptr)
CAIRN_REAL(int, closedir, (DIR * dir), (dir), -1)
CAIRN_REAL(int, dup, (int fd), (fd), -1)
CAIRN_REAL(int, dup2, (int fd, int fd2), (fd, fd2), -1)
CAIRN_REAL(int, dup3, (int fd, int fd2, int flags), (fd, fd2, flags), -1)

}  // namespace cairn::interpose::real
