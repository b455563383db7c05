// cairn-bench --migrate (migrate_bench.hpp; docs/performance.md, "Process migration"). The parent runs an
// application of its own (this executable with --migrate-app: every rank holds --size bytes of
// incompressible state, computes a little, checkpoints every 10 iterations of 10 ms and honours cairn_need_checkpoint and
// cairn_should_exit) under `cairn run` on --ranks ranks over --nodes simulated nodes, xor across them, and
// for each repetition empties node 1 three ways:
//   local    cairn migrate --node 1 --transport local: the launcher copies the snapshots between the caches
//   fabric   cairn migrate --node 1 --transport fabric: cairnd migrate-source on node 1, migrate-sink on the
//            spare, over libfabric (tcp;ofi_rxm on 127.0.0.1 here)
//   l3       cairn halt (checkpoint, flush to L3 at finalize, exit); every cache deleted and the L3 files
//            dropped from the page cache; relaunch, restart from L3
// Each from the request to the relaunched job's restart (cairn run's figures for the migrations; the same
// points measured here for the halt). Then the limits: the same bytes copied with read/write on the cache's
// file system (the local path's), streamed over a loopback TCP connection between two processes and written
// into a file of the cache's file system as they arrive (the fabric path's: the tcp provider runs on TCP;
// the bare stream beside it), and written (fsync) and read back (page cache dropped) on the prefix's file
// system (the halt's).
#include "migrate/migrate_bench.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <tuple>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "base/state_file.hpp"
#include "bench.hpp"
#include "cairn/cairn.h"
#include "service/service_bench.hpp"

namespace cairn::bench {
namespace {

namespace stdfs = std::filesystem;
using json = nlohmann::ordered_json;

// What a failure must not leave behind: the work directory, the current job's cache, its cairn run.
struct Leftovers {
  std::string work, cache;
  pid_t run = -1;
} g_left;

[[noreturn]] void fail(const std::string& what) {
  fprintf(stderr, "cairn-bench --migrate: %s\n", what.c_str());
  if (g_left.run > 0) {  // SIGTERM: cairn run passes it to the job and does not relaunch
    kill(g_left.run, SIGTERM);
    waitpid(g_left.run, nullptr, 0);
  }
  std::error_code ec;
  if (!g_left.cache.empty()) stdfs::remove_all(g_left.cache, ec);
  if (!g_left.work.empty()) stdfs::remove_all(g_left.work, ec);
  exit(1);
}

// A command's stdout (and its exit status).
std::string capture(const std::vector<std::string>& args, int* rc) {
  int pipefd[2];
  if (pipe(pipefd) != 0) fail("pipe: " + std::string(strerror(errno)));
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], STDOUT_FILENO);
    close(pipefd[0]);
    close(pipefd[1]);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(pipefd[0]);
  *rc = wait_exit(pid);
  return out;
}

state_file::State read_state(const std::string& prefix) {
  return state_file::decode_state(slurp(prefix + "/.cairn/state"));
}

// Until `pred` holds of the job's state file; fails when the job ends first or after `timeout` s.
void wait_state(const std::string& prefix, pid_t run, const std::string& log, double timeout,
                const std::function<bool(const state_file::State&)>& pred, const char* what) {
  const double until = now() + timeout;
  while (now() < until) {
    if (pred(read_state(prefix))) return;
    int status = 0;
    if (waitpid(run, &status, WNOHANG) == run) {
      g_left.run = -1;
      fail(std::string("the job ended before ") + what + ":\n" + slurp(log));
    }
    usleep(10000);
  }
  fail(std::string("the job did not reach ") + what + " in time:\n" + slurp(log));
}

bool protected_v2(const state_file::State& s) { return s.l2 >= 2; }

struct Bench {
  explicit Bench(const MigrateBenchOptions& opts) : o(opts) {}
  const MigrateBenchOptions& o;
  std::string self, cairn, work;
  int runs = 0;

  std::vector<std::string> run_command(bool spares) const {
    std::vector<std::string> cmd{cairn, "run", "-n", std::to_string(o.ranks), "--nodes", std::to_string(o.nodes)};
    if (spares) cmd.insert(cmd.end(), {"--spares", "1"});
    cmd.insert(cmd.end(), {"--no-scavenge", "--", self, "--migrate-app", "--size", std::to_string(o.size)});
    return cmd;
  }

