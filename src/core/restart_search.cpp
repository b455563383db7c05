// The full restart search: collectively pick the newest version that can be rebuilt completely and
// verified. For each candidate, newest first: L1 where every rank's slot verifies; else L2, rebuilding the
// ranks whose cache is gone or fails verification from their redundancy sets (and writing the rebuilt
// data back into their cache); else L3. Any mismatch moves on to the next candidate. The bytes are
// verified where they lie (slot, staging buffer), and copied by apply_restart; with restart_in_place_ an
// L3 version is read straight into the regions. This is the path of the rare cases (the planned version
// failed, a version of another rank count, a version with files); the common one is restart_inplace.cpp.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "base/stream_reader.hpp"
#include "base/version_index.hpp"
#include "cache/version_view.hpp"
#include "core/runtime.hpp"
#include "mpi/mpi_util.hpp"
#include "l3/l3_store.hpp"
#include "restore/inventory.hpp"
#include "restore/mpi/set_rebuild.hpp"
#include "restore/plan.hpp"

namespace cairn {
using restore::kHasL1;
using restore::kMaxInventory;
using restore::kProtected;
using restore::RestartInventory;

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

Status Runtime::gather_inventory(RestartInventory* inv) {
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
  inv->all.assign(static_cast<size_t>(nranks_) * mine.size(), 0);
  CAIRN_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, inv->all.data(),
                          static_cast<int>(mine.size()), MPI_UINT64_T, app_comm_));
  // L3: committed versions, listed by rank 0.
  inv->l3.clear();
  if (rank_ == 0) {
    for (const auto& c : l3::list_committed(layout_)) {
      if (c.nranks == static_cast<uint32_t>(nranks_)) inv->l3.push_back(c.version);
      else LOG_DEBUG("L3 version %llu was written by %u ranks, this job has %d: left to the reshaping restart",
                    static_cast<unsigned long long>(c.version), c.nranks, nranks_);
    }
  }
  int nl3 = static_cast<int>(inv->l3.size());
  CAIRN_MPI(MPI_Bcast(&nl3, 1, MPI_INT, 0, app_comm_));
  inv->l3.resize(static_cast<size_t>(nl3));
  if (nl3) CAIRN_MPI(MPI_Bcast(inv->l3.data(), nl3, MPI_UINT64_T, 0, app_comm_));
  inv->candidates = std::set<uint64_t, std::greater<>>(inv->l3.begin(), inv->l3.end());
  // A version counts as a candidate where some rank holds it for this job's rank count.
  for (size_t i = 0; i < inv->all.size(); i += 2)
    if (inv->all[i] && (inv->all[i + 1] & kHasL1)) inv->candidates.insert(inv->all[i]);
  CAIRN_TRY(pass_over_versions(*inv));
  for (uint64_t r : rejected_) inv->candidates.erase(r);
  return Status::ok();
}

// The user's choice (`cairn index --current/--drop`, the restart_version knob): the versions a restart
// passes over join the rejected ones, for this search and for the reshaper's. Rank 0 reads the index and
// lists every version it knows of (its L1 inventory, every rank's, and L3 of any rank count); all agree.
Status Runtime::pass_over_versions(const RestartInventory& inv) {
  std::vector<uint64_t> over;
  Status read = Status::ok();
  if (rank_ == 0) {
    auto index = read_index(layout_.index_file());
    if (!index) {
      read = index.status().prefixed("cannot tell which versions to restart from");
    } else {
      for (uint64_t v : known_versions(inv))
        if (restart_passes_over(*index, v, cfg_.restart_version)) over.push_back(v);
      if (!over.empty())
        LOG_INFO("restart: passing over version%s %s (%s)", over.size() > 1 ? "s" : "",
                 format_version_ranges(std::set<uint64_t>(over.begin(), over.end())).c_str(),
                 cfg_.restart_version ? ("restart_version = " + std::to_string(cfg_.restart_version)).c_str()
                                      : ("cairn index: " + layout_.index_file()).c_str());
    }
  }
  CAIRN_TRY(agree(app_comm_, read));
  return reject_from_rank0(over);
}

// Every version rank 0 knows of: its L1 inventory, every rank's, and L3 of any rank count.
std::set<uint64_t> Runtime::known_versions(const RestartInventory& inv) const {
  std::set<uint64_t> known(inv.candidates.begin(), inv.candidates.end());
  for (size_t i = 0; i < inv.all.size(); i += 2)
    if (inv.all[i]) known.insert(inv.all[i]);
  for (const auto& c : l3::list_committed(layout_)) known.insert(c.version);
  return known;
}

// Rank 0's list of versions to pass over, shared: every rank adds them to rejected_.
Status Runtime::reject_from_rank0(std::vector<uint64_t> over) {
  int n = static_cast<int>(over.size());
  CAIRN_MPI(MPI_Bcast(&n, 1, MPI_INT, 0, app_comm_));
  over.resize(static_cast<size_t>(n));
  if (n) CAIRN_MPI(MPI_Bcast(over.data(), n, MPI_UINT64_T, 0, app_comm_));
  for (uint64_t v : over)
    if (std::find(rejected_.begin(), rejected_.end(), v) == rejected_.end()) rejected_.push_back(v);
  return Status::ok();
}

