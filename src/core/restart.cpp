// Restart: collectively pick the newest version that can be rebuilt completely and verified.
// For each candidate, newest first: L1 where every rank's slot verifies; else L2, rebuilding the ranks
// whose cache is gone or fails verification from their redundancy sets (and writing the rebuilt data
// back into their cache); else L3. Any mismatch moves on to the next candidate.
//
// cairn_restart_available (and cairn_restart after it) leaves the application's memory alone until a
// version verified everywhere: the bytes are verified where they lie (slot, staging buffer) and copied.
// cairn_restart alone reads straight into the regions, hashing every chunk as it lands (one pass, no
// mapping, no staging): the newest L1 version from the slot file (fast_restart_l1), or an L3 version in
// place when every rank's regions match it. It still returns success only for verified bytes -- a bad
// chunk anywhere moves on as above, and the next candidate writes the regions again -- but after a
// failure the regions may hold partial data. A size mismatch is found before anything is written.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "base/stream_reader.hpp"
#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "mpi/mpi_util.hpp"
#include "core/runtime.hpp"
#include "pfs/l3_store.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_record.hpp"

namespace cairn {
namespace {
constexpr int kMaxInventory = 128;  // versions per rank considered (cache_versions <= 64)
constexpr uint64_t kHasL1 = 1, kProtected = 2;

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

Status Runtime::find_restart(RestartChoice* out) {
  Status drained = wait_all();
  (void)drained;  // a failed background version does not stop a restart from an older one
  // This rank's inventory: (version, flags) pairs.
  std::vector<uint64_t> mine(2 * kMaxInventory, 0);
  auto versions = cache_.versions();
  if (versions.size() > static_cast<size_t>(kMaxInventory))
    versions.erase(versions.begin(), versions.end() - kMaxInventory);
  for (size_t i = 0; i < versions.size(); ++i) {
    uint64_t v = versions[i];
    auto rec = cache_.read_record(v);
    uint64_t flags = 0;
    if (rec && rec->manifest.nranks == static_cast<uint32_t>(nranks_) && rec->manifest.rank == static_cast<uint32_t>(rank_))
      flags |= kHasL1;
    if (cache_.is_protected(v)) flags |= kProtected;
    mine[2 * i] = v;
    mine[2 * i + 1] = flags;
  }
  std::vector<uint64_t> all(static_cast<size_t>(nranks_) * mine.size());
  CAIRN_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                          static_cast<int>(mine.size()), MPI_UINT64_T, app_comm_));
  // L3: committed versions, listed by rank 0.
  std::vector<uint64_t> l3v;
  if (rank_ == 0) {
    for (const auto& c : l3::list_committed(layout_)) {
      if (c.nranks == static_cast<uint32_t>(nranks_)) l3v.push_back(c.version);
      else LOG_DEBUG("L3 version %llu was written by %u ranks, this job has %d: left to the reshaping restart",
                    static_cast<unsigned long long>(c.version), c.nranks, nranks_);
    }
  }
  int nl3 = static_cast<int>(l3v.size());
  CAIRN_MPI(MPI_Bcast(&nl3, 1, MPI_INT, 0, app_comm_));
  l3v.resize(static_cast<size_t>(nl3));
  if (nl3) CAIRN_MPI(MPI_Bcast(l3v.data(), nl3, MPI_UINT64_T, 0, app_comm_));

  std::set<uint64_t, std::greater<>> candidates(l3v.begin(), l3v.end());
  // A version counts as a candidate where some rank holds it for this job's rank count.
  for (size_t i = 0; i < all.size(); i += 2)
    if (all[i] && (all[i + 1] & kHasL1)) candidates.insert(all[i]);
  for (uint64_t r : rejected_) candidates.erase(r);

