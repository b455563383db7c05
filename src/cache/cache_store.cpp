#include "cache/cache_store.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <cstdio>
#include <cstring>

#include "base/clock.hpp"
#include "base/fsutil.hpp"
#include "base/log.hpp"

namespace cairn {
namespace {

const char* suffix_of(VersionFile kind) {
  switch (kind) {
    case VersionFile::record: return ".l1";
    case VersionFile::set: return ".set";
    case VersionFile::protected_marker: return ".protected";
    case VersionFile::files: return ".files";
  }
  return "";
}

const char* suffix_of(SlotFile kind) { return kind == SlotFile::data ? ".data" : ".red"; }

// "<prefix><number><suffix>" with the suffix one of `kinds`' (as suffix_of names them).
template <class Kind, size_t N>
bool parse_numbered(std::string_view name, std::string_view prefix, const Kind (&kinds)[N], uint64_t max,
                    uint64_t* number, Kind* kind) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  size_t dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  for (Kind k : kinds)
    if (name.substr(dot) == suffix_of(k) && parse_decimal(name.substr(0, dot), max, number)) {
      *kind = k;
      return true;
    }
  return false;
}

}  // namespace

std::string rank_dir_name(uint32_t rank) { return "r" + std::to_string(rank); }

bool parse_rank_dir_name(std::string_view name, uint32_t* rank) {
  uint64_t r = 0;
  if (name.empty() || name[0] != 'r' || !parse_decimal(name.substr(1), UINT32_MAX, &r)) return false;
  *rank = static_cast<uint32_t>(r);
  return true;
}

std::string rank_dir(const Layout& layout, const std::string& node, uint32_t rank) {
  return layout.node_cache(node) + "/" + rank_dir_name(rank);
}

std::string version_file_name(uint64_t v, VersionFile kind) { return "v" + std::to_string(v) + suffix_of(kind); }

bool parse_version_file_name(std::string_view name, uint64_t* v, VersionFile* kind) {
  static constexpr VersionFile kKinds[] = {VersionFile::record, VersionFile::set, VersionFile::protected_marker,
                                           VersionFile::files};
  return parse_numbered(name, "v", kKinds, UINT64_MAX, v, kind);
}

std::string slot_file_name(uint32_t slot, SlotFile kind) { return "slot-" + std::to_string(slot) + suffix_of(kind); }

bool parse_slot_file_name(std::string_view name, uint32_t* slot, SlotFile* kind) {
  static constexpr SlotFile kKinds[] = {SlotFile::data, SlotFile::red};
  uint64_t s = 0;
  if (!parse_numbered(name, "slot-", kKinds, UINT32_MAX, &s, kind)) return false;
  *slot = static_cast<uint32_t>(s);
  return true;
}

std::string encode_l1_record(const L1Record& rec) {
  std::string bytes(4, '\0');
  for (int i = 0; i < 4; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((rec.slot >> (8 * i)) & 0xff);
  return bytes + encode_manifest(rec.manifest);
}

Result<L1Record> decode_l1_record(std::string_view bytes) {
  if (bytes.size() < 4) return make_error(Code::ERR_CORRUPT, "truncated record (%zu bytes)", bytes.size());
  L1Record rec;
  for (int i = 0; i < 4; ++i)
    rec.slot |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[static_cast<size_t>(i)])) << (8 * i);
  CAIRN_ASSIGN_OR_RETURN(m, decode_manifest(bytes.data() + 4, bytes.size() - 4));
  rec.manifest = std::move(m);
  return rec;
}

