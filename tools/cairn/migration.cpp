#include "migration.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "cache/cache_store.hpp"
#include "base/fsutil.hpp"
#include "base/manifest.hpp"
#include "base/state_file.hpp"

namespace cairn::tool {
namespace {

std::string join_list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

template <class T>
bool parse_num(const std::map<std::string, std::string>& kv, const char* key, T* out) {
  auto it = kv.find(key);
  if (it == kv.end()) return false;
  const std::string& s = it->second;
  if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') return false;
    *out = static_cast<T>(v);
    return true;
  } else {
    T v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return false;
    *out = v;
    return true;
  }
}

std::string get(const std::map<std::string, std::string>& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? "" : it->second;
}

std::string fmt_seconds(double s) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.6f", s);
  return buf;
}

}  // namespace

// ---- control files --------------------------------------------------------------------------------

std::string format_launcher_info(const LauncherInfo& info) {
  return state_file::encode({{"pid", std::to_string(info.pid)}, {"nodes", join_list(info.nodes)}, {"spares", join_list(info.spares)}},
                            "cairn run manages this job (docs/migration.md)");
}

LauncherInfo parse_launcher_info(const std::string& text) {
  auto kv = state_file::decode(text);
  LauncherInfo info;
  parse_num(kv, "pid", &info.pid);
  info.nodes = split_list(get(kv, "nodes"));
  info.spares = split_list(get(kv, "spares"));
  return info;
}

std::string format_migrate_request(const MigrateRequest& r) {
  return state_file::encode({{"id", r.id},
                             {"node", r.node},
                             {"buffers", std::to_string(r.buffers)},
                             {"buffer_size", std::to_string(r.buffer_size)},
                             {"requested_unix_ns", std::to_string(r.requested_unix_ns)}},
                            "written by cairn migrate (docs/migration.md)");
}

Result<MigrateRequest> parse_migrate_request(const std::string& text) {
  auto kv = state_file::decode(text);
  MigrateRequest r;
  r.id = get(kv, "id");
  r.node = get(kv, "node");
  if (r.id.empty() || r.node.empty())
    return make_error(Code::ERR_FORMAT, "migration request without %s", r.id.empty() ? "id" : "node");
  if (kv.count("buffers") && (!parse_num(kv, "buffers", &r.buffers) || r.buffers < 2))
    return make_error(Code::ERR_FORMAT, "migration request: buffers '%s' is not a number >= 2", get(kv, "buffers").c_str());
  if (kv.count("buffer_size") && (!parse_num(kv, "buffer_size", &r.buffer_size) || r.buffer_size < 4096))
    return make_error(Code::ERR_FORMAT, "migration request: buffer_size '%s' is not a number >= 4096",
                      get(kv, "buffer_size").c_str());
  parse_num(kv, "requested_unix_ns", &r.requested_unix_ns);
  return r;
}

std::string format_migrate_result(const MigrateResult& r) {
  return state_file::encode({{"id", r.id},
                             {"status", r.status},
                             {"node", r.node},
                             {"spare", r.spare},
                             {"version", std::to_string(r.version)},
                             {"bytes", std::to_string(r.bytes)},
                             {"wind_down_seconds", fmt_seconds(r.wind_down_seconds)},
                             {"transfer_seconds", fmt_seconds(r.transfer_seconds)},
                             {"restart_seconds", fmt_seconds(r.restart_seconds)},
                             {"total_seconds", fmt_seconds(r.total_seconds)},
                             {"restart_level", r.restart_level},
                             {"message", r.message}},
                            "written by cairn run (docs/migration.md)");
}

MigrateResult parse_migrate_result(const std::string& text) {
  auto kv = state_file::decode(text);
  MigrateResult r;
  r.id = get(kv, "id");
  r.status = get(kv, "status");
  r.message = get(kv, "message");
  r.node = get(kv, "node");
  r.spare = get(kv, "spare");
  r.restart_level = get(kv, "restart_level");
  parse_num(kv, "version", &r.version);
  parse_num(kv, "bytes", &r.bytes);
  parse_num(kv, "wind_down_seconds", &r.wind_down_seconds);
  parse_num(kv, "transfer_seconds", &r.transfer_seconds);
  parse_num(kv, "restart_seconds", &r.restart_seconds);
  parse_num(kv, "total_seconds", &r.total_seconds);
  return r;
}

// ---- the transfer ---------------------------------------------------------------------------------