  std::ostringstream why;
  // Versions written by another rank count that are newer than every own-count candidate come first.
  std::string reshaped_why;
  uint64_t newest_own = candidates.empty() ? 0 : *candidates.begin();
  Status newer = find_reshaped(out, &reshaped_why, newest_own, UINT64_MAX);
  if (newer.is_ok() || newer.code() == Code::ERR_MPI) return newer;
  for (uint64_t v : candidates) {
    std::vector<uint64_t> flags(static_cast<size_t>(nranks_), 0);
    for (int r = 0; r < nranks_; ++r)
      for (int i = 0; i < kMaxInventory; ++i) {
        size_t at = static_cast<size_t>(r) * mine.size() + 2 * static_cast<size_t>(i);
        if (all[at] == v) flags[static_cast<size_t>(r)] = all[at + 1];
      }
    bool handled = false;
    std::string attempt;
    out->in_l3 = std::find(l3v.begin(), l3v.end(), v) != l3v.end();
    Status st = try_l1_l2(v, flags, out, &handled);
    if (st.code() == Code::ERR_MPI) return st;
    if (handled) return Status::ok();
    if (!st.is_ok()) attempt += st.message() + "; ";
    if (std::find(l3v.begin(), l3v.end(), v) != l3v.end()) {
      st = try_l3(v, out);
      if (st.is_ok()) return Status::ok();
      if (st.code() == Code::ERR_MPI) return st;
      attempt += "L3: " + st.message();
    } else {
      attempt += "not in L3";
    }
    why << " version " << v << ": " << attempt << ".";
    if (rank_ == 0) LOG_WARN("restart: version %llu is not recoverable: %s", static_cast<unsigned long long>(v), attempt.c_str());
  }
  Status older = find_reshaped(out, &reshaped_why, 0, newest_own);
  if (older.is_ok() || older.code() == Code::ERR_MPI) return older;
  why << reshaped_why;
  if (candidates.empty() && reshaped_why.empty())
    return make_error(Code::ERR_NO_CHECKPOINT, "no checkpoint found in the cache (%s) or the prefix (%s)",
                      layout_.cache_job.c_str(), layout_.prefix.c_str());
  // Checkpoints exist but none can be rebuilt: an error, not a fresh start (which would silently
  // throw away the run's progress).
  return Status(Code::ERR_UNRECOVERABLE,
                "checkpoints exist but none can be rebuilt and verified;" + why.str() +
                    " To start over instead, remove " + layout_.prefix + " and " + layout_.cache_job +
                    ", or do not restart.");
}