  // A fresh prefix and job name for the next run.
  std::string next(const std::string& what) {
    std::string prefix = work + "/" + what + "-" + std::to_string(++runs);
    setenv("CAIRN_PREFIX", prefix.c_str(), 1);
    setenv("CAIRN_JOB", ("cbm-" + std::to_string(getpid()) + "-" + std::to_string(runs)).c_str(), 1);
    g_left.cache = cache_job();
    return prefix;
  }
  pid_t start_run(bool spares, const std::string& log) {
    return g_left.run = spawn(run_command(spares), log);
  }
  std::string cache_job() const { return o.cache_dir + "/cairn-" + getenv("CAIRN_JOB"); }

  void halt_and_wait(const std::string& prefix, pid_t run, bool immediate) {
    int rc = 0;
    std::vector<std::string> cmd{cairn, "halt", prefix};
    if (immediate) cmd.push_back("--immediate");
    capture(cmd, &rc);
    if (rc != 0) fail("cairn halt exited " + std::to_string(rc));
    wait_exit(run);
    g_left.run = -1;
  }

  // One migration: from the request to the restart, as cairn migrate reports it.
  json migrate(const std::string& transport) {
    const std::string prefix = next(transport);
    unsetenv("CAIRN_FLUSH_ON_FINALIZE");
    const std::string log = prefix + ".log";
    stdfs::create_directories(prefix);
    pid_t run = start_run(true, log);
    wait_state(prefix, run, log, 300, protected_v2, "version 2");
    int rc = 0;
    std::string out = capture({cairn, "migrate", "--node", "1", "--transport", transport, "--buffers",
                               std::to_string(o.buffers), "--buffer-size", std::to_string(o.buffer_size), "--json",
                               prefix},
                              &rc);
    halt_and_wait(prefix, run, true);
    json r = json::parse(out, nullptr, false);
    if (rc != 0 || !r.is_object() || r.value("status", "") != "done" || r.value("restart_level", "") != "L1")
      fail("the " + transport + " migration did not complete (exit " + std::to_string(rc) + "): " + out + "\n" +
           slurp(log));
    if (o.verbose) fprintf(stderr, "%s\n", out.c_str());
    std::error_code ec;
    stdfs::remove_all(cache_job(), ec);
    return r;
  }

  // A halt with the flush to L3, every cache deleted and L3 out of the page cache, a relaunch from L3.
  json halt_restart() {
    const std::string prefix = next("l3");
    setenv("CAIRN_FLUSH_ON_FINALIZE", "true", 1);
    const std::string log = prefix + ".log";
    stdfs::create_directories(prefix);
    pid_t run = start_run(false, log);
    wait_state(prefix, run, log, 300, protected_v2, "version 2");
    const double t0 = now();
    halt_and_wait(prefix, run, false);
    const double t1 = now();
    int rc = 0;
    capture({cairn, "halt", prefix, "--unset"}, &rc);
    std::error_code ec;
    stdfs::remove_all(cache_job(), ec);
    evict(prefix);
    const double t2 = now();
    run = start_run(false, log);
    wait_state(prefix, run, log, 300, [](const state_file::State& s) { return s.restart_level != "none"; },
               "its restart");
    const double t3 = now();
    const std::string level = read_state(prefix).restart_level;
    halt_and_wait(prefix, run, true);
    stdfs::remove_all(cache_job(), ec);
    if (level != "L3") fail("the relaunch restarted from " + level + ", not from L3:\n" + slurp(log));
    json r;
    r["halt_flush_exit_seconds"] = t1 - t0;
    r["restart_seconds"] = t3 - t2;
    r["total_seconds"] = t3 - t2 + t1 - t0;
    return r;
  }
};

// ---- the limits -------------------------------------------------------------------------------------------

std::vector<uint8_t> random_bytes(uint64_t n) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(42);
  for (uint64_t i = 0; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    memcpy(&v[i], &x, 8);
  }
  return v;
}

// The bare pipeline both migration paths are: one thread fills buffers (`fill`: the next piece's bytes at
// `off`, returning how many, 0 at the end), another writes them to `out` (pwrite), 8 buffers of `piece`
// bytes between them; fdatasync at the end. Seconds from the first fill to the sync.
double pipelined_write(int out, uint64_t piece, const std::function<size_t(uint8_t*, uint64_t)>& fill) {
  constexpr int kBuffers = 8;
  std::vector<std::vector<uint8_t>> bufs(kBuffers, std::vector<uint8_t>(piece));
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> free_bufs{0, 1, 2, 3, 4, 5, 6, 7};
  std::deque<std::tuple<int, uint64_t, size_t>> full;  // buffer, offset, length; length 0: the end
  const double t0 = now();
  std::thread writer([&] {
    for (;;) {
      std::tuple<int, uint64_t, size_t> item;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !full.empty(); });
        item = full.front();
        full.pop_front();
      }
      auto [b, off, len] = item;
      if (len == 0) return;
      if (pwrite(out, bufs[static_cast<size_t>(b)].data(), len, static_cast<off_t>(off)) != static_cast<ssize_t>(len))
        fail("write: " + std::string(strerror(errno)));
      std::lock_guard<std::mutex> lock(mu);
      free_bufs.push_back(b);
      cv.notify_all();
    }
  });
  for (uint64_t off = 0;;) {
    int b = 0;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !free_bufs.empty(); });
      b = free_bufs.front();
      free_bufs.pop_front();
    }
    size_t n = fill(bufs[static_cast<size_t>(b)].data(), off);
    std::lock_guard<std::mutex> lock(mu);
    full.emplace_back(b, off, n);
    cv.notify_all();
    if (n == 0) break;
    off += n;
  }
  writer.join();
  fdatasync(out);
  return now() - t0;
}

