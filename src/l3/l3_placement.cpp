#include "l3/l3_placement.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/fsutil.hpp"
#include "base/xxh.hpp"

namespace cairn::l3 {

Result<std::vector<WeightedPrefix>> parse_prefixes(const std::string& text) {
  std::vector<WeightedPrefix> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    WeightedPrefix p;
    auto colon = item.rfind(':');
    p.path = item;
    if (colon != std::string::npos) {
      char* end = nullptr;
      double w = strtod(item.c_str() + colon + 1, &end);
      if (end && *end == '\0' && colon + 1 < item.size()) {
        if (!(w > 0) || !std::isfinite(w))
          return make_error(Code::ERR_CONFIG, "prefix '%s': the weight must be a positive number", item.c_str());
        p.weight = w;
        p.path = item.substr(0, colon);
      }
    }
    if (p.path.empty() || p.path[0] != '/')
      return make_error(Code::ERR_CONFIG, "prefix '%s': give an absolute path (PATH[:WEIGHT])", item.c_str());
    out.push_back(p);
  }
  return out;
}

Result<int> parse_compress(const std::string& text) {
  if (text.empty() || text == "none") return 0;
  if (text == "zstd") return 3;
  if (text.rfind("zstd:", 0) == 0) {
    char* end = nullptr;
    long level = strtol(text.c_str() + 5, &end, 10);
    if (end && *end == '\0' && level >= 1 && level <= 19) return static_cast<int>(level);
  }
  return make_error(Code::ERR_CONFIG, "compress = '%s': use none, zstd or zstd:LEVEL (LEVEL 1..19)", text.c_str());
}

std::string encode_where(const Where& w) {
  std::ostringstream os;
  os << "cairn-where 1\nfile " << w.file << "\noffset " << w.offset << "\nstored " << w.stored << "\ncompress "
     << (w.zstd ? "zstd" : "none") << "\n";
  if (w.zstd) {
    os << "chunks " << w.chunk_stored.size() << "\n";
    for (uint64_t s : w.chunk_stored) os << s << "\n";
  }
  return os.str();
}

Result<Where> decode_where(const std::string& text) {
  std::istringstream is(text);
  std::string magic, key;
  int fmt = 0;
  is >> magic >> fmt;
  if (magic != "cairn-where" || fmt != 1) return make_error(Code::ERR_FORMAT, "not a cairn where-record");
  Where w;
  std::string compress;
  uint64_t nchunks = 0;
  bool have_file = false;
  while (is >> key) {
    if (key == "file") {
      is >> std::ws;
      std::getline(is, w.file);
      have_file = true;
    } else if (key == "offset") {
      is >> w.offset;
    } else if (key == "stored") {
      is >> w.stored;
    } else if (key == "compress") {
      is >> compress;
    } else if (key == "chunks") {
      is >> nchunks;
      // Each chunk's size takes two bytes of the text at least: more chunks than that is damage (and
      // must not make the reader allocate for them).
      if (nchunks > text.size() / 2)
        return make_error(Code::ERR_CORRUPT, "where-record: %llu chunks", static_cast<unsigned long long>(nchunks));
      w.chunk_stored.resize(nchunks);
      for (auto& s : w.chunk_stored) is >> s;
    } else {
      return make_error(Code::ERR_FORMAT, "where-record: unknown key '%s'", key.c_str());
    }
    if (!is) return make_error(Code::ERR_CORRUPT, "where-record: bad value for '%s'", key.c_str());
  }
  if (!have_file || (compress != "none" && compress != "zstd"))
    return make_error(Code::ERR_CORRUPT, "where-record: incomplete");
  w.zstd = compress == "zstd";
  if (!w.zstd && !w.chunk_stored.empty()) return make_error(Code::ERR_CORRUPT, "where-record: chunks without compression");
  if (w.offset + w.stored < w.offset) return make_error(Code::ERR_CORRUPT, "where-record: offset and size overflow");
  uint64_t sum = 0;
  bool overflow = false;
  for (uint64_t s : w.chunk_stored) overflow |= __builtin_add_overflow(sum, s, &sum);
  if (w.zstd && (overflow || sum != w.stored))
    return make_error(Code::ERR_CORRUPT, "where-record: chunk sizes do not add up");
  return w;
}

std::string choose_data_file(const WriteOptions& o, const std::string& main_prefix, const std::string& vname,
                             uint32_t rank) {
  std::string base = o.files_per_node > 0
                         ? "node-" + o.node + "." + std::to_string(o.local_index % o.files_per_node) + ".data"
                         : "rank-" + std::to_string(rank) + ".data";
  std::string root = main_prefix;
  if (!o.data_prefixes.empty()) {
    // Deterministic weighted choice by the file's name: the ranks sharing a file agree on it.
    double total = 0;
    for (const auto& p : o.data_prefixes) total += p.weight;
    double x = static_cast<double>(XXH3_64bits(base.data(), base.size()) % 1000003) / 1000003.0 * total;
    for (const auto& p : o.data_prefixes) {
      root = p.path;
      if (x < p.weight) break;
      x -= p.weight;
    }
  }
  return root + "/" + vname + "/" + base;
}

