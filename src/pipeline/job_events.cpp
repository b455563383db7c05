#include "pipeline/job_events.hpp"

#include <unistd.h>

#include "base/history.hpp"
#include "base/log.hpp"

namespace cairn::pipeline {

void JobEvents::sealed(const Version& v) {
  if (!writer()) return;
  // Off the application's path. An application that went on after an unrecoverable restart (starting
  // over by itself) computes again: its new versions are what a relaunch restarts from.
  if (unrecoverable_.exchange(false))
    state_->set({{"version", std::to_string(v.number)}, {"phase", "compute"}});
  else
    state_->set("version", std::to_string(v.number));
}

void JobEvents::local(const Version& v, uint64_t all_bytes, uint64_t all_copied) {
  if (!writer()) return;
  // The history line first: a reader that sees the level in the state file finds the line too.
  state_->history().l1(v.number, v.manifest.created_unix_ns, v.t_copy, v.t_seal, all_bytes, v.manifest.total_size,
                       all_copied);
  state_->set("l1", std::to_string(v.number));
}

void JobEvents::protected_l2(const Version& v, double start_s, const L2Bytes& all, const char* scheme) {
  if (!writer()) return;
  state_->history().l2(v.number, static_cast<int64_t>(start_s * 1e9), all.redundancy, scheme, all.sent, all.full);
  state_->set("l2", std::to_string(v.number));
}

void JobEvents::flush_began(uint64_t v, bool at_finalize) {
  if (!writer()) return;
  if (at_finalize) state_->set("phase", "flush");
  state_->history().l3_began(v, at_finalize);
}

static_assert(Version::kUnknownBytes == history::kUnknownBytes, "one 'unknown' for the pipeline and the history");

void JobEvents::flushed(const Version& v, const char* via) {
  if (!writer()) return;
  state_->history().l3(v.number, v.t_l3, v.manifest.total_size, via, v.l3_written_all, v.l3_written);
  state_->set("l3", std::to_string(v.number));
}

void JobEvents::failed(uint64_t v, int level, const std::string& why) {
  if (!writer()) return;
  const auto n = static_cast<unsigned long long>(v);
  switch (level) {
    case 1: LOG_ERROR("version %llu discarded: %s", n, why.c_str()); break;
    case 2: LOG_ERROR("version %llu not protected at L2: %s", n, why.c_str()); break;
    default: LOG_ERROR("version %llu not flushed to %s: %s", n, prefix_.c_str(), why.c_str()); break;
  }
  state_->history().failed(v, level, why);
}

void JobEvents::began(const history::StartInfo& info) {
  if (writer()) state_->history().start(info);
}

void JobEvents::computing(int nranks, const char* redundancy, uint64_t version, const std::string& cache) {
  if (!writer()) return;
  state_->set({{"phase", "compute"}, {"nranks", std::to_string(nranks)}, {"redundancy", redundancy},
               {"version", std::to_string(version)}, {"cache", cache}, {"pid", std::to_string(getpid())}});
}

void JobEvents::restart_found() {
  if (writer()) state_->history().restart_probe();
}

void JobEvents::restart_level(uint64_t v, int level) {
  if (writer()) state_->set({{"restart_version", std::to_string(v)}, {"restart_level", history::level_name(level)}});
}

void JobEvents::restart_via(const char* via) {
  if (writer()) state_->set({{"restart_via", via}});
}

void JobEvents::restarted(uint64_t v, int level, int64_t start_ns) {
  if (writer()) state_->history().restart(v, level, start_ns);
}

void JobEvents::restart_rejected(uint64_t v, int level) {
  if (writer()) state_->history().restart_rejected(v, level);
}

void JobEvents::unrecoverable(const std::string& why) {
  if (!writer()) return;
  state_->set({{"phase", "unrecoverable"}, {"unrecoverable", why}});
  unrecoverable_ = true;
}

void JobEvents::started_over(const std::string& what) {
  if (writer()) state_->set({{"started_over", what}});
}

void JobEvents::discarded(uint64_t v, const std::string& why) {
  if (writer()) state_->history().discarded(v, why);
}

void JobEvents::exit_requested(const std::string& why) {
  if (writer()) state_->set("exit_request", why);
}

void JobEvents::finalized(const std::string& status, uint64_t versions, bool exit_requested) {
  if (!writer()) return;
  state_->set("phase", "finalized");
  state_->history().end(status, versions, exit_requested);
}

}  // namespace cairn::pipeline