// `bytes` copied from one file to a new one in `dir`, read and written by two threads in `piece` steps.
double copy_gbps(const std::string& dir, uint64_t bytes, uint64_t piece) {
  const std::string a = dir + "/cairn-bench-copy-src." + std::to_string(getpid());
  const std::string b = dir + "/cairn-bench-copy-dst." + std::to_string(getpid());
  auto data = random_bytes(piece);
  int fa = open(a.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fa < 0) fail("open " + a + ": " + strerror(errno));
  for (uint64_t off = 0; off < bytes; off += piece)
    if (pwrite(fa, data.data(), std::min(piece, bytes - off), static_cast<off_t>(off)) < 0) fail("write " + a);
  int fb = open(b.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fb < 0) fail("open " + b + ": " + strerror(errno));
  if (ftruncate(fb, static_cast<off_t>(bytes)) != 0) fail("ftruncate " + b);
  const double secs = pipelined_write(fb, piece, [&](uint8_t* buf, uint64_t off) -> size_t {
    size_t n = static_cast<size_t>(std::min(piece, bytes - off));
    if (n > 0 && pread(fa, buf, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) fail("read " + a);
    return n;
  });
  close(fa), close(fb);
  unlink(a.c_str()), unlink(b.c_str());
  return static_cast<double>(bytes) / secs / 1e9;
}

// `bytes` sent over a TCP connection on 127.0.0.1 from a child process to this one, in 1 MiB writes; with
// `dir`, what arrives is written into a new file there by a second thread (pwrite, fdatasync at the end), as
// a migration's writer does.
double tcp_loopback_gbps(uint64_t bytes, const std::string& dir = "") {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    fail("a loopback socket: " + std::string(strerror(errno)));
  const uint64_t piece = 1 << 20;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    auto data = random_bytes(piece);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(1);
    for (uint64_t off = 0; off < bytes;) {
      ssize_t n = write(s, data.data(), static_cast<size_t>(std::min(piece, bytes - off)));
      if (n <= 0) _exit(1);
      off += static_cast<uint64_t>(n);
    }
    close(s);
    _exit(0);
  }
  int c = accept(l, nullptr, nullptr);
  uint64_t got = 0;
  auto receive = [&](uint8_t* buf, uint64_t) -> size_t {  // a whole piece, or what is left
    size_t have = 0;
    for (ssize_t n; have < piece && (n = read(c, buf + have, piece - have)) > 0;) have += static_cast<size_t>(n);
    got += have;
    return have;
  };
  double secs = 0;
  if (dir.empty()) {
    std::vector<uint8_t> buf(piece);
    const double t0 = now();
    while (receive(buf.data(), 0) > 0) {
    }
    secs = now() - t0;
  } else {
    const std::string f = dir + "/cairn-bench-stream." + std::to_string(getpid());
    int out = open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0) fail("open " + f + ": " + strerror(errno));
    secs = pipelined_write(out, piece, receive);
    close(out);
    unlink(f.c_str());
  }
  close(c), close(l);
  wait_exit(pid);
  if (got != bytes) fail("the loopback stream carried " + std::to_string(got) + " of " + std::to_string(bytes) + " bytes");
  return static_cast<double>(bytes) / secs / 1e9;
}

