#include "l3/l3_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "base/fsutil.hpp"

namespace cairn::l3 {

namespace {

const char* suffix_of(RankFile kind) {
  switch (kind) {
    case RankFile::data: return ".data";
    case RankFile::manifest: return ".manifest";
    case RankFile::where: return ".where";
  }
  return "";
}

std::string rank_file(const Layout& l, uint64_t v, uint32_t rank, RankFile kind) {
  return l.l3_version_dir(v) + "/rank-" + std::to_string(rank) + suffix_of(kind);
}

}  // namespace

std::string data_path(const Layout& l, uint64_t v, uint32_t rank) { return rank_file(l, v, rank, RankFile::data); }
std::string manifest_path(const Layout& l, uint64_t v, uint32_t rank) {
  return rank_file(l, v, rank, RankFile::manifest);
}
std::string commit_path(const Layout& l, uint64_t v) { return l.l3_version_dir(v) + "/COMMIT"; }
std::string where_path(const Layout& l, uint64_t v, uint32_t rank) { return rank_file(l, v, rank, RankFile::where); }

bool parse_rank_file_name(std::string_view name, uint32_t* rank, RankFile* kind) {
  constexpr std::string_view kPrefix = "rank-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  name.remove_prefix(kPrefix.size());
  size_t dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  for (RankFile k : {RankFile::data, RankFile::manifest, RankFile::where}) {
    uint64_t r = 0;
    if (name.substr(dot) == suffix_of(k) && parse_decimal(name.substr(0, dot), UINT32_MAX, &r)) {
      *rank = static_cast<uint32_t>(r);
      *kind = k;
      return true;
    }
  }
  return false;
}

std::string encode_commit(const Committed& c) {
  std::string label = c.label;
  std::replace(label.begin(), label.end(), '\n', ' ');
  return "cairn-commit 1\nversion " + std::to_string(c.version) + "\nnranks " + std::to_string(c.nranks) +
         "\nlabel " + label + "\n";
}

Result<Committed> decode_commit(std::string_view text) {
  size_t nl = text.find('\n');
  std::string_view head = text.substr(0, nl);
  constexpr std::string_view kMagic = "cairn-commit ";
  uint64_t format = 0;
  if (head.substr(0, kMagic.size()) != kMagic || !parse_decimal(head.substr(kMagic.size()), UINT32_MAX, &format) ||
      format < 1)
    return make_error(Code::ERR_FORMAT, "not a cairn COMMIT file");
  Committed c;
  bool have_version = false, have_nranks = false;
  while (nl != std::string_view::npos) {
    text.remove_prefix(nl + 1);
    nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    size_t sp = line.find(' ');
    std::string_view key = line.substr(0, sp), value = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    uint64_t n = 0;
    if (key == "version") {
      have_version = parse_decimal(value, UINT64_MAX, &c.version);
    } else if (key == "nranks") {
      have_nranks = parse_decimal(value, UINT32_MAX, &n);
      c.nranks = static_cast<uint32_t>(n);
    } else if (key == "label") {
      c.label = std::string(value);
    }
  }
  if (!have_version || !have_nranks) return make_error(Code::ERR_CORRUPT, "incomplete COMMIT");
  return c;
}

Result<RankPlacement> place_rank(const Layout& l, const Manifest& m, uint64_t stored, const WriteOptions* opts) {
  RankPlacement p;
  if (!opts || opts->legacy()) return p;
  p.recorded = true;
  p.shared = opts->files_per_node > 0;
  p.where.file = choose_data_file(*opts, l.prefix, Layout::l3_version_name(m.version), m.rank);
  p.where.stored = stored;
  if (p.shared) {
    CAIRN_ASSIGN_OR_RETURN(off, reserve_extent(*opts, m.version, p.where.file, stored));
    p.where.offset = off;
  }
  return p;
}

Status RankWriter::open(const Layout& l, const Manifest& m, const RankPlacement& p, const WriteOptions* opts) {
  layout_ = l;
  manifest_ = m;
  place_ = p;
  written_ = 0;
  CAIRN_TRY(fs::make_dirs(l.l3_version_dir(m.version)));
  path_ = p.recorded ? p.where.file : data_path(l, m.version, m.rank);
  base_ = p.recorded ? p.where.offset : 0;
  if (p.recorded && opts) CAIRN_TRY(turn_.enter(*opts));  // at most turnstile_width writers of this node at a time
  CAIRN_TRY(fs::make_dirs(fs::dirname(path_)));
  temp_ = p.shared ? "" : path_ + ".part-" + std::to_string(getpid());
  const std::string& open_path = p.shared ? path_ : temp_;
  CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(open_path, O_WRONLY | O_CREAT | (p.shared ? 0 : O_TRUNC)));
  fd_ = std::move(fd);
  return Status::ok();
}

