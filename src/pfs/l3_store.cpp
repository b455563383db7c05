#include "pfs/l3_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "base/fsutil.hpp"

namespace cairn::l3 {

std::string data_path(const Layout& l, uint64_t v, uint32_t rank) {
  return l.l3_version_dir(v) + "/rank-" + std::to_string(rank) + ".data";
}
std::string manifest_path(const Layout& l, uint64_t v, uint32_t rank) {
  return l.l3_version_dir(v) + "/rank-" + std::to_string(rank) + ".manifest";
}
std::string commit_path(const Layout& l, uint64_t v) { return l.l3_version_dir(v) + "/COMMIT"; }
std::string where_path(const Layout& l, uint64_t v, uint32_t rank) {
  return l.l3_version_dir(v) + "/rank-" + std::to_string(rank) + ".where";
}

namespace {
// The data, written from the slot (or the compressed copy) with large pwrites, then fsync'ed.
Status write_extent(const std::string& path, const uint8_t* bytes, uint64_t len, uint64_t offset, bool truncate) {
  CAIRN_TRY(fs::make_dirs(fs::dirname(path)));
  CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(path, O_WRONLY | O_CREAT | (truncate ? O_TRUNC : 0)));
  constexpr uint64_t kPiece = 64ull << 20;
  for (uint64_t off = 0; off < len; off += kPiece) {
    uint64_t n = std::min(kPiece, len - off);
    CAIRN_TRY(fs::pwrite_all(fd.get(), bytes + off, n, offset + off, path));
  }
  if (fsync(fd.get()) != 0) return posix_error("fsync", path, errno);
  return Status::ok();
}
}  // namespace

