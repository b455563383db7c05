// cairn-bench: the speed of every level of cairn, each beside the machine's own limit measured in the
// same run (memcpy for L1, ISA-L's raw encode for L2, write+fsync for L3). How every figure is
// measured, and the figures of a reference machine: docs/performance.md.
//
// `cairn-bench --ranks 2 --size 256M --json` is a plain program: it re-executes itself under mpirun
// ($CAIRN_MPIRUN, default mpirun, with $CAIRN_MPIRUN_ARGS split on whitespace), one app context per
// rank so that every rank is its own simulated node (CAIRN_NODE=node<r>), and the child (which knows it
// is one by CAIRN_BENCH_CHILD=1) does the measuring; rank 0 prints one JSON object (or a table). The
// parent owns the work directory and the job's cache directory and removes both at the end, whatever
// happened to the MPI job.
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <isa-l/erasure_code.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "bench_util.hpp"
#include "snapshot_bench.hpp"
#include "cairn/cairn.h"
#include "base/layout.hpp"
#include "base/xxh.hpp"
#include "redundancy/set_code.hpp"

namespace stdfs = std::filesystem;
using namespace cairn::bench;

namespace {

// ---- options --------------------------------------------------------------------------------------

const char* const kPhases[] = {"l1", "l2", "l3", "restart", "codec"};
const char* const kL2Schemes[] = {"partner", "xor", "rs"};
constexpr int kCodecK = 4, kCodecM = 2;  // the codec comparison: RS(k + m, k) on one core

struct Options {
  int ranks = 2;
  std::string size_text = "256M";
  uint64_t size = 0;
  int reps = 5;
  std::string prefix_base = "/tmp";
  std::string cache_dir = "/dev/shm";
  bool json = false;
  bool verbose = false;
  std::string only_text;
  std::set<std::string> only;
  bool redistribute = false;  // --redistribute: N -> M restart beside N -> N (docs/performance.md)
  bool snapshot = false;      // --snapshot: copy against copy-on-write snapshots (bench/snapshot_bench.cpp)
  std::vector<uint64_t> sizes;  // --snapshot: every size of --size (a comma-separated list)
  int to = 0;                 // M; 0 = ranks + 1
  // Set by the parent for the MPI job.
  std::string child_dir, child_job, child_stage;
  bool wants(const char* phase) const { return only.count(phase) != 0; }
};

// "256M", "8m", "1G", "4096", "64KiB": binary multiples.
bool parse_size(const std::string& text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !(v > 0)) return false;
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else return false;
  double bytes = v * mult;
  if (bytes > 1e15) return false;
  *out = static_cast<uint64_t>(bytes);
  return true;
}

std::vector<std::string> split_words(const char* s) {
  std::vector<std::string> out;
  std::istringstream is(s ? s : "");
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

// ---- the parent: start the MPI job, clean up after it ----------------------------------------------

pid_t g_child = -1;
void forward_signal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// One MPI job: `nranks` app contexts of this program as a child, each its own simulated node, with the
// command line it was given plus `extra`. Returns 0 when the job succeeded.
int launch(const Options& o, int nranks, const std::vector<std::string>& extra, int argc, char** argv,
           const std::string& exe) {
  const char* mpirun_env = getenv("CAIRN_MPIRUN");
  std::vector<std::string> cmd{mpirun_env && *mpirun_env ? mpirun_env : "mpirun"};
  for (auto& w : split_words(getenv("CAIRN_MPIRUN_ARGS"))) cmd.push_back(w);
  for (int r = 0; r < nranks; ++r) {
    if (r) cmd.push_back(":");
    for (const char* w : {"-np", "1", "env", "CAIRN_BENCH_CHILD=1"}) cmd.push_back(w);
    cmd.push_back("CAIRN_NODE=node" + std::to_string(r));
    cmd.push_back(exe);
    for (int i = 1; i < argc; ++i) cmd.push_back(argv[i]);
    for (const std::string& w : extra) cmd.push_back(w);
  }
  if (o.verbose) {
    std::string line;
    for (auto& w : cmd) line += (line.empty() ? "" : " ") + w;
    fprintf(stderr, "cairn-bench: %s\n", line.c_str());
  }
  std::vector<char*> cargv;
  for (auto& w : cmd) cargv.push_back(w.data());
  cargv.push_back(nullptr);

  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "cairn-bench: fork: %s\n", strerror(errno));
    return 1;
  }
  if (pid == 0) {
    execvp(cargv[0], cargv.data());
    fprintf(stderr, "cairn-bench: cannot run the MPI launcher '%s': %s (set CAIRN_MPIRUN)\n", cargv[0], strerror(errno));
    _exit(127);
  }
  g_child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) != 127) fprintf(stderr, "cairn-bench: the MPI job failed (exit status %d)\n", WEXITSTATUS(status));
    return WEXITSTATUS(status);
  }
  fprintf(stderr, "cairn-bench: the MPI job was killed by signal %d\n", WTERMSIG(status));
  return 1;
}

int report_redistribute(const Options& o, const std::string& dir, const std::string& cache_job, double load_start,
                        const std::string& date);

int run_parent(const Options& o, int argc, char** argv) {
  std::error_code ec;
  std::string base = stdfs::absolute(o.prefix_base, ec).string();
  std::string tmpl = base + "/cairn-bench.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    fprintf(stderr, "cairn-bench: cannot create a work directory under %s: %s\n", base.c_str(), strerror(errno));
    return 1;
  }
  std::string dir = buf.data();
  std::string job = "bench-" + std::to_string(getpid()) + "-" + dir.substr(dir.size() - 6);
  std::string cache_job = o.cache_dir + "/cairn-" + job;
  std::string exe = stdfs::read_symlink("/proc/self/exe", ec).string();
  if (exe.empty()) exe = argv[0];
  std::vector<std::string> extra{"--child-dir", dir, "--child-job", job};

  // Ctrl-C reaches mpirun directly (same process group); the parent stays to clean up.
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGINT, SIG_IGN);
  int rc = 0;
  if (!o.redistribute) {
    rc = launch(o, o.ranks, extra, argc, argv, exe);
  } else {
    // Three jobs on the same cache and prefix: N ranks write the version and restart it from L1 and L2;
    // M ranks restart it from L1, L2 and L3; N ranks restart it from L3 (last: it needs the caches gone).
    double load_start = loadavg_1m();
    std::string date = utc_now();
    std::vector<std::pair<std::string, int>> stages{{"write", o.ranks}, {"reshape", o.to}};
    if (o.wants("l3")) stages.push_back({"same_l3", o.ranks});
    for (const auto& [stage, n] : stages) {
      std::vector<std::string> args = extra;
      args.insert(args.end(), {"--child-stage", stage});
      rc = launch(o, n, args, argc, argv, exe);
      if (rc != 0) break;
    }
    if (rc == 0) rc = report_redistribute(o, dir, cache_job, load_start, date);
  }
  stdfs::remove_all(dir, ec);
  stdfs::remove_all(cache_job, ec);
  return rc;
}

// ---- the child: one rank of the MPI job -------------------------------------------------------------

// Median per stage (ms) over the library's per-version summary lines of the timed versions:
// "version V: ... L1 copy X ms (...), seal X ms; L2 <scheme> X ms (...); L3 X ms (...)".
struct StageTimes {
  std::vector<double> copy, seal, l2, l3;
};

