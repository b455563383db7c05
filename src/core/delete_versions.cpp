// Deleting versions by label (cairn_delete_versions): the dataset management that SCR's SCR_Delete,
// SCR_Drop and SCR_Current ask for. Every rank drops its L1 records of the chosen versions; rank 0
// removes their L3 directories (COMMIT first). Labels live in the manifests, so the newest version
// with a label is found from the L1 records and rank 0's committed L3 versions.
#include <algorithm>
#include <cstring>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "core/runtime.hpp"
#include "mpi/mpi_util.hpp"
#include "l3/l3_store.hpp"

namespace cairn {

Status Runtime::delete_versions(const char* label, int flags) {
  const int known = CAIRN_DELETE_LABELLED | CAIRN_DELETE_NEWER;
  if (!label || !*label || strlen(label) > 255)
    return make_error(Code::ERR_INVALID_ARG, "cairn_delete_versions: label is empty, NULL or longer than 255 bytes");
  if (flags == 0 || (flags & ~known))
    return make_error(Code::ERR_INVALID_ARG,
                      "cairn_delete_versions: flags %d; use CAIRN_DELETE_LABELLED, CAIRN_DELETE_NEWER or both", flags);
  if (in_output_)
    return make_error(Code::ERR_SEQUENCE, "cairn_delete_versions: an output is open (call cairn_complete_output first)");
  if (in_restart_)
    return make_error(Code::ERR_SEQUENCE, "cairn_delete_versions: a restart is open (call cairn_complete_restart first)");
  // Versions in flight must be settled (sealed, protected, flushed or discarded) before they can go.
  Status background = wait_all();
  if (!background.is_ok())
    LOG_WARN("cairn_delete_versions: an earlier version failed in the background: %s", background.message().c_str());

  std::vector<std::pair<uint64_t, std::string>> l1;  // this rank's L1 versions and their labels
  for (uint64_t v : cache_.versions())
    if (auto rec = cache_.read_record(v)) l1.emplace_back(v, rec->manifest.label);
  std::vector<l3::Committed> l3_versions;
  if (rank_ == 0) l3_versions = l3::list_committed(layout_);

  unsigned long long mine = 0, newest = 0;
  for (const auto& [v, l] : l1)
    if (l == label) mine = std::max<unsigned long long>(mine, v);
  for (const auto& c : l3_versions)
    if (c.label == label) mine = std::max<unsigned long long>(mine, c.version);
  CAIRN_MPI(MPI_Allreduce(&mine, &newest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, app_comm_));
  if (newest == 0)
    return make_error(Code::ERR_NO_CHECKPOINT, "cairn_delete_versions: no version is labelled '%s'", label);

  auto chosen = [&](uint64_t v, const std::string& l) {
    return ((flags & CAIRN_DELETE_LABELLED) && l == label) || ((flags & CAIRN_DELETE_NEWER) && v > newest);
  };
  Status st = Status::ok();
  unsigned long long newest_left = 0;
  for (const auto& [v, l] : l1) {
    if (!chosen(v, l)) {
      newest_left = std::max<unsigned long long>(newest_left, v);
      continue;
    }
    Status dropped = cache_.drop(v);
    if (!dropped.is_ok() && st.is_ok()) st = dropped;
  }
  for (const auto& c : l3_versions) {
    if (!chosen(c.version, c.label)) continue;
    Status removed = l3::remove_version(layout_, c.version);
    if (!removed.is_ok() && st.is_ok()) st = removed;
    if (removed.is_ok()) LOG_INFO("deleted version %llu ('%s') from L3", static_cast<unsigned long long>(c.version),
                                  c.label.c_str());
  }
  CAIRN_TRY(agree(app_comm_, st.prefixed("cairn_delete_versions")));

  // The newest version every rank still holds is what finalize may flush; a deleted one never is.
  unsigned long long common = 0;
  CAIRN_MPI(MPI_Allreduce(&newest_left, &common, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, app_comm_));
  pipeline::Marks marks = pipeline_->marks();
  marks.local = std::min<uint64_t>(marks.local, common);
  marks.protected_l2 = std::min<uint64_t>(marks.protected_l2, common);
  marks.flushed = std::min<uint64_t>(marks.flushed, common);
  pipeline_->set_marks(marks);
  pending_.reset();  // a search or plan made before may name a deleted version
  plan_.reset();
  if (restored_version_ && chosen(restored_version_, restored_label_)) restored_files_.clear();
  return Status::ok();
}

Status Runtime::local_dir(char* out, size_t len) {
  if (!out || len == 0) return make_error(Code::ERR_INVALID_ARG, "cairn_local_dir: output buffer is NULL or empty");
  std::string dir = cache_.dir() + "/local";
  CAIRN_TRY(fs::make_dirs(dir, 0700));
  if (dir.size() + 1 > len) {
    snprintf(out, len, "%s", dir.c_str());
    return make_error(Code::ERR_TRUNCATED, "cairn_local_dir: needs %zu bytes, buffer has %zu", dir.size() + 1, len);
  }
  memcpy(out, dir.c_str(), dir.size() + 1);
  return Status::ok();
}

}  // namespace cairn