namespace {

// One file streamed through the pool.
struct StreamItem {
  std::string src, dst;
  uint64_t length = 0;     // bytes streamed (from offset 0)
  uint64_t file_size = 0;  // the destination is sized like the source (slots are reused at this size)
  int rank = 0;
  const Manifest* manifest = nullptr;  // slot data: checked chunk by chunk; nullptr: copied as is
};

// Small files written after the streams, the L1 record of each rank last of all.
struct SmallFile {
  std::string src, dst;
};

struct Piece {
  size_t item = 0;
  uint64_t offset = 0, length = 0;
  int buffer = -1;
};

// The bounded pool and the two queues between the reader and the writer.
class Pool {
 public:
  Pool(int n, uint64_t size) {
    for (int i = 0; i < n; ++i) {
      void* p = nullptr;
      if (posix_memalign(&p, 4096, size) != 0) break;
      buffers_.emplace_back(static_cast<uint8_t*>(p), &std::free);
      free_.push_back(i);
    }
  }
  bool ok(int n) const { return static_cast<int>(buffers_.size()) == n; }
  uint8_t* data(int i) { return buffers_[static_cast<size_t>(i)].get(); }

  // Reader: a free buffer, or -1 once the transfer is abandoned.
  int take_free() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_free_.wait(lock, [&] { return !free_.empty() || abort_; });
    if (abort_) return -1;
    int b = free_.front();
    free_.pop_front();
    return b;
  }
  void push_full(const Piece& p) {
    std::lock_guard<std::mutex> lock(mu_);
    full_.push_back(p);
    peak_ = std::max(peak_, static_cast<int>(full_.size()));
    cv_full_.notify_one();
  }
  void reader_done() {
    std::lock_guard<std::mutex> lock(mu_);
    reader_done_ = true;
    cv_full_.notify_one();
  }
  // Writer: the next filled piece; nullopt at the end or once abandoned.
  std::optional<Piece> take_full() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_full_.wait(lock, [&] { return !full_.empty() || reader_done_ || abort_; });
    if (abort_ || full_.empty()) return std::nullopt;
    Piece p = full_.front();
    full_.pop_front();
    return p;
  }
  void give_back(int b) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(b);
    cv_free_.notify_one();
  }
  void abort(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!abort_) error_ = std::move(st);
    abort_ = true;
    cv_free_.notify_all();
    cv_full_.notify_all();
  }
  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_ ? error_ : Status::ok();
  }
  int peak() const { return peak_; }

 private:
  std::vector<std::unique_ptr<uint8_t, decltype(&std::free)>> buffers_;
  std::mutex mu_;
  std::condition_variable cv_free_, cv_full_;
  std::deque<int> free_;
  std::deque<Piece> full_;
  bool reader_done_ = false, abort_ = false;
  Status error_ = Status::ok();
  int peak_ = 0;
};

uint64_t file_size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