Status Runtime::find_restart(RestartChoice* out) {
  RestartInventory inv;
  CAIRN_TRY(gather_inventory(&inv));
  const auto& candidates = inv.candidates;
  std::ostringstream why;
  // Versions written by another rank count that are newer than every own-count candidate come first.
  std::string reshaped_why;
  uint64_t newest_own = candidates.empty() ? 0 : *candidates.begin();
  Status newer = find_reshaped(out, &reshaped_why, newest_own, UINT64_MAX);
  if (newer.is_ok() || newer.code() == Code::ERR_MPI) return newer;
  for (uint64_t v : candidates) {
    std::vector<uint64_t> flags = inv.flags_of(v, nranks_);
    bool handled = false;
    std::string attempt;
    out->in_l3 = inv.in_l3(v);
    Status st = try_l1_l2(v, flags, out, &handled);
    if (st.code() == Code::ERR_MPI) return st;
    if (handled) return Status::ok();
    if (!st.is_ok()) attempt += st.message() + "; ";
    if (inv.in_l3(v)) {
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
  // throw away the run's progress), unless the configuration asks for one.
  Status unrecoverable(Code::ERR_UNRECOVERABLE,
                       "checkpoints exist but none can be rebuilt and verified;" + why.str() +
                           " To start over instead, set if_unrecoverable = start_over (CAIRN_IF_UNRECOVERABLE), "
                           "or remove " + layout_.prefix + " and " + layout_.cache_job + ", or do not restart.");
  if (cfg_.if_unrecoverable == IfUnrecoverable::start_over) return start_over(inv, unrecoverable);
  events_->unrecoverable(unrecoverable.message());
  return unrecoverable;
}

// if_unrecoverable = start_over: every version there is (known_versions) joins the version index's skip
// list, so that this launch and every later one pass over them (their files stay), and the job starts
// afresh: ERR_NO_CHECKPOINT, as for a job without checkpoints. New versions number on from the newest
// number seen (agree_next_version), never reusing a passed-over one. Should the index not be written,
// the job stops as with stop, and says why.
Status Runtime::start_over(const RestartInventory& inv, const Status& unrecoverable) {
  std::vector<uint64_t> over;
  std::string listed;
  Status wrote = Status::ok();
  if (rank_ == 0) {
    const std::set<uint64_t> known = known_versions(inv);
    over.assign(known.begin(), known.end());
    listed = format_version_ranges(known);
    auto index = read_index(layout_.index_file());
    if (!index) {
      wrote = index.status();
    } else {
      index->skip.insert(known.begin(), known.end());
      wrote = write_index(layout_.index_file(), *index);
    }
  }
  Status agreed = agree(app_comm_, wrote);
  if (agreed.code() == Code::ERR_MPI) return agreed;
  if (!agreed.is_ok()) {
    Status stop(Code::ERR_UNRECOVERABLE, unrecoverable.message() + " (if_unrecoverable = start_over could not pass over "
                                             "the versions: " + agreed.message() + ")");
    events_->unrecoverable(stop.message());
    return stop;
  }
  CAIRN_TRY(reject_from_rank0(std::move(over)));
  const std::string said = "versions " + listed + " passed over (" + layout_.index_file() + "): " + unrecoverable.message();
  if (rank_ == 0) LOG_WARN("restart: starting afresh (if_unrecoverable = start_over): %s", said.c_str());
  events_->started_over(said);  // rank 0's, the writer
  return make_error(Code::ERR_NO_CHECKPOINT, "started over: the versions there were are passed over");
}

// Can every set rebuild its lost members (good[r] == 0), with every survivor of such a set protected?
// The same answer on every rank: all inputs are global (restore::l2_can_rebuild says how).
// *my_set_lost: this rank's set has losses.
Status Runtime::l2_can_rebuild(const std::vector<int>& good, const std::vector<uint64_t>& flags,
                               const std::string& l1_text, bool* my_set_lost) const {
  std::vector<std::vector<int>> lost;
  Status st = restore::l2_can_rebuild(placement_, cfg_.redundancy, good, flags, l1_text, &lost);
  *my_set_lost = st.is_ok() && placement_.my_set >= 0 && static_cast<size_t>(placement_.my_set) < lost.size() &&
                 !lost[static_cast<size_t>(placement_.my_set)].empty();
  return st;
}

// The narrow view of this rank's set for a rebuild of version v (good: as for l2_can_rebuild), its set
// record shared by its first survivor (restore::share_set). Collective over the set.
Result<restore::SetRebuild> Runtime::share_my_set(uint64_t v, const std::vector<int>& good) {
  const auto& members = placement_.members[static_cast<size_t>(placement_.my_set)];
  restore::SetRebuildJob job{set_comm_, placement_.my_member,
                             restore::lost_members(members, [&](int r) { return good[static_cast<size_t>(r)] != 0; }), v,
                             cfg_.exchange_chunk, redundancy::SetExpectation{cfg_.redundancy, code_->m(), members}};
  return restore::share_set(std::move(job), [&] { return cache_.read_set(v); });
}

Status Runtime::try_l1_l2(uint64_t v, const std::vector<uint64_t>& flags, RestartChoice* out, bool* handled) {
  *handled = false;
  out->view.reset();
  out->files_in_place = false;
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
    if (rec && has_files(rec->manifest)) {  // the file API's: the slot and the files where they lie
      slot = static_cast<int>(rec->slot);
      auto view = VersionView::of(rec->manifest, cache_.slot_path(slot), cache_.files_dir(v));
      mine = view.status().prefixed(cache_.dir());
      if (view) {
        mine = verify_stream(rec->manifest, (*view)->data(), rec->manifest.total_size).prefixed(cache_.dir());
        out->view = *view;
        out->files_in_place = true;
        data = (*view)->data();
        m = rec->manifest;
      }
    } else if (rec) {
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

  bool my_set_lost = false;
  CAIRN_TRY(l2_can_rebuild(good, flags, l1_text, &my_set_lost));

  // Rebuild, set by set, those with losses (restore/mpi/set_rebuild). Survivors pass the stream they
  // verified (their slot, or their view: a version with files); a lost member receives its whole stream
  // into a slot of its cache.
  Status local = Status::ok();
  std::optional<restore::SetRebuild> set;
  const bool i_am_lost = !good_mine;
  if (my_set_lost) {
    auto shared = share_my_set(v, good);
    if (shared.status().code() == Code::ERR_MPI) return shared.status();
    if (shared) set = std::move(shared).value(), m = set->plan.mine;
    else local = shared.status();
  }
  CAIRN_TRY(agree(app_comm_, local).prefixed(l1_text + "; L2"));

  if (my_set_lost) {
    restore::SetBuffers buf;
    if (i_am_lost) {
      auto r = cache_.read_record(v);
      slot = r ? static_cast<int>(r->slot) : pipeline_->slot_for_rebuild();
      local = set->claim_slot(cache_, slot, &buf.data, &buf.red);
    } else {
      local = restore::survivor_buffers("", cache_.red_path(slot), m.total_size, set->plan.redundancy_len,
                                        restore::Populate::no, &buf, data);
    }
    local = set->exchange(local, buf.data, buf.red, "rebuilt data");
    if (local.code() == Code::ERR_MPI) return local;
    if (local.is_ok() && i_am_lost) {
      data = buf.data;
      // The rebuilt stream is in the slot; a version's files are its L1 copy where the view finds them.
      for (const auto& e : m.regions) {
        if (e.kind != RegionKind::file || !local.is_ok()) continue;
        local = fs::make_dirs(cache_.files_dir(v));
        if (local.is_ok())
          local = fs::write_file_atomic(cache_.files_dir(v) + "/" + e.name,
                                        std::string(reinterpret_cast<const char*>(data + e.offset), e.size), false);
      }
      out->files_in_place = true;
      if (local.is_ok()) local = set->record_rebuilt(cache_, slot);
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
  out->view.reset();
  out->files_in_place = false;
  // Read straight into the application's regions when cairn_restart itself searches (not
  // cairn_restart_available, which must leave the regions alone) and every rank's regions match the
  // version's (memory only, same names and sizes): no staging buffer and no copy out of it. Decided
  // together, so that a size mismatch on one rank leaves every rank's regions untouched.
  auto manifest = l3::read_manifest(layout_, v, static_cast<uint32_t>(rank_));
  int fits = 0;
  if (restart_in_place_ && manifest) fits = regions_hold(*manifest, regions_.table()) ? 1 : 0;
  int all_fit = 0;
  CAIRN_MPI(MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, app_comm_));
  out->in_place = all_fit != 0;
  out->staging.reset();
  Status local = [&]() -> Status {
    if (!manifest) return manifest.status();
    Manifest& m = *manifest;
    std::vector<StreamExtent> extents;
    if (out->in_place) {
      extents = regions_.extents(m);
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

ReshapeJob Runtime::reshape_job() const {
  ReshapeJob j;
  j.comm = app_comm_;
  j.node_of_rank = node_of_rank_;
  j.node = cfg_.node;
  j.layout = layout_;
  j.cache_versions = cfg_.cache_versions;
  j.exchange_chunk = cfg_.exchange_chunk;
  j.restart_threads = cfg_.restart_threads;
  return j;
}

Status Runtime::find_reshaped(RestartChoice* out, std::string* why, uint64_t above, uint64_t at_most) {
  const ReshapeJob job = reshape_job();
  Reshaper reshaper(job, regions_.table(), restart_in_place_, rejected_);
  ReshapedVersion found;
  CAIRN_TRY(reshaper.find(&found, why, above, at_most));
  out->version = found.version;
  out->level = found.level;
  out->p_old = found.p_old;
  out->host_of_old = std::move(found.host_of_old);
  out->held = std::move(found.held);
  out->in_place = found.in_place;
  return Status::ok();
}

}  // namespace cairn
