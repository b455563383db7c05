#include "pfs/l3_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

#include "core/fsutil.hpp"

namespace cairn::l3 {

std::string data_path(const Layout& l, uint64_t v, uint32_t rank) {
  return l.l3_version_dir(v) + "/rank-" + std::to_string(rank) + ".data";
}
std::string manifest_path(const Layout& l, uint64_t v, uint32_t rank) {
  return l.l3_version_dir(v) + "/rank-" + std::to_string(rank) + ".manifest";
}
std::string commit_path(const Layout& l, uint64_t v) { return l.l3_version_dir(v) + "/COMMIT"; }

Status write_rank(const Layout& l, const Manifest& m, const uint8_t* data,
                  const std::function<void()>& after_data) {
  std::string dir = l.l3_version_dir(m.version);
  CAIRN_TRY(fs::make_dirs(dir));
  std::string path = data_path(l, m.version, m.rank);
  {
    CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(path, O_WRONLY | O_CREAT | O_TRUNC));
    // Large pwrites straight from the snapshot slot: no staging copy.
    constexpr uint64_t kPiece = 64ull << 20;
    for (uint64_t off = 0; off < m.total_size; off += kPiece) {
      uint64_t n = std::min(kPiece, m.total_size - off);
      CAIRN_TRY(fs::pwrite_all(fd.get(), data + off, n, off, path));
    }
    if (fsync(fd.get()) != 0) return posix_error("fsync", path, errno);
  }
  if (after_data) after_data();
  return fs::write_file_atomic(manifest_path(l, m.version, m.rank), encode_manifest(m), true);
}

Status commit(const Layout& l, uint64_t v, uint32_t nranks, const std::string& label) {
  std::ostringstream os;
  os << "cairn-commit 1\nversion " << v << "\nnranks " << nranks << "\nlabel " << label << "\n";
  return fs::write_file_atomic(commit_path(l, v), os.str(), true);
}

Result<Committed> read_commit(const Layout& l, uint64_t v) {
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(commit_path(l, v)));
  std::istringstream is(text);
  std::string key, magic;
  int fmt = 0;
  is >> magic >> fmt;
  if (magic != "cairn-commit" || fmt < 1)
    return make_error(Code::ERR_FORMAT, "%s: not a cairn COMMIT file", commit_path(l, v).c_str());
  Committed c;
  bool have_version = false, have_nranks = false;
  std::string line;
  std::getline(is, line);
  while (std::getline(is, line)) {
    auto sp = line.find(' ');
    std::string k = line.substr(0, sp), val = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (k == "version") c.version = std::stoull(val), have_version = true;
    else if (k == "nranks") c.nranks = static_cast<uint32_t>(std::stoul(val)), have_nranks = true;
    else if (k == "label") c.label = val;
  }
  if (!have_version || !have_nranks || c.version != v)
    return make_error(Code::ERR_CORRUPT, "%s: incomplete or inconsistent COMMIT", commit_path(l, v).c_str());
  return c;
}

static std::vector<uint64_t> version_dirs(const Layout& l) {
  std::vector<uint64_t> out;
  auto names = fs::list_dir(l.prefix);
  if (!names) return out;
  for (const auto& n : *names) {
    uint64_t v;
    if (Layout::parse_l3_version_name(n, &v)) out.push_back(v);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

std::vector<Committed> list_committed(const Layout& l) {
  std::vector<Committed> out;
  for (uint64_t v : version_dirs(l)) {
    auto c = read_commit(l, v);
    if (c) out.push_back(*c);
  }
  return out;
}

uint64_t max_version_present(const Layout& l) {
  auto v = version_dirs(l);
  return v.empty() ? 0 : v.front();
}

Result<Manifest> read_manifest(const Layout& l, uint64_t v, uint32_t rank) {
  std::string path = manifest_path(l, v, rank);
  CAIRN_ASSIGN_OR_RETURN(bytes, fs::read_file(path));
  auto m = decode_manifest(bytes.data(), bytes.size());
  if (!m) return m.status().prefixed(path);
  if (m->version != v || m->rank != rank)
    return make_error(Code::ERR_CORRUPT, "%s: manifest is for version %llu rank %u", path.c_str(),
                      static_cast<unsigned long long>(m->version), m->rank);
  return m;
}

Status read_data(const Layout& l, const Manifest& m, uint8_t* dst) {
  std::string path = data_path(l, m.version, m.rank);
  CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(path, O_RDONLY));
  off_t end = lseek(fd.get(), 0, SEEK_END);
  if (end < 0) return posix_error("lseek", path, errno);
  if (static_cast<uint64_t>(end) != m.total_size)
    return make_error(Code::ERR_CORRUPT, "%s: %lld bytes, manifest says %llu (truncated or extended)",
                      path.c_str(), static_cast<long long>(end),
                      static_cast<unsigned long long>(m.total_size));
  return fs::pread_all(fd.get(), dst, m.total_size, 0, path);
}

Status prune(const Layout& l, int keep) {
  auto committed = list_committed(l);
  if (committed.empty()) return Status::ok();
  uint64_t newest = committed.front().version;
  std::vector<uint64_t> kept;
  for (size_t i = 0; i < committed.size() && static_cast<int>(i) < std::max(keep, 1); ++i)
    kept.push_back(committed[i].version);
  for (uint64_t v : version_dirs(l)) {
    if (v >= newest) continue;  // newer uncommitted ones may be in flight
    if (std::find(kept.begin(), kept.end(), v) != kept.end()) continue;
    // Remove COMMIT first: a half-removed directory then reads as uncommitted, never as good.
    CAIRN_TRY(fs::remove_file(commit_path(l, v)));
    CAIRN_TRY(fs::remove_tree(l.l3_version_dir(v)));
  }
  return Status::ok();
}

}  // namespace cairn::l3
