// stdio on matching paths: glibc's fopen opens its file without going through open(), so fopen,
// fopen64 and freopen are answered here (the stream is fdopen'ed on the file's node-local copy), and
// fclose flushes the stream before the file's generation is committed.
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "libc_real.hpp"
#include "vfs.hpp"

using cairn::interpose::vfs;
namespace real = cairn::interpose::real;

namespace {

// fopen's mode as open flags; -1 for a mode fopen would refuse.
int mode_flags(const char* mode) {
  if (!mode) return -1;
  int flags;
  switch (mode[0]) {
    case 'r': flags = O_RDONLY; break;
    case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
    case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
    default: return -1;
  }
  for (const char* c = mode + 1; *c && *c != ','; ++c) {
    if (*c == '+') flags = (flags & ~O_ACCMODE) | O_RDWR;
    else if (*c == 'x') flags |= O_EXCL;
    else if (*c == 'e') flags |= O_CLOEXEC;
  }
  return flags;
}

FILE* open_stream(const char* path, const char* mode, FILE* (*fallback)(const char*, const char*)) {
  int flags = mode_flags(mode);
  if (flags >= 0 && vfs().active())
    if (auto fd = vfs().open(path, flags, 0666)) {
      if (*fd < 0) return nullptr;
      FILE* f = fdopen(*fd, mode);
      if (!f) {
        int e = errno;
        vfs().before_close(*fd);
        real::close(*fd);
        errno = e;
      }
      return f;
    }
  return fallback(path, mode);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) FILE* fopen(const char* path, const char* mode) {
  return open_stream(path, mode, real::fopen);
}
__attribute__((visibility("default"))) FILE* fopen64(const char* path, const char* mode) {
  return open_stream(path, mode, real::fopen);
}

__attribute__((visibility("default"))) FILE* freopen(const char* path, const char* mode, FILE* stream) {
  if (!vfs().active() || !stream) return real::freopen(path, mode, stream);
  int old = fileno(stream);
  if (old >= 0 && vfs().owns(old)) {
    fflush(stream);
    vfs().before_close(old);
  }
  int flags = mode_flags(mode);
  auto fd = path && flags >= 0 ? vfs().open(path, flags, 0666) : std::nullopt;
  if (!fd) return real::freopen(path, mode, stream);
  if (*fd < 0) {
    fclose(stream);
    return nullptr;
  }
  // The stream reopens the node-local copy through /proc; its new descriptor takes over our record.
  std::string self = "/proc/self/fd/" + std::to_string(*fd);
  FILE* f = real::freopen(self.c_str(), mode, stream);
  if (f) vfs().dup(*fd, fileno(f));
  int e = errno;
  vfs().before_close(*fd);
  real::close(*fd);
  errno = e;
  return f;
}
__attribute__((visibility("default"))) FILE* freopen64(const char* path, const char* mode, FILE* stream) {
  return freopen(path, mode, stream);
}

__attribute__((visibility("default"))) int fclose(FILE* stream) {
  if (stream && vfs().active()) {
    int fd = fileno(stream);
    if (fd >= 0 && vfs().owns(fd)) {
      int flushed = fflush(stream);  // the last bytes are in the file before its generation commits
      vfs().before_close(fd);
      int rc = real::fclose(stream);
      return flushed == 0 ? rc : EOF;
    }
  }
  return real::fclose(stream);
}

}  // extern "C"
