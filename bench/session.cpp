#include "session.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "base/history_line.hpp"
#include "cache/cache_store.hpp"

namespace cairn::bench {
namespace {

void setenv_or_die(const char* name, const std::string& value) {
  if (setenv(name, value.c_str(), 1) != 0) die("setenv %s: %s", name, strerror(errno));
}

}  // namespace

Session::Session(const Options& o)
    : o_(o), dir_(o.child_dir), prefix_(o.child_dir + "/prefix"), cache_job_(o.cache_dir + "/cairn-" + o.child_job) {}

void Session::clean_levels() {
  barrier();
  if (g_rank == 0) {
    std::error_code ec;
    stdfs::remove_all(cache_job_, ec);
    if (ec) die("removing %s: %s", cache_job_.c_str(), ec.message().c_str());
    stdfs::remove_all(prefix_, ec);
    if (ec) die("removing %s: %s", prefix_.c_str(), ec.message().c_str());
  }
  barrier();
}

void Session::open(const char* redundancy, int flush_every, const std::function<void()>& protect) {
  setenv_or_die("CAIRN_PREFIX", prefix_);
  setenv_or_die("CAIRN_CACHE_DIR", o_.cache_dir);
  setenv_or_die("CAIRN_JOB", o_.child_job);
  setenv_or_die("CAIRN_REDUNDANCY", redundancy);
  setenv_or_die("CAIRN_FLUSH_EVERY", std::to_string(flush_every));
  setenv_or_die("CAIRN_FLUSH_ON_FINALIZE", "false");
  setenv_or_die("CAIRN_SET_SIZE", std::to_string(set_size_));
  setenv_or_die("CAIRN_RS_PARITY", std::to_string(rs_parity_));
  // The levels against the machine's limits on the copy path; cow is --snapshot's comparison (a
  // CAIRN_SNAPSHOT in the environment, or set by the mode, wins).
  if (!getenv("CAIRN_SNAPSHOT")) setenv_or_die("CAIRN_SNAPSHOT", "copy");
  const char* lvl = getenv("CAIRN_LOG");
  if (!lvl || strcmp(lvl, "debug") != 0) setenv_or_die("CAIRN_LOG", "info");
  start_capture(dir_ + "/log.r" + std::to_string(g_rank));
  CHECK_CAIRN(cairn_init(MPI_COMM_WORLD, nullptr));
  protect();
}

std::string Session::close() {
  CHECK_CAIRN(cairn_finalize());
  std::string log = end_capture();
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (o_.verbose || line.find(" info: ") == std::string::npos) fprintf(stderr, "%s\n", line.c_str());
  return log;
}

Session::Restart Session::timed_restart(const char* redundancy, int flush_every, int want_level,
                                       const std::function<void()>& lose, const std::function<void()>& clear,
                                       const std::function<void()>& protect, bool available_first) {
  static const char* kLevel[] = {"none", "L1", "L2", "L3"};
  barrier();
  if (g_rank == 0) lose();
  clear();
  barrier();
  Restart r;
  double t0 = now();
  open(redundancy, flush_every, protect);
  r.init_s = now() - t0;
  barrier();
  t0 = now();
  if (available_first) {
    int available = 0, newest = 0;
    CHECK_CAIRN(cairn_restart_available(&available, &newest));
    if (!available) die("cairn_restart_available: no version to restart from (expected one at L%d)", want_level);
  }
  CHECK_CAIRN(cairn_restart());
  r.calls_s = now() - t0;
  r.seconds = max_over_ranks(r.calls_s);
  int version = 0, level = 0;
  CHECK_CAIRN(cairn_restart_level(&version, &level));
  r.log = close();
  if (level != want_level)
    die("restart on %d ranks came from %s, expected %s", g_nranks, kLevel[std::clamp(level, 0, 3)], kLevel[want_level]);
  return r;
}

std::string newest_slot_file(const Session& s, int rank, cairn::SlotFile which) {
  if (rank < 0) rank = g_rank;
  std::string dir = s.cache_job() + "/node" + std::to_string(rank) + "/" +
                    cairn::rank_dir_name(static_cast<uint32_t>(rank));
  auto versions = cairn::recorded_versions(dir);
  if (versions.empty()) die("slot_read: no version recorded in %s", dir.c_str());
  std::string rec_path = dir + "/" + cairn::version_file_name(versions.back(), cairn::VersionFile::record);
  std::ifstream in(rec_path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto rec = cairn::decode_l1_record(bytes);
  if (!rec) die("slot_read: %s: %s", rec_path.c_str(), rec.status().message().c_str());
  return dir + "/" + cairn::slot_file_name(rec.value().slot, which);
}

SlotRead timed_slot_read(const std::string& path, uint8_t* dst, uint64_t size, int reps) {
  std::vector<double> pr, mm;
  double first_pread = 0, first_map = 0;
  for (int i = 0; i < 1 + reps; ++i) {
    memset(dst, 0, size);
    barrier();
    double t0 = now();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
    read_all(fd, dst, size, path);
    close(fd);
    double tp = max_over_ranks(now() - t0);
    barrier();
    t0 = now();
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
    void* m = mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) die("mmap %s: %s", path.c_str(), strerror(errno));
    memcpy(dst, m, size);
    munmap(m, size);
    double tm = max_over_ranks(now() - t0);
    if (i) pr.push_back(tp), mm.push_back(tm);
    else first_pread = tp, first_map = tm;
  }
  SlotRead r;
  r.pread_s = median(pr);
  r.map_memcpy_s = median(mm);
  r.pread_first_s = first_pread;
  r.map_memcpy_first_s = first_map;
  return r;
}

double history_number(const nlohmann::json& line, const char* key) {
  auto it = line.find(key);
  return it != line.end() && it->is_number() ? it->get<double>() : -1.0;
}

std::vector<HistoryLine> history_version_lines(const Session& s, uint64_t first_version) {
  std::vector<HistoryLine> out;
  if (g_rank != 0) return out;
  std::ifstream in(s.prefix() + "/.cairn/history");
  for (std::string text; std::getline(in, text);) {
    auto line = cairn::history::decode_line(text);
    if (!line) continue;  // a torn line: not a figure
    const double v = history_number(*line, "version");
    if (line->at("v").get<uint64_t>() > static_cast<uint64_t>(cairn::history::kFormat) || v < 1 ||
        v < static_cast<double>(first_version))
      continue;
    out.push_back({static_cast<uint64_t>(v), std::move(*line)});
  }
  return out;
}

StageTimes history_stage_times(const Session& s, uint64_t first_version) {
  StageTimes t;
  for (const HistoryLine& h : history_version_lines(s, first_version)) {
    const nlohmann::json& j = h.line;
    double a = 0;
    const std::string ev = j.value("ev", "");
    if (ev == "l1") {
      if ((a = history_number(j, "copy_s")) >= 0) t.copy.push_back(a * 1e3);
      if ((a = history_number(j, "seal_s")) >= 0) t.seal.push_back(a * 1e3);
    } else if (ev == "l2") {
      auto start = j.find("start_ns"), end = j.find("end_ns");  // integers: nanoseconds exactly
      if (start != j.end() && end != j.end() && start->is_number_integer() && end->is_number_integer())
        t.l2.push_back(static_cast<double>(end->get<int64_t>() - start->get<int64_t>()) / 1e6);
    } else if (ev == "l3") {
      if ((a = history_number(j, "write_s")) >= 0) t.l3.push_back(a * 1e3);
    }
  }
  return t;
}

json stage_json(const StageTimes& t, uint64_t bytes) {
  json j = json::object();
  auto put = [&](const char* name, const std::vector<double>& ms) {
    if (ms.empty()) return;
    double m = median(ms);
    j[std::string(name) + "_ms"] = round3(m);
    j[std::string(name) + "_gbps"] = gbps(bytes, m / 1e3);
  };
  put("copy", t.copy);
  put("seal", t.seal);
  put("l2", t.l2);
  put("l3", t.l3);
  return j;
}

}  // namespace cairn::bench
