#include "base/fsutil.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>

namespace cairn::fs {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}
Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Fd> open_file(const std::string& path, int flags, unsigned mode) {
  int fd;
  do fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return posix_error("open", path, errno);
  return Fd(fd);
}

Status make_dirs(const std::string& path, unsigned mode) {
  if (path.empty()) return Status::ok();
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return posix_error("mkdir", cur, errno);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return posix_error("stat", path, errno);
  if (!S_ISDIR(st.st_mode)) return make_error(Code::ERR_IO, "%s exists and is not a directory", path.c_str());
  return Status::ok();
}

Status pwrite_all(int fd, const void* buf, size_t len, uint64_t off, const std::string& path) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return posix_error("pwrite", path, errno);
    }
    if (n == 0) return posix_error("pwrite", path, ENOSPC);
    p += n;
    len -= static_cast<size_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

Status pread_all(int fd, void* buf, size_t len, uint64_t off, const std::string& path) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::pread(fd, p, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return posix_error("pread", path, errno);
    }
    if (n == 0)
      return make_error(Code::ERR_TRUNCATED, "pread %s: file ends at byte %llu, %zu bytes short",
                        path.c_str(), static_cast<unsigned long long>(off), len);
    p += n;
    len -= static_cast<size_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

Status fsync_dir(const std::string& dir) {
  auto fd = open_file(dir, O_RDONLY | O_DIRECTORY);
  if (!fd) return fd.status();
  if (::fsync(fd->get()) != 0 && errno != EINVAL) return posix_error("fsync", dir, errno);
  return Status::ok();
}

Status write_file_atomic(const std::string& path, const std::string& bytes, bool sync) {
  // A name of this process's own: two processes replacing the same file never share a temporary.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    CAIRN_ASSIGN_OR_RETURN(fd, open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC));
    Status st = pwrite_all(fd.get(), bytes.data(), bytes.size(), 0, tmp);
    if (st.is_ok() && sync && ::fsync(fd.get()) != 0) st = posix_error("fsync", tmp, errno);
    if (!st.is_ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return posix_error("rename", path, err);
  }
  if (sync) return fsync_dir(dirname(path));
  return Status::ok();
}

Result<std::string> read_file(const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(fd, open_file(path, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return posix_error("fstat", path, errno);
  std::string out(static_cast<size_t>(st.st_size), '\0');
  CAIRN_TRY(pread_all(fd.get(), out.data(), out.size(), 0, path));
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status remove_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return posix_error("unlink", path, errno);
  return Status::ok();
}

Status remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return posix_error("remove", path, ec.value());
  return Status::ok();
}

namespace {
std::atomic<uint64_t> list_dir_calls{0}, list_dir_names{0};
}  // namespace

DirScans dir_scans() {
  return {list_dir_calls.load(std::memory_order_relaxed), list_dir_names.load(std::memory_order_relaxed)};
}

Result<std::vector<std::string>> list_dir(const std::string& path) {
  list_dir_calls.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    if (errno == ENOENT) return names;
    return posix_error("opendir", path, errno);
  }
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  list_dir_names.fetch_add(names.size(), std::memory_order_relaxed);
  return names;
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return p.lexically_normal().string();
}

std::string dirname(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

}  // namespace cairn::fs