Status Runtime::try_l1_l2(uint64_t v, const std::vector<uint64_t>& flags, RestartChoice* out, bool* handled) {
  *handled = false;
  int with_l1 = 0;
  for (uint64_t f : flags) with_l1 += (f & kHasL1) ? 1 : 0;
  if (with_l1 == 0) return make_error(Code::ERR_NO_CHECKPOINT, "not in any cache");

  // Verify this rank's slot.
  Manifest m;
  const uint8_t* data = nullptr;
  int slot = -1;
  Status mine = Status(Code::ERR_NO_CHECKPOINT, "no L1 record");
  if (flags[static_cast<size_t>(rank_)] & kHasL1) {
    auto rec = cache_.read_record(v);
    mine = rec.status();
    if (rec) {
      slot = static_cast<int>(rec->slot);
      auto mapped = cache_.slot(slot, 0);
      mine = mapped.status();
      if (mapped) {
        if ((*mapped)->size() < rec->manifest.total_size)
          mine = make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", (*mapped)->path().c_str());
        else
          mine = verify_stream(rec->manifest, (*mapped)->data(), rec->manifest.total_size).prefixed(cache_.slot_path(slot));
        data = (*mapped)->data();
        m = rec->manifest;
      }
    }
    if (!mine.is_ok()) LOG_WARN("restart: version %llu in L1 fails verification: %s", static_cast<unsigned long long>(v), mine.message().c_str());
  }
  int good_mine = mine.is_ok() ? 1 : 0;
  std::vector<int> good(static_cast<size_t>(nranks_));
  CAIRN_MPI(MPI_Allgather(&good_mine, 1, MPI_INT, good.data(), 1, MPI_INT, app_comm_));
  std::vector<int> lost_ranks;
  for (int r = 0; r < nranks_; ++r)
    if (!good[static_cast<size_t>(r)]) lost_ranks.push_back(r);
  if (lost_ranks.empty()) {
    out->version = v;
    out->level = CAIRN_LEVEL_L1;
    out->manifest = m;
    out->data = data;
    out->staging.reset();
    out->in_place = false;
    *handled = true;
    return Status::ok();
  }
  std::string l1_text = "L1 on " + std::to_string(nranks_ - static_cast<int>(lost_ranks.size())) + " of " +
                        std::to_string(nranks_) + " ranks (missing or bad: " + rank_list(lost_ranks) + ")";
  if (!placement_.enabled) return make_error(Code::ERR_UNRECOVERABLE, "%s, L2 off", l1_text.c_str());

  // Can every set rebuild its lost members? (The same answer on every rank: all inputs are global.)
  bool my_set_lost = false;
  for (size_t s = 0; s < placement_.members.size(); ++s) {
    const auto& mem = placement_.members[s];
    std::vector<bool> lost(mem.size());
    bool any = false;
    for (size_t i = 0; i < mem.size(); ++i) {
      lost[i] = !good[static_cast<size_t>(mem[i])];
      any = any || lost[i];
    }
    if (!any) continue;
    for (size_t i = 0; i < mem.size(); ++i)
      if (!lost[i] && !(flags[static_cast<size_t>(mem[i])] & kProtected))
        return make_error(Code::ERR_UNRECOVERABLE, "%s; L2 incomplete (rank %d never finished its redundancy)",
                          l1_text.c_str(), mem[i]);
    auto code = redundancy::SetCode::make(cfg_.redundancy, static_cast<int>(mem.size()), placement_.m);
    if (!code || !code->recoverable(lost))
      return make_error(Code::ERR_UNRECOVERABLE, "%s; L2 cannot rebuild set %zu (%s tolerates fewer losses)",
                        l1_text.c_str(), s, redundancy_name(cfg_.redundancy));
    if (static_cast<int>(s) == placement_.my_set) my_set_lost = true;
  }

  // Rebuild, set by set, those with losses. Survivors pass their data; lost members receive theirs.
  Status local = Status::ok();
  std::vector<bool> lost;
  std::string set_bytes;
  redundancy::SetRecord rec;
  std::vector<size_t> lens;
  bool i_am_lost = !good_mine;
  if (my_set_lost) {
    const auto& mem = placement_.members[static_cast<size_t>(placement_.my_set)];
    int n = static_cast<int>(mem.size());
    lost.resize(mem.size());
    int first_survivor = -1;
    for (int i = 0; i < n; ++i) {
      lost[i] = !good[static_cast<size_t>(mem[i])];
      if (!lost[i] && first_survivor < 0) first_survivor = i;
    }
    // The set record (every member's manifest) comes from the first survivor.
    if (placement_.my_member == first_survivor) {
      auto b = cache_.read_set(v);
      if (b) set_bytes = *b;
      else local = b.status();
    }
    unsigned long long len = set_bytes.size();
    CAIRN_MPI(MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, first_survivor, set_comm_));
    set_bytes.resize(len);
    if (len) CAIRN_MPI(MPI_Bcast(set_bytes.data(), static_cast<int>(len), MPI_CHAR, first_survivor, set_comm_));
    auto parsed = redundancy::decode_set_record(set_bytes);
    if (!parsed) {
      local = parsed.status().prefixed("set record of version " + std::to_string(v));
    } else {
      rec = std::move(parsed).value();
      bool same = rec.scheme == cfg_.redundancy && rec.n == static_cast<uint32_t>(n) &&
                  rec.m == static_cast<uint32_t>(code_->m());
      for (int i = 0; same && i < n; ++i) same = rec.ranks[i] == static_cast<uint32_t>(mem[i]);
      if (!same) local = make_error(Code::ERR_UNRECOVERABLE, "version %llu was protected with other sets or another scheme",
                                    static_cast<unsigned long long>(v));
      for (int i = 0; local.is_ok() && i < n; ++i) {
        auto mi = decode_manifest(rec.manifests[i].data(), rec.manifests[i].size());
        if (!mi) local = mi.status();
        else lens.push_back(mi->total_size), (i == placement_.my_member ? (void)(m = *mi) : (void)0);
      }
    }
  }
  CAIRN_TRY(agree(app_comm_, local).prefixed(l1_text + "; L2"));

  if (my_set_lost) {
    size_t max_len = *std::max_element(lens.begin(), lens.end());
    size_t red_len = std::max<size_t>(code_->redundancy_len(max_len), 1);
    local = [&]() -> Status {
      if (i_am_lost) {
        auto r = cache_.read_record(v);
        slot = r ? static_cast<int>(r->slot) : pipeline_->slot_for_rebuild();
        for (uint64_t old : cache_.versions()) {
          auto o = cache_.read_record(old);
          if (!o || static_cast<int>(o->slot) == slot) CAIRN_TRY(cache_.drop(old));
        }
        CAIRN_TRY(cache_.drop(v));
      }
      return Status::ok();
    }();
    // The whole set enters the exchange or none of it does.
    Result<MappedFile*> d = local.is_ok() ? cache_.slot(slot, std::max<uint64_t>(m.total_size, 1)) : Result<MappedFile*>(local);
    Result<MappedFile*> red = d.is_ok() ? cache_.red(slot, red_len) : Result<MappedFile*>(d.status());
    local = agree(set_comm_, red.status());
    if (local.is_ok()) {
      data = (*d)->data();
      local = redundancy::rebuild_set(set_comm_, *code_, lost, (*d)->data(), lens, (*red)->data(), cfg_.exchange_chunk);
    }
    if (local.code() == Code::ERR_MPI) return local;
    if (local.is_ok() && i_am_lost) {
      local = verify_stream(m, data, m.total_size).prefixed("rebuilt data");
      if (local.is_ok()) local = cache_.write_record(v, L1Record{static_cast<uint32_t>(slot), m});
      if (local.is_ok()) local = cache_.write_set(v, set_bytes);
      if (local.is_ok()) local = cache_.mark_protected(v);
    }
  }
  CAIRN_TRY(agree(app_comm_, local).prefixed(l1_text + "; L2 rebuild"));
  if (rank_ == 0)
    LOG_INFO("restart: version %llu rebuilt at L2 for ranks %s", static_cast<unsigned long long>(v), rank_list(lost_ranks).c_str());
  out->version = v;
  out->level = CAIRN_LEVEL_L2;
  out->manifest = m;
  out->data = data;
  out->staging.reset();
  out->in_place = false;
  *handled = true;
  return Status::ok();
}