Status write_rank(const Layout& l, const Manifest& m, const uint8_t* data,
                  const std::function<void()>& after_data, const WriteOptions* opts) {
  std::string dir = l.l3_version_dir(m.version);
  CAIRN_TRY(fs::make_dirs(dir));
  if (!opts || opts->legacy()) {
    CAIRN_TRY(write_extent(data_path(l, m.version, m.rank), data, m.total_size, 0, true));
  } else {
    Where w;
    std::string packed;
    const uint8_t* bytes = data;
    uint64_t len = m.total_size;
    if (opts->zstd_level > 0) {
      CAIRN_TRY(compress_chunks(data, m.total_size, m.chunk_size, opts->zstd_level, &packed, &w.chunk_stored));
      bytes = reinterpret_cast<const uint8_t*>(packed.data());
      len = packed.size();
      w.zstd = true;
    }
    w.file = choose_data_file(*opts, l.prefix, Layout::l3_version_name(m.version), m.rank);
    w.stored = len;
    if (opts->files_per_node > 0) {
      CAIRN_ASSIGN_OR_RETURN(off, reserve_extent(*opts, m.version, w.file, len));
      w.offset = off;
    }
    Turnstile turn;  // at most turnstile_width writers of this node at a time
    CAIRN_TRY(turn.enter(*opts));
    CAIRN_TRY(write_extent(w.file, bytes, len, w.offset, opts->files_per_node == 0));
    CAIRN_TRY(fs::write_file_atomic(where_path(l, m.version, m.rank), encode_where(w), true));
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
  auto number = [](const std::string& text, uint64_t* out) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19) return false;
    *out = std::stoull(text);
    return true;
  };
  while (std::getline(is, line)) {
    auto sp = line.find(' ');
    std::string k = line.substr(0, sp), val = sp == std::string::npos ? "" : line.substr(sp + 1);
    uint64_t n = 0;
    if (k == "version") have_version = number(val, &c.version);
    else if (k == "nranks") have_nranks = number(val, &n) && n <= UINT32_MAX, c.nranks = static_cast<uint32_t>(n);
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

namespace {
Status with_source(const Layout& l, const Manifest& m,
                   const std::function<Status(const StreamSource&, const std::string& path)>& use);
}  // namespace

Status read_data(const Layout& l, const Manifest& m, uint8_t* dst) {
  // Chunk by chunk: a compressed source decompresses one chunk per request.
  const uint64_t chunk = m.chunk_size ? m.chunk_size : (1u << 20);
  return with_source(l, m, [&](const StreamSource& src, const std::string&) {
    for (uint64_t off = 0; off < m.total_size; off += chunk)
      CAIRN_TRY(src(off, std::min<uint64_t>(chunk, m.total_size - off), dst + off));
    return Status::ok();
  });
}

namespace {
// Opens the rank's data, whatever layout wrote it, checks its length, and calls `use` with a source of
// its stream bytes (pread at the right offset; for zstd, each chunk decompressed when first asked for).
Status with_source(const Layout& l, const Manifest& m,
                   const std::function<Status(const StreamSource&, const std::string& path)>& use) {
  std::string wpath = where_path(l, m.version, m.rank);
  if (!fs::exists(wpath)) {  // one file per rank, stored as is
    std::string path = data_path(l, m.version, m.rank);
    CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(path, O_RDONLY));
    off_t end = lseek(fd.get(), 0, SEEK_END);
    if (end < 0) return posix_error("lseek", path, errno);
    if (static_cast<uint64_t>(end) != m.total_size)
      return make_error(Code::ERR_CORRUPT, "%s: %lld bytes, manifest says %llu (truncated or extended)",
                        path.c_str(), static_cast<long long>(end),
                        static_cast<unsigned long long>(m.total_size));
    (void)posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);  // larger read-ahead
    return use(pread_source(fd.get(), 0, path), path).prefixed(path);
  }
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(wpath));
  auto w = decode_where(text);
  if (!w) return w.status().prefixed(wpath);
  if (!w->zstd && w->stored != m.total_size)
    return make_error(Code::ERR_CORRUPT, "%s: %llu bytes stored, manifest says %llu", wpath.c_str(),
                      static_cast<unsigned long long>(w->stored), static_cast<unsigned long long>(m.total_size));
  CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(w->file, O_RDONLY));
  off_t end = lseek(fd.get(), 0, SEEK_END);
  if (end < 0) return posix_error("lseek", w->file, errno);
  if (static_cast<uint64_t>(end) < w->offset + w->stored)
    return make_error(Code::ERR_CORRUPT, "%s: %lld bytes, the rank's data ends at byte %llu (truncated)",
                      w->file.c_str(), static_cast<long long>(end), static_cast<unsigned long long>(w->offset + w->stored));
  (void)posix_fadvise(fd.get(), static_cast<off_t>(w->offset), static_cast<off_t>(w->stored), POSIX_FADV_SEQUENTIAL);
  if (!w->zstd) return use(pread_source(fd.get(), w->offset, w->file), w->file).prefixed(w->file);
  // Compressed: each chunk is read and decompressed when its first piece is asked for, into a one-chunk
  // buffer the pieces are copied from (still in cache).
  const uint64_t chunk = m.chunk_size ? m.chunk_size : (1u << 20);
  const uint64_t nchunks = m.total_size == 0 ? 0 : (m.total_size + chunk - 1) / chunk;
  if (w->chunk_stored.size() != nchunks)
    return make_error(Code::ERR_CORRUPT, "%s: compressed data has %zu chunks, the manifest needs %llu", w->file.c_str(),
                      w->chunk_stored.size(), static_cast<unsigned long long>(nchunks));
  std::vector<uint64_t> starts(nchunks + 1, 0);
  for (uint64_t c = 0; c < nchunks; ++c) starts[c + 1] = starts[c] + w->chunk_stored[c];
  if (starts[nchunks] > w->stored)
    return make_error(Code::ERR_CORRUPT, "%s: the compressed chunks extend past the stored data", w->file.c_str());
  std::vector<uint8_t> one(static_cast<size_t>(std::min<uint64_t>(chunk, std::max<uint64_t>(m.total_size, 1))));
  std::string packed;
  uint64_t have = UINT64_MAX;  // the chunk in `one`
  const int fdn = fd.get();
  auto source = [&](uint64_t off, uint64_t len, uint8_t* dst) -> Status {
    uint64_t c = off / chunk;
    if (c != have) {
      uint64_t n = std::min<uint64_t>(chunk, m.total_size - c * chunk);
      packed.resize(static_cast<size_t>(w->chunk_stored[c]));
      CAIRN_TRY(fs::pread_all(fdn, packed.data(), packed.size(), w->offset + starts[c], w->file));
      CAIRN_TRY(decompress_chunks(reinterpret_cast<const uint8_t*>(packed.data()), packed.size(), {w->chunk_stored[c]},
                                  static_cast<uint32_t>(n), one.data(), n));
      have = c;
    }
    memcpy(dst, one.data() + (off - c * chunk), len);
    return Status::ok();
  };
  return use(source, w->file).prefixed(w->file);
}
}  // namespace

Status read_data_verified(const Layout& l, const Manifest& m, const std::vector<StreamExtent>& extents) {
  return with_source(l, m, [&](const StreamSource& src, const std::string&) { return read_verified(m, extents, src); });
}

Status read_ranges_verified(const Layout& l, const Manifest& m, const std::vector<StreamExtent>& wanted) {
  return with_source(l, m, [&](const StreamSource& src, const std::string&) { return read_verified_ranges(m, wanted, src); });
}

Status remove_version(const Layout& l, uint64_t v) {
  // Remove COMMIT first: a half-removed directory then reads as uncommitted, never as good. Data
  // files on other prefixes are named by the where-records.
  CAIRN_TRY(fs::remove_file(commit_path(l, v)));
  std::string dir = l.l3_version_dir(v);
  auto names = fs::list_dir(dir);
  for (const auto& n : names ? *names : std::vector<std::string>{}) {
    if (n.size() < 6 || n.compare(n.size() - 6, 6, ".where") != 0) continue;
    auto text = fs::read_file(dir + "/" + n);
    auto w = text ? decode_where(*text) : Result<Where>(text.status());
    if (w && w->file.rfind(dir + "/", 0) != 0) {
      CAIRN_TRY(fs::remove_file(w->file));
      ::rmdir(fs::dirname(w->file).c_str());  // the version's directory there, once empty
    }
  }
  return fs::remove_tree(dir);
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
    CAIRN_TRY(remove_version(l, v));
  }
  return Status::ok();
}

}  // namespace cairn::l3
