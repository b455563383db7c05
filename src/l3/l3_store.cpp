#include "l3/l3_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "base/fsutil.hpp"
#include "base/log.hpp"

namespace cairn::l3 {

namespace {

const char* suffix_of(RankFile kind) {
  switch (kind) {
    case RankFile::data: return ".data";
    case RankFile::manifest: return ".manifest";
    case RankFile::where: return ".where";
    case RankFile::chunks: return ".chunks";
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
std::string chunks_path(const Layout& l, uint64_t v, uint32_t rank) { return rank_file(l, v, rank, RankFile::chunks); }

bool parse_rank_file_name(std::string_view name, uint32_t* rank, RankFile* kind) {
  constexpr std::string_view kPrefix = "rank-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  name.remove_prefix(kPrefix.size());
  size_t dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  for (RankFile k : {RankFile::data, RankFile::manifest, RankFile::where, RankFile::chunks}) {
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
  end_ = 0;
  recycled_ = false;
  if (!p.recorded) {
    auto fd = take_recycled(recycle_path(l, m.rank));
    if (fd) {
      fd_ = std::move(*fd);
      recycled_ = true;
      return Status::ok();
    }
  }
  const std::string& open_path = p.shared ? path_ : temp_;
  CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(open_path, O_WRONLY | O_CREAT | (p.shared ? 0 : O_TRUNC)));
  fd_ = std::move(fd);
  return Status::ok();
}

// The pool's file of this rank, if there is one, becomes the temporary file: overwritten in place, its
// blocks neither freed nor allocated anew. Only a regular file of one name, opened without following a
// link: whatever else is there (a link, a directory, a file another name shares) is removed and the
// writer makes a new file, as it does when the pool has none or the rename fails.
std::optional<fs::Fd> RankWriter::take_recycled(const std::string& pooled) {
  if (::rename(pooled.c_str(), temp_.c_str()) != 0) return std::nullopt;
  auto fd = fs::open_file(temp_, O_WRONLY | O_NOFOLLOW);
  struct stat st {};
  if (fd && ::fstat(fd->get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) return std::move(*fd);
  LOG_INFO("L3 recycle pool: %s is not a file of its own (%s); writing a new one", pooled.c_str(),
           fd ? "a link, or shared with another name" : fd.status().message().c_str());
  fs::remove_tree(temp_).ignore();
  return std::nullopt;
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
  end_ = std::max(end_, offset + len);
  return Status::ok();
}

void RankWriter::record_compressed(std::vector<uint64_t> chunk_stored) {
  place_.where.zstd = true;
  place_.where.stored = 0;
  for (uint64_t n : chunk_stored) place_.where.stored += n;
  place_.where.chunk_stored = std::move(chunk_stored);
}

void RankWriter::record_chunks(ChunkRecord record) { chunks_ = std::move(record); }

Result<RankWriter::Finished> RankWriter::finish(const std::function<void()>& after_data) {
  if (!fd_.valid()) return make_error(Code::ERR_SEQUENCE, "RankWriter::finish before open");
  // A recycled file may be longer than this version: nothing of the old one stays past its end; and
  // nothing of it in a gap, where a new file would read zeros (no writer leaves one: the agents' bytes
  // arrive in order, the others write from 0 on).
  if (recycled_ && written_ < end_)
    return make_error(Code::ERR_INTERNAL, "%s: %llu bytes written over a recycled file of %llu: a gap would keep old bytes",
                      temp_.c_str(), static_cast<unsigned long long>(written_), static_cast<unsigned long long>(end_));
  if (recycled_ && ::ftruncate(fd_.get(), static_cast<off_t>(end_)) != 0) return posix_error("ftruncate", temp_, errno);
  if (fsync(fd_.get()) != 0) return posix_error("fsync", temp_.empty() ? path_ : temp_, errno);
  if (!temp_.empty()) {
    if (::rename(temp_.c_str(), path_.c_str()) != 0) return posix_error("rename", temp_, errno);
    // The version directory is synced with the manifest below; a data file on another prefix is not.
    if (fs::dirname(path_) != layout_.l3_version_dir(manifest_.version)) CAIRN_TRY(fs::fsync_dir(fs::dirname(path_)));
  }
  fd_ = fs::Fd();
  if (place_.recorded)
    CAIRN_TRY(fs::write_file_atomic(where_path(layout_, manifest_.version, manifest_.rank), encode_where(place_.where), true));
  const std::string cpath = chunks_path(layout_, manifest_.version, manifest_.rank);
  if (chunks_) {
    CAIRN_TRY(fs::write_file_atomic(cpath, encode_chunk_record(*chunks_), true));
    // Pruning removes a version's COMMIT first and then looks for chunk records being written that
    // name it (and puts COMMIT back if it finds one); this record is durable before the check, so
    // either pruning sees it or this check sees the COMMIT gone.
    for (uint64_t h : holders_of(*chunks_))
      if (!fs::exists(commit_path(layout_, h))) {
        LOG_INFO("version %llu rank %u: written full to L3 (version %llu, which holds chunks of it, is being removed)",
                 static_cast<unsigned long long>(manifest_.version), manifest_.rank, static_cast<unsigned long long>(h));
        return Finished::base_removed;
      }
  } else {
    CAIRN_TRY(fs::remove_file(cpath));  // an earlier, incremental attempt at this version
  }
  if (after_data) after_data();
  Status st = fs::write_file_atomic(manifest_path(layout_, manifest_.version, manifest_.rank), encode_manifest(manifest_), true);
  turn_.leave();
  CAIRN_TRY(st);
  return Finished::written;
}

namespace {

// The plan of an incremental version of `m` on the newest committed version older than it, or why the
// version is written full.
Result<IncrementalPlan> plan_on_previous(const Layout& l, const Manifest& m, int full_every) {
  if (full_every <= 1) return make_error(Code::ERR_NOT_SUPPORTED, "full_every = %d", full_every);
  // The newest committed version older than m: COMMIT files read only down to it.
  for (uint64_t v : version_dirs(l)) {
    if (v >= m.version) continue;
    auto committed = read_commit(l, v);
    if (!committed) continue;
    const Committed& c = *committed;
    if (fs::exists(where_path(l, c.version, m.rank)))
      return make_error(Code::ERR_NOT_SUPPORTED, "version %llu was written in another layout",
                        static_cast<unsigned long long>(c.version));
    CAIRN_ASSIGN_OR_RETURN(base, read_manifest(l, c.version, m.rank));
    std::optional<ChunkRecord> record;
    std::string cpath = chunks_path(l, c.version, m.rank);
    if (fs::exists(cpath)) {
      CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(cpath));
      auto r = decode_chunk_record(text);
      if (!r) return r.status().prefixed(cpath);
      record = std::move(r).value();
    }
    CAIRN_ASSIGN_OR_RETURN(plan, plan_incremental(m, {&base, record ? &*record : nullptr}, full_every));
    // A version it would name that lost its data file (a restart passed over it) makes a full one.
    for (uint64_t h : holders_of(plan.record))
      if (!fs::exists(data_path(l, h, m.rank)))
        return make_error(Code::ERR_NOT_SUPPORTED, "%s, holding chunks of version %llu, is missing",
                          data_path(l, h, m.rank).c_str(), static_cast<unsigned long long>(c.version));
    return plan;
  }
  return make_error(Code::ERR_NOT_SUPPORTED, "no earlier committed version");
}

// The changed chunks of version m and its chunk record; base_removed when a version the record names went
// meanwhile (nothing is committed then).
Result<RankWriter::Finished> write_incremental(const Layout& l, const Manifest& m, const uint8_t* data,
                                               const IncrementalPlan& plan, const std::function<void()>& after_data,
                                               uint64_t* written) {
  RankWriter w;
  CAIRN_TRY(w.open(l, m, RankPlacement{}, nullptr));
  // Runs of consecutive changed chunks in one write each.
  uint64_t out = 0;
  for (size_t i = 0; i < plan.changed.size();) {
    size_t j = i + 1;
    while (j < plan.changed.size() && plan.changed[j] == plan.changed[j - 1] + 1) ++j;
    uint64_t from = plan.changed[i] * m.chunk_size;
    uint64_t to = std::min<uint64_t>(m.total_size, (plan.changed[j - 1] + 1) * m.chunk_size);
    CAIRN_TRY(w.write(out, data + from, to - from));
    out += to - from;
    i = j;
  }
  w.record_chunks(plan.record);
  CAIRN_ASSIGN_OR_RETURN(finished, w.finish(after_data));
  if (written) *written = w.written();
  return finished;
}

}  // namespace

Status write_rank(const Layout& l, const Manifest& m, const uint8_t* data,
                  const std::function<void()>& after_data, const WriteOptions* opts, uint64_t* written) {
  if (opts && opts->full_every > 1 && opts->legacy()) {
    auto plan = plan_on_previous(l, m, opts->full_every);
    if (plan) {
      CAIRN_ASSIGN_OR_RETURN(finished, write_incremental(l, m, data, *plan, after_data, written));
      if (finished == RankWriter::Finished::written) return Status::ok();
    } else {
      LOG_DEBUG("version %llu rank %u: a full L3 version (%s)", static_cast<unsigned long long>(m.version), m.rank,
                plan.status().message().c_str());
    }
  }
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
  CAIRN_TRY(w.finish(after_data).status());  // no chunk record: written, or an error
  if (written) *written = w.written();
  return Status::ok();
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

std::vector<uint64_t> version_dirs(const Layout& l) {
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

// An incremental version: each chunk from the data file of the version its chunk record names, every
// file opened once and checked to hold the runs named in it.
Status with_chunk_record(const Layout& l, const Manifest& m, const std::string& cpath,
                         const std::function<Status(const StreamSource&, const std::string& path)>& use) {
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(cpath));
  auto decoded = decode_chunk_record(text);
  if (!decoded) return decoded.status().prefixed(cpath);
  const ChunkRecord& r = *decoded;
  if (r.version != m.version || r.chunks != m.chunk_hashes.size() || r.chunk_size != m.chunk_size)
    return make_error(Code::ERR_CORRUPT, "%s: a record of version %llu, %llu chunks of %u bytes; the manifest says "
                      "version %llu, %zu chunks of %u bytes", cpath.c_str(), static_cast<unsigned long long>(r.version),
                      static_cast<unsigned long long>(r.chunks), r.chunk_size, static_cast<unsigned long long>(m.version),
                      m.chunk_hashes.size(), m.chunk_size);
  struct Holder {
    fs::Fd fd;
    std::string path;
    uint64_t end = 0;  // the furthest byte a run needs
  };
  std::map<uint64_t, Holder> files;
  auto run_bytes = [&](const ChunkRun& run) {
    return std::min<uint64_t>(m.total_size, (run.first + run.count) * m.chunk_size) - run.first * m.chunk_size;
  };
  for (const ChunkRun& run : r.runs) {
    auto it = files.find(run.holder);
    if (it == files.end()) {
      Holder h;
      h.path = data_path(l, run.holder, m.rank);
      auto fd = fs::open_file(h.path, O_RDONLY);
      if (!fd)
        return make_error(Code::ERR_CORRUPT, "version %llu, which holds chunks of this one: %s",
                          static_cast<unsigned long long>(run.holder), fd.status().message().c_str());
      h.fd = std::move(fd).value();
      it = files.emplace(run.holder, std::move(h)).first;
    }
    it->second.end = std::max(it->second.end, run.offset + run_bytes(run));
  }
  for (const auto& [holder, h] : files) {
    off_t end = lseek(h.fd.get(), 0, SEEK_END);
    if (end < 0) return posix_error("lseek", h.path, errno);
    const bool own = holder == r.version;
    if (static_cast<uint64_t>(end) < h.end || (own && static_cast<uint64_t>(end) != r.stored))
      return make_error(Code::ERR_CORRUPT, "%s: %lld bytes; %s", h.path.c_str(), static_cast<long long>(end),
                        own ? ("the chunk record says " + std::to_string(r.stored) + " stored").c_str()
                            : ("version " + std::to_string(r.version) + "'s chunks in it end at byte " +
                               std::to_string(h.end)).c_str());
  }
  // The read-ahead the full path gets (with_source).
  for (const auto& [holder, h] : files) (void)posix_fadvise(h.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  auto source = [&](uint64_t off, uint64_t len, uint8_t* dst) -> Status {
    const uint64_t c = off / m.chunk_size;
    ChunkPlace p = place_of(r, c);
    const Holder& h = files.at(p.holder);
    return fs::pread_all(h.fd.get(), dst, len, p.offset + (off - c * m.chunk_size), h.path);
  };
  return use(source, cpath);
}

// Opens the rank's data, whatever layout wrote it, checks its length, and calls `use` with a source of
// its stream bytes (pread at the right offset; for zstd, each chunk decompressed when first asked for).
Status with_source(const Layout& l, const Manifest& m,
                   const std::function<Status(const StreamSource&, const std::string& path)>& use) {
  std::string wpath = where_path(l, m.version, m.rank);
  std::string cpath = chunks_path(l, m.version, m.rank);
  if (fs::exists(cpath)) {
    if (fs::exists(wpath))
      return make_error(Code::ERR_CORRUPT, "%s: a chunk record beside a where-record (no writer makes both)", cpath.c_str());
    return with_chunk_record(l, m, cpath, use);
  }
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

}  // namespace cairn::l3
