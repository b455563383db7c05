#include "inspect/inventory.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "cache/cache_store.hpp"
#include "cache/snapshot_slot.hpp"
#include "common.hpp"
#include "format.hpp"
#include "base/fsutil.hpp"

namespace cairn::tool {
namespace {

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t mtime_ns(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The file's creation time where the file system records one (ext4, xfs, tmpfs on recent kernels).
int64_t birth_ns(const std::string& path) {
  struct statx sx;
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_BTIME, &sx) != 0 || !(sx.stx_mask & STATX_BTIME)) return 0;
  return static_cast<int64_t>(sx.stx_btime.tv_sec) * 1000000000 + sx.stx_btime.tv_nsec;
}

std::vector<std::string> sorted_names(const std::string& dir) {
  auto names = fs::list_dir(dir);
  std::vector<std::string> out = names ? *names : std::vector<std::string>();
  std::sort(out.begin(), out.end());
  return out;
}

void scan_rank_dir(Inventory& inv, const std::string& node, const std::string& dir, uint32_t rank) {
  CacheStore store;
  if (!store.open(dir, kMaxL1Slots).is_ok()) return;
  std::set<uint64_t> versions;
  for (const auto& n : sorted_names(dir)) {
    uint64_t v;
    VersionFile kind;
    if (parse_version_file_name(n, &v, &kind) && kind != VersionFile::files) versions.insert(v);
  }
  for (uint64_t v : versions) {
    VersionInfo& info = inv.versions[v];
    info.version = v;
    L1Copy c;
    c.node = node;
    c.rank_dir = dir;
    c.rank = rank;
    if (fs::exists(store.record_path(v))) {
      auto rec = store.read_record(v);
      if (!rec) {
        c.record_error = rec.status().message();
      } else if (rec->manifest.rank != rank) {
        c.record_error = store.record_path(v) + ": record of rank " + std::to_string(rec->manifest.rank) +
                         " in the directory of rank " + std::to_string(rank);
      } else {
        c.has_record = true;
        c.slot = rec->slot;
        c.manifest = std::move(rec->manifest);
        c.record_mtime_ns = mtime_ns(store.record_path(v));
      }
    }
    c.is_protected = store.is_protected(v);
    if (c.is_protected) c.protected_mtime_ns = mtime_ns(store.protected_path(v));
    c.has_set = fs::exists(store.set_path(v));
    if (c.has_set) {
      auto bytes = store.read_set(v);
      auto rec = bytes ? redundancy::decode_set_record(*bytes) : Result<redundancy::SetRecord>(bytes.status());
      if (!rec) {
        info.l2_errors.push_back(store.set_path(v) + ": " + rec.status().message());
      } else {
        bool known =
            std::any_of(info.sets.begin(), info.sets.end(), [&](const auto& s) { return s.ranks == rec->ranks; });
        if (!known) {
          for (size_t i = 0; i < rec->ranks.size() && i < rec->manifests.size(); ++i) {
            auto m = decode_manifest(rec->manifests[i].data(), rec->manifests[i].size());
            if (m && m->version == v) info.set_manifests.emplace(rec->ranks[i], std::move(m).value());
          }
          info.sets.push_back(std::move(rec).value());
        }
      }
    }
    info.l1.push_back(std::move(c));
  }
}

void scan_l3(Inventory& inv) {
  const Layout& l = inv.layout;
  for (const auto& name : sorted_names(l.prefix)) {
    uint64_t v;
    if (!Layout::parse_l3_version_name(name, &v) || !is_dir(l.l3_version_dir(v))) continue;
    VersionInfo& info = inv.versions[v];
    info.version = v;
    L3Version& d = info.l3;
    d.present = true;
    d.dir = l.l3_version_dir(v);
    std::string commit = l3::commit_path(l, v);
    if (fs::exists(commit)) {
      d.commit_mtime_ns = mtime_ns(commit);
      auto c = l3::read_commit(l, v);
      if (c) {
        d.committed = true;
        d.commit = *c;
      } else {
        d.commit_error = c.status().message();
      }
    }
    std::set<uint64_t> data_ranks;
    for (const auto& f : sorted_names(d.dir)) {
      d.bytes += file_size(d.dir + "/" + f);
      uint32_t r;
      l3::RankFile kind;
      if (!l3::parse_rank_file_name(f, &r, &kind)) continue;
      if (kind == l3::RankFile::chunks) {
        // An incremental version: which versions hold its unchanged chunks.
        std::string path = d.dir + "/" + f;
        auto text = fs::read_file(path);
        auto rec = text ? l3::decode_chunk_record(*text) : Result<l3::ChunkRecord>(text.status());
        if (rec)
          d.needs.merge(l3::holders_of(*rec));
        else if (d.needs_error.empty())
          d.needs_error = "unreadable chunk record: " + rec.status().prefixed(path).message();
      }
      if (kind != l3::RankFile::manifest) {
        if (!data_ranks.insert(r).second) continue;
        auto w = l3_where(l, v, r);
        int64_t b = w ? birth_ns(w->file) : 0;
        if (b && (!d.data_birth_ns || b < d.data_birth_ns)) d.data_birth_ns = b;
      } else {
        auto m = l3::read_manifest(l, v, r);
        if (m)
          d.manifests.emplace(r, std::move(m).value());
        else
          d.errors.push_back(m.status().message());
      }
    }
    d.data_files = static_cast<uint32_t>(data_ranks.size());
  }
}

}  // namespace