Status Runtime::try_l3(uint64_t v, RestartChoice* out) {
  // Read straight into the application's regions when cairn_restart itself searches (not
  // cairn_restart_available, which must leave the regions alone) and every rank's regions match the
  // version's (memory only, same names and sizes): no staging buffer and no copy out of it. Decided
  // together, so that a size mismatch on one rank leaves every rank's regions untouched.
  auto manifest = l3::read_manifest(layout_, v, static_cast<uint32_t>(rank_));
  int fits = 0;
  if (restart_in_place_ && manifest) {
    fits = manifest->regions.size() == regions_.size() ? 1 : 0;
    for (const auto& e : manifest->regions) {
      auto it = regions_.find(e.name);
      if (e.kind != RegionKind::memory || it == regions_.end() || it->second.bytes() != e.size) fits = 0;
    }
  }
  int all_fit = 0;
  CAIRN_MPI(MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, app_comm_));
  out->in_place = all_fit != 0;
  out->staging.reset();
  Status local = [&]() -> Status {
    if (!manifest) return manifest.status();
    Manifest& m = *manifest;
    std::vector<StreamExtent> extents;
    if (out->in_place) {
      for (const auto& e : m.regions) extents.push_back({e.offset, e.size, static_cast<uint8_t*>(regions_.at(e.name).ptr)});
      std::sort(extents.begin(), extents.end(), [](const StreamExtent& x, const StreamExtent& y) { return x.offset < y.offset; });
    } else {
      auto buf = MappedFile::anonymous(m.total_size);
      if (!buf)
        return make_error(Code::ERR_NO_MEMORY, "no memory to stage %llu bytes of version %llu: %s",
                          static_cast<unsigned long long>(m.total_size), static_cast<unsigned long long>(v),
                          buf.status().message().c_str());
      out->staging = std::make_shared<MappedFile>(std::move(buf).value());
      extents = whole_stream(m, out->staging->data());
    }
    double t0 = now_seconds();
    CAIRN_TRY(l3::read_data_verified(layout_, m, extents));
    if (rank_ == 0)
      LOG_INFO("restart: version %llu read from L3 %s and verified in %.1f ms on rank 0", static_cast<unsigned long long>(v),
               out->in_place ? "into the regions" : "into a staging buffer", (now_seconds() - t0) * 1e3);
    out->manifest = std::move(m);
    return Status::ok();
  }();
  if (!local.is_ok()) LOG_WARN("restart: version %llu in L3: %s", static_cast<unsigned long long>(v), local.message().c_str());
  Status all = agree(app_comm_, local);
  if (!all.is_ok()) {
    out->staging.reset();
    out->in_place = false;
    return all;
  }
  out->version = v;
  out->level = CAIRN_LEVEL_L3;
  out->data = out->in_place ? nullptr : out->staging->data();
  return Status::ok();
}