StageTimes parse_summaries(const std::string& log, uint64_t first_version) {
  StageTimes t;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    double v = 0, x = 0;
    if (!number_after(line, "info: version ", &v) || line.find("MiB/rank") == std::string::npos) continue;
    if (static_cast<uint64_t>(v) < first_version) continue;
    if (number_after(line, "L1 copy ", &x)) t.copy.push_back(x);
    if (number_after(line, "seal ", &x)) t.seal.push_back(x);
    auto l2 = line.find("; L2 ");
    if (l2 != std::string::npos && line.compare(l2, 11, "; L2 off") != 0) {
      auto sp = line.find(' ', l2 + 5);  // after the scheme name
      if (sp != std::string::npos && number_after(line.substr(sp), " ", &x)) t.l2.push_back(x);
    }
    if (number_after(line, "; L3 ", &x)) t.l3.push_back(x);
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

class Bench {
 public:
  Bench(const Options& o) : o_(o) {}

  void run() {
    dir_ = o_.child_dir;
    prefix_ = dir_ + "/prefix";
    cache_job_ = o_.cache_dir + "/cairn-" + o_.child_job;
    size_ = o_.size;
    load_start_ = loadavg_1m();
    cache_versions_ = 2;
    if (const char* cv = getenv("CAIRN_CACHE_VERSIONS")) cache_versions_ = std::max(1, atoi(cv));
    plan_sets();

    state_ = alloc_faulted(size_);
    fill_random(state_, size_, 1000 + static_cast<uint64_t>(g_rank));
    scratch_ = alloc_faulted(size_);

    bench_memcpy();
    if (o_.wants("codec")) bench_codec();
    if (o_.wants("l1")) bench_l1();
    // One rank is one failure group: no L2 (its figures stay null, run.skipped says why).
    if (o_.wants("l2") && g_nranks >= 2)
      for (const char* s : kL2Schemes) bench_l2(s);
    if (o_.wants("l3")) {
      bench_raw_write();
      bench_l3();
    }
    if (o_.wants("restart")) {
      if (!o_.wants("l3")) bench_raw_write();  // raw_read_gbps: the reference of restart_l3_gbps
      bench_restart_l1();
      if (g_nranks >= 2) bench_restart_l2();
      bench_restart_l3();
    }
    clean_levels();
    free(state_);
    free(scratch_);
    if (g_rank == 0) report();
  }

 private:
  // ---- set-up -------------------------------------------------------------------------------------

  // The library cuts the ranks (one per node here) into sets of set_size; a tail of one joins the
  // previous set. set_size 4 (the default) or fewer when there are fewer nodes; rs keeps at least one
  // data shard per stripe: rs_parity = min(2, smallest set - 1).
  static std::vector<int> set_sizes(int nranks, int set_size) {
    std::vector<int> sets;
    for (int left = nranks; left > 0; left -= set_size) sets.push_back(std::min(left, set_size));
    if (sets.size() >= 2 && sets.back() < 2) {
      sets[sets.size() - 2] += sets.back();
      sets.pop_back();
    }
    return sets;
  }
  void plan_sets() {
    set_size_ = std::max(2, std::min(4, g_nranks));
    int smallest = g_nranks;
    if (g_nranks >= 2) {
      auto sets = set_sizes(g_nranks, set_size_);
      smallest = *std::min_element(sets.begin(), sets.end());
    }
    rs_parity_ = std::max(1, std::min(2, smallest - 1));
  }

  void setenv_or_die(const char* name, const std::string& value) {
    if (setenv(name, value.c_str(), 1) != 0) die("setenv %s: %s", name, strerror(errno));
  }

  // Every level's files of earlier sessions gone: a session starts from an empty cache and prefix.
  void clean_levels() {
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

  // cairn_init with the configuration of one measurement (environment, set before init), and the
  // state region protected. The library's log goes to a file until close_session().
  void open_session(const char* redundancy, int flush_every) {
    setenv_or_die("CAIRN_PREFIX", prefix_);
    setenv_or_die("CAIRN_CACHE_DIR", o_.cache_dir);
    setenv_or_die("CAIRN_JOB", o_.child_job);
    setenv_or_die("CAIRN_REDUNDANCY", redundancy);
    setenv_or_die("CAIRN_FLUSH_EVERY", std::to_string(flush_every));
    setenv_or_die("CAIRN_FLUSH_ON_FINALIZE", "false");
    setenv_or_die("CAIRN_SET_SIZE", std::to_string(set_size_));
    setenv_or_die("CAIRN_RS_PARITY", std::to_string(rs_parity_));
    // The levels against the machine's limits on the copy path; cow is --snapshot's comparison (a
    // CAIRN_SNAPSHOT in the environment wins).
    if (!getenv("CAIRN_SNAPSHOT")) setenv_or_die("CAIRN_SNAPSHOT", "copy");
    const char* lvl = getenv("CAIRN_LOG");
    if (!lvl || strcmp(lvl, "debug") != 0) setenv_or_die("CAIRN_LOG", "info");
    g_capture.start(dir_ + "/log.r" + std::to_string(g_rank));
    CHECK_CAIRN(cairn_init(MPI_COMM_WORLD, nullptr));
    if (protect_) protect_();
    else CHECK_CAIRN(cairn_protect("state", state_, size_, CAIRN_BYTE));
  }

  // cairn_finalize; returns the session's log. Lines other than info are passed on to stderr.
  std::string close_session() {
    CHECK_CAIRN(cairn_finalize());
    std::string log = g_capture.stop();
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);)
      if (o_.verbose || line.find(" info: ") == std::string::npos) fprintf(stderr, "%s\n", line.c_str());
    return log;
  }

  // warm + reps checkpoints, each followed by cairn_wait. Per timed one: the blocking time of
  // cairn_checkpoint and the time from its start until cairn_wait returns, both the slowest rank's.
  struct CkptTimes {
    std::vector<double> blocking, until_wait;
    double first_blocking = 0;
  };
  // `settle`, if given, runs after each cairn_wait (untimed) until the library's background work of
  // that version is over too (L3: rank 0's pruning of old versions, which cairn_wait does not wait for).
  CkptTimes timed_checkpoints(int warm, const std::function<void()>& settle = {}) {
    CkptTimes t;
    for (int i = 0; i < warm + o_.reps; ++i) {
      reinterpret_cast<uint64_t*>(state_)[0] += 1;  // every version differs from the one before
      barrier();
      double t0 = now();
      CHECK_CAIRN(cairn_checkpoint());
      double t1 = now();
      CHECK_CAIRN(cairn_wait());
      double t2 = now();
      if (settle) settle();
      double blocking = max_over_ranks(t1 - t0), until_wait = max_over_ranks(t2 - t0);
      if (i == 0) t.first_blocking = blocking;
      if (i >= warm) {
        t.blocking.push_back(blocking);
        t.until_wait.push_back(until_wait);
      }
    }
    return t;
  }

  // ---- memcpy ---------------------------------------------------------------------------------------

  void bench_memcpy() {
    // One core: rank 0 copies while the others wait in a barrier.
    std::vector<double> one, all, shm;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      if (g_rank == 0) {
        double t0 = now();
        memcpy(scratch_, state_, size_);
        clobber(scratch_);
        if (i) one.push_back(now() - t0);
      }
      barrier();
    }
    // Every rank at once (what the ranks of a node share during a checkpoint).
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      double t0 = now();
      memcpy(scratch_, state_, size_);
      clobber(scratch_);
      double t = max_over_ranks(now() - t0);
      if (i) all.push_back(t);
    }
    // One core into a pre-faulted shared mapping of a file in cache_dir (what an L1 slot is).
    if (g_rank == 0) {
      uint8_t* p = map_slot_like(o_.cache_dir + "/cairn-" + o_.child_job + ".memcpy", size_);
      for (int i = 0; i < 1 + o_.reps; ++i) {
        double t0 = now();
        memcpy(p, state_, size_);
        clobber(p);
        if (i) shm.push_back(now() - t0);
      }
      munmap(p, size_);
    }
    barrier();
    r_["memcpy_gbps"] = gbps(size_, median(one));
    extra_["memcpy_all_ranks_gbps"] = gbps(size_, median(all));
    memcpy_all_s_ = median(all);
    extra_["memcpy_shm_gbps"] = gbps(size_, median(shm));
    memcpy_s_ = median(one);
  }

  // ---- codec: raw ISA-L against cairn's SetCode, one core --------------------------------------------

  void bench_codec() {
    size_t len = static_cast<size_t>(size_ / kCodecK) / 64 * 64;
    if (len == 0) die("--size is too small for the codec comparison (k = %d)", kCodecK);
    uint64_t bytes = static_cast<uint64_t>(len) * kCodecK;
    std::vector<double> isal, ours;
    bool identical = true;
    if (g_rank == 0) {
      uint8_t* par = alloc_faulted(2 * kCodecM * static_cast<uint64_t>(len));
      const uint8_t* data[kCodecK];
      uint8_t* p_isal[kCodecM];
      uint8_t* p_ours[kCodecM];
      for (int j = 0; j < kCodecK; ++j) data[j] = state_ + static_cast<size_t>(j) * len;
      for (int p = 0; p < kCodecM; ++p) {
        p_isal[p] = par + static_cast<size_t>(p) * len;
        p_ours[p] = par + static_cast<size_t>(kCodecM + p) * len;
      }
      // Raw ISA-L: the Cauchy matrix cairn documents for rs, tables expanded once (as cairn does).
      std::vector<uint8_t> matrix(static_cast<size_t>(kCodecK + kCodecM) * kCodecK), tables(32 * kCodecK * kCodecM);
      gf_gen_cauchy1_matrix(matrix.data(), kCodecK + kCodecM, kCodecK);
      ec_init_tables(kCodecK, kCodecM, &matrix[kCodecK * kCodecK], tables.data());
      auto code = cairn::redundancy::SetCode::make(cairn::Redundancy::rs, kCodecK + kCodecM, kCodecM);
      if (!code) die("SetCode::make(rs, %d, %d): %s", kCodecK + kCodecM, kCodecM, code.status().message().c_str());
      constexpr size_t kMaxLen = size_t{1} << 30;  // ec_encode_data takes an int length
      auto raw = [&] {
        double t0 = now();
        for (size_t off = 0; off < len; off += kMaxLen) {
          size_t n = std::min(kMaxLen, len - off);
          unsigned char* s[kCodecK];
          unsigned char* d[kCodecM];
          for (int j = 0; j < kCodecK; ++j) s[j] = const_cast<uint8_t*>(data[j]) + off;
          for (int p = 0; p < kCodecM; ++p) d[p] = p_isal[p] + off;
          ec_encode_data(static_cast<int>(n), kCodecK, kCodecM, tables.data(), s, d);
        }
        clobber(par);
        return now() - t0;
      };
      auto cairn = [&] {
        double t0 = now();
        code->encode_stripe(len, data, p_ours);
        clobber(par);
        return now() - t0;
      };
      // Two warm-up rounds, then the order alternates so that neither side always runs second.
      for (int i = 0; i < 2 + o_.reps; ++i) {
        double a, b;
        if (i % 2) b = cairn(), a = raw();
        else a = raw(), b = cairn();
        if (i >= 2) isal.push_back(a), ours.push_back(b);
      }
      for (int p = 0; p < kCodecM; ++p) identical = identical && memcmp(p_isal[p], p_ours[p], len) == 0;
      free(par);
    }
    barrier();
    r_["isal_rs_encode_gbps"] = gbps(bytes, median(isal));
    r_["rs_encode_gbps"] = gbps(bytes, median(ours));
    isal_s_ = median(isal);
    rs_s_ = median(ours);
    extra_["codec"] = {{"k", kCodecK}, {"m", kCodecM}, {"shard_bytes", len}, {"parity_identical", identical}};
    if (g_rank == 0 && !identical) die("cairn's rs parity differs from raw ISA-L's on the same data and matrix");
  }

  // ---- L1 ---------------------------------------------------------------------------------------------

  void bench_l1() {
    clean_levels();
    open_session("single", 0);
    // One warm-up version per slot: a slot is created and faulted in by the first version that uses it.
    CkptTimes t = timed_checkpoints(cache_versions_);
    std::string log = close_session();
    r_["l1_checkpoint_gbps"] = gbps(size_, median(t.blocking));
    l1_s_ = median(t.blocking);
    extra_["l1_checkpoint_first_gbps"] = gbps(size_, t.first_blocking);
    stages_["l1"] = stage_json(parse_summaries(log, static_cast<uint64_t>(cache_versions_) + 1), size_);
    stages_["l1"]["blocking_ms"] = round3(median(t.blocking) * 1e3);
    stages_["l1"]["until_wait_ms"] = round3(median(t.until_wait) * 1e3);
  }

  // ---- L2 ---------------------------------------------------------------------------------------------

  void bench_l2(const char* scheme) {
    clean_levels();
    open_session(scheme, 0);
    CkptTimes t = timed_checkpoints(cache_versions_);
    std::string log = close_session();
    r_[std::string("l2_") + scheme + "_gbps"] = gbps(size_, median(t.until_wait));
    json s = stage_json(parse_summaries(log, static_cast<uint64_t>(cache_versions_) + 1), size_);
    s["blocking_ms"] = round3(median(t.blocking) * 1e3);
    s["until_wait_ms"] = round3(median(t.until_wait) * 1e3);
    stages_[std::string("l2_") + scheme] = s;
  }

  // ---- L3 ---------------------------------------------------------------------------------------------

  static void write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path) {
    constexpr uint64_t kPiece = 64ull << 20;  // the L3 writer's piece size
    for (uint64_t off = 0; off < n;) {
      ssize_t w = ::pwrite(fd, p + off, std::min(kPiece, n - off), static_cast<off_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) die("write %s: %s", path.c_str(), w < 0 ? strerror(errno) : "no progress");
      off += static_cast<uint64_t>(w);
    }
  }
  static void read_all(int fd, uint8_t* p, uint64_t n, const std::string& path) {
    constexpr uint64_t kPiece = 64ull << 20;
    for (uint64_t off = 0; off < n;) {
      ssize_t r = ::pread(fd, p + off, std::min(kPiece, n - off), static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) die("read %s: %s", path.c_str(), r < 0 ? strerror(errno) : "short file");
      off += static_cast<uint64_t>(r);
    }
  }

  // Drop the page cache of every file under `dir`, so that reads come from the device (the data was
  // fsynced; DONTNEED drops clean pages).
  static void evict(const std::string& dir) {
    std::error_code ec;
    for (auto it = stdfs::recursive_directory_iterator(dir, ec); !ec && it != stdfs::recursive_directory_iterator();
         it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      fdatasync(fd);
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      close(fd);
    }
  }

  // write(2) in the L3 writer's pieces + fsync of a new file in the prefix directory, every rank at
  // once (as the ranks flush at once); then reading it back from the device.
  void bench_raw_write() {
    clean_levels();
    if (g_rank == 0) {
      std::error_code ec;
      stdfs::create_directories(prefix_, ec);
      if (ec) die("mkdir %s: %s", prefix_.c_str(), ec.message().c_str());
    }
    barrier();
    std::string path = prefix_ + "/raw-write.r" + std::to_string(g_rank);
    std::vector<double> wr, rd;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      double t0 = now();
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
      write_all(fd, state_, size_, path);
      if (fsync(fd) != 0) die("fsync %s: %s", path.c_str(), strerror(errno));
      close(fd);
      double t = max_over_ranks(now() - t0);
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      barrier();
      t0 = now();
      read_all(fd, scratch_, size_, path);
      double tr = max_over_ranks(now() - t0);
      close(fd);
      if (unlink(path.c_str()) != 0) die("unlink %s: %s", path.c_str(), strerror(errno));
      if (i) wr.push_back(t), rd.push_back(tr);
    }
    r_["raw_write_gbps"] = gbps(size_, median(wr));
    extra_["raw_read_gbps"] = gbps(size_, median(rd));
    raw_write_s_ = median(wr);
    raw_read_s_ = median(rd);
  }

  // Rank 0 prunes L3 to keep_flushed versions after a flushed version left the pipeline, so cairn_wait
  // returns before the deletions are done. Wait (untimed) until the prefix holds no more than
  // keep_flushed version directories, so that the next flush starts with an idle pipeline; 10 s at most.
  void wait_for_prune() {
    if (g_rank == 0) {
      int keep = 2;
      if (const char* k = getenv("CAIRN_KEEP_FLUSHED")) keep = std::max(1, atoi(k));
      for (int tries = 0; tries < 10000; ++tries) {
        std::error_code ec;
        int versions = 0;
        for (auto it = stdfs::directory_iterator(prefix_, ec); !ec && it != stdfs::directory_iterator(); it.increment(ec)) {
          uint64_t v = 0;
          if (cairn::Layout::parse_l3_version_name(it->path().filename().string(), &v)) ++versions;
        }
        if (versions <= keep) break;
        usleep(1000);
      }
    }
    barrier();
  }

  void bench_l3() {
    clean_levels();
    open_session("single", 1);
    // The target figure: every flush starts with an idle pipeline (the previous version's pruning done).
    CkptTimes t = timed_checkpoints(cache_versions_, [this] { wait_for_prune(); });
    std::string log = close_session();
    r_["l3_flush_gbps"] = gbps(size_, median(t.until_wait));
    l3_s_ = median(t.until_wait);
    StageTimes st = parse_summaries(log, static_cast<uint64_t>(cache_versions_) + 1);
    r_["l3_flush_stage_gbps"] = st.l3.empty() ? json(nullptr) : gbps(size_, median(st.l3) / 1e3);
    json s = stage_json(st, size_);
    s["blocking_ms"] = round3(median(t.blocking) * 1e3);
    s["until_wait_ms"] = round3(median(t.until_wait) * 1e3);
    stages_["l3"] = s;
    // Back to back: the next checkpoint right after cairn_wait returns, while rank 0 may still be
    // pruning (its worker prunes before it takes up the next version), as for an application that
    // flushes every checkpoint with nothing to compute in between.
    clean_levels();
    open_session("single", 1);
    CkptTimes b = timed_checkpoints(cache_versions_);
    std::string blog = close_session();
    extra_["l3_flush_back_to_back_gbps"] = gbps(size_, median(b.until_wait));
    json bs = stage_json(parse_summaries(blog, static_cast<uint64_t>(cache_versions_) + 1), size_);
    bs["blocking_ms"] = round3(median(b.blocking) * 1e3);
    bs["until_wait_ms"] = round3(median(b.until_wait) * 1e3);
    stages_["l3_back_to_back"] = bs;
  }

  // ---- restart ----------------------------------------------------------------------------------------

  // One version of the state, taken and completed at every level the configuration asks for.
  uint64_t take_reference_version(const char* redundancy, int flush_every) {
    clean_levels();
    reinterpret_cast<uint64_t*>(state_)[0] += 1;
    uint64_t hash = XXH3_64bits(state_, size_);
    open_session(redundancy, flush_every);
    CHECK_CAIRN(cairn_checkpoint());
    CHECK_CAIRN(cairn_wait());
    close_session();
    return hash;
  }

  // `reps` times: remove what `lose` removes, fresh cairn_init, time cairn_restart (slowest rank),
  // check the level it came from and the bytes it restored.
  std::vector<double> timed_restarts(const char* redundancy, int flush_every, uint64_t hash, int want_level,
                                     const std::function<void()>& lose) {
    static const char* kLevel[] = {"none", "L1", "L2", "L3"};
    std::vector<double> times;
    for (int i = 0; i < o_.reps; ++i) {
      barrier();
      if (g_rank == 0) lose();
      memset(state_, 0, size_);  // pages stay faulted in; the restart must bring every byte back
      barrier();
      open_session(redundancy, flush_every);
      barrier();
      double t0 = now();
      CHECK_CAIRN(cairn_restart());
      double t = max_over_ranks(now() - t0);
      int version = 0, level = 0;
      CHECK_CAIRN(cairn_restart_level(&version, &level));
      close_session();
      if (level != want_level)
        die("restart came from %s, expected %s", kLevel[std::clamp(level, 0, 3)], kLevel[want_level]);
      if (XXH3_64bits(state_, size_) != hash) die("restart from %s restored different bytes", kLevel[want_level]);
      times.push_back(t);
    }
    return times;
  }

  void bench_restart_l1() {
    uint64_t hash = take_reference_version("single", 0);
    auto t = timed_restarts("single", 0, hash, CAIRN_LEVEL_L1, [] {});
    r_["restart_l1_gbps"] = gbps(size_, median(t));
    restart_l1_s_ = median(t);
  }

  void bench_restart_l2() {
    uint64_t hash = take_reference_version("xor", 0);
    std::string lost = cache_job_ + "/node" + std::to_string(g_nranks - 1);
    auto t = timed_restarts("xor", 0, hash, CAIRN_LEVEL_L2, [&] {
      std::error_code ec;
      if (stdfs::remove_all(lost, ec) == 0 || ec) die("cannot remove the cache of the lost node %s", lost.c_str());
    });
    r_["restart_l2_gbps"] = gbps(size_, median(t));
    extra_["restart_l2_lost"] = "node" + std::to_string(g_nranks - 1) + " (xor)";
  }

  void bench_restart_l3() {
    uint64_t hash = take_reference_version("single", 1);
    std::string prefix = prefix_, cache = cache_job_;
    auto t = timed_restarts("single", 1, hash, CAIRN_LEVEL_L3, [&] {
      std::error_code ec;
      if (stdfs::remove_all(cache, ec) == 0 || ec) die("cannot remove the cache %s", cache.c_str());
      evict(prefix);
    });
    r_["restart_l3_gbps"] = gbps(size_, median(t));
    restart_l3_s_ = median(t);
  }

  // ---- --redistribute: one stage of the N -> M comparison (the parent runs the stages in turn) ----------
  //
  // The state is one BLOCK-distributed array of N x --size bytes of uint64 in all (G elements), element g
  // holding splitmix64 of g, so that a rank of any job can check the piece it restored. Stage "write"
  // (N ranks) takes one version with redundancy xor (single on one rank) and flush_every 1, so that it
  // exists at L1, L2 and L3, and restarts it on N ranks from L1 and from L2; stage "reshape" (M ranks)
  // restarts it on M ranks from L1, L2 and L3; stage "same_l3" (N ranks) restarts it on N ranks from L3
  // (last, as it needs the caches gone). Rank 0 writes each stage's figures to
  // <work dir>/redistribute-<stage>.json, from which the parent prints the report.
 public:
  void run_redistribute() {
    dir_ = o_.child_dir;
    prefix_ = dir_ + "/prefix";
    cache_job_ = o_.cache_dir + "/cairn-" + o_.child_job;
    const int n_old = o_.ranks, m_new = o_.to;
    // The sets of the writing job, which the restarts of its version must use too.
    set_size_ = std::max(2, std::min(4, n_old));
    auto sets = set_sizes(n_old, set_size_);
    rs_parity_ = std::max(1, std::min(2, *std::min_element(sets.begin(), sets.end()) - 1));
    const uint64_t global = static_cast<uint64_t>(n_old) * (o_.size / 8);
    global_bytes_ = global * 8;
    dist_ = cairn_distribution{CAIRN_DIST_BLOCK, static_cast<size_t>(global), 0, 0, 0};
    // This rank's BLOCK piece: q = G / P elements, one more on the first G % P ranks.
    const uint64_t q = global / static_cast<uint64_t>(g_nranks), r = global % static_cast<uint64_t>(g_nranks);
    const uint64_t k = static_cast<uint64_t>(g_rank);
    count_ = q + (k < r ? 1 : 0);
    const uint64_t start = k * q + std::min(k, r);
    field_ = alloc_faulted(std::max<uint64_t>(count_ * 8, 8));
    auto* expect = reinterpret_cast<uint64_t*>(alloc_faulted(std::max<uint64_t>(count_ * 8, 8)));
    for (uint64_t i = 0; i < count_; ++i) {
      uint64_t z = (start + i + 1) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      expect[i] = z ^ (z >> 31);
    }
    expect_hash_ = XXH3_64bits(expect, count_ * 8);
    protect_ = [this] {
      size_t n = 0;
      CHECK_CAIRN(cairn_local_count(&dist_, &n));
      if (n != count_) die("cairn_local_count gives %zu elements, the bench computed %llu", n, static_cast<unsigned long long>(count_));
      CHECK_CAIRN(cairn_protect_distributed("field", field_, count_, CAIRN_UINT64, &dist_));
    };
    const char* redundancy = g_nranks >= 2 ? "xor" : "single";
    std::string lost_node = cache_job_ + "/node" + std::to_string(n_old - 1);
    auto lose_node = [&] {
      std::error_code ec;
      stdfs::remove_all(lost_node, ec);
      if (ec) die("cannot remove the cache of the lost node %s: %s", lost_node.c_str(), ec.message().c_str());
    };
    auto lose_all = [&] {
      std::error_code ec;
      stdfs::remove_all(cache_job_, ec);
      if (ec) die("cannot remove the cache %s: %s", cache_job_.c_str(), ec.message().c_str());
      evict(prefix_);
    };
    json figures = json::object(), skipped = json::object();
    const std::string& stage = o_.child_stage;
    if (stage == "write") {
      clean_levels();
      memcpy(field_, expect, count_ * 8);
      open_session(redundancy, 1);
      CHECK_CAIRN(cairn_checkpoint());
      CHECK_CAIRN(cairn_wait());
      close_session();
      if (o_.wants("l1")) figures["l1"] = timed_field_restarts(redundancy, CAIRN_LEVEL_L1, [] {});
      if (o_.wants("l2")) {
        // The restart from L2 writes the rebuilt node's cache back, so L1 is whole again afterwards.
        if (n_old >= 2) figures["l2"] = timed_field_restarts(redundancy, CAIRN_LEVEL_L2, lose_node);
        else skipped["l2"] = "one rank is one failure group: no L2";
      }
    } else if (stage == "reshape") {
      bool all_nodes = m_new >= n_old;  // every old rank's node (node<k>) is a node of this job
      if (o_.wants("l1")) {
        if (all_nodes) figures["l1"] = timed_field_restarts(redundancy, CAIRN_LEVEL_L1, [] {});
        else skipped["l1"] = "--to " + std::to_string(m_new) + " < --ranks " + std::to_string(n_old) +
                             ": the caches of old ranks " + std::to_string(m_new) + ".." + std::to_string(n_old - 1) +
                             " are on nodes outside the new job";
      }
      if (o_.wants("l2")) {
        // One old rank lost: node N-1's cache removed (M >= N), or its node absent (M = N - 1). Its set
        // is rebuilt by as many ranks as it has members.
        bool one_lost = all_nodes || n_old - m_new == 1;
        if (n_old < 2) skipped["l2"] = "one rank is one failure group: no L2";
        else if (!one_lost) skipped["l2"] = "more than one old rank lost (--to < --ranks - 1): beyond xor";
        else if (sets.back() > m_new) skipped["l2"] = "the set of the lost rank has more members than the new job has ranks";
        else figures["l2"] = timed_field_restarts(redundancy, CAIRN_LEVEL_L2, all_nodes ? std::function<void()>(lose_node) : [] {});
      }
      if (o_.wants("l3")) figures["l3"] = timed_field_restarts(redundancy, CAIRN_LEVEL_L3, lose_all);
    } else if (stage == "same_l3") {
      figures["l3"] = timed_field_restarts(redundancy, CAIRN_LEVEL_L3, lose_all);
    } else {
      die("unknown --child-stage '%s'", stage.c_str());
    }
    free(field_);
    free(expect);
    field_ = nullptr;
    if (g_rank == 0) {
      json out;
      out["stage"] = stage;
      out["ranks"] = g_nranks;
      out["figures"] = figures;
      out["skipped"] = skipped;
      out["mpi_thread_multiple"] = thread_multiple_;
      out["cpus_per_rank"] = cpus_per_rank_;
      out["set_size"] = set_size_;
      std::string path = dir_ + "/redistribute-" + stage + ".json";
      std::ofstream f(path);
      f << out.dump(2) << "\n";
      if (!f) die("cannot write %s", path.c_str());
    }
    barrier();
  }

 private:
  // `reps` times: what `lose` removes gone, the field zeroed, a fresh cairn_init, cairn_restart timed
  // (slowest rank); the level must be want_level and every rank's piece must hash to what it should
  // hold. Global bytes per second; the library's restart lines of rank 0's last repetition.
  json timed_field_restarts(const char* redundancy, int want_level, const std::function<void()>& lose) {
    static const char* kLevel[] = {"none", "L1", "L2", "L3"};
    std::vector<double> times;
    std::string lines;
    for (int i = 0; i < o_.reps; ++i) {
      barrier();
      if (g_rank == 0) lose();
      memset(field_, 0, count_ * 8);
      barrier();
      open_session(redundancy, 1);
      barrier();
      double t0 = now();
      CHECK_CAIRN(cairn_restart());
      double t = max_over_ranks(now() - t0);
      int version = 0, level = 0;
      CHECK_CAIRN(cairn_restart_level(&version, &level));
      std::string log = close_session();
      if (level != want_level)
        die("restart on %d ranks came from %s, expected %s", g_nranks, kLevel[std::clamp(level, 0, 3)], kLevel[want_level]);
      int ok = XXH3_64bits(field_, count_ * 8) == expect_hash_ ? 1 : 0, all = 0;
      CHECK_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
      if (!all) die("restart on %d ranks from %s restored different bytes (rank %d: %s)", g_nranks, kLevel[want_level],
                    g_rank, ok ? "right" : "wrong");
      times.push_back(t);
      lines.clear();
      std::istringstream in(log);
      for (std::string line; std::getline(in, line);)
        if (line.find("restart") != std::string::npos) lines += line + "\n";
    }
    json j;
    j["gbps"] = gbps(global_bytes_, median(times));
    j["seconds"] = median(times);
    j["ms"] = json::array();
    for (double t : times) j["ms"].push_back(round3(t * 1e3));
    j["log"] = lines;
    return j;
  }

 public:
  // ---- report -----------------------------------------------------------------------------------------

  // ratio of two rates of the same bytes = inverse ratio of their times.
  static json target(const char* what, double num_s, double den_s, double min_ratio) {
    json j;
    j["what"] = what;
    j["min_ratio"] = min_ratio;
    if (num_s > 0 && den_s > 0) {
      double ratio = den_s / num_s;  // (bytes / num_s) / (bytes / den_s)
      j["ratio"] = round3(ratio);
      j["pass"] = ratio >= min_ratio;
    } else {
      j["ratio"] = nullptr;
      j["pass"] = nullptr;
    }
    return j;
  }

  void report() {
    static const char* kKeys[] = {"memcpy_gbps",     "l1_checkpoint_gbps", "l2_partner_gbps", "l2_xor_gbps",
                                  "l2_rs_gbps",      "isal_rs_encode_gbps", "rs_encode_gbps", "raw_write_gbps",
                                  "l3_flush_gbps",   "l3_flush_stage_gbps", "restart_l1_gbps", "restart_l2_gbps",
                                  "restart_l3_gbps"};
    json out;
    for (const char* k : kKeys) out[k] = r_.contains(k) ? r_[k] : json(nullptr);
    json targets;
    targets["l1_checkpoint"] = target("l1_checkpoint_gbps / memcpy_gbps", l1_s_, memcpy_s_, 0.7);
    targets["rs_encode"] = target("rs_encode_gbps / isal_rs_encode_gbps", rs_s_, isal_s_, 0.8);
    targets["l3_flush"] = target("l3_flush_gbps / raw_write_gbps", l3_s_, raw_write_s_, 0.7);
    targets["restart_l1"] = target("restart_l1_gbps / memcpy_gbps", restart_l1_s_, memcpy_s_, 0.5);
    // Every rank copies at once in a checkpoint and a restart: the same ratios against what one rank
    // gets while all copy (memory bandwidth shared), for the analysis; the targets stay as above.
    for (const char* t : {"l1_checkpoint", "restart_l1"}) {
      double s_fig = std::string(t) == "l1_checkpoint" ? l1_s_ : restart_l1_s_;
      targets[t]["ratio_vs_memcpy_all_ranks"] =
          s_fig > 0 && memcpy_all_s_ > 0 ? round3(memcpy_all_s_ / s_fig) : json(nullptr);
    }
    out["targets"] = targets;
    // Figures without a target, beside their reference: the restart from L3 against a cold raw read.
    out["ratios"] = {{"restart_l3_vs_raw_read",
                      restart_l3_s_ > 0 && raw_read_s_ > 0 ? round3(raw_read_s_ / restart_l3_s_) : json(nullptr)}};
    for (auto& [k, v] : extra_.items()) out[k] = v;
    out["stages"] = stages_;
    out["run"] = run_info();

    if (o_.json) {
      printf("%s\n", out.dump(2).c_str());
    } else {
      print_table(out);
    }
    fflush(stdout);
  }

  json run_info() {
    json j = machine_info(load_start_);
    j["size_bytes"] = size_;
    j["snapshot"] = getenv("CAIRN_SNAPSHOT") ? getenv("CAIRN_SNAPSHOT") : "copy";
    j["reps"] = o_.reps;
    j["statistic"] = "median of reps; per-rank bytes / slowest rank's time; GB/s = 1e9 bytes/s";
    j["cache_dir"] = o_.cache_dir;
    j["cache_fs"] = fs_type_name(o_.cache_dir);
    j["prefix"] = prefix_;
    j["prefix_fs"] = fs_type_name(dir_);
    j["job"] = o_.child_job;
    j["cache_job_dir"] = cache_job_;
    j["work_dir"] = dir_;
    j["cache_versions"] = cache_versions_;
    j["warmup_checkpoints"] = cache_versions_;
    j["set_size"] = set_size_;
    j["rs_parity"] = rs_parity_;
    j["mpi_thread_multiple"] = thread_multiple_;
    j["cpus_per_rank"] = cpus_per_rank_;
    j["phases"] = std::vector<std::string>(o_.only.begin(), o_.only.end());
    if (g_nranks < 2 && (o_.wants("l2") || o_.wants("restart")))
      j["skipped"] = "L2 and restart from L2: one rank is one failure group";
    return j;
  }

  void print_table(const json& out) {
    const json& run = out["run"];
    printf("cairn-bench  %s  %s, %lld cores  %d ranks x %.1f MiB  median of %d  (GB/s = 1e9 B/s)\n",
           run["date"].get<std::string>().c_str(), run["cpu"].get<std::string>().c_str(),
           static_cast<long long>(run["cores_online"].get<long>()), g_nranks, static_cast<double>(size_) / (1 << 20),
           o_.reps);
    printf("load average %.2f at start, %.2f at end\n", run["loadavg_1m_start"].get<double>(),
           run["loadavg_1m_end"].get<double>());
    printf("cache %s (%s), prefix %s (%s)\n\n", o_.cache_dir.c_str(), run["cache_fs"].get<std::string>().c_str(),
           prefix_.c_str(), run["prefix_fs"].get<std::string>().c_str());
    auto row = [&](const char* label, const char* key) {
      const json& v = out.contains(key) ? out[key] : json(nullptr);
      if (v.is_number()) printf("  %-34s %9.3f GB/s\n", label, v.get<double>());
      else printf("  %-34s %9s\n", label, "-");
    };
    row("memcpy, 1 core", "memcpy_gbps");
    row("memcpy, every rank at once", "memcpy_all_ranks_gbps");
    row("memcpy, 1 core into a shm mapping", "memcpy_shm_gbps");
    row("L1 checkpoint (blocking)", "l1_checkpoint_gbps");
    row("L2 partner (until cairn_wait)", "l2_partner_gbps");
    row("L2 xor (until cairn_wait)", "l2_xor_gbps");
    row("L2 rs (until cairn_wait)", "l2_rs_gbps");
    row("ISA-L rs encode, 1 core", "isal_rs_encode_gbps");
    row("cairn rs encode, 1 core", "rs_encode_gbps");
    row("raw write + fsync", "raw_write_gbps");
    row("raw read (page cache dropped)", "raw_read_gbps");
    row("L3 flush (until cairn_wait)", "l3_flush_gbps");
    row("L3 flush stage (library log)", "l3_flush_stage_gbps");
    row("L3 flush, back to back", "l3_flush_back_to_back_gbps");
    row("restart from L1", "restart_l1_gbps");
    row("restart from L2", "restart_l2_gbps");
    row("restart from L3", "restart_l3_gbps");
    printf("\ntargets\n");
    for (auto& [name, t] : out["targets"].items()) {
      if (t["ratio"].is_number())
        printf("  %-40s %6.3f >= %.2f  %s\n", t["what"].get<std::string>().c_str(), t["ratio"].get<double>(),
               t["min_ratio"].get<double>(), t["pass"].get<bool>() ? "PASS" : "MISS");
      else
        printf("  %-40s %6s\n", t["what"].get<std::string>().c_str(), "-");
    }
    if (out["ratios"]["restart_l3_vs_raw_read"].is_number())
      printf("\nwithout a target\n  %-40s %6.3f\n", "restart_l3_gbps / raw_read_gbps",
             out["ratios"]["restart_l3_vs_raw_read"].get<double>());
  }

 public:
  bool thread_multiple_ = false;
  std::vector<int> cpus_per_rank_;

 private:
  const Options& o_;
  std::string dir_, prefix_, cache_job_;
  uint64_t size_ = 0;
  int cache_versions_ = 2, set_size_ = 2, rs_parity_ = 1;
  double load_start_ = -1;
  uint8_t* state_ = nullptr;
  uint8_t* scratch_ = nullptr;
  json r_ = json::object(), extra_ = json::object(), stages_ = json::object();
  // Median times (s) of the figures the targets compare; 0 when not measured.
  double memcpy_s_ = 0, l1_s_ = 0, raw_write_s_ = 0, l3_s_ = 0, restart_l1_s_ = 0, isal_s_ = 0, rs_s_ = 0;
  double memcpy_all_s_ = 0, raw_read_s_ = 0, restart_l3_s_ = 0;
  // --redistribute
  std::function<void()> protect_;  // what open_session protects instead of the state, if set
  cairn_distribution dist_{};
  uint64_t count_ = 0, global_bytes_ = 0, expect_hash_ = 0;
  uint8_t* field_ = nullptr;
};

