// Removing L3 versions (l3_store.hpp: holders_named_by, remove_version, remove_versions, prune). An
// incremental version's chunk records name the versions whose data files hold its chunks, so a version
// goes only when no version that stays committed names it; and a removal races with an incremental
// version being written by the pair "writer: record, then check the holders' COMMIT (RankWriter::finish);
// remover: remove COMMIT, then look for records naming the version, and put COMMIT back if one does".
// A pruned version's own data files may go to the recycle pool (recycle_dir) rather than be deleted.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "l3/l3_store.hpp"

namespace cairn::l3 {

Result<std::set<uint64_t>> holders_named_by(const Layout& l, uint64_t v) {
  std::set<uint64_t> out;
  const std::string dir = l.l3_version_dir(v);
  auto names = fs::list_dir(dir);
  for (const auto& n : names ? *names : std::vector<std::string>{}) {
    uint32_t rank;
    RankFile kind;
    if (!parse_rank_file_name(n, &rank, &kind) || kind != RankFile::chunks) continue;
    const std::string path = dir + "/" + n;
    auto text = fs::read_file(path);
    if (!text) {
      if (!fs::exists(path)) continue;  // removed meanwhile
      return text.status();
    }
    auto r = decode_chunk_record(*text);
    if (!r) return r.status().prefixed(path);
    out.merge(holders_of(*r));
  }
  return out;
}

namespace {

// The versions a version's records name; a record that does not decode names nothing (its version
// cannot be read anyway).
std::set<uint64_t> named_by(const Layout& l, uint64_t v) {
  auto named = holders_named_by(l, v);
  return named ? std::move(named).value() : std::set<uint64_t>{};
}

// A new name that never replaces one: renameat2's RENAME_NOREPLACE, or where the file system does not
// have it (NFS, CephFS: EINVAL), a hard link and the old name's removal, as atomic. errno on failure.
bool rename_noreplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  if (::link(from.c_str(), to.c_str()) != 0) return false;
  ::unlink(from.c_str());
  return true;
}

// Into the pool, if its place for the rank is free (at most one file per rank), and only a regular file
// of one name: a link, or a file a user linked elsewhere to keep it, is deleted with the directory as
// before, never overwritten. Anything else that keeps it out of the pool is logged once.
void recycle_file(const Layout& l, const std::string& path, uint32_t rank) {
  struct stat st {};
  if (l.control.empty() || ::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) return;
  const std::string to = recycle_path(l, rank);
  if (rename_noreplace(path, to)) return;
  if (errno == ENOENT && fs::make_dirs(recycle_dir(l)).is_ok() && rename_noreplace(path, to)) return;
  if (errno == EEXIST) return;  // the place is taken: the pool holds one file per rank
  static std::atomic<bool> told{false};
  if (!told.exchange(true))
    LOG_INFO("L3 recycle pool %s: %s; removed versions' files are deleted instead", recycle_dir(l).c_str(),
             strerror(errno));
}

// The data files a version's where-records name on other prefixes; with `recycle`, its own data files
// to the pool (not those of a rank with a where-record: its writers never take from the pool); then its
// directory.
Status remove_files(const Layout& l, uint64_t v, bool recycle) {
  std::string dir = l.l3_version_dir(v);
  auto names = fs::list_dir(dir);
  std::set<uint32_t> recorded, data;
  for (const auto& n : names ? *names : std::vector<std::string>{}) {
    uint32_t rank = 0;
    RankFile kind;
    if (!parse_rank_file_name(n, &rank, &kind)) continue;
    if (kind == RankFile::data) data.insert(rank);
    if (kind != RankFile::where) continue;
    recorded.insert(rank);
    auto text = fs::read_file(dir + "/" + n);
    auto w = text ? decode_where(*text) : Result<Where>(text.status());
    if (w && w->file.rfind(dir + "/", 0) != 0) {
      CAIRN_TRY(fs::remove_file(w->file));
      ::rmdir(fs::dirname(w->file).c_str());  // the version's directory there, once empty
    }
  }
  if (recycle)
    for (uint32_t rank : data)
      if (!recorded.count(rank)) recycle_file(l, data_path(l, v, rank), rank);
  return fs::remove_tree(dir);
}

Status refused_named(uint64_t v, uint64_t by) {
  return make_error(Code::ERR_INVALID_ARG, "L3 version %llu holds chunks of version %llu (incremental): remove that one first",
                    static_cast<unsigned long long>(v), static_cast<unsigned long long>(by));
}

// `by` names v in a record being written, or (in_flight false) is a version kept that way and names v.
Status refused_in_flight(uint64_t v, uint64_t by, bool in_flight) {
  return make_error(Code::ERR_INVALID_ARG, "L3 version %llu holds chunks of version %llu, %s: kept",
                    static_cast<unsigned long long>(v), static_cast<unsigned long long>(by),
                    in_flight ? "being written" : "kept for a version being written");
}

}  // namespace

Status remove_version(const Layout& l, uint64_t v) { return remove_versions(l, {v}).at(v); }

std::string recycle_dir(const Layout& l) { return l.control + "/recycle"; }

std::string recycle_path(const Layout& l, uint32_t rank) {
  return recycle_dir(l) + "/rank-" + std::to_string(rank) + ".data";
}

Status drop_recycled(const Layout& l) { return l.control.empty() ? Status::ok() : fs::remove_tree(recycle_dir(l)); }