RankWriter::~RankWriter() {
  if (fd_.valid() && !temp_.empty()) ::unlink(temp_.c_str());
}

Status RankWriter::write(uint64_t offset, const uint8_t* data, uint64_t len) {
  if (!fd_.valid()) return make_error(Code::ERR_SEQUENCE, "RankWriter::write before open");
  constexpr uint64_t kPiece = 64ull << 20;  // large pwrites, bounded
  for (uint64_t off = 0; off < len; off += kPiece) {
    uint64_t n = std::min(kPiece, len - off);
    CAIRN_TRY(fs::pwrite_all(fd_.get(), data + off, n, base_ + offset + off, path_));
  }
  written_ += len;
  return Status::ok();
}

void RankWriter::record_compressed(std::vector<uint64_t> chunk_stored) {
  place_.where.zstd = true;
  place_.where.stored = 0;
  for (uint64_t n : chunk_stored) place_.where.stored += n;
  place_.where.chunk_stored = std::move(chunk_stored);
}

Status RankWriter::finish(const std::function<void()>& after_data) {
  if (!fd_.valid()) return make_error(Code::ERR_SEQUENCE, "RankWriter::finish before open");
  if (fsync(fd_.get()) != 0) return posix_error("fsync", temp_.empty() ? path_ : temp_, errno);
  if (!temp_.empty()) {
    if (::rename(temp_.c_str(), path_.c_str()) != 0) return posix_error("rename", temp_, errno);
    // The version directory is synced with the manifest below; a data file on another prefix is not.
    if (fs::dirname(path_) != layout_.l3_version_dir(manifest_.version)) CAIRN_TRY(fs::fsync_dir(fs::dirname(path_)));
  }
  fd_ = fs::Fd();
  if (place_.recorded)
    CAIRN_TRY(fs::write_file_atomic(where_path(layout_, manifest_.version, manifest_.rank), encode_where(place_.where), true));
  if (after_data) after_data();
  Status st = fs::write_file_atomic(manifest_path(layout_, manifest_.version, manifest_.rank), encode_manifest(manifest_), true);
  turn_.leave();
  return st;
}

Status write_rank(const Layout& l, const Manifest& m, const uint8_t* data,
                  const std::function<void()>& after_data, const WriteOptions* opts) {
  std::string packed;
  const uint8_t* bytes = data;
  uint64_t len = m.total_size;
  std::vector<uint64_t> chunk_stored;
  if (opts && opts->zstd_level > 0) {
    CAIRN_TRY(compress_chunks(data, m.total_size, m.chunk_size, opts->zstd_level, &packed, &chunk_stored));
    bytes = reinterpret_cast<const uint8_t*>(packed.data());
    len = packed.size();
  }
  CAIRN_ASSIGN_OR_RETURN(place, place_rank(l, m, len, opts));
  if (opts && opts->zstd_level > 0) {
    place.where.zstd = true;
    place.where.chunk_stored = std::move(chunk_stored);
  }
  RankWriter w;
  CAIRN_TRY(w.open(l, m, place, opts));
  CAIRN_TRY(w.write(0, bytes, len));
  return w.finish(after_data);
}

Status commit(const Layout& l, uint64_t v, uint32_t nranks, const std::string& label) {
  return fs::write_file_atomic(commit_path(l, v), encode_commit({v, nranks, label}), true);
}

Result<Committed> read_commit(const Layout& l, uint64_t v) {
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(commit_path(l, v)));
  auto c = decode_commit(text);
  if (!c) return c.status().prefixed(commit_path(l, v));
  if (c->version != v)
    return make_error(Code::ERR_CORRUPT, "%s: incomplete or inconsistent COMMIT (version %llu)", commit_path(l, v).c_str(),
                      static_cast<unsigned long long>(c->version));
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
