#include "checkpoint_thread.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cairn/cairn.h"
#include "common/lexical_path.hpp"
#include "common/whole_file.hpp"
#include "libc_real.hpp"
#include "version_index.hpp"
#include "vfs.hpp"

namespace cairn::interpose {
namespace {

constexpr int kTag = 0x6361;  // "ca"
enum Message : uint64_t { kReport = 1, kFinal = 2, kTake = 3, kFinish = 4 };

class CheckpointThread {
 public:
  void start(int provided);
  void finish();
  void changed() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      changed_ = true;
    }
    cv_.notify_all();
  }

 private:
  void run();
  bool init_cairn();
  void restore();
  void report();
  void send(int dest, const std::vector<uint64_t>& msg) {
    MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_UINT64_T, dest, kTag, comm_);
  }
  bool poll(int source, std::vector<uint64_t>* msg, int* from);
  void handle_report(int from, const std::vector<uint64_t>& msg);
  void decide(bool finishing);
  void take(uint64_t step);
  void note(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void warn(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  Settings s_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::string local_, take_dir_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool changed_ = false, finishing_ = false, ready_ = false, running_ = false;
  std::map<uint64_t, StepState> sent_;  // what rank 0 last heard from this rank
  // Rank 0: every rank's steps (with when rank 0 last heard of a change), who is finishing, and what was
  // taken.
  struct Heard {
    StepState st;
    std::chrono::steady_clock::time_point at;
  };
  std::vector<std::map<uint64_t, Heard>> table_;
  std::vector<bool> final_;
  std::map<uint64_t, uint64_t> taken_changes_;
  bool any_taken_ = false;
  uint64_t newest_taken_ = 0;
};

CheckpointThread& checkpoint_thread() {
  static CheckpointThread* a = new CheckpointThread();
  return *a;
}

void CheckpointThread::note(const char* fmt, ...) {
  if (!s_.verbose || rank_ != 0) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cairn-interpose: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

void CheckpointThread::warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cairn-interpose: rank %d: warning: ", rank_);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

void CheckpointThread::start(int provided) {
  std::string error;
  auto settings = settings_from_env(&error);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (!settings) {
    if (!error.empty() && rank_ == 0)
      fprintf(stderr, "cairn-interpose: %s; files are not interposed (written where the program says)\n",
              error.c_str());
    return;
  }
  s_ = *settings;
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank_ == 0)
      fprintf(stderr, "cairn-interpose: the MPI library gives no MPI_THREAD_MULTIPLE; files are not interposed\n");
    return;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  running_ = true;
  thread_ = std::thread([this] { run(); });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ready_; });
}

void CheckpointThread::finish() {
  if (!running_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finishing_ = true;
  }
  cv_.notify_all();
  thread_.join();
  running_ = false;
  vfs().stop();
  MPI_Comm_free(&comm_);
}

bool CheckpointThread::init_cairn() {
  // cairn catches SIGTERM and its exit signal for cairn_should_exit, which this application never
  // calls: its own handlers (or the defaults) come back right after.
  struct sigaction saved[65];
  for (int sig = 1; sig <= 64; ++sig) sigaction(sig, nullptr, &saved[sig]);
  int rc = cairn_init(MPI_COMM_WORLD, nullptr);
  for (int sig = 1; sig <= 64; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &saved[sig], nullptr);
  if (rc != CAIRN_SUCCESS) {
    warn("cairn_init: %s: %s; files are not interposed", cairn_strerror(rc), cairn_last_error());
    return false;
  }
  char dir[4096];
  rc = cairn_local_dir(dir, sizeof dir);
  if (rc != CAIRN_SUCCESS) {
    warn("cairn_local_dir: %s", cairn_last_error());
    cairn_finalize();
    return false;
  }
  local_ = dir;
  take_dir_ = local_ + "/take";
  for (const std::string& d : {local_ + "/files", take_dir_})
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      warn("mkdir %s: %s", d.c_str(), strerror(errno));
      cairn_finalize();
      return false;
    }
  std::string error;
  auto pattern = Pattern::parse(s_.pattern, paths::current_dir(), &error);
  vfs().start(local_ + "/files", std::move(*pattern), s_.prefault, [this] { changed(); });
  return true;
}