Status Runtime::apply_restart(const RestartChoice& c) {
  if (c.p_old) {
    std::vector<int> identity(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) identity[r] = r;
    double t0 = now_seconds();
    if (!c.in_place)  // else every rank read its pieces itself (reshaped_from_l3_direct)
      CAIRN_TRY(move_regions(app_comm_, c.p_old, c.host_of_old, identity, c.held, /*restart=*/true));
    double moved_ms = (now_seconds() - t0) * 1e3;
    restored_version_ = c.version;
    restored_level_ = c.level;
    restored_files_.clear();
    static const char* kLevels[] = {"none", "L1", "L2", "L3"};
    if (rank_ == 0) {
      state_.set({{"restart_version", std::to_string(c.version)}, {"restart_level", kLevels[c.level]}});
      if (c.in_place)
        LOG_INFO("restarted from version %llu at %s, written by %d ranks, %s by %d",
                 static_cast<unsigned long long>(c.version), kLevels[c.level], c.p_old,
                 c.level == CAIRN_LEVEL_L1 ? "read by the old ranks' hosts and sent on as verified" : "read in place", nranks_);
      else
        LOG_INFO("restarted from version %llu at %s, written by %d ranks, redistributed onto %d (moved in %.1f ms on rank 0)",
                 static_cast<unsigned long long>(c.version), kLevels[c.level], c.p_old, nranks_, moved_ms);
    }
    last_checkpoint_time_ = now_seconds();
    return Status::ok();
  }
  const Manifest& m = c.manifest;
  Status check = Status::ok();
  for (const auto& [name, r] : regions_) {
    auto it = std::find_if(m.regions.begin(), m.regions.end(),
                           [&](const RegionEntry& e) { return e.kind == RegionKind::memory && e.name == name; });
    if (it == m.regions.end()) {
      check = make_error(Code::ERR_UNKNOWN_REGION, "region '%s' is protected but version %llu has no such region",
                         name.c_str(), static_cast<unsigned long long>(m.version));
      break;
    }
    if (it->size != r.bytes()) {
      check = make_error(Code::ERR_SIZE_MISMATCH,
                         "region '%s': %llu bytes protected now, %llu bytes in version %llu (%llu elements of %u bytes)",
                         name.c_str(), static_cast<unsigned long long>(r.bytes()), static_cast<unsigned long long>(it->size),
                         static_cast<unsigned long long>(m.version), static_cast<unsigned long long>(it->count), it->elem_size);
      break;
    }
  }
  CAIRN_TRY(agree(app_comm_, check));
  Status local = Status::ok();
  restored_files_.clear();
  for (const auto& e : m.regions) {
    if (e.kind == RegionKind::memory) {
      auto it = regions_.find(e.name);
      if (it != regions_.end() && e.size && !c.in_place) memcpy(it->second.ptr, c.data + e.offset, e.size);
    } else if (local.is_ok()) {
      std::string dir = cache_.files_dir(m.version);
      local = fs::make_dirs(dir);
      std::string path = dir + "/" + e.name;
      if (local.is_ok()) local = fs::write_file_atomic(path, std::string(reinterpret_cast<const char*>(c.data + e.offset), e.size), false);
      restored_files_[e.name] = path;
    }
  }
  CAIRN_TRY(agree(app_comm_, local));
  restored_version_ = m.version;
  restored_level_ = c.level;
  restored_label_ = m.label;
  before_restart_ = pipeline_->marks();
  pipeline::Marks marks = before_restart_;
  if (c.level != CAIRN_LEVEL_L3) {
    marks.local = m.version;
    if (cache_.is_protected(m.version)) marks.protected_l2 = m.version;
  }
  // Already committed in L3: finalize must not write it again (rewriting a committed copy in place could
  // destroy the only L3 copy).
  if (c.level == CAIRN_LEVEL_L3 || c.in_l3) marks.flushed = m.version;
  pipeline_->set_marks(marks);
  static const char* kLevels[] = {"none", "L1", "L2", "L3"};
  if (rank_ == 0) {
    state_.set({{"restart_version", std::to_string(m.version)}, {"restart_level", kLevels[c.level]}});
    LOG_INFO("restarted from version %llu ('%s') at %s", static_cast<unsigned long long>(m.version), m.label.c_str(), kLevels[c.level]);
  }
  last_checkpoint_time_ = now_seconds();
  return Status::ok();
}