std::map<uint64_t, Status> remove_versions(const Layout& l, const std::set<uint64_t>& versions, bool recycle) {
  std::map<uint64_t, Status> out;
  // Who names whom, once: every version directory's COMMIT and chunk records.
  struct Dir {
    std::optional<Committed> commit;  // committed at the scan
    std::set<uint64_t> names;
  };
  std::map<uint64_t, Dir, std::greater<uint64_t>> dirs;  // newest first
  for (uint64_t u : version_dirs(l)) {
    Dir& d = dirs[u];
    if (auto c = read_commit(l, u)) d.commit = *c;
    d.names = named_by(l, u);
  }
  std::map<uint64_t, std::set<uint64_t>> namers;  // v -> the versions whose records name it
  for (const auto& [u, d] : dirs)
    for (uint64_t h : d.names) namers[h].insert(u);
  auto in_batch = [&](uint64_t u) { return versions.count(u) > 0; };

  // Newest first: a version's namers are newer than it, so their fate is known when it comes. A
  // committed version goes only if none of its namers is still committed.
  std::set<uint64_t> still_committed;  // of the batch: refused, or COMMIT could not be removed
  std::map<uint64_t, Committed> uncommitted_here;  // COMMIT removed by this call
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    const uint64_t v = *it;
    auto d = dirs.find(v);
    const bool committed = d != dirs.end() && d->second.commit;
    if (committed) {
      uint64_t by = 0;
      for (uint64_t u : namers[v])
        if (dirs[u].commit && (!in_batch(u) || still_committed.count(u))) by = std::max(by, u);
      if (by) {
        out[v] = refused_named(v, by);
        still_committed.insert(v);
        continue;
      }
    }
    // Remove COMMIT first: a half-removed directory then reads as uncommitted, never as good.
    Status st = fs::remove_file(commit_path(l, v));
    if (!st.is_ok()) {
      out[v] = st;
      if (committed) still_committed.insert(v);
      continue;
    }
    if (committed) uncommitted_here.emplace(v, *d->second.commit);
    out[v] = Status::ok();
  }

  // A writer of an incremental version checks after writing its chunk record that the versions it
  // names are committed (RankWriter::finish): a record written before a COMMIT went is seen here. The
  // records that can have appeared since the scan are those of directories not committed then, and of
  // new ones; the batch's own uncommitted directories are going.
  // version whose COMMIT goes back -> the version that names it, and whether that one is being written
  std::map<uint64_t, std::pair<uint64_t, bool>> kept;
  if (!uncommitted_here.empty()) {
    const uint64_t oldest = uncommitted_here.begin()->first;
    for (uint64_t u : version_dirs(l)) {
      if (u <= oldest) break;  // a record names older versions only
      if (in_batch(u)) continue;
      auto d = dirs.find(u);
      if (d != dirs.end() && d->second.commit) continue;
      for (uint64_t h : named_by(l, u))
        if (uncommitted_here.count(h)) kept.emplace(h, std::make_pair(u, true));  // the newest namer
    }
    // A version kept committed keeps what it names (newest first: the holders are older).
    for (auto it = uncommitted_here.rbegin(); it != uncommitted_here.rend(); ++it) {
      if (!kept.count(it->first)) continue;
      for (uint64_t h : dirs.at(it->first).names)
        if (uncommitted_here.count(h)) kept.emplace(h, std::make_pair(it->first, false));
    }
    for (const auto& [v, by] : kept) {
      Status back = fs::write_file_atomic(commit_path(l, v), encode_commit(uncommitted_here.at(v)), true);
      out[v] = back.is_ok() ? refused_in_flight(v, by.first, by.second) : back;
    }
  }

  // The directories, newest first.
  for (auto it = versions.rbegin(); it != versions.rend(); ++it)
    if (out[*it].is_ok() && !kept.count(*it)) out[*it] = remove_files(l, *it, recycle);
  return out;
}

Status prune(const Layout& l, int keep, bool recycle) {
  auto committed = list_committed(l);
  if (committed.empty()) return Status::ok();
  uint64_t newest = committed.front().version;
  std::vector<uint64_t> kept;
  std::map<uint64_t, uint64_t> named;  // a version kept because a kept one names it -> the newest that does
  for (size_t i = 0; i < committed.size() && static_cast<int>(i) < std::max(keep, 1); ++i) {
    kept.push_back(committed[i].version);
    auto holders = holders_named_by(l, committed[i].version);
    if (!holders) {
      LOG_WARN("pruning L3: %s", holders.status().message().c_str());
      continue;
    }
    for (uint64_t h : *holders) named.emplace(h, committed[i].version);
  }
  std::set<uint64_t> gone;
  for (uint64_t v : version_dirs(l)) {
    if (v >= newest) continue;  // newer uncommitted ones may be in flight
    if (std::find(kept.begin(), kept.end(), v) != kept.end()) continue;
    if (auto it = named.find(v); it != named.end()) {
      LOG_INFO("L3 version %llu kept: version %llu, kept, has chunks in it (incremental)", static_cast<unsigned long long>(v),
               static_cast<unsigned long long>(it->second));
      continue;
    }
    gone.insert(v);
  }
  Status first = Status::ok();
  for (const auto& [v, st] : remove_versions(l, gone, recycle)) {
    if (st.code() == Code::ERR_INVALID_ARG)
      LOG_INFO("%s", st.message().c_str());
    else if (!st.is_ok() && first.is_ok())
      first = st;
  }
  return first;
}

}  // namespace cairn::l3
