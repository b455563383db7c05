#include "inspect/inventory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <set>

#include "cache/cache_store.hpp"
#include "cache/snapshot_slot.hpp"
#include "pfs/cache_to_l3.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "base/state_file.hpp"

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

std::string node_rank(const L1Copy& c) { return c.node + "/" + rank_dir_name(c.rank); }

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

Result<ToolContext> load_tool_context(const std::string& who, const std::string& config_path,
                                      const std::string& prefix, bool prefix_must_exist) {
  auto loaded = load_job_config(config_path.empty() ? std::string() : fs::absolute(config_path), who);
  if (!loaded) return loaded.status();
  ToolContext ctx;
  ctx.config = loaded->config;
  if (!prefix.empty()) {
    // A prefix named on the command line must be there: a typo is not an empty prefix. (The configured
    // one may not exist yet: no job has run.)
    if (prefix_must_exist && !is_dir(prefix))
      return make_error(Code::ERR_INVALID_ARG, "%s: %s", prefix.c_str(),
                        fs::exists(prefix) ? "not a directory" : "no such directory (PREFIX names a job's prefix)");
    ctx.config.prefix = prefix;
  }
  ctx.layout = make_layout(ctx.config);
  return ctx;
}

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

VersionTimes version_times(const VersionInfo& v) {
  VersionTimes t;
  t.bytes = v.total_bytes();
  for (uint32_t r = 0; r < v.nranks(); ++r)
    if (const Manifest* m = v.manifest(r); m && m->created_unix_ns > 0)
      t.created_ns = t.created_ns ? std::min(t.created_ns, m->created_unix_ns) : m->created_unix_ns;
  for (const auto& c : v.l1) {
    t.l1_ns = std::max(t.l1_ns, c.record_mtime_ns);
    t.l2_ns = std::max(t.l2_ns, c.protected_mtime_ns);
  }
  t.l3_ns = v.l3.committed ? v.l3.commit_mtime_ns : 0;
  t.l3_start_ns = v.l3.data_birth_ns ? v.l3.data_birth_ns : t.l2_ns ? t.l2_ns : t.l1_ns;
  return t;
}

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
  return inv;
}

// ---- progress ------------------------------------------------------------------------------------

Progress::Progress(std::string what, uint64_t total_bytes)
    : what_(std::move(what)), total_(total_bytes), enabled_(isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::add(uint64_t bytes) {
  done_ += bytes;
  if (enabled_) draw(false);
}

void Progress::draw(bool force) {
  int64_t now = now_unix_ns();
  if (!force && now - last_draw_ns_ < 100000000) return;  // 10 redraws a second at most
  last_draw_ns_ = now;
  constexpr int kWidth = 30;
  double frac = total_ ? std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_)) : 1.0;
  int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  fprintf(stderr, "\r%s [%s] %3d%% %s / %s\033[K", what_.c_str(), bar.c_str(), static_cast<int>(frac * 100),
          format_bytes(done_).c_str(), format_bytes(total_).c_str());
  fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (enabled_ && drawn_) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  drawn_ = false;
  enabled_ = false;
}

// ---- checking ------------------------------------------------------------------------------------

const char* state_name(LevelCheck::State s) {
  switch (s) {
    case LevelCheck::State::good:
      return "good";
    case LevelCheck::State::bad:
      return "bad";
    case LevelCheck::State::incomplete:
      return "incomplete";
    case LevelCheck::State::absent:
      return "absent";
  }
  return "unknown";
}

uint64_t l1_check_bytes(const VersionInfo& v) {
  uint64_t total = 0;
  for (uint32_t r = 0; r < v.nranks(); ++r)
    if (const L1Copy* c = v.l1_copy(r)) total += c->manifest.total_size;
  return total;
}

uint64_t l3_check_bytes(const VersionInfo& v) {
  if (!v.l3.committed) return 0;
  uint64_t total = 0;
  for (const auto& [r, m] : v.l3.manifests) total += m.total_size;
  return total;
}

namespace {

void note_bad(LevelCheck* out, const std::string& message) {
  out->state = LevelCheck::State::bad;
  if (out->error.empty()) out->error = message;
}

}  // namespace

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

LevelCheck check_l1(const VersionInfo& v, Progress* progress) {
  LevelCheck out;
  out.nranks = v.nranks();
  for (const auto& c : v.l1)
    if (!c.record_error.empty())
      note_bad(&out, "rank " + std::to_string(c.rank) + " (" + node_rank(c) + "): " + c.record_error);
  std::vector<uint32_t> missing;
  for (uint32_t r = 0; r < out.nranks; ++r) {
    const L1Copy* c = v.l1_copy(r);
    if (!c) {
      missing.push_back(r);
      continue;
    }
    ++out.ranks_checked;
    Status st = map_verified_slot(c->rank_dir, L1Record{c->slot, c->manifest}).status();
    if (progress) progress->add(c->manifest.total_size);
    if (!st.is_ok()) {
      note_bad(&out, "rank " + std::to_string(r) + " (" + node_rank(*c) + ", slot " + std::to_string(c->slot) +
                         "): " + st.message());
      continue;
    }
    ++out.ranks_good;
    out.chunks += c->manifest.chunk_hashes.size();
    out.bytes += c->manifest.total_size;
  }
  if (out.state == LevelCheck::State::bad) return out;
  if (out.ranks_checked == 0) {
    out.state = LevelCheck::State::absent;
    out.error = "no L1 record here";
  } else if (!missing.empty()) {
    out.state = LevelCheck::State::incomplete;
    out.error = "no record here for rank" + std::string(missing.size() > 1 ? "s " : " ") + rank_ranges(missing);
  } else {
    out.state = LevelCheck::State::good;
  }
  return out;
}