std::string node_rank(const L1Copy& c) { return c.node + "/" + rank_dir_name(c.rank); }

// ---- VersionInfo ---------------------------------------------------------------------------------

uint32_t VersionInfo::nranks() const {
  for (const auto& c : l1)
    if (c.has_record) return c.manifest.nranks;
  if (!set_manifests.empty()) return set_manifests.begin()->second.nranks;
  if (!l3.manifests.empty()) return l3.manifests.begin()->second.nranks;
  return l3.committed ? l3.commit.nranks : 0;
}

std::string VersionInfo::label() const {
  for (uint32_t r = 0; r < std::max<uint32_t>(nranks(), 1); ++r)
    if (const Manifest* m = manifest(r)) return m->label;
  return l3.committed ? l3.commit.label : std::string();
}

const L1Copy* VersionInfo::l1_copy(uint32_t rank) const {
  const L1Copy* best = nullptr;
  for (const auto& c : l1)
    if (c.has_record && c.rank == rank && (!best || c.record_mtime_ns > best->record_mtime_ns)) best = &c;
  return best;
}

const Manifest* VersionInfo::manifest(uint32_t rank) const {
  if (const L1Copy* c = l1_copy(rank)) return &c->manifest;
  if (auto it = set_manifests.find(rank); it != set_manifests.end()) return &it->second;
  if (auto it = l3.manifests.find(rank); it != l3.manifests.end()) return &it->second;
  return nullptr;
}

uint32_t VersionInfo::l1_ranks() const {
  std::set<uint32_t> ranks;
  for (const auto& c : l1)
    if (c.has_record) ranks.insert(c.rank);
  return static_cast<uint32_t>(ranks.size());
}

uint32_t VersionInfo::l2_ranks() const {
  std::set<uint32_t> ranks;
  for (const auto& c : l1)
    if (c.is_protected) ranks.insert(c.rank);
  return static_cast<uint32_t>(ranks.size());
}

bool VersionInfo::l1_complete() const {
  uint32_t n = nranks();
  if (n == 0) return false;
  for (uint32_t r = 0; r < n; ++r) {
    const L1Copy* c = l1_copy(r);
    if (!c || c->manifest.nranks != n) return false;
  }
  return true;
}

bool VersionInfo::l2_complete() const {
  uint32_t n = nranks();
  if (n == 0) return false;
  for (uint32_t r = 0; r < n; ++r)
    if (std::none_of(l1.begin(), l1.end(), [&](const L1Copy& c) { return c.rank == r && c.is_protected; }))
      return false;
  return true;
}

std::vector<std::string> VersionInfo::l1_nodes() const {
  std::set<std::string> nodes;
  for (const auto& c : l1)
    if (c.has_record) nodes.insert(c.node);
  return {nodes.begin(), nodes.end()};
}

uint32_t VersionInfo::known_ranks() const {
  uint32_t k = 0;
  for (uint32_t r = 0; r < nranks(); ++r) k += manifest(r) ? 1 : 0;
  return k;
}