// The newest version cairn can rebuild: its files become the application's again.
void CheckpointThread::restore() {
  for (;;) {
    int avail = 0;
    char label[256] = "";
    if (cairn_have_restart(&avail, label, sizeof label) != CAIRN_SUCCESS) {
      warn("no restart: %s", cairn_last_error());
      return;
    }
    if (!avail) return;
    if (cairn_start_restart(label, sizeof label) != CAIRN_SUCCESS) {
      warn("restart of '%s' failed: %s", label, cairn_last_error());
      return;
    }
    char path[4096];
    bool valid = cairn_route_file(kIndexName, path, sizeof path) == CAIRN_SUCCESS;
    auto bytes = valid ? files::read_whole_file(path) : std::nullopt;
    auto index = bytes ? decode_index(*bytes) : std::nullopt;
    if (!index) {
      valid = false;
      warn("version '%s' has no readable file index (not written by the interposer?)", label);
    }
    std::vector<std::string> restored;
    for (const auto& e : index ? *index : std::vector<IndexEntry>{}) {
      bool ghost = e.name == "-";
      if (ghost) path[0] = '\0';
      if ((!ghost && cairn_route_file(e.name.c_str(), path, sizeof path) != CAIRN_SUCCESS) ||
          vfs().restore(e.path, e.step, e.mode, path, e.size) != 0) {
        warn("version '%s': file %s could not be restored", label, e.path.c_str());
        valid = false;
        break;
      }
      restored.push_back(e.path);
    }
    if (cairn_complete_restart(valid ? 1 : 0) == CAIRN_SUCCESS) {
      int version = 0, level = 0;
      cairn_restart_level(&version, &level);
      note("restored '%s' (version %d from L%d): %zu file(s) on rank 0", label, version, level, restored.size());
      return;
    }
    for (const auto& p : restored) vfs().unlink(p.c_str());
  }
}

void CheckpointThread::run() {
  bool ok = init_cairn();
  if (ok) restore();
  if (ok) note("files matching %s go to cairn (%d file(s) per rank and step, %d step(s) kept)", s_.pattern.c_str(),
               s_.files_per_rank, s_.keep);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = true;
  }
  cv_.notify_all();
  if (!ok) return;
  if (rank_ == 0) table_.assign(static_cast<size_t>(size_), {}), final_.assign(static_cast<size_t>(size_), false);
  bool final_sent = false, done = false;
  while (!done) {
    bool changed = false, finishing = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return changed_ || (finishing_ && !final_sent); });
      changed = changed_;
      changed_ = false;
      finishing = finishing_;
    }
    if (changed || (finishing && !final_sent)) report();
    if (finishing && !final_sent) {
      if (rank_ == 0) final_[0] = true;
      else send(0, {kFinal});
      final_sent = true;
    }
    std::vector<uint64_t> msg;
    int from = 0;
    if (rank_ == 0) {
      while (poll(MPI_ANY_SOURCE, &msg, &from)) {
        if (msg[0] == kReport) handle_report(from, msg);
        else if (msg[0] == kFinal) final_[static_cast<size_t>(from)] = true;
      }
      bool all_final = true;
      for (bool f : final_) all_final = all_final && f;
      decide(all_final);
      if (all_final) {
        for (int r = 1; r < size_; ++r) send(r, {kFinish});
        done = true;
      }
    } else {
      while (!done && poll(0, &msg, &from)) {
        if (msg[0] == kTake && msg.size() == 2) take(msg[1]);
        else if (msg[0] == kFinish) done = true;
      }
    }
  }
  int rc = cairn_finalize();
  if (rc != CAIRN_SUCCESS) warn("cairn_finalize: %s", cairn_last_error());
}

bool CheckpointThread::poll(int source, std::vector<uint64_t>* msg, int* from) {
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(source, kTag, comm_, &flag, &st);
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&st, MPI_UINT64_T, &count);
  msg->assign(static_cast<size_t>(std::max(count, 1)), 0);
  MPI_Recv(msg->data(), count, MPI_UINT64_T, st.MPI_SOURCE, kTag, comm_, MPI_STATUS_IGNORE);
  *from = st.MPI_SOURCE;
  return true;
}

// This rank's steps that changed since the last report.
void CheckpointThread::report() {
  std::vector<uint64_t> msg = {kReport, 0};
  for (const auto& [step, st] : vfs().steps()) {
    auto it = sent_.find(step);
    if (it != sent_.end() && it->second.writers == st.writers && it->second.committed == st.committed &&
        it->second.changes == st.changes && it->second.shape == st.shape)
      continue;
    sent_[step] = st;
    msg.insert(msg.end(),
               {step, static_cast<uint64_t>(st.writers), static_cast<uint64_t>(st.committed), st.changes, st.shape});
    ++msg[1];
  }
  if (msg[1] == 0) return;
  if (rank_ == 0) handle_report(0, msg);
  else send(0, msg);
}

void CheckpointThread::handle_report(int from, const std::vector<uint64_t>& msg) {
  if (msg.size() < 2 || msg.size() != 2 + 5 * msg[1]) return;
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 2; i + 4 < msg.size(); i += 5) {
    Heard& h = table_[static_cast<size_t>(from)][msg[i]];
    h.st.writers = static_cast<int>(msg[i + 1]);
    h.st.committed = static_cast<int>(msg[i + 2]);
    h.st.changes = msg[i + 3];
    h.st.shape = msg[i + 4];
    h.at = now;
  }
}

