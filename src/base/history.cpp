// The job history's writer (docs/format.md, "The job history"); lines are encoded by history_line.cpp.
#include "base/history.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/fsutil.hpp"
#include "base/history_line.hpp"
#include "base/log.hpp"

namespace cairn::history {

std::string path(const Layout& layout) { return layout.control + "/history"; }

const char* level_name(int level) {
  switch (level) {
    case 1: return "L1";
    case 2: return "L2";
    case 3: return "L3";
  }
  return "none";
}

int level_number(std::string_view name) {
  if (name == "L1") return 1;
  if (name == "L2") return 2;
  if (name == "L3") return 3;
  return 0;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- writing ---------------------------------------------------------------------------------------

StartInfo start_info(const Config& cfg, uint64_t ranks, const std::vector<std::string>& groups, bool l2,
                     bool thread_progress, uint64_t newest_version) {
  StartInfo h;
  h.ranks = ranks;
  h.groups = groups;
  h.redundancy = redundancy_name(cfg.redundancy);
  h.l2 = l2;
  h.set_size = cfg.set_size;
  h.rs_parity = cfg.rs_parity;
  h.flush_every = cfg.flush_every;
  h.cache_versions = cfg.cache_versions;
  h.keep_flushed = cfg.keep_flushed;
  h.chunk_size = cfg.chunk_size;
  h.compress = cfg.compress;
  h.flush_on_finalize = cfg.flush_on_finalize;
  h.progress = thread_progress ? "thread" : "calls";
  h.newest_version = newest_version;
  h.job = job_name(cfg);
  return h;
}

namespace {
std::string new_launch_id() {
  std::random_device rd;
  uint64_t x = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  x ^= static_cast<uint64_t>(now_ns()) * 0x9E3779B97F4A7C15ull;
  x ^= static_cast<uint64_t>(getpid()) << 17;
  char buf[24];
  snprintf(buf, sizeof buf, "%016" PRIx64, x);
  return buf;
}
}  // namespace

Writer::~Writer() { close(); }

void Writer::open(const std::string& file, bool writer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  writer_ = writer;
  path_ = file;
  if (!writer) return;
  if (launch_.empty()) launch_ = new_launch_id();
  fd_ = ::open(file.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    LOG_WARN("cannot open the job history %s: %s; this launch keeps no history", file.c_str(), strerror(errno));
    return;
  }
  // A launch that died inside a write left a line without its newline: end it, so that this launch's
  // first line stands on its own (readers skip the torn one).
  struct stat st;
  char last = '\n';
  if (fstat(fd_, &st) == 0 && st.st_size > 0 && pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n')
    torn_ = true;
}

void Writer::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Writer::active() {
  std::lock_guard<std::mutex> lock(mu_);
  return fd_ >= 0;
}

namespace {
// A line of this launch, stamped with its id and the time: {"v":1,"ev":..,"launch":..,"t":..}.
LineWriter line_of(std::string_view event, const std::string& launch) {
  LineWriter w(event);
  w.str("launch", launch).i64("t", now_ns());
  return w;
}
}  // namespace

void Writer::emit(const std::string& line) {
  if (fd_ < 0) return;
  const std::string& text = torn_ ? "\n" + line : line;
  torn_ = false;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      LOG_WARN("cannot append to the job history %s: %s; this launch writes no more history", path_.c_str(),
               n < 0 ? strerror(errno) : "nothing written");
      ::close(fd_);
      fd_ = -1;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

uint64_t Writer::bytes_of(uint64_t v) {
  auto it = bytes_.find(v);
  return it != bytes_.end() ? it->second : 0;
}

void Writer::remember_bytes(uint64_t v, uint64_t bytes) {
  if (!bytes) return;
  bytes_[v] = bytes;
  while (bytes_.size() > 256) bytes_.erase(bytes_.begin());
}

// The bytes a line of the history gave version v, from the last few MiB of the file (a restart, or a
// finalize flush of a version this launch restored, looks up what the launch that wrote it recorded).
uint64_t Writer::lookup_bytes_in_file(uint64_t v) {
  constexpr off_t kTail = 4 << 20;
  fs::Fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || st.st_size <= 0) return 0;
  off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
  std::string text(static_cast<size_t>(st.st_size - from), '\0');
  if (!fs::pread_all(fd.get(), text.data(), text.size(), static_cast<uint64_t>(from), path_).is_ok()) return 0;
  if (from > 0) text.erase(0, std::min(text.size(), text.find('\n') + 1));  // a partial first line
  // The last complete line about v that knows its bytes; lines that do not decode are skipped.
  uint64_t found = 0;
  for (size_t begin = 0, end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    auto line = decode_line(std::string_view(text).substr(begin, end - begin));
    if (!line || (*line)["v"].get<uint64_t>() > static_cast<uint64_t>(kFormat)) continue;  // newer: not ours to read
    const nlohmann::json& j = *line;
    auto ev = j.find("ev"), version = j.find("version"), bytes = j.find("bytes");
    if (ev == j.end() || !ev->is_string() || version == j.end() || !version->is_number_unsigned() ||
        version->get<uint64_t>() != v || bytes == j.end() || !bytes->is_number_unsigned() || !bytes->get<uint64_t>())
      continue;
    const auto& e = ev->get_ref<const std::string&>();
    if (e == "l1" || e == "l2" || e == "l3" || e == "restart") found = bytes->get<uint64_t>();
  }
  return found;
}

void Writer::start(const StartInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  std::vector<std::string> groups;
  for (const auto& g : info.groups)
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  LineWriter w = line_of("start", launch_);
  w.u64("ranks", info.ranks)
      .u64("nodes", groups.size())
      .strings("groups", groups)
      .str("redundancy", info.redundancy)
      .boolean("l2", info.l2)
      .i64("set_size", info.set_size)
      .i64("rs_parity", info.rs_parity)
      .i64("flush_every", info.flush_every)
      .i64("cache_versions", info.cache_versions)
      .i64("keep_flushed", info.keep_flushed)
      .u64("chunk_size", info.chunk_size)
      .str("compress", info.compress)
      .boolean("flush_on_finalize", info.flush_on_finalize)
      .str("progress", info.progress)
      .u64("newest_version", info.newest_version)
      .str("job", info.job)
      .str("host", host)
      .i64("pid", getpid());
  emit(w.finish());
}

void Writer::restart_probe() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!probe_ns_) probe_ns_ = now_ns();
}

void Writer::restart(uint64_t v, int level, int64_t start_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t began = probe_ns_ ? std::min(probe_ns_, start_ns) : start_ns;
  probe_ns_ = 0;
  if (fd_ < 0) return;
  int64_t end = now_ns();
  uint64_t bytes = bytes_of(v);
  if (!bytes) bytes = lookup_bytes_in_file(v);
  remember_bytes(v, bytes);
  LineWriter w = line_of("restart", launch_);
  w.u64("version", v).str("level", level_name(level)).i64("start_ns", began).i64("end_ns", end);
  if (bytes) w.u64("bytes", bytes);
  emit(w.finish());
}

void Writer::restart_rejected(uint64_t v, int level) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line_of("restart_rejected", launch_);
  w.u64("version", v).str("level", level_name(level));
  emit(w.finish());
}

