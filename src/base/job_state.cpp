#include "base/job_state.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "base/state_file.hpp"

namespace cairn {

void JobState::open(const Layout& layout, bool writer) {
  std::lock_guard<std::mutex> lock(mu_);
  writer_ = writer;
  path_ = layout.state_file();
  kv_.clear();
  history_.open(history::path(layout), writer);
}

void JobState::set(const std::map<std::string, std::string>& kv) {
  if (!writer_) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, v] : kv) kv_[k] = v;
  auto now = std::chrono::system_clock::now().time_since_epoch();
  kv_["updated_unix_ns"] = std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  Status st = fs::write_file_atomic(path_, state_file::encode(kv_), /*sync=*/false);
  if (!st.is_ok()) LOG_WARN("cannot update the job state file: %s", st.message().c_str());
}

void FaultInjector::init(int rank, std::string state_path) {
  rank_ = rank;
  state_path_ = std::move(state_path);
  const char* spec = getenv("CAIRN_INJECT");
  const char* dir = getenv("CAIRN_INJECT_DIR");
  if (!spec || !dir || !*spec || !*dir) return;
  std::string s = spec;
  auto colon = s.find(':');
  if (colon == std::string::npos) {
    LOG_WARN("ignoring CAIRN_INJECT=%s (expected <phase>:<version>)", spec);
    return;
  }
  phase_ = s.substr(0, colon);
  version_ = strtoull(s.c_str() + colon + 1, nullptr, 10);
  dir_ = dir;
  active_ = true;
  Status st = fs::write_file_atomic(dir_ + "/pid." + std::to_string(rank_), std::to_string(getpid()) + "\n", false);
  if (!st.is_ok()) LOG_WARN("failure injection: %s", st.message().c_str());
}

// Until the state file says `key` >= v, for at most 10 s (a job without a state file, or whose rank 0
// is stuck, is killed anyway: the injection must not hang a test).
void FaultInjector::wait_settled(const char* key, uint64_t v) const {
  for (int i = 0; i < 2000; ++i) {
    auto st = state_file::read_state(state_path_);
    if (!st.is_ok() || !st->has_value()) return;
    const state_file::State& s = **st;
    const uint64_t at = std::string_view(key) == "l2" ? s.l2 : s.l1;
    if (at >= v) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  LOG_WARN("failure injection: rank 0 has not recorded version %llu at %s after 10 s; going on",
           static_cast<unsigned long long>(v), key);
}

void FaultInjector::point(const char* phase, uint64_t v, const char* settled_key) const {
  if (!active_ || v != version_ || phase_ != phase) return;
  if (settled_key) wait_settled(settled_key, v);
  LOG_INFO("failure injection: reached %s of checkpoint %llu, waiting to be killed", phase,
           static_cast<unsigned long long>(v));
  Status st = fs::write_file_atomic(dir_ + "/reached." + std::to_string(rank_), std::to_string(getpid()) + "\n", false);
  (void)st;
  // The launcher kills every rank of this node; if it never does, die anyway: the test asked for it.
  for (int i = 0; i < 120 * 100; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  raise(SIGKILL);
}

}  // namespace cairn
