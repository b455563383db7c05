// The file API: codes that write their own checkpoint files route them through cairn. A routed file is
// written where it becomes the version's L1 copy (<rank dir>/v<N>.files/<name>) and is never copied:
// cairn_complete_output only looks at its size; the pipeline reads it where it lies, through the
// version's view (cache/version_view.hpp), for its checksums, L2 and L3. Routed files are regions of the
// version (kind "file") beside the protected memory, so every level treats them alike; a restart from L1
// routes to them in place, and one from L2 or L3 writes them back into the cache first.
#include <cstring>

#include "base/fsutil.hpp"
#include "base/history.hpp"
#include "mpi/mpi_util.hpp"
#include "core/runtime.hpp"

namespace cairn {
namespace {
Status copy_out(const std::string& text, char* out, size_t len, const char* call) {
  if (!out || len == 0) return make_error(Code::ERR_INVALID_ARG, "%s: output buffer is NULL or empty", call);
  if (text.size() + 1 > len) {
    snprintf(out, len, "%s", text.c_str());
    return make_error(Code::ERR_TRUNCATED, "%s: needs %zu bytes, buffer has %zu", call, text.size() + 1, len);
  }
  memcpy(out, text.c_str(), text.size() + 1);
  return Status::ok();
}

bool safe_file_name(const char* name) {
  if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return false;
  return strlen(name) <= 255;
}
}  // namespace

Status Runtime::route_file(const char* name, char* out, size_t len) {
  if (!safe_file_name(name))
    return make_error(Code::ERR_INVALID_ARG, "cairn_route_file: '%s' is not a plain file name (no '/', at most 255 bytes)",
                      name ? name : "(null)");
  std::string path;
  if (in_output_) {
    if (routed_.empty()) {
      // A local failure here still lets the output complete: cairn_complete_output then votes the
      // version invalid on every rank. (A directory left by a version that never completed goes.)
      std::string dir = cache_.files_dir(next_version_);
      Status st = fs::remove_tree(dir);
      if (st.is_ok()) st = fs::make_dirs(dir);
      if (!st.is_ok()) {
        output_failure_ = st;
        return st;
      }
    }
    path = cache_.files_dir(next_version_) + "/" + name;
    routed_[name] = path;
  } else if (auto it = restored_files_.find(name); it != restored_files_.end()) {
    path = it->second;
  } else if (in_restart_) {
    return make_error(Code::ERR_INVALID_ARG, "cairn_route_file: version %llu has no file named '%s'",
                      static_cast<unsigned long long>(restored_version_), name);
  } else {
    path = name;
  }
  return copy_out(path, out, len, "cairn_route_file");
}

Status Runtime::start_output(const char* label, int flags) {
  if (flags != 0) return make_error(Code::ERR_INVALID_ARG, "cairn_start_output: flags must be 0");
  if (in_output_) return make_error(Code::ERR_SEQUENCE, "cairn_start_output: an output is already open (call cairn_complete_output first)");
  if (in_restart_) return make_error(Code::ERR_SEQUENCE, "cairn_start_output: a restart is open (call cairn_complete_restart first)");
  if (label && strlen(label) > 255) return make_error(Code::ERR_INVALID_ARG, "cairn_start_output: label longer than 255 bytes");
  routed_.clear();
  output_label_ = label ? label : "";
  in_output_ = true;
  output_failure_ = Status::ok();  // the output directory is made at the first routed file
  return Status::ok();
}

Status Runtime::complete_output(int valid) {
  if (!in_output_) return make_error(Code::ERR_SEQUENCE, "call cairn_start_output before cairn_complete_output");
  in_output_ = false;
  pending_.reset();
  plan_.reset();
  int mine = valid && output_failure_.is_ok() ? 1 : 0, all = mine;
  Status failure = output_failure_;
  output_failure_ = Status::ok();
  CAIRN_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, app_comm_));

  std::string label = output_label_.empty() ? "ckpt." + std::to_string(next_version_) : output_label_;
  Status st;
  if (!all) {
    uint64_t v = next_version_++;
    st = make_error(Code::ERR_INVALID_VERSION, "version %llu ('%s') discarded: %s", static_cast<unsigned long long>(v),
                    label.c_str(), mine ? "another rank passed valid=0" : "this rank passed valid=0");
    events_->discarded(v, st.message());
  } else {
    st = take_version(label, !routed_.empty(), failure);
  }
  // A discarded output's files go; a version's stay, as its L1 copy (dropped with the version).
  if (!all && !routed_.empty()) fs::remove_tree(cache_.files_dir(next_version_ - 1)).ignore();
  routed_.clear();
  return st;
}

Status Runtime::have_restart(int* available, char* label, size_t len) {
  CAIRN_TRY(restart_available(available, nullptr));
  if (label && len) {
    if (*available) return copy_out(pending_label(), label, len, "cairn_have_restart");
    label[0] = '\0';
  }
  return Status::ok();
}

Status Runtime::start_restart(char* label, size_t len) {
  if (in_restart_) return make_error(Code::ERR_SEQUENCE, "cairn_start_restart: a restart is open (call cairn_complete_restart first)");
  CAIRN_TRY(restart());
  in_restart_ = true;
  if (label && len) return copy_out(restored_label_, label, len, "cairn_start_restart");
  return Status::ok();
}

Status Runtime::complete_restart(int valid) {
  if (!in_restart_) return make_error(Code::ERR_SEQUENCE, "call cairn_start_restart before cairn_complete_restart");
  in_restart_ = false;
  int mine = valid ? 1 : 0, all = 0;
  CAIRN_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, app_comm_));
  if (!all) {
    rejected_.push_back(restored_version_);
    events_->restart_rejected(restored_version_, restored_level_);
    restored_files_.clear();
    // The rejected version must not be flushed at finalize, nor count as the newest local one.
    pipeline_->set_marks(before_restart_);
    return make_error(Code::ERR_INVALID_VERSION, "version %llu rejected by the application (%s)",
                      static_cast<unsigned long long>(restored_version_),
                      mine ? "another rank passed valid=0" : "this rank passed valid=0");
  }
  return Status::ok();
}

}  // namespace cairn
