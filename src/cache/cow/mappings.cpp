#include "cache/cow/mappings.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

// Linux 6.11's query of one mapping; older kernel headers lack it (the kernel answers ENOTTY then).
#ifndef PROCMAP_QUERY
struct procmap_query {
  uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
  uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
  uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE 0x01
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_SHARED 0x08
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#endif
static_assert(sizeof(procmap_query) == 104, "PROCMAP_QUERY's argument");

namespace cairn::cow {
namespace {

bool hex_field(std::string_view& s, char stop, uint64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  if (ec != std::errc() || p == s.data() || p == s.data() + s.size() || *p != stop) return false;
  s.remove_prefix(static_cast<size_t>(p - s.data()) + 1);
  return true;
}

std::string_view word(std::string_view& s) {
  size_t b = s.find_first_not_of(' ');
  if (b == std::string_view::npos) b = s.size();
  s.remove_prefix(b);
  size_t e = std::min(s.find(' '), s.size());
  std::string_view w = s.substr(0, e);
  s.remove_prefix(e);
  return w;
}

// "start-end perms offset major:minor inode   path"
bool parse_line(std::string_view line, Mapping* m) {
  if (!hex_field(line, '-', &m->start) || !hex_field(line, ' ', &m->end) || m->end < m->start) return false;
  std::string_view perms = word(line);
  if (perms.size() != 4) return false;
  m->readable = perms[0] == 'r';
  m->writable = perms[1] == 'w';
  if (perms[3] != 's' && perms[3] != 'p') return false;
  m->shared = perms[3] == 's';
  if (word(line).empty() || word(line).empty()) return false;  // offset, device
  std::string_view inode = word(line);
  auto [p, ec] = std::from_chars(inode.data(), inode.data() + inode.size(), m->inode, 10);
  if (ec != std::errc() || p != inode.data() + inode.size()) return false;
  size_t b = line.find_first_not_of(' ');
  m->path = b == std::string_view::npos ? std::string() : std::string(line.substr(b));
  return true;
}

bool anonymous(const Mapping& m) {
  if (m.inode != 0) return false;
  return m.path.empty() || m.path == "[heap]" || m.path.rfind("[stack", 0) == 0 || m.path.rfind("[anon:", 0) == 0;
}

std::string why_not(const Mapping& m) {
  if (m.shared) return m.path.empty() ? "shared memory (another process may write it)"
                                      : "shared memory (" + m.path + ")";
  if (m.path.rfind("/anon_hugepage", 0) == 0) return "hugetlb pages";
  if (m.path.rfind("/dev/", 0) == 0) return "device memory (" + m.path + ")";
  if (!anonymous(m)) return m.inode != 0 ? "file-backed memory (" + m.path + ")" : "special memory (" + m.path + ")";
  if (!m.writable) return "read-only memory";
  return {};
}

}  // namespace

Result<std::vector<Mapping>> parse_mappings(std::string_view text) {
  std::vector<Mapping> out;
  while (!text.empty()) {
    size_t nl = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(std::min(nl + 1, text.size()));
    if (line.empty()) continue;
    Mapping m;
    if (!parse_line(line, &m))
      return make_error(Code::ERR_FORMAT, "unexpected line in /proc/self/maps: '%.*s'", static_cast<int>(std::min<size_t>(line.size(), 200)),
                        line.data());
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  return out;
}

Result<std::vector<Mapping>> read_mappings() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return posix_error("open", "/proc/self/maps", errno);
  std::string text;
  char buf[64 << 10];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return posix_error("read", "/proc/self/maps", err);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return parse_mappings(text);
}

Result<std::vector<Mapping>> mappings_in(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return posix_error("open", "/proc/self/maps", errno);
  std::vector<Mapping> out;
  char name[4096];
  for (const auto& [start, end] : ranges) {
    for (uint64_t at = start; at < end;) {
      procmap_query q{};
      q.size = sizeof q;
      q.query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA;
      q.query_addr = at;
      q.vma_name_addr = reinterpret_cast<uint64_t>(name);
      q.vma_name_size = sizeof name;
      if (ioctl(fd, PROCMAP_QUERY, &q) != 0) {
        int err = errno;
        if (err == ENOENT) break;  // nothing mapped from here on
        close(fd);
        if (err == ENOTTY || err == EINVAL) return read_mappings();  // before Linux 6.11
        return posix_error("ioctl(PROCMAP_QUERY)", "/proc/self/maps", err);
      }
      if (q.vma_start >= end) break;
      Mapping m;
      m.start = q.vma_start;
      m.end = q.vma_end;
      m.readable = q.vma_flags & PROCMAP_QUERY_VMA_READABLE;
      m.writable = q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE;
      m.shared = q.vma_flags & PROCMAP_QUERY_VMA_SHARED;
      m.inode = q.inode;
      if (q.vma_name_size > 0) m.path.assign(name, strnlen(name, std::min<size_t>(q.vma_name_size, sizeof name)));
      out.push_back(std::move(m));
      at = q.vma_end;
    }
  }
  close(fd);
  std::sort(out.begin(), out.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  out.erase(std::unique(out.begin(), out.end(), [](const Mapping& a, const Mapping& b) { return a.start == b.start; }),
            out.end());
  return out;
}

namespace {
// Calls f on every mapping overlapping [start, end); false when a part of the range is not mapped.
template <class F>
bool each_overlapping(const std::vector<Mapping>& maps, uint64_t start, uint64_t end, F f) {
  auto it = std::upper_bound(maps.begin(), maps.end(), start, [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it != maps.begin()) --it;
  uint64_t at = start;
  for (; it != maps.end() && at < end; ++it) {
    if (it->end <= at) continue;
    if (it->start > at) return false;
    if (!f(*it)) return true;
    at = it->end;
  }
  return at >= end;
}
}  // namespace

std::string unprotectable_reason(const std::vector<Mapping>& maps, uint64_t start, uint64_t end) {
  std::string why;
  bool whole = each_overlapping(maps, start, end, [&](const Mapping& m) {
    why = why_not(m);
    return why.empty();
  });
  if (!whole && why.empty()) return "not entirely mapped";
  return why;
}

bool readable(const std::vector<Mapping>& maps, uint64_t start, uint64_t end) {
  bool ok = true;
  bool whole = each_overlapping(maps, start, end, [&](const Mapping& m) { return ok = m.readable; });
  return whole && ok;
}

}  // namespace cairn::cow
