#include "cache/version_view.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cairn {
namespace {
uint64_t page() {
  static const uint64_t p = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return p;
}
uint64_t round_up(uint64_t x) { return (x + page() - 1) / page() * page(); }

// Maps [0, len) of `path` read-only at `at` (inside the view's reservation).
Status map_at(uint8_t* at, const std::string& path, uint64_t len) {
  if (len == 0) return Status::ok();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return posix_error("open", path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return posix_error("fstat", path, e);
  }
  if (static_cast<uint64_t>(st.st_size) < len) {
    ::close(fd);
    return make_error(Code::ERR_CORRUPT, "%s: %llu bytes, the version says %llu", path.c_str(),
                      static_cast<unsigned long long>(st.st_size), static_cast<unsigned long long>(len));
  }
  void* p = mmap(at, round_up(len), PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return posix_error("mmap", path, e);
  return Status::ok();
}
}  // namespace

uint64_t file_region_offset(uint64_t offset) { return round_up(offset); }

bool has_files(const Manifest& m) {
  return std::any_of(m.regions.begin(), m.regions.end(), [](const RegionEntry& e) { return e.kind == RegionKind::file; });
}

VersionView::~VersionView() {
  if (base_) munmap(base_, mapped_);
}

Result<std::shared_ptr<VersionView>> VersionView::map(const std::string& slot_path, uint64_t memory_bytes,
                                                      const std::vector<File>& files, uint64_t total) {
  std::shared_ptr<VersionView> v(new VersionView());
  v->total_ = total;
  v->mapped_ = std::max<uint64_t>(round_up(total), page());
  // One reservation for the whole stream; the slot and the files are mapped into it. The gaps between
  // them stay inaccessible: no reader goes there (regions never overlap a gap, and a region's last page
  // is mapped whole).
  void* p = mmap(nullptr, v->mapped_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return make_error(Code::ERR_NO_MEMORY, "cannot reserve %llu bytes for a version's view: %s",
                                         static_cast<unsigned long long>(v->mapped_), strerror(errno));
  v->base_ = static_cast<uint8_t*>(p);
  CAIRN_TRY(map_at(v->base_, slot_path, memory_bytes));
  for (const auto& f : files) {
    if (f.offset % page() != 0 || f.offset + f.size > total)
      return make_error(Code::ERR_CORRUPT, "%s: file region at %llu (+%llu) is not page aligned in a %llu-byte stream",
                        f.path.c_str(), static_cast<unsigned long long>(f.offset),
                        static_cast<unsigned long long>(f.size), static_cast<unsigned long long>(total));
    CAIRN_TRY(map_at(v->base_ + f.offset, f.path, f.size));
  }
  return v;
}

Result<std::shared_ptr<VersionView>> VersionView::of(const Manifest& m, const std::string& slot_path,
                                                     const std::string& files_dir) {
  uint64_t memory_bytes = 0;
  std::vector<File> files;
  for (const auto& e : m.regions) {
    if (e.kind == RegionKind::file) files.push_back({files_dir + "/" + e.name, e.offset, e.size});
    else memory_bytes = std::max(memory_bytes, e.offset + e.size);
  }
  return map(slot_path, memory_bytes, files, m.total_size);
}

}  // namespace cairn