void Writer::l1(uint64_t v, int64_t start_ns, double copy_s, double seal_s, uint64_t bytes, uint64_t rank_bytes,
                uint64_t copied) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  remember_bytes(v, bytes);
  LineWriter w = line_of("l1", launch_);
  w.u64("version", v)
      .i64("start_ns", start_ns)
      .i64("end_ns", now_ns())
      .real("copy_s", copy_s)
      .real("seal_s", seal_s)
      .u64("bytes", bytes)
      .u64("rank_bytes", rank_bytes);
  if (copied != kUnknownBytes) w.u64("copied_bytes", copied);
  emit(w.finish());
}

void Writer::l2(uint64_t v, int64_t start_ns, uint64_t redundancy_bytes, const std::string& scheme, uint64_t sent,
                uint64_t full_sent) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line_of("l2", launch_);
  w.u64("version", v).i64("start_ns", start_ns).i64("end_ns", now_ns());
  if (uint64_t b = bytes_of(v)) w.u64("bytes", b);
  w.u64("redundancy_bytes", redundancy_bytes).str("scheme", scheme);
  if (full_sent > 0) w.u64("sent_bytes", sent).u64("full_sent_bytes", full_sent);
  emit(w.finish());
}

void Writer::l3_began(uint64_t v, bool at_finalize) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  l3_start_[v] = {now_ns(), at_finalize};
  while (l3_start_.size() > 64) l3_start_.erase(l3_start_.begin());
}

void Writer::l3(uint64_t v, double write_s, uint64_t rank_bytes, std::string_view via, uint64_t written,
                uint64_t rank_written) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  int64_t end = now_ns();
  int64_t start = end - static_cast<int64_t>(write_s * 1e9);
  bool at_finalize = false;
  if (auto it = l3_start_.find(v); it != l3_start_.end()) {
    start = it->second.first;
    at_finalize = it->second.second;
    l3_start_.erase(it);
  }
  uint64_t bytes = bytes_of(v);
  if (!bytes) bytes = lookup_bytes_in_file(v);
  LineWriter w = line_of("l3", launch_);
  w.u64("version", v).i64("start_ns", start).i64("end_ns", end);
  if (write_s > 0) w.real("write_s", write_s);
  if (bytes) w.u64("bytes", bytes);
  w.u64("rank_bytes", rank_bytes);
  if (written != kUnknownBytes) w.u64("l3_bytes_written", written);
  if (rank_written != kUnknownBytes) w.u64("rank_l3_bytes_written", rank_written);
  w.boolean("at_finalize", at_finalize).str("via", via);
  emit(w.finish());
}

void Writer::failed(uint64_t v, int level, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  l3_start_.erase(v);
  LineWriter w = line_of("fail", launch_);
  w.u64("version", v).str("level", level_name(level)).str("error", error);
  emit(w.finish());
}

void Writer::discarded(uint64_t v, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line_of("discard", launch_);
  w.u64("version", v).str("error", error);
  emit(w.finish());
}

void Writer::end(const std::string& status, uint64_t versions, bool exit_requested) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line_of("end", launch_);
  w.str("status", status).u64("versions", versions).boolean("exit_requested", exit_requested);
  emit(w.finish());
}

}  // namespace cairn::history
