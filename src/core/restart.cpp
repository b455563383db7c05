// Restart: the entry points (cairn_restart_available, cairn_restart) and restoring what was found.
//
// The search's result is reused, so that the data is read once, verified while it lands in the regions,
// whichever call came first. cairn_restart_available plans (restart_inplace.cpp: the newest version every
// piece of which is present at some level, from the ranks' inventories and the set records' metadata,
// without reading the data); cairn_restart carries the plan out, reading straight into the regions and
// hashing every chunk as it lands. Only verified bytes make a success: a chunk that fails moves on to the
// full search (restart_search.cpp), which tries every level of every older version and writes the
// regions again. A size mismatch is found before anything is written.
#include <algorithm>
#include <cstring>
#include <map>

#include "base/fsutil.hpp"
#include "base/history.hpp"
#include "base/log.hpp"
#include "core/runtime.hpp"
#include "mpi/mpi_util.hpp"

namespace cairn {

void Runtime::restored(uint64_t v, int level, const std::string& label, bool in_l3) {
  restored_version_ = v;
  restored_level_ = level;
  restored_label_ = label;
  before_restart_ = pipeline_->marks();
  pipeline::Marks marks = before_restart_;
  if (level != CAIRN_LEVEL_L3) {
    marks.local = v;
    if (cache_.is_protected(v)) marks.protected_l2 = v;
  }
  // Already committed in L3: finalize must not write it again (rewriting a committed copy in place could
  // destroy the only L3 copy).
  if (level == CAIRN_LEVEL_L3 || in_l3) marks.flushed = v;
  pipeline_->set_marks(marks);
  if (rank_ == 0)
    state_.set({{"restart_version", std::to_string(v)}, {"restart_level", history::level_name(level)}});
  observer_.compute_from(now_seconds());
}

Status Runtime::apply_restart(const RestartChoice& c) {
  if (c.p_old) {
    std::vector<int> identity(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) identity[r] = r;
    double t0 = now_seconds();
    if (!c.in_place)  // else every rank read its pieces itself (Reshaper::from_l3_direct)
      CAIRN_TRY(move_regions(app_comm_, regions_.table(), c.p_old, c.host_of_old, identity, c.held, /*restart=*/true));
    double moved_ms = (now_seconds() - t0) * 1e3;
    restored_version_ = c.version;
    restored_level_ = c.level;
    restored_files_.clear();
    static const char* kLevels[] = {"none", "L1", "L2", "L3"};
    events_->restart_level(c.version, c.level);
    if (rank_ == 0) {
      if (c.in_place)
        LOG_INFO("restarted from version %llu at %s, written by %d ranks, %s by %d",
                 static_cast<unsigned long long>(c.version), kLevels[c.level], c.p_old,
                 c.level == CAIRN_LEVEL_L3 ? "read in place" : "read by the old ranks' hosts and sent on as verified", nranks_);
      else
        LOG_INFO("restarted from version %llu at %s, written by %d ranks, redistributed onto %d (moved in %.1f ms on rank 0)",
                 static_cast<unsigned long long>(c.version), kLevels[c.level], c.p_old, nranks_, moved_ms);
    }
    observer_.compute_from(now_seconds());
    return Status::ok();
  }
  const Manifest& m = c.manifest;
  Status check = Status::ok();
  for (const auto& [name, r] : regions_.table()) {
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
  std::map<std::string, std::string> files;
  for (const auto& e : m.regions) {
    if (e.kind == RegionKind::memory) {
      auto it = regions_.table().find(e.name);
      if (it != regions_.table().end() && e.size && !c.in_place) memcpy(it->second.ptr, c.data + e.offset, e.size);
    } else if (local.is_ok()) {
      std::string dir = cache_.files_dir(m.version);
      std::string path = dir + "/" + e.name;
      files[e.name] = path;
      if (c.files_in_place) continue;  // read in place: verified where it lies
      local = fs::make_dirs(dir);
      if (local.is_ok()) local = fs::write_file_atomic(path, std::string(reinterpret_cast<const char*>(c.data + e.offset), e.size), false);
    }
  }
  CAIRN_TRY(agree(app_comm_, local));
  restored_files_ = std::move(files);
  restored(m.version, c.level, m.label, c.level == CAIRN_LEVEL_L3 || c.in_l3);
  if (rank_ == 0)
    LOG_INFO("restarted from version %llu ('%s') at %s", static_cast<unsigned long long>(m.version), m.label.c_str(),
             history::level_name(c.level));
  return Status::ok();
}

Status Runtime::restart_available(int* available, int* version) {
  if (!available) return make_error(Code::ERR_INVALID_ARG, "cairn_restart_available: available is NULL");
  if (!pending_ && !plan_) {
    Status drained = wait_all();  // a failed background version does not stop a restart
    if (drained.code() == Code::ERR_MPI) return drained;
    // Nothing moves a slot's mapping while the search reads it; and a restart does not wait for slots
    // it may never use (a rank whose cache was lost would create and fault in every one): the
    // preparation stops within a piece and goes on after the restart (or now, when there is none).
    cache_.stop_prepare();
    Status st = plan_restart();
    if (st.code() == Code::ERR_NO_CHECKPOINT) {
      *available = 0;
      if (version) *version = 0;
      prepare_slots();
      return Status::ok();
    }
    CAIRN_TRY(st);
  }
  *available = 1;
  if (version) *version = static_cast<int>(pending_ ? pending_->version : plan_->version);
  events_->restart_found();
  return Status::ok();
}

Status Runtime::restart() {
  const int64_t t0 = history::now_ns();
  CAIRN_TRY(restart_all_regions());
  events_->restarted(restored_version_, restored_level_, t0);
  return Status::ok();
}

const std::string& Runtime::pending_label() const { return pending_ ? pending_->manifest.label : plan_->label; }

Status Runtime::restart_regions() {
  if (in_output_) return make_error(Code::ERR_SEQUENCE, "cairn_restart: an output is open (call cairn_complete_output first)");
  restart_in_place_ = true;  // the application asked for its regions to be written
  struct Reset {
    bool* flag;
    ~Reset() { *flag = false; }
  } reset{&restart_in_place_};
  if (!pending_ && !plan_) {
    Status drained = wait_all();  // a failed background version does not stop a restart
    if (drained.code() == Code::ERR_MPI) return drained;
    cache_.stop_prepare();
    CAIRN_TRY(plan_restart());
  }
  if (plan_ && plan_->p_old) {  // a version of another rank count, named by cairn_restart_available
    plan_.reset();
    RestartChoice c;
    CAIRN_TRY(find_restart(&c));  // the same search, now free to read into the regions
    pending_ = std::move(c);
  }
  if (pending_) {  // found by the full search (or a version of another rank count): restore it
    Status st = apply_restart(*pending_);
    pending_.reset();
    if (st.is_ok()) prepare_slots();  // the regions may have changed size
    return st;
  }
  RestartPlan plan = std::move(*plan_);
  plan_.reset();
  bool done = false, unsuited = false;
  if (plan.level == CAIRN_LEVEL_L3 && cfg_.service_restart == ServiceRestart::agents)
    CAIRN_TRY(restore_through_agents(plan, &done));  // not done: the ranks read it themselves below
  if (!done) CAIRN_TRY(carry_out(plan, &done, &unsuited));
  if (done) {
    prepare_slots();
    start_write_back();
    return Status::ok();
  }
  // The planned version did not read back whole somewhere (or cannot be read in place): the full search,
  // which verifies every level of every candidate, and writes the regions again.
  if (rank_ == 0 && !unsuited)
    LOG_WARN("restart: version %llu could not be restored as planned (%s); searching every level",
             static_cast<unsigned long long>(plan.version), history::level_name(plan.level));
  RestartChoice c;
  CAIRN_TRY(find_restart(&c));
  CAIRN_TRY(apply_restart(c));
  prepare_slots();
  return Status::ok();
}

void Runtime::restart_level(int* version, int* level) const {
  if (version) *version = static_cast<int>(restored_version_);
  if (level) *level = restored_level_;
}

}  // namespace cairn