int run_child(const Options& o, int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "cairn-bench: MPI_Init_thread failed\n");
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
  int want = o.redistribute && o.child_stage == "reshape" ? o.to : o.ranks;
  if (g_nranks != want) die("the MPI job has %d ranks, expected %d", g_nranks, want);
  Bench b(o);
  b.thread_multiple_ = provided == MPI_THREAD_MULTIPLE;
  cpu_set_t set;
  int ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  b.cpus_per_rank_.resize(static_cast<size_t>(g_nranks));
  CHECK_MPI(MPI_Gather(&ncpu, 1, MPI_INT, b.cpus_per_rank_.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  if (o.snapshot) {
    run_snapshot_child({o.sizes, o.reps, o.cache_dir, o.child_dir, o.child_job, o.json, o.verbose});
  } else if (o.redistribute) {
    b.run_redistribute();
  } else {
    b.run();
  }
  MPI_Finalize();
  return 0;
}

// The --redistribute report, from the stages' files: per level, N -> M beside N -> N, their ratio and
// the 0.7 target.
int report_redistribute(const Options& o, const std::string& dir, const std::string& cache_job, double load_start,
                        const std::string& date) {
  json stage_out = json::object();
  for (const char* stage : {"write", "reshape", "same_l3"}) {
    std::ifstream in(dir + "/redistribute-" + stage + ".json");
    if (!in) continue;
    try {
      stage_out[stage] = json::parse(in);
    } catch (const std::exception& e) {
      fprintf(stderr, "cairn-bench: %s/redistribute-%s.json: %s\n", dir.c_str(), stage, e.what());
      return 1;
    }
  }
  auto figure = [&](const char* stage, const char* level) -> const json* {
    if (!stage_out.contains(stage) || !stage_out[stage]["figures"].contains(level)) return nullptr;
    return &stage_out[stage]["figures"][level];
  };
  const uint64_t global = static_cast<uint64_t>(o.ranks) * (o.size / 8) * 8;
  json out;
  out["mode"] = "redistribute";
  out["from_ranks"] = o.ranks;
  out["to_ranks"] = o.to;
  out["bytes_per_old_rank"] = global / static_cast<uint64_t>(o.ranks);
  out["global_bytes"] = global;
  json targets = json::object(), skipped = json::object(), logs = json::object();
  for (const char* level : {"l1", "l2", "l3"}) {
    const json* same = figure(level == std::string("l3") ? "same_l3" : "write", level);
    const json* moved = figure("reshape", level);
    std::string key_same = std::string("restart_n_to_n_") + level + "_gbps";
    std::string key_moved = std::string("restart_n_to_m_") + level + "_gbps";
    out[key_same] = same ? (*same)["gbps"] : json(nullptr);
    out[key_moved] = moved ? (*moved)["gbps"] : json(nullptr);
    json t;
    t["what"] = key_moved + " / " + key_same;
    t["min_ratio"] = 0.7;
    if (same && moved && (*same)["seconds"].get<double>() > 0 && (*moved)["seconds"].get<double>() > 0) {
      double ratio = (*same)["seconds"].get<double>() / (*moved)["seconds"].get<double>();
      t["ratio"] = round3(ratio);
      t["pass"] = ratio >= 0.7;
    } else {
      t["ratio"] = nullptr;
      t["pass"] = nullptr;
    }
    targets[std::string("n_to_m_") + level] = t;
    for (const char* stage : {"write", "reshape", "same_l3"})
      if (stage_out.contains(stage) && stage_out[stage]["skipped"].contains(level))
        skipped[std::string(stage == std::string("reshape") ? "n_to_m_" : "n_to_n_") + level] = stage_out[stage]["skipped"][level];
    if (!o.wants(level)) skipped[level] = "not asked for (--only)";
    if (same) logs[std::string("n_to_n_") + level] = (*same)["log"];
    if (moved) logs[std::string("n_to_m_") + level] = (*moved)["log"];
  }
  out["targets"] = targets;
  out["skipped"] = skipped;
  json ms = json::object();
  for (const char* level : {"l1", "l2", "l3"}) {
    const json* same = figure(level == std::string("l3") ? "same_l3" : "write", level);
    const json* moved = figure("reshape", level);
    if (same) ms[std::string("n_to_n_") + level] = (*same)["ms"];
    if (moved) ms[std::string("n_to_m_") + level] = (*moved)["ms"];
  }
  out["restart_ms"] = ms;
  out["restart_log"] = logs;
  json run = machine_info(load_start);  // date: the end of the run, as in the other mode
  run["date_start"] = date;
  run["ranks"] = o.ranks;
  run["to_ranks"] = o.to;
  run["size_bytes"] = o.size;
  run["reps"] = o.reps;
  run["statistic"] = "median of reps; global bytes (every old rank's --size) / slowest rank's cairn_restart time; GB/s = 1e9 bytes/s";
  run["distribution"] = "one BLOCK region of uint64";
  run["cache_dir"] = o.cache_dir;
  run["cache_fs"] = fs_type_name(o.cache_dir);
  run["prefix_fs"] = fs_type_name(dir);
  run["work_dir"] = dir;
  run["cache_job_dir"] = cache_job;
  for (const char* stage : {"write", "reshape", "same_l3"})
    if (stage_out.contains(stage)) {
      run["stages"][stage] = {{"ranks", stage_out[stage]["ranks"]},
                              {"mpi_thread_multiple", stage_out[stage]["mpi_thread_multiple"]},
                              {"cpus_per_rank", stage_out[stage]["cpus_per_rank"]}};
    }
  run["set_size"] = stage_out.contains("write") ? stage_out["write"]["set_size"] : json(nullptr);
  out["run"] = run;
  if (o.json) {
    printf("%s\n", out.dump(2).c_str());
  } else {
    printf("cairn-bench --redistribute  %s  %s, %ld cores  %d -> %d ranks, %.1f MiB per old rank, median of %d\n",
           run["date"].get<std::string>().c_str(), run["cpu"].get<std::string>().c_str(), sysconf(_SC_NPROCESSORS_ONLN), o.ranks, o.to,
           static_cast<double>(global / static_cast<uint64_t>(o.ranks)) / (1 << 20), o.reps);
    printf("load average %.2f at start, %.2f at end; GB/s of the global state (1e9 B/s)\n\n", load_start, loadavg_1m());
    printf("  %-6s %14s %14s %8s\n", "level", "N -> N", "N -> M", "ratio");
    for (const char* level : {"l1", "l2", "l3"}) {
      auto cell = [](const json& v) {
        char b[32];
        if (v.is_number()) snprintf(b, sizeof b, "%9.3f GB/s", v.get<double>());
        else snprintf(b, sizeof b, "%14s", "-");
        return std::string(b);
      };
      const json& t = targets[std::string("n_to_m_") + level];
      char r[48] = "-";
      if (t["ratio"].is_number())
        snprintf(r, sizeof r, "%.3f >= 0.70 %s", t["ratio"].get<double>(), t["pass"].get<bool>() ? "PASS" : "MISS");
      printf("  %-6s %14s %14s  %s\n", level, cell(out[std::string("restart_n_to_n_") + level + "_gbps"]).c_str(),
             cell(out[std::string("restart_n_to_m_") + level + "_gbps"]).c_str(), r);
    }
    for (auto& [k, v] : skipped.items()) printf("  skipped %s: %s\n", k.c_str(), v.get<std::string>().c_str());
  }
  fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"cairn-bench: the speed of every cairn level beside the machine's own limits "
               "(memcpy, ISA-L encode, write+fsync), measured in one MPI run. See docs/performance.md."};
  app.add_option("--ranks", o.ranks, "MPI ranks, each its own simulated node (node0, node1, ...)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--size", o.size_text, "bytes of state per rank; K, M, G suffixes (binary)");
  app.add_option("--reps", o.reps, "timed repetitions per figure (the median is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--prefix", o.prefix_base,
                 "directory in which a fresh work directory (holding the L3 prefix) is made and removed "
                 "at the end");
  app.add_option("--cache-dir", o.cache_dir, "base of the L1 cache (cache_dir)");
  app.add_flag("--json", o.json, "print one JSON object instead of a table");
  app.add_option("--only", o.only_text, "comma-separated subset of l1,l2,l3,restart,codec (memcpy always runs)");
  app.add_flag("-v,--verbose", o.verbose, "show the launch command and the library's info log");
  app.add_flag("--redistribute", o.redistribute,
               "restart a block-distributed version written by --ranks N ranks on --to M ranks, beside the same "
               "version restarted on N ranks, from L1, L2 and L3 (three MPI jobs)");
  app.add_flag("--snapshot", o.snapshot,
               "what a checkpoint costs the application with snapshot = copy and = cow (L1 only), beside memcpy, "
               "and a loop writing the state while the snapshot is in flight; --size may list sizes (256M,2G)");
  app.add_option("--to", o.to, "--redistribute: ranks of the N -> M restart (default N + 1)")->check(CLI::Range(1, 4096));
  app.add_option("--child-dir", o.child_dir)->group("");
  app.add_option("--child-stage", o.child_stage)->group("");
  app.add_option("--child-job", o.child_job)->group("");
  CLI11_PARSE(app, argc, argv);

  {
    std::stringstream ss(o.size_text);
    for (std::string w; std::getline(ss, w, ',');) {
      uint64_t size = 0;
      if (!parse_size(w, &size) || size < 4096) {
        fprintf(stderr, "cairn-bench: --size %s: expected a size of at least 4K, e.g. 256M\n", o.size_text.c_str());
        return 2;
      }
      o.sizes.push_back(size);
    }
    if (o.sizes.empty() || (o.sizes.size() > 1 && !o.snapshot)) {
      fprintf(stderr, "cairn-bench: --size %s: one size (a list only with --snapshot)\n", o.size_text.c_str());
      return 2;
    }
    o.size = o.sizes[0];
  }
  if (o.snapshot && (o.redistribute || !o.only_text.empty())) {
    fprintf(stderr, "cairn-bench: --snapshot goes without --redistribute and --only\n");
    return 2;
  }
  if (o.only_text.empty()) {
    o.only.insert(std::begin(kPhases), std::end(kPhases));
  } else {
    std::stringstream ss(o.only_text);
    for (std::string w; std::getline(ss, w, ',');) {
      if (w.empty()) continue;
      if (std::find_if(std::begin(kPhases), std::end(kPhases), [&](const char* p) { return w == p; }) == std::end(kPhases)) {
        fprintf(stderr, "cairn-bench: --only: unknown phase '%s' (expected l1, l2, l3, restart, codec)\n", w.c_str());
        return 2;
      }
      o.only.insert(w);
    }
  }
  if (o.redistribute) {
    if (o.to == 0) o.to = o.ranks + 1;
    if (o.to == o.ranks) {
      fprintf(stderr, "cairn-bench: --redistribute: --to must differ from --ranks (%d)\n", o.ranks);
      return 2;
    }
    if (o.size < 8 * 1024) {
      fprintf(stderr, "cairn-bench: --redistribute: --size must be at least 8K\n");
      return 2;
    }
    for (const std::string& p : o.only)
      if (p != "l1" && p != "l2" && p != "l3") {
        if (o.only_text.empty()) continue;
        fprintf(stderr, "cairn-bench: --redistribute measures l1, l2 and l3 only (--only %s)\n", p.c_str());
        return 2;
      }
  } else if (o.to != 0) {
    fprintf(stderr, "cairn-bench: --to goes with --redistribute\n");
    return 2;
  }
  if (o.ranks < 2 && !o.only_text.empty() && o.wants("l2") && !o.redistribute) {  // asked for explicitly
    fprintf(stderr, "cairn-bench: L2 needs two failure groups: use --ranks 2 or more\n");
    return 2;
  }

  const char* child = getenv("CAIRN_BENCH_CHILD");
  if (child && strcmp(child, "1") == 0) {
    if (o.child_dir.empty() || o.child_job.empty()) {
      fprintf(stderr, "cairn-bench: CAIRN_BENCH_CHILD=1 is set but the launch arguments are missing; "
                      "run cairn-bench itself, not under mpirun\n");
      return 2;
    }
    return run_child(o, argc, argv);
  }
  return run_parent(o, argc, argv);
}