// Rank 0: the newest step that every rank has written (step_written: closed, committed, and either shaped
// like the step before or settled), and that changed since it was last taken, becomes a version on every
// rank. `finishing`: every rank is in MPI_Finalize, nothing more will change.
void CheckpointThread::decide(bool finishing) {
  const auto now = std::chrono::steady_clock::now();
  std::map<uint64_t, bool> steps;
  for (const auto& per_rank : table_)
    for (const auto& [step, st] : per_rank) steps[step] = true;
  bool found = false;
  uint64_t best = 0;
  for (const auto& [step, unused] : steps) {
    if (any_taken_ && step < newest_taken_) continue;
    bool ready = true;
    uint64_t changes = 0;
    for (auto& per_rank : table_) {
      const Heard& h = per_rank[step];
      const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - h.at);
      ready = ready && step_written(h.st, s_.files_per_rank, quiet, std::chrono::milliseconds(s_.settle_ms), finishing);
      changes += h.st.changes;
    }
    if (!ready || taken_changes_[step] == changes) continue;
    taken_changes_[step] = changes;  // an older ready step is passed over for a newer one
    found = true;
    best = step;
  }
  if (!found) return;
  any_taken_ = true;
  newest_taken_ = best;
  for (int r = 1; r < size_; ++r) send(r, {kTake, best});
  take(best);
}

// Every rank: the committed files of `step` become a cairn version (collective).
void CheckpointThread::take(uint64_t step) {
  std::string label = "step " + std::to_string(step);
  int rc = cairn_start_output(label.c_str(), 0);
  if (rc != CAIRN_SUCCESS) {
    warn("cairn_start_output: %s", cairn_last_error());
    return;
  }
  bool valid = true;
  std::vector<Held> held = vfs().hold_step(step, take_dir_);
  std::vector<IndexEntry> index;
  char routed[4096];
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i].link.empty()) {  // an older step's file: listed, without content
      index.push_back(IndexEntry{"-", held[i].step, held[i].mode, held[i].size, held[i].path});
      continue;
    }
    IndexEntry e{"f" + std::to_string(i), step, held[i].mode, 0, held[i].path};
    if (cairn_route_file(e.name.c_str(), routed, sizeof routed) != CAIRN_SUCCESS ||
        real::rename(held[i].link.c_str(), routed) != 0) {
      warn("step %llu: %s could not join the version: %s", static_cast<unsigned long long>(step),
           held[i].path.c_str(), errno ? strerror(errno) : cairn_last_error());
      valid = false;
      real::unlink(held[i].link.c_str());
      continue;
    }
    index.push_back(std::move(e));
  }
  // Rank 0 judged the step written with at least this many files here; fewer now means the code removed
  // some of them before the step was held (a take that came late): such a version would restart nothing.
  const auto contents = std::count_if(index.begin(), index.end(), [](const IndexEntry& e) { return e.name != "-"; });
  if (valid && contents < s_.files_per_rank) {
    warn("step %llu: %ld of its %d file(s) here are left to take (the code removed the others since); the "
         "version is not taken", static_cast<unsigned long long>(step), static_cast<long>(contents), s_.files_per_rank);
    valid = false;
  }
  std::string bytes = encode_index(index);
  int fd = cairn_route_file(kIndexName, routed, sizeof routed) == CAIRN_SUCCESS
               ? real::open(routed, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
               : -1;
  if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) valid = false;
  if (fd >= 0 && real::close(fd) != 0) valid = false;
  rc = cairn_complete_output(valid ? 1 : 0);
  if (rc != CAIRN_SUCCESS) {
    if (rank_ == 0) warn("step %llu is not a version: %s", static_cast<unsigned long long>(step), cairn_last_error());
    return;
  }
  note("step %llu taken: %zu file(s) on rank 0 (older steps' files listed)", static_cast<unsigned long long>(step),
       index.size());
  vfs().after_take(step, s_.keep);
}

}  // namespace

std::optional<Settings> settings_from_env(std::string* error) {
  const char* pattern = getenv("CAIRN_INTERPOSE_PATTERN");
  if (!pattern || !*pattern) return std::nullopt;
  Settings s;
  s.pattern = pattern;
  std::string perr;
  if (!Pattern::parse(s.pattern, paths::current_dir(), &perr)) {
    *error = "CAIRN_INTERPOSE_PATTERN=" + s.pattern + ": " + perr;
    return std::nullopt;
  }
  auto number = [&](const char* name, int lo, int hi, int* out) {
    const char* v = getenv(name);
    if (!v || !*v) return true;
    char* end = nullptr;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
      *error = std::string(name) + "=" + v + ": not an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
      return false;
    }
    *out = static_cast<int>(x);
    return true;
  };
  int prefault = 1;
  if (!number("CAIRN_INTERPOSE_FILES", 1, 1 << 20, &s.files_per_rank) ||
      !number("CAIRN_INTERPOSE_KEEP", 1, 1000, &s.keep) || !number("CAIRN_INTERPOSE_PREFAULT", 0, 1, &prefault) ||
      !number("CAIRN_INTERPOSE_SETTLE_MS", 0, 3600 * 1000, &s.settle_ms))
    return std::nullopt;
  s.prefault = prefault == 1;
  const char* log = getenv("CAIRN_LOG");
  s.verbose = log && (strcmp(log, "info") == 0 || strcmp(log, "debug") == 0);
  return s;
}

void start_checkpoint_thread(int provided) { checkpoint_thread().start(provided); }
void finish_checkpoint_thread() { checkpoint_thread().finish(); }

}  // namespace cairn::interpose