LevelCheck check_l3(const Layout& layout, const VersionInfo& v, Progress* progress) {
  LevelCheck out;
  out.nranks = v.nranks();
  LevelVerdict verdict = l3_verdict(v);
  if (verdict.state == LevelVerdict::State::absent) return out;
  if (!v.l3.committed) {  // a damaged COMMIT is bad; no COMMIT, incomplete (the inventory's one verdict)
    out.state = verdict.state == LevelVerdict::State::damaged ? LevelCheck::State::bad : LevelCheck::State::incomplete;
    out.error = verdict.why;
    return out;
  }
  out.nranks = v.l3.commit.nranks;
  std::vector<uint8_t> buffer;
  for (uint32_t r = 0; r < out.nranks; ++r) {
    ++out.ranks_checked;
    auto m = l3::read_manifest(layout, v.version, r);
    if (!m) {
      note_bad(&out, "rank " + std::to_string(r) + ": " + m.status().message());
      continue;
    }
    if (m->nranks != out.nranks) {
      note_bad(&out, "rank " + std::to_string(r) + ": " + l3::manifest_path(layout, v.version, r) + " is of a job of " +
                         std::to_string(m->nranks) + " ranks, COMMIT says " + std::to_string(out.nranks));
      continue;
    }
    // read_data reads every layout (one file per rank, N-to-M files, zstd) and checks the length.
    auto where = l3_where(layout, v.version, r);
    std::string file = where ? where->file : l3::data_path(layout, v.version, r);
    buffer.resize(m->total_size);
    Status st = l3::read_data(layout, *m, buffer.data());
    if (st.is_ok()) st = verify_stream(*m, buffer.data(), m->total_size);
    if (progress) progress->add(m->total_size);
    if (!st.is_ok()) {
      note_bad(&out, "rank " + std::to_string(r) + " (" + file + "): " + st.message());
      continue;
    }
    ++out.ranks_good;
    out.chunks += m->chunk_hashes.size();
    out.bytes += m->total_size;
  }
  if (out.state != LevelCheck::State::bad) out.state = LevelCheck::State::good;
  return out;
}

// ---- flushing ------------------------------------------------------------------------------------

Status flush_to_l3(const Layout& layout, const VersionInfo& v, Progress* progress) {
  if (!v.l1_complete())
    return make_error(Code::ERR_NO_CHECKPOINT, "version %llu is not complete in the L1 cache visible here",
                      static_cast<unsigned long long>(v.version));
  std::vector<l3::CachedRank> ranks;
  for (uint32_t r = 0; r < v.nranks(); ++r) {
    const L1Copy* c = v.l1_copy(r);
    ranks.push_back({c->rank_dir, L1Record{c->slot, c->manifest}});
  }
  return l3::flush_from_cache(layout, v.version, ranks, [progress](uint64_t bytes) {
    if (progress) progress->add(bytes);
  });
}

bool job_not_running(const Layout& layout) {
  auto state = state_file::read_state(layout.state_file());
  if (!state) return false;
  return !state->has_value() || (*state)->phase == "finalized";
}

// ---- formatting ----------------------------------------------------------------------------------

int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double x = static_cast<double>(bytes);
  int u = 0;
  while (x >= 1024 && u < 5) x /= 1024, ++u;
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f %s", x, units[u]);
  return buf;
}

std::string format_duration(double s) {
  char buf[32];
  if (s < 0) s = 0;
  if (s < 1)
    snprintf(buf, sizeof buf, "%.0f ms", s * 1e3);
  else if (s < 120)
    snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 7200)
    snprintf(buf, sizeof buf, "%.0f min", s / 60);
  else if (s < 172800)
    snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  else
    snprintf(buf, sizeof buf, "%.1f d", s / 86400);
  return buf;
}

std::string format_utc(int64_t unix_ns) {
  time_t t = static_cast<time_t>(unix_ns / 1000000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string format_rate(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  double r = static_cast<double>(bytes) / seconds;
  char buf[32];
  if (r >= 1e9)
    snprintf(buf, sizeof buf, "%.2f GB/s", r / 1e9);
  else if (r >= 1e6)
    snprintf(buf, sizeof buf, "%.1f MB/s", r / 1e6);
  else
    snprintf(buf, sizeof buf, "%.1f kB/s", r / 1e3);
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

bool parse_version_arg(const std::string& text, uint64_t* version) {
  if (Layout::parse_l3_version_name(text, version)) return true;
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *version = std::stoull(text);
  return *version > 0;
}

std::string rank_ranges(std::vector<uint32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace cairn::tool