// `bytes` written in 64 MiB pieces and fsync'ed in `dir`, then read back with the page cache dropped.
std::pair<double, double> file_gbps(const std::string& dir, uint64_t bytes) {
  const uint64_t piece = 64ull << 20;
  const std::string f = dir + "/cairn-bench-raw." + std::to_string(getpid());
  auto data = random_bytes(std::min(piece, bytes));
  int fd = open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) fail("open " + f + ": " + strerror(errno));
  double t0 = now();
  for (uint64_t off = 0; off < bytes; off += piece)
    if (write(fd, data.data(), static_cast<size_t>(std::min(piece, bytes - off))) < 0) fail("write " + f);
  fsync(fd);
  const double write_s = now() - t0;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  std::vector<uint8_t> buf(data.size());
  t0 = now();
  for (uint64_t off = 0; off < bytes; off += piece)
    if (pread(fd, buf.data(), static_cast<size_t>(std::min(piece, bytes - off)), static_cast<off_t>(off)) < 0)
      fail("read " + f);
  const double read_s = now() - t0;
  close(fd);
  unlink(f.c_str());
  return {static_cast<double>(bytes) / write_s / 1e9, static_cast<double>(bytes) / read_s / 1e9};
}

json summary(const std::vector<json>& runs, const std::vector<std::string>& keys) {
  json s;
  for (const auto& k : keys) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.value(k, 0.0));
    s[k] = round3(median(v));
  }
  return s;
}

}  // namespace