uint64_t VersionInfo::total_bytes() const {
  uint64_t total = 0;
  for (uint32_t r = 0; r < nranks(); ++r)
    if (const Manifest* m = manifest(r)) total += m->total_size;
  return total;
}

int64_t VersionInfo::created_unix_ns() const {
  int64_t t = 0;
  for (uint32_t r = 0; r < nranks(); ++r)
    if (const Manifest* m = manifest(r)) t = std::max(t, m->created_unix_ns);
  return t;
}

std::string VersionInfo::scheme() const { return sets.empty() ? std::string() : redundancy_name(sets.front().scheme); }

Result<l3::Where> l3_where(const Layout& layout, uint64_t v, uint32_t rank) {
  std::string wpath = l3::where_path(layout, v, rank);
  if (fs::exists(wpath)) {
    CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(wpath));
    auto w = l3::decode_where(text);
    if (!w) return w.status().prefixed(wpath);
    return w;
  }
  l3::Where w;
  w.file = l3::data_path(layout, v, rank);
  if (!fs::exists(w.file)) return posix_error("stat", w.file, ENOENT);
  w.stored = file_size(w.file);
  return w;
}

// ---- scanning ------------------------------------------------------------------------------------

Inventory scan_inventory(const Layout& layout) {
  Inventory inv;
  inv.layout = layout;
  for (const auto& node : sorted_names(layout.cache_job)) {
    std::string node_dir = layout.node_cache(node);
    if (!is_dir(node_dir)) continue;
    inv.nodes.push_back(node);
    for (const auto& entry : sorted_names(node_dir)) {
      uint32_t rank;
      if (parse_rank_dir_name(entry, &rank) && is_dir(rank_dir(layout, node, rank)))
        scan_rank_dir(inv, node, rank_dir(layout, node, rank), rank);
    }
  }
  scan_l3(inv);
  // A committed incremental version is readable only while every version it names is committed too.
  for (auto& [ver, v] : inv.versions) {
    if (!v.l3.committed) continue;
    for (uint64_t h : v.l3.needs) {
      auto it = inv.versions.find(h);
      if ((it == inv.versions.end() || !it->second.l3.committed) && v.l3.needs_error.empty())
        v.l3.needs_error = "incremental: its chunk records name version " + std::to_string(h) + ", which is " +
                           (it == inv.versions.end() || !it->second.l3.present ? "gone" : "not committed");
    }
  }
  return inv;
}

// ---- verdicts ------------------------------------------------------------------------------------

LevelVerdict l1_verdict(const VersionInfo& v) {
  if (v.l1.empty()) return {};
  for (const auto& c : v.l1)
    if (!c.record_error.empty())
      return {LevelVerdict::State::damaged, "rank " + std::to_string(c.rank) + " (" + node_rank(c) + "): " + c.record_error};
  if (!v.l1_complete()) {
    std::vector<uint32_t> missing;
    for (uint32_t r = 0; r < v.nranks(); ++r)
      if (!v.l1_copy(r)) missing.push_back(r);
    return {LevelVerdict::State::incomplete,
            "no record here for rank" + std::string(missing.size() > 1 ? "s " : " ") + rank_ranges(missing)};
  }
  return {LevelVerdict::State::complete, ""};
}

LevelVerdict l3_verdict(const VersionInfo& v) {
  if (!v.l3.present) return {};
  if (!v.l3.commit_error.empty()) return {LevelVerdict::State::damaged, "unreadable COMMIT: " + v.l3.commit_error};
  if (!v.l3.committed) return {LevelVerdict::State::incomplete, "no COMMIT: never read by a restart"};
  if (!v.l3.errors.empty()) return {LevelVerdict::State::damaged, "unreadable manifest: " + v.l3.errors.front()};
  if (!v.l3.needs_error.empty()) return {LevelVerdict::State::damaged, v.l3.needs_error};
  return {LevelVerdict::State::complete, ""};
}

const char* verdict_name(const LevelVerdict& v, bool l3) {
  switch (v.state) {
    case LevelVerdict::State::absent: return "absent";
    case LevelVerdict::State::incomplete: return "incomplete";
    case LevelVerdict::State::damaged: return "damaged";
    case LevelVerdict::State::complete: return l3 ? "committed" : "complete";
  }
  return "?";
}

}  // namespace cairn::tool
