// POSIX file helpers. Every call records the call, the path and errno in the Status it returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::fs {

Status make_dirs(const std::string& path, unsigned mode = 0755);
// Write to path.tmp.<pid>, fsync, rename to path (readers see the old or the new file, never a partial one).
Status write_file_atomic(const std::string& path, const std::string& bytes, bool sync = true);
Result<std::string> read_file(const std::string& path);
bool exists(const std::string& path);
Status remove_file(const std::string& path);   // ENOENT is fine
Status remove_tree(const std::string& path);   // ENOENT is fine
// Names in a directory (not "." and ".."); an absent directory is an empty list.
Result<std::vector<std::string>> list_dir(const std::string& path);
// What list_dir has done in this process, from any thread: the tests count a removal's directory
// scans with it (l3::remove_versions reads each version's records once).
struct DirScans {
  uint64_t calls = 0;  // directories listed
  uint64_t names = 0;  // names returned
};
DirScans dir_scans();
// Loops over short writes/reads; EINTR retried. Short reads at EOF are ERR_TRUNCATED.
Status pwrite_all(int fd, const void* buf, size_t len, uint64_t off, const std::string& path);
Status pread_all(int fd, void* buf, size_t len, uint64_t off, const std::string& path);
Status fsync_dir(const std::string& dir);
std::string absolute(const std::string& path);
std::string dirname(const std::string& path);
std::string join(const std::string& a, const std::string& b);

// RAII file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd();
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  bool valid() const { return fd_ >= 0; }
 private:
  int fd_ = -1;
};
Result<Fd> open_file(const std::string& path, int flags, unsigned mode = 0644);

}  // namespace cairn::fs