int run_migrate_bench(const MigrateBenchOptions& o) {
  if (o.nodes < 2 || o.ranks < o.nodes) fail("--nodes must be at least 2 and at most --ranks");
  Bench b(o);
  std::error_code ec;
  b.self = stdfs::read_symlink("/proc/self/exe", ec).string();
  b.cairn = find_program(o.cairn, "cairn", "tools/cairn");
  std::string tmpl = stdfs::absolute(o.prefix_base, ec).string() + "/cairn-bench-migrate.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) fail("cannot create a work directory under " + o.prefix_base + ": " + strerror(errno));
  b.work = g_left.work = buf.data();
  const double load_start = loadavg_1m();
  setenv("CAIRN_CACHE_DIR", o.cache_dir.c_str(), 1);
  setenv("CAIRN_REDUNDANCY", "xor", 1);
  setenv("CAIRN_SET_SIZE", std::to_string(o.nodes).c_str(), 1);
  setenv("CAIRN_FLUSH_EVERY", "0", 1);
  setenv("CAIRN_LOG", o.verbose ? "info" : "warn", 1);
  unsetenv("CAIRN_SERVICE");
  unsetenv("CAIRN_MIGRATE_EXEC");
  if (!getenv("CAIRN_MPIRUN_ARGS")) setenv("CAIRN_MPIRUN_ARGS", "--oversubscribe", 1);

  std::vector<json> local, fabric, l3;
  for (int rep = 0; rep < o.reps; ++rep) {  // the three paths alternate, so a change of load touches all
    local.push_back(b.migrate("local"));
    fabric.push_back(b.migrate("fabric"));
    l3.push_back(b.halt_restart());
  }
  const uint64_t moved = fabric.front().value("bytes", uint64_t{0});
  const uint64_t state = static_cast<uint64_t>(o.ranks) * o.size;
  // The limits, for the same bytes.
  std::vector<double> copy, tcp, stream, wr, rd;
  for (int rep = 0; rep < o.reps; ++rep) {
    copy.push_back(copy_gbps(o.cache_dir, moved, o.buffer_size));
    tcp.push_back(tcp_loopback_gbps(moved));
    stream.push_back(tcp_loopback_gbps(moved, o.cache_dir));
    auto [w, r] = file_gbps(b.work, state);
    wr.push_back(w), rd.push_back(r);
  }
  stdfs::remove_all(b.work, ec);

  const std::vector<std::string> mkeys{"wind_down_seconds", "transfer_seconds", "move_seconds", "restart_seconds",
                                       "total_seconds"};
  json doc;
  doc["mode"] = "migrate";
  doc["run"] = machine_info(load_start, o.ranks);
  doc["run"]["nodes"] = o.nodes;
  doc["run"]["size_per_rank"] = o.size;
  doc["run"]["reps"] = o.reps;
  doc["run"]["buffers"] = o.buffers;
  doc["run"]["buffer_size"] = o.buffer_size;
  doc["run"]["cache_fs"] = fs_type_name(o.cache_dir);
  doc["run"]["prefix_fs"] = fs_type_name(o.prefix_base);
  doc["bytes_moved"] = moved;
  doc["state_bytes"] = state;
  auto path = [&](const std::vector<json>& runs, double limit_gbps, const char* limit_name) {
    json p = summary(runs, mkeys);
    std::vector<double> g;
    for (const auto& r : runs) g.push_back(r.value("bytes", 0.0) / std::max(r.value("move_seconds", 0.0), 1e-9) / 1e9);
    p["move_gbps"] = round3(median(g));
    p[limit_name] = round3(limit_gbps);
    p["of_limit"] = round3(median(g) / limit_gbps);
    p["runs"] = runs;
    return p;
  };
  doc["local"] = path(local, median(copy), "copy_gbps");
  doc["fabric"] = path(fabric, median(stream), "tcp_to_cache_gbps");
  doc["fabric"]["tcp_loopback_gbps"] = round3(median(tcp));
  doc["l3"] = summary(l3, {"halt_flush_exit_seconds", "restart_seconds", "total_seconds"});
  doc["l3"]["raw_write_gbps"] = round3(median(wr));
  doc["l3"]["raw_read_gbps"] = round3(median(rd));
  doc["l3"]["runs"] = l3;
  const double l3_total = doc["l3"]["total_seconds"].get<double>();
  doc["speedup_vs_l3"] = {{"local", round3(l3_total / doc["local"]["total_seconds"].get<double>())},
                          {"fabric", round3(l3_total / doc["fabric"]["total_seconds"].get<double>())}};
  doc["run"]["loadavg_1m_end"] = round3(loadavg_1m());

  if (o.json) {
    printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  printf("cairn-bench --migrate: %d ranks on %d nodes, %s per rank, xor; node 1 emptied (%.1f MiB moved); median of %d\n",
         o.ranks, o.nodes, std::to_string(o.size >> 20).append(" MiB").c_str(), static_cast<double>(moved) / 1048576.0,
         o.reps);
  printf("%-28s %10s %10s %10s %10s %10s %12s\n", "", "wind-down", "transfer", "(moving)", "restart", "total", "move GB/s");
  for (const char* p : {"local", "fabric"}) {
    const json& j = doc[p];
    printf("%-28s %9.3fs %9.3fs %9.3fs %9.3fs %9.3fs %12.2f\n",
           std::string(p) == "local" ? "migrate, between caches" : "migrate, over the fabric",
           j["wind_down_seconds"].get<double>(), j["transfer_seconds"].get<double>(), j["move_seconds"].get<double>(),
           j["restart_seconds"].get<double>(), j["total_seconds"].get<double>(), j["move_gbps"].get<double>());
  }
  printf("%-28s %9.3fs %10s %10s %9.3fs %9.3fs\n", "halt + restart from L3", doc["l3"]["halt_flush_exit_seconds"].get<double>(),
         "-", "-", doc["l3"]["restart_seconds"].get<double>(), l3_total);
  printf("limits: a copy on %s %.2f GB/s; TCP over the loopback %.2f GB/s, into a %s file %.2f GB/s; %s write %.2f / "
         "read %.2f GB/s\n",
         doc["run"]["cache_fs"].get<std::string>().c_str(), median(copy), median(tcp),
         doc["run"]["cache_fs"].get<std::string>().c_str(), median(stream),
         doc["run"]["prefix_fs"].get<std::string>().c_str(), median(wr), median(rd));
  printf("load average %.2f at the start, %.2f at the end\n", load_start, loadavg_1m());
  return 0;
}

// ---- the application ----------------------------------------------------------------------------------

int run_migrate_app(int argc, char** argv, uint64_t size) {
  int provided = 0, rank = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto check = [&](int rc, const char* call) {
    if (rc == CAIRN_SUCCESS) return;
    fprintf(stderr, "cairn-bench --migrate-app: rank %d: %s: %s: %s\n", rank, call, cairn_strerror(rc), cairn_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  };
  const size_t words = static_cast<size_t>(size / 8);
  std::vector<uint64_t> state(words);
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  for (auto& w : state) w = splitmix64(&x);  // incompressible, different per rank
  int64_t iter = 0;
  check(cairn_init(MPI_COMM_WORLD, nullptr), "cairn_init");
  check(cairn_protect("state", state.data(), words, CAIRN_UINT64), "cairn_protect");
  check(cairn_protect("iter", &iter, 1, CAIRN_INT64), "cairn_protect");
  int available = 0, version = 0;
  check(cairn_restart_available(&available, &version), "cairn_restart_available");
  if (available) check(cairn_restart(), "cairn_restart");
  for (;;) {
    for (size_t i = 0; i < words; i += 512) state[i] += static_cast<uint64_t>(iter);  // a word per 4 KiB page
    ++iter;
    usleep(10000);
    int need = 0, stop = 0;
    check(cairn_need_checkpoint(&need), "cairn_need_checkpoint");  // the same answer on every rank
    if (need || iter % 10 == 0) check(cairn_checkpoint(), "cairn_checkpoint");
    check(cairn_should_exit(&stop), "cairn_should_exit");
    if (stop) break;
  }
  check(cairn_finalize(), "cairn_finalize");
  MPI_Finalize();
  return 0;
}

}  // namespace cairn::bench