Result<TransferStats> transfer_node_cache(const Layout& layout, const std::string& from, const std::string& to,
                                          const TransferOptions& options) {
  if (from == to) return make_error(Code::ERR_INVALID_ARG, "migration from %s to itself", from.c_str());
  if (options.buffers < 2) return make_error(Code::ERR_INVALID_ARG, "the buffer pool needs at least 2 buffers");
  const std::string src_node = layout.node_cache(from), dst_node = layout.node_cache(to);
  auto names = fs::list_dir(src_node);
  if (!names) return make_error(Code::ERR_NO_CHECKPOINT, "%s has no cache to migrate (%s): %s", from.c_str(),
                                src_node.c_str(), names.status().message().c_str());

  // The rank directories and the newest version that all of them hold at L1.
  std::vector<int> ranks;
  for (const auto& n : *names) {
    uint32_t r = 0;
    if (parse_rank_dir_name(n, &r) && r <= static_cast<uint32_t>(INT32_MAX)) ranks.push_back(static_cast<int>(r));
  }
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty())
    return make_error(Code::ERR_NO_CHECKPOINT, "%s has no cache to migrate (no rank directory in %s)", from.c_str(),
                      src_node.c_str());
  std::vector<CacheStore> src(ranks.size());
  std::vector<std::string> dst_dirs;
  std::optional<std::set<uint64_t>> common;
  for (size_t i = 0; i < ranks.size(); ++i) {
    // Any slot the record names is accepted here (the cache_versions knob bounds them at 64).
    CAIRN_TRY(src[i].open(rank_dir(layout, from, static_cast<uint32_t>(ranks[i])), kMaxL1Slots));
    auto vs = src[i].versions();
    std::set<uint64_t> mine(vs.begin(), vs.end());
    if (!common) {
      common = mine;
    } else {
      std::set<uint64_t> both;
      for (uint64_t v : *common)
        if (mine.count(v)) both.insert(v);
      common = both;
    }
  }
  if (!common || common->empty())
    return make_error(Code::ERR_NO_CHECKPOINT, "no version is complete at L1 on every rank of %s (%s)", from.c_str(),
                      src_node.c_str());
  const uint64_t version = *common->rbegin();

  const bool dst_existed = fs::exists(dst_node);
  std::vector<L1Record> records(ranks.size());
  std::vector<StreamItem> items;
  std::vector<SmallFile> smalls, recs;
  std::vector<std::string> file_dirs;  // v<N>.files/ at the destination, of the file API's versions
  std::vector<size_t> whole_checks;    // ranks whose version is verified whole after the copy
  uint32_t max_chunk = 4096;
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto rec = src[i].read_record(version);
    if (!rec) return make_error(rec.status().code(), "rank %d of %s, version %llu: %s", ranks[i], from.c_str(),
                                static_cast<unsigned long long>(version), rec.status().message().c_str());
    records[i] = std::move(rec).value();
    const Manifest& m = records[i].manifest;
    if (m.chunk_size == 0) return make_error(Code::ERR_CORRUPT, "rank %d: manifest with chunk size 0", ranks[i]);
    max_chunk = std::max(max_chunk, m.chunk_size);
    const std::string dst_dir = rank_dir(layout, to, static_cast<uint32_t>(ranks[i]));
    dst_dirs.push_back(dst_dir);
    auto there = [&](const std::string& src_path) { return dst_dir + src_path.substr(src[i].dir().size()); };
    const int slot = static_cast<int>(records[i].slot);
    StreamItem data{src[i].slot_path(slot), there(src[i].slot_path(slot)), m.total_size, file_size_of(src[i].slot_path(slot)),
                    ranks[i], &m};
    if (has_files(m)) {
      // A version of the file API: the slot holds the memory regions, v<N>.files/ the routed files, at
      // other offsets of the stream than in their files. Both are copied as they are and the whole
      // version is verified at the destination (map_verified_slot) before its record is written.
      data.length = data.file_size;
      data.manifest = nullptr;
      const std::string files = src[i].files_dir(version);
      file_dirs.push_back(there(files));
      for (const auto& e : m.regions)
        if (e.kind == RegionKind::file) {
          const std::string f = files + "/" + e.name;
          items.push_back({f, there(f), file_size_of(f), file_size_of(f), ranks[i], nullptr});
        }
      whole_checks.push_back(i);
    } else if (data.file_size < m.total_size)
      return make_error(Code::ERR_CORRUPT, "rank %d of %s: %s holds %llu bytes, version %llu needs %llu; not migrated",
                        ranks[i], from.c_str(), data.src.c_str(), static_cast<unsigned long long>(data.file_size),
                        static_cast<unsigned long long>(version), static_cast<unsigned long long>(m.total_size));
    items.push_back(data);
    std::string red = src[i].red_path(slot);
    if (fs::exists(red)) items.push_back({red, there(red), file_size_of(red), file_size_of(red), ranks[i], nullptr});
    for (const std::string& small : {src[i].set_path(version), src[i].protected_path(version)})
      if (fs::exists(small)) smalls.push_back({small, there(small)});
    recs.push_back({src[i].record_path(version), there(src[i].record_path(version))});
  }

  TransferStats stats;
  stats.version = version;
  stats.ranks = static_cast<int>(ranks.size());
  stats.buffers = options.buffers;
  stats.buffer_size = (std::max<uint64_t>(options.buffer_size, 1) + max_chunk - 1) / max_chunk * max_chunk;
  for (const auto& r : records)
    if (stats.buffer_size % r.manifest.chunk_size != 0)  // one configuration: never seen in practice
      return make_error(Code::ERR_CORRUPT, "the ranks of %s disagree on chunk_size (%u and %u)", from.c_str(),
                        r.manifest.chunk_size, max_chunk);
  uint64_t total = 0;
  for (const auto& it : items) total += it.length;

  std::vector<std::string> written;  // destination files, removed on failure
  auto undo = [&](Status st) -> Status {
    for (const auto& f : written) (void)fs::remove_file(f);
    if (!dst_existed) (void)fs::remove_tree(dst_node);
    return st;
  };
  for (const auto* dirs : {&dst_dirs, &file_dirs})
    for (const auto& dir : *dirs) {
      Status st = fs::make_dirs(dir);
      if (!st) return undo(st);
    }
  // Open every destination now, sized like its source, so the writer only writes.
  std::vector<fs::Fd> out(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    auto fd = fs::open_file(items[k].dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd) return undo(fd.status());
    written.push_back(items[k].dst);
    if (::ftruncate(fd->get(), static_cast<off_t>(items[k].file_size)) != 0)
      return undo(make_error(Code::ERR_IO, "sizing %s to %llu bytes: %s", items[k].dst.c_str(),
                             static_cast<unsigned long long>(items[k].file_size), strerror(errno)));
    out[k] = std::move(fd).value();
  }

  Pool pool(options.buffers, stats.buffer_size);
  if (!pool.ok(options.buffers))
    return undo(make_error(Code::ERR_NO_MEMORY, "cannot allocate %d buffers of %llu bytes for the migration",
                           options.buffers, static_cast<unsigned long long>(stats.buffer_size)));
  auto t0 = std::chrono::steady_clock::now();

  std::thread reader([&] {
    for (size_t k = 0; k < items.size(); ++k) {
      const StreamItem& it = items[k];
      auto fd = fs::open_file(it.src, O_RDONLY);
      if (!fd) return pool.abort(fd.status());
      // Read ahead: the pipeline consumes the file in order.
      posix_fadvise(fd->get(), 0, static_cast<off_t>(it.length), POSIX_FADV_SEQUENTIAL);
      for (uint64_t off = 0; off < it.length; off += stats.buffer_size) {
        int b = pool.take_free();
        if (b < 0) return;
        uint64_t len = std::min<uint64_t>(stats.buffer_size, it.length - off);
        Status st = fs::pread_all(fd->get(), pool.data(b), len, off, it.src);
        if (!st) return pool.abort(st);
        pool.push_full({k, off, len, b});
      }
    }
    pool.reader_done();
  });

  uint64_t done = 0, verified = 0;
  std::thread writer([&] {
    while (auto p = pool.take_full()) {
      const StreamItem& it = items[p->item];
      const uint8_t* buf = pool.data(p->buffer);
      if (it.manifest) {
        const Manifest& m = *it.manifest;
        // Pieces start on chunk boundaries (the buffer size is a multiple of the chunk size).
        auto hashes = chunk_hashes(buf, p->length, m.chunk_size);
        uint64_t first = p->offset / m.chunk_size;
        for (size_t j = 0; j < hashes.size(); ++j) {
          uint64_t idx = first + j;
          if (idx >= m.chunk_hashes.size() || hashes[j] != m.chunk_hashes[idx])
            return pool.abort(make_error(Code::ERR_CORRUPT,
                                         "rank %d, version %llu: chunk %llu of %s does not match its manifest; the "
                                         "cache of the node is damaged and was not migrated",
                                         it.rank, static_cast<unsigned long long>(m.version),
                                         static_cast<unsigned long long>(idx), it.src.c_str()));
        }
        verified += p->length;
      }
      Status st = fs::pwrite_all(out[p->item].get(), buf, p->length, p->offset, it.dst);
      if (!st) return pool.abort(st);
      pool.give_back(p->buffer);
      done += p->length;
      if (options.progress) options.progress(done, total);
    }
  });
  reader.join();
  writer.join();
  if (Status st = pool.error(); !st) return undo(st);

  for (size_t k = 0; k < items.size(); ++k) {
    if (::fdatasync(out[k].get()) != 0)
      return undo(make_error(Code::ERR_IO, "fdatasync %s: %s", items[k].dst.c_str(), strerror(errno)));
    out[k] = fs::Fd();
  }
  for (size_t i : whole_checks) {
    auto view = map_verified_slot(dst_dirs[i], records[i]);
    if (!view)
      return undo(make_error(Code::ERR_CORRUPT, "rank %d of %s, version %llu: %s; not migrated", ranks[i], from.c_str(),
                             static_cast<unsigned long long>(version), view.status().message().c_str()));
    verified += records[i].manifest.total_size;
  }
  // The set files and protected markers, then each rank's L1 record: the version exists on the spare
  // only once everything it needs is there.
  for (const auto* group : {&smalls, &recs}) {
    for (const auto& f : *group) {
      auto bytes = fs::read_file(f.src);
      if (!bytes) return undo(bytes.status());
      written.push_back(f.dst);
      Status st = fs::write_file_atomic(f.dst, *bytes, /*sync=*/true);
      if (!st) return undo(st);
    }
  }
  for (const auto& dir : dst_dirs) {
    Status st = fs::fsync_dir(dir);
    if (!st) return undo(st);
  }

  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.files = static_cast<int>(items.size() + smalls.size() + recs.size());
  stats.bytes = done;
  stats.verified = verified;
  stats.peak_in_use = pool.peak();
  return stats;
}

}  // namespace cairn::tool