namespace {
Result<fs::Fd> lock_file(const std::string& path, int op) {
  CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(path, O_RDWR | O_CREAT, 0600));
  int rc;
  do rc = flock(fd.get(), op);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) return posix_error("flock", path, errno);
  return fd;
}
}  // namespace

Result<uint64_t> reserve_extent(const WriteOptions& o, uint64_t version, const std::string& file, uint64_t len) {
  CAIRN_TRY(fs::make_dirs(o.node_dir));
  char tag[32];
  snprintf(tag, sizeof tag, "%08x", static_cast<unsigned>(XXH3_64bits(file.data(), file.size())));
  std::string counter = o.node_dir + "/.l3-next-v" + std::to_string(version) + "-" + tag;
  CAIRN_ASSIGN_OR_RETURN(fd, lock_file(counter, LOCK_EX));
  char buf[32] = {0};
  ssize_t n = pread(fd.get(), buf, sizeof buf - 1, 0);
  if (n < 0) return posix_error("pread", counter, errno);
  uint64_t next = n > 0 ? strtoull(buf, nullptr, 10) : 0;
  std::string text = std::to_string(next + len);
  if (ftruncate(fd.get(), 0) != 0) return posix_error("ftruncate", counter, errno);
  CAIRN_TRY(fs::pwrite_all(fd.get(), text.data(), text.size(), 0, counter));
  // Counters of versions finished everywhere are no longer needed.
  auto names = fs::list_dir(o.node_dir);
  for (const auto& name : names ? *names : std::vector<std::string>{}) {
    if (name.rfind(".l3-next-v", 0) != 0) continue;
    uint64_t v = strtoull(name.c_str() + 10, nullptr, 10);
    if (v < o.clean_below) fs::remove_file(o.node_dir + "/" + name).ignore();
  }
  return next;
}

void Turnstile::leave() {
  if (fd_ >= 0) {
    flock(fd_, LOCK_UN);
    close(fd_);
    fd_ = -1;
  }
}

Status Turnstile::enter(const WriteOptions& o) {
  if (o.turnstile_width <= 0) return Status::ok();
  CAIRN_TRY(fs::make_dirs(o.node_dir));
  std::string path = o.node_dir + "/.turnstile-" + std::to_string(o.local_index % o.turnstile_width);
  CAIRN_ASSIGN_OR_RETURN(fd, lock_file(path, LOCK_EX));
  fd_ = fd.release();
  return Status::ok();
}

Status compress_chunks(const uint8_t* data, uint64_t len, uint32_t chunk_size, int level, std::string* out,
                       std::vector<uint64_t>* sizes) {
  out->clear();
  sizes->clear();
  if (chunk_size == 0) chunk_size = 1 << 20;
  ZSTD_CCtx* ctx = ZSTD_createCCtx();
  if (!ctx) return make_error(Code::ERR_NO_MEMORY, "zstd: cannot create a compression context");
  Status st = Status::ok();
  for (uint64_t off = 0; off < len; off += chunk_size) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_size, len - off));
    size_t at = out->size();
    out->resize(at + ZSTD_compressBound(n));
    size_t got = ZSTD_compressCCtx(ctx, out->data() + at, out->size() - at, data + off, n, level);
    if (ZSTD_isError(got)) {
      st = make_error(Code::ERR_IO, "zstd compress: %s", ZSTD_getErrorName(got));
      break;
    }
    out->resize(at + got);
    sizes->push_back(got);
  }
  ZSTD_freeCCtx(ctx);
  return st;
}

Status decompress_chunks(const uint8_t* stored, uint64_t stored_len, const std::vector<uint64_t>& sizes,
                         uint32_t chunk_size, uint8_t* dst, uint64_t len) {
  if (chunk_size == 0) chunk_size = 1 << 20;
  uint64_t expect_chunks = len == 0 ? 0 : (len + chunk_size - 1) / chunk_size;
  if (sizes.size() != expect_chunks)
    return make_error(Code::ERR_CORRUPT, "compressed data has %zu chunks, the manifest needs %llu", sizes.size(),
                      static_cast<unsigned long long>(expect_chunks));
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  if (!ctx) return make_error(Code::ERR_NO_MEMORY, "zstd: cannot create a decompression context");
  Status st = Status::ok();
  uint64_t in = 0;
  for (size_t i = 0; i < sizes.size() && st.is_ok(); ++i) {
    uint64_t off = i * chunk_size;
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_size, len - off));
    if (in + sizes[i] > stored_len) {
      st = make_error(Code::ERR_CORRUPT, "compressed chunk %zu extends past the stored data", i);
      break;
    }
    size_t got = ZSTD_decompressDCtx(ctx, dst + off, n, stored + in, sizes[i]);
    if (ZSTD_isError(got) || got != n)
      st = make_error(Code::ERR_CORRUPT, "compressed chunk %zu does not decompress to %zu bytes%s%s", i, n,
                      ZSTD_isError(got) ? ": " : "", ZSTD_isError(got) ? ZSTD_getErrorName(got) : "");
    in += sizes[i];
  }
  ZSTD_freeDCtx(ctx);
  return st;
}

}  // namespace cairn::l3