std::vector<uint64_t> recorded_versions(const std::string& dir) {
  std::vector<uint64_t> out;
  auto names = fs::list_dir(dir);
  if (!names) return out;
  for (const auto& n : *names) {
    uint64_t v;
    VersionFile kind;
    if (parse_version_file_name(n, &v, &kind) && kind == VersionFile::record) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool cache_holds_versions(const Layout& layout, const std::string& node) {
  std::vector<std::string> nodes{node};
  if (node.empty()) {
    auto names = fs::list_dir(layout.cache_job);
    if (!names) return false;
    nodes = *names;
  }
  for (const auto& n : nodes) {
    auto ranks = fs::list_dir(layout.node_cache(n));
    if (!ranks) continue;
    for (const auto& r : *ranks) {
      uint32_t rank;
      if (parse_rank_dir_name(r, &rank) && !recorded_versions(rank_dir(layout, n, rank)).empty()) return true;
    }
  }
  return false;
}

Result<std::shared_ptr<VersionView>> map_verified_slot(const std::string& dir, const L1Record& rec) {
  const Manifest& m = rec.manifest;
  const std::string path = dir + "/" + slot_file_name(rec.slot, SlotFile::data);
  if (!has_files(m)) {  // the whole stream in the slot; a short slot is reported before any mapping
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return posix_error("stat", path, errno);
    if (static_cast<uint64_t>(st.st_size) < m.total_size)
      return make_error(Code::ERR_CORRUPT, "%s: truncated: %llu bytes, manifest says %llu", path.c_str(),
                        static_cast<unsigned long long>(st.st_size), static_cast<unsigned long long>(m.total_size));
  }
  auto view = has_files(m) ? VersionView::of(m, path, dir + "/" + version_file_name(m.version, VersionFile::files))
                           : VersionView::map(path, m.total_size, {}, m.total_size);
  if (!view) return view.status();
  CAIRN_TRY(verify_stream(m, (*view)->data(), m.total_size));
  return view;
}

CacheStore::~CacheStore() { finish_prepare(); }

Status CacheStore::open(const std::string& rank_dir, int nslots) {
  finish_prepare();
  prep_size_ = prep_red_ = done_size_ = done_red_ = 0;
  prep_in_use_ = {};
  dir_ = rank_dir;
  slots_.clear();
  reds_.clear();
  slots_.resize(static_cast<size_t>(nslots));
  reds_.resize(static_cast<size_t>(nslots));
  slot_mu_ = std::make_unique<std::mutex[]>(static_cast<size_t>(nslots));
  return fs::make_dirs(dir_);
}

void CacheStore::finish_prepare() {
  if (preparer_.joinable()) preparer_.join();
}

void CacheStore::stop_prepare() {
  {
    std::lock_guard<std::mutex> lock(hold_mu_);
    prep_stop_ = true;
  }
  hold_cv_.notify_all();
  finish_prepare();
  std::lock_guard<std::mutex> lock(prep_mu_);
  preparing_ = false;  // a stopped preparer returns without clearing it
  prep_stop_ = false;
}

CacheStore::PrepareHold::PrepareHold(CacheStore& c) : c_(c) {
  std::lock_guard<std::mutex> lock(c_.hold_mu_);
  ++c_.holds_;
}

CacheStore::PrepareHold::~PrepareHold() {
  {
    std::lock_guard<std::mutex> lock(c_.hold_mu_);
    --c_.holds_;
  }
  c_.hold_cv_.notify_all();
}

bool CacheStore::prepare_may_go_on() {
  std::unique_lock<std::mutex> lock(hold_mu_);
  hold_cv_.wait(lock, [&] { return holds_ == 0 || prep_stop_; });
  return !prep_stop_;
}

void CacheStore::prepare(uint64_t size, uint64_t red_size, std::function<bool(int)> in_use) {
  std::lock_guard<std::mutex> lock(prep_mu_);
  prep_size_ = std::max(prep_size_, size);
  prep_red_ = std::max(prep_red_, red_size);
  prep_in_use_ = std::move(in_use);
  if (preparing_ || slots_.empty() || (prep_size_ <= done_size_ && prep_red_ <= done_red_)) return;
  if (preparer_.joinable()) preparer_.join();  // finished: it cleared preparing_ under the lock
  preparing_ = true;
  preparer_ = BackgroundThread([this] {
    for (;;) {
      uint64_t size, red;
      std::function<bool(int)> in_use;
      {
        std::lock_guard<std::mutex> lock(prep_mu_);
        if (prep_size_ <= done_size_ && prep_red_ <= done_red_) {
          preparing_ = false;
          return;
        }
        size = prep_size_, red = prep_red_, in_use = prep_in_use_;
      }
      const MappedFile::PieceGate gate = [this] { return prepare_may_go_on(); };
      for (int s = 0; s < nslots(); ++s) {  // failures are met again by the checkpoint that needs the slot
        if (prep_stop_) return;               // stop_prepare: done_* stay, the next prepare() goes on
        const double t0 = now_seconds();
        if (size) {
          auto m = map(slots_, s, slot_path(s), size, in_use, gate);
          if (m.is_ok() && m.value())
            LOG_DEBUG("cache: slot %d prepared in %.1f ms", s, (now_seconds() - t0) * 1e3);
        }
        if (red) (void)map(reds_, s, red_path(s), red, in_use, gate);
      }
      // Every slot populated: then their pages touched, a second pass that delays a checkpoint or restart
      // waiting to map a slot by one piece at most (it leaves the rest of the slot it is on untouched).
      for (int s = 0; s < nslots(); ++s) {
        if (prep_stop_) return;
        const double t0 = now_seconds();
        if (size) touch(slots_, s, in_use, gate);
        if (red) touch(reds_, s, in_use, gate);
        LOG_DEBUG("cache: slot %d touched in %.1f ms", s, (now_seconds() - t0) * 1e3);
      }
      if (prep_stop_) return;
      std::lock_guard<std::mutex> lock(prep_mu_);
      done_size_ = size, done_red_ = red;
    }
  });
}

std::string CacheStore::slot_path(int s) const {
  return dir_ + "/" + slot_file_name(static_cast<uint32_t>(s), SlotFile::data);
}
std::string CacheStore::red_path(int s) const { return dir_ + "/" + slot_file_name(static_cast<uint32_t>(s), SlotFile::red); }
std::string CacheStore::record_path(uint64_t v) const { return dir_ + "/" + version_file_name(v, VersionFile::record); }
std::string CacheStore::set_path(uint64_t v) const { return dir_ + "/" + version_file_name(v, VersionFile::set); }
std::string CacheStore::protected_path(uint64_t v) const {
  return dir_ + "/" + version_file_name(v, VersionFile::protected_marker);
}
std::string CacheStore::files_dir(uint64_t v) const { return dir_ + "/" + version_file_name(v, VersionFile::files); }

Result<MappedFile*> CacheStore::map(std::vector<std::unique_ptr<MappedFile>>& files, int s, const std::string& path,
                                    uint64_t size, const std::function<bool(int)>& skip,
                                    const MappedFile::PieceGate& gate) {
  if (s < 0 || s >= nslots()) return make_error(Code::ERR_INTERNAL, "slot %d out of range", s);
  // A caller without a gate (a checkpoint, a restart) may wait below for the preparation of this slot:
  // counted meanwhile, so that the preparation's touch pass gives way (CacheStore::touch).
  struct Waiting {
    std::atomic<int>* n;
    explicit Waiting(std::atomic<int>* waiters) : n(waiters) {
      if (n) n->fetch_add(1, std::memory_order_relaxed);
    }
    ~Waiting() {
      if (n) n->fetch_sub(1, std::memory_order_relaxed);
    }
  } waiting(gate ? nullptr : &map_waiters_);
  std::lock_guard<std::mutex> lock(slot_mu_[static_cast<size_t>(s)]);
  if (skip && skip(s)) return static_cast<MappedFile*>(nullptr);
  std::unique_ptr<MappedFile>& f = files[static_cast<size_t>(s)];
  if (!f) {
    auto m = MappedFile::open_rw(path, size, /*prefault=*/true, gate);
    if (!m) return m.status();
    f = std::make_unique<MappedFile>(std::move(m).value());
  } else {
    CAIRN_TRY(f->reserve(size, /*prefault=*/true, gate));
  }
  return f.get();
}

void CacheStore::touch(std::vector<std::unique_ptr<MappedFile>>& files, int s, const std::function<bool(int)>& skip,
                       const MappedFile::PieceGate& gate) {
  auto nobody_waits = [this] { return map_waiters_.load(std::memory_order_relaxed) == 0; };
  if (!nobody_waits()) return;
  std::lock_guard<std::mutex> lock(slot_mu_[static_cast<size_t>(s)]);
  if ((skip && skip(s)) || !files[static_cast<size_t>(s)]) return;
  (void)files[static_cast<size_t>(s)]->touch(gate, nobody_waits);
}

Result<MappedFile*> CacheStore::slot(int s, uint64_t size) { return map(slots_, s, slot_path(s), size); }

Result<MappedFile*> CacheStore::red(int s, uint64_t size) { return map(reds_, s, red_path(s), size); }

Status CacheStore::write_record(uint64_t v, const L1Record& rec) {
  // tmpfs: no fsync needed for durability against process death; rename keeps it atomic.
  return fs::write_file_atomic(record_path(v), encode_l1_record(rec), /*sync=*/false);
}

Result<L1Record> CacheStore::read_record(uint64_t v) const {
  CAIRN_ASSIGN_OR_RETURN(bytes, fs::read_file(record_path(v)));
  auto rec = decode_l1_record(bytes);
  if (!rec) return rec.status().prefixed(record_path(v));
  if (rec->manifest.version != v)
    return make_error(Code::ERR_CORRUPT, "%s: record is for version %llu", record_path(v).c_str(),
                      static_cast<unsigned long long>(rec->manifest.version));
  if (rec->slot >= static_cast<uint32_t>(nslots()))
    return make_error(Code::ERR_CORRUPT, "%s: slot %u beyond cache_versions", record_path(v).c_str(), rec->slot);
  return rec;
}

Status CacheStore::write_set(uint64_t v, const std::string& bytes) {
  return fs::write_file_atomic(set_path(v), bytes, false);
}
Result<std::string> CacheStore::read_set(uint64_t v) const { return fs::read_file(set_path(v)); }

Status CacheStore::mark_protected(uint64_t v) {
  return fs::write_file_atomic(protected_path(v), "protected\n", false);
}
bool CacheStore::is_protected(uint64_t v) const { return fs::exists(protected_path(v)); }

Status CacheStore::drop(uint64_t v) {
  CAIRN_TRY(fs::remove_file(record_path(v)));
  CAIRN_TRY(fs::remove_file(protected_path(v)));
  CAIRN_TRY(fs::remove_file(set_path(v)));
  return fs::remove_tree(files_dir(v));
}

Status CacheStore::release_slot(int slot) {
  for (uint64_t v : versions()) {
    auto rec = read_record(v);
    if (!rec || static_cast<int>(rec->slot) == slot) CAIRN_TRY(drop(v));
  }
  return Status::ok();
}

std::vector<uint64_t> CacheStore::versions() const { return recorded_versions(dir_); }

uint64_t CacheStore::version_in_slot(int s) const {
  for (uint64_t v : versions()) {
    auto rec = read_record(v);
    if (rec && static_cast<int>(rec->slot) == s) return v;
  }
  return 0;
}

}  // namespace cairn