Status Runtime::restart_available(int* available, int* version) {
  if (!available) return make_error(Code::ERR_INVALID_ARG, "cairn_restart_available: available is NULL");
  if (!pending_) {
    RestartChoice c;
    Status st = find_restart(&c);
    if (st.code() == Code::ERR_NO_CHECKPOINT) {
      *available = 0;
      if (version) *version = 0;
      return Status::ok();
    }
    CAIRN_TRY(st);
    pending_ = std::move(c);
  }
  *available = 1;
  if (version) *version = static_cast<int>(pending_->version);
  return Status::ok();
}

// The common case, fast: every rank holds the newest version anywhere in its own L1 slot, with the
// regions protected now. Each rank reads its slot file into the regions piece by piece (pread, no
// mapping) and hashes every chunk while it is still in the CPU cache -- one pass over the slot. A
// missing record or a region that does not match on any rank and nothing is read; a bad checksum on
// any rank and the full search runs instead, which writes the regions again. The application gets
// success only for verified bytes.
Status Runtime::fast_restart_l1(bool* done) {
  *done = false;
  uint64_t newest = next_version_ - 1;
  double read_s = 0;
  // First, without touching any region: does every rank hold the version for the regions it protects?
  // (Together, so that a rank whose regions do not match leaves every rank's regions alone.)
  std::optional<L1Record> rec;
  Status mine = [&]() -> Status {
    if (newest == 0 || std::find(rejected_.begin(), rejected_.end(), newest) != rejected_.end())
      return Status(Code::ERR_NO_CHECKPOINT, "");
    CAIRN_ASSIGN_OR_RETURN(r, cache_.read_record(newest));
    const Manifest& m = r.manifest;
    if (m.nranks != static_cast<uint32_t>(nranks_) || m.rank != static_cast<uint32_t>(rank_) ||
        m.regions.size() != regions_.size() || m.chunk_size == 0)
      return Status(Code::ERR_NO_CHECKPOINT, "");
    for (const auto& e : m.regions) {
      auto it = regions_.find(e.name);
      if (e.kind != RegionKind::memory || it == regions_.end() || it->second.bytes() != e.size)
        return Status(Code::ERR_NO_CHECKPOINT, "");
    }
    rec = std::move(r);
    return Status::ok();
  }();
  // A record that is simply not here (a lost node's cache) is no news: the full search handles it.
  auto warn = [&](const Status& st) {
    if (!st.is_ok() && st.code() != Code::ERR_NO_CHECKPOINT && !(st.code() == Code::ERR_IO && !fs::exists(cache_.record_path(newest))))
      LOG_WARN("restart: version %llu in L1: %s", static_cast<unsigned long long>(newest), st.message().c_str());
  };
  warn(mine);
  int ok = mine.is_ok() ? 1 : 0, all = 0;
  CAIRN_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, app_comm_));
  if (!all) return Status::ok();
  // Then read the slot file into the regions piece by piece and hash each piece while it is in cache:
  // with pread on 4 KiB pages (mapping a 256 MiB tmpfs file costs about a memcpy of it in page tables),
  // mapped where the cache is on huge pages (map_to_read).
  mine = [&]() -> Status {
    const Manifest& m = rec->manifest;
    std::string path = cache_.slot_path(static_cast<int>(rec->slot));
    std::vector<StreamExtent> extents;
    for (const auto& e : m.regions)
      extents.push_back({e.offset, e.size, static_cast<uint8_t*>(regions_.at(e.name).ptr)});
    std::sort(extents.begin(), extents.end(), [](const StreamExtent& x, const StreamExtent& y) { return x.offset < y.offset; });
    CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(path, O_RDONLY));
    struct stat sb;
    if (fstat(fd.get(), &sb) != 0) return posix_error("fstat", path, errno);
    if (static_cast<uint64_t>(sb.st_size) < m.total_size)
      return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", path.c_str());
    std::optional<MappedFile> map;
    StreamSource source = pread_source(fd.get(), 0, path);
    if (map_to_read(static_cast<uint64_t>(sb.st_blksize))) {  // huge pages: mapping is cheap, memcpy fast
      auto mm = MappedFile::open_ro(path);
      if (mm && mm->size() >= m.total_size) {
        map = std::move(mm).value();
        source = copy_source(map->data());
      }
    }
    double t0 = now_seconds();
    Status st = read_verified(m, extents, source).prefixed(path);
    read_s = now_seconds() - t0;
    if (st.is_ok()) restored_label_ = m.label;
    return st;
  }();
  warn(mine);
  ok = mine.is_ok() ? 1 : 0;
  CAIRN_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, app_comm_));
  if (!all) return Status::ok();
  // The same bookkeeping as apply_restart for an L1 version.
  restored_version_ = newest;
  restored_level_ = CAIRN_LEVEL_L1;
  restored_files_.clear();
  int committed = 0;
  if (rank_ == 0) committed = l3::read_commit(layout_, newest).is_ok() ? 1 : 0;
  CAIRN_MPI(MPI_Bcast(&committed, 1, MPI_INT, 0, app_comm_));
  before_restart_ = pipeline_->marks();
  pipeline::Marks marks = before_restart_;
  marks.local = newest;
  if (cache_.is_protected(newest)) marks.protected_l2 = newest;
  if (committed) marks.flushed = newest;  // already in L3: finalize must not write it again
  pipeline_->set_marks(marks);
  if (rank_ == 0) {
    state_.set({{"restart_version", std::to_string(newest)}, {"restart_level", "L1"}});
    LOG_INFO("restarted from version %llu ('%s') at L1 (slot read into the regions and verified in %.1f ms on rank 0)",
             static_cast<unsigned long long>(newest), restored_label_.c_str(), read_s * 1e3);
  }
  last_checkpoint_time_ = now_seconds();
  *done = true;
  return Status::ok();
}

Status Runtime::restart() {
  if (in_output_) return make_error(Code::ERR_SEQUENCE, "cairn_restart: an output is open (call cairn_complete_output first)");
  if (!pending_) {
    Status drained = wait_all();  // a failed background version does not stop a restart
    if (drained.code() == Code::ERR_MPI) return drained;
    bool done = false;
    CAIRN_TRY(fast_restart_l1(&done));
    if (done) return Status::ok();
  }
  if (!pending_) {
    RestartChoice c;
    restart_in_place_ = true;
    Status found = find_restart(&c);
    restart_in_place_ = false;
    CAIRN_TRY(found);
    pending_ = std::move(c);
  }
  Status st = apply_restart(*pending_);
  pending_.reset();
  return st;
}

void Runtime::restart_level(int* version, int* level) const {
  if (version) *version = static_cast<int>(restored_version_);
  if (level) *level = restored_level_;
}

}  // namespace cairn
