#include "cache/cache_store.hpp"

#include <algorithm>
#include <utility>
#include <cstdio>
#include <cstring>

#include "base/fsutil.hpp"

namespace cairn {
namespace {

bool parse_versioned(const std::string& name, const char* suffix, uint64_t* v) {
  size_t sl = strlen(suffix);
  if (name.size() <= sl + 1 || name[0] != 'v' || name.compare(name.size() - sl, sl, suffix) != 0)
    return false;
  uint64_t x = 0;
  for (size_t i = 1; i < name.size() - sl; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    x = x * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *v = x;
  return true;
}

std::string vname(uint64_t v, const char* suffix) { return "v" + std::to_string(v) + suffix; }

}  // namespace

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

void CacheStore::prepare(uint64_t size, uint64_t red_size, std::function<bool(int)> in_use) {
  std::lock_guard<std::mutex> lock(prep_mu_);
  prep_size_ = std::max(prep_size_, size);
  prep_red_ = std::max(prep_red_, red_size);
  prep_in_use_ = std::move(in_use);
  if (preparing_ || slots_.empty() || (prep_size_ <= done_size_ && prep_red_ <= done_red_)) return;
  if (preparer_.joinable()) preparer_.join();  // finished: it cleared preparing_ under the lock
  preparing_ = true;
  preparer_ = std::thread([this] {
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
      for (int s = 0; s < nslots(); ++s) {  // failures are met again by the checkpoint that needs the slot
        if (size) (void)map(slots_, s, slot_path(s), size, in_use);
        if (red) (void)map(reds_, s, red_path(s), red, in_use);
      }
      std::lock_guard<std::mutex> lock(prep_mu_);
      done_size_ = size, done_red_ = red;
    }
  });
}

std::string CacheStore::slot_path(int s) const { return dir_ + "/slot-" + std::to_string(s) + ".data"; }
std::string CacheStore::red_path(int s) const { return dir_ + "/slot-" + std::to_string(s) + ".red"; }
std::string CacheStore::record_path(uint64_t v) const { return dir_ + "/" + vname(v, ".l1"); }
std::string CacheStore::set_path(uint64_t v) const { return dir_ + "/" + vname(v, ".set"); }
std::string CacheStore::protected_path(uint64_t v) const { return dir_ + "/" + vname(v, ".protected"); }
std::string CacheStore::files_dir(uint64_t v) const { return dir_ + "/" + vname(v, ".files"); }

Result<MappedFile*> CacheStore::map(std::vector<std::unique_ptr<MappedFile>>& files, int s, const std::string& path,
                                    uint64_t size, const std::function<bool(int)>& skip) {
  if (s < 0 || s >= nslots()) return make_error(Code::ERR_INTERNAL, "slot %d out of range", s);
  std::lock_guard<std::mutex> lock(slot_mu_[static_cast<size_t>(s)]);
  if (skip && skip(s)) return static_cast<MappedFile*>(nullptr);
  std::unique_ptr<MappedFile>& f = files[static_cast<size_t>(s)];
  if (!f) {
    auto m = MappedFile::open_rw(path, size, /*prefault=*/true);
    if (!m) return m.status();
    f = std::make_unique<MappedFile>(std::move(m).value());
  } else {
    CAIRN_TRY(f->reserve(size, /*prefault=*/true));
  }
  return f.get();
}

Result<MappedFile*> CacheStore::slot(int s, uint64_t size) { return map(slots_, s, slot_path(s), size); }

Result<MappedFile*> CacheStore::red(int s, uint64_t size) { return map(reds_, s, red_path(s), size); }

Status CacheStore::write_record(uint64_t v, const L1Record& rec) {
  std::string bytes(4, '\0');
  for (int i = 0; i < 4; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((rec.slot >> (8 * i)) & 0xff);
  bytes += encode_manifest(rec.manifest);
  // tmpfs: no fsync needed for durability against process death; rename keeps it atomic.
  return fs::write_file_atomic(record_path(v), bytes, /*sync=*/false);
}

Result<L1Record> CacheStore::read_record(uint64_t v) const {
  CAIRN_ASSIGN_OR_RETURN(bytes, fs::read_file(record_path(v)));
  if (bytes.size() < 4) return make_error(Code::ERR_CORRUPT, "%s: truncated record", record_path(v).c_str());
  L1Record rec;
  for (int i = 0; i < 4; ++i) rec.slot |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[static_cast<size_t>(i)])) << (8 * i);
  auto m = decode_manifest(bytes.data() + 4, bytes.size() - 4);
  if (!m) return m.status().prefixed(record_path(v));
  rec.manifest = std::move(m).value();
  if (rec.manifest.version != v)
    return make_error(Code::ERR_CORRUPT, "%s: record is for version %llu", record_path(v).c_str(),
                      static_cast<unsigned long long>(rec.manifest.version));
  if (static_cast<int>(rec.slot) >= nslots())
    return make_error(Code::ERR_CORRUPT, "%s: slot %u beyond cache_versions", record_path(v).c_str(), rec.slot);
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

std::vector<uint64_t> CacheStore::versions() const {
  std::vector<uint64_t> out;
  auto names = fs::list_dir(dir_);
  if (!names) return out;
  for (const auto& n : *names) {
    uint64_t v;
    if (parse_versioned(n, ".l1", &v)) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t CacheStore::version_in_slot(int s) const {
  for (uint64_t v : versions()) {
    auto rec = read_record(v);
    if (rec && static_cast<int>(rec->slot) == s) return v;
  }
  return 0;
}

}  // namespace cairn
