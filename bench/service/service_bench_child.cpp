// cairn-bench --service, the MPI job: the same state measured four ways, in one run (docs/performance.md,
// "Service mode"):
//   sync write    every rank writes its state to a file of its own and fsyncs, at once (what an MPI-IO
//                 checkpoint costs the application: all of it blocks); also the raw write reference
//   drain         a version through the service with 1, 2 and 4 agents: from cairn_checkpoint's return to
//                 the version committed (cairn_wait), all ranks' bytes over that time
//   blocking      cairn_checkpoint's time in a compute loop with the service and with the embedded flusher
//   slowdown      the compute loop's time per iteration without checkpoints, and while versions drain
//                 through the service (and through the embedded flusher)
// Rank 0 prints the JSON object (or a table).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "cairn/cairn.h"
#include "bench.hpp"
#include "service/service_bench.hpp"

namespace stdfs = std::filesystem;
using json = nlohmann::ordered_json;

namespace cairn::bench {
namespace {


[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "cairn-bench --service: rank %d: %s\n", g_rank, what.c_str());
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

void check(int rc, const char* call) {
  if (rc != CAIRN_SUCCESS) die(std::string(call) + ": " + cairn_strerror(rc) + ": " + cairn_last_error());
}

double slowest(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}


json r3(double x) { return std::isfinite(x) && x > 0 ? json(std::round(x * 1000.0) / 1000.0) : json(nullptr); }

double loadavg() {
  double l = -1;
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  return l;
}

json target(const std::string& what, double ratio, double min_ratio) {
  json t;
  t["what"] = what;
  t["min_ratio"] = min_ratio;
  t["ratio"] = r3(ratio);
  t["pass"] = ratio > 0 && std::isfinite(ratio) ? json(ratio >= min_ratio) : json(nullptr);
  return t;
}

class Child {
 public:
  explicit Child(const ServiceOptions& o) : o_(o), n_(o.size / sizeof(float)), state_(n_) {
    for (size_t i = 0; i < n_; ++i) state_[i] = static_cast<float>((i * 2654435761u + static_cast<size_t>(g_rank)) % 1000) * 1e-3f;
  }

  void run() {
    load_start_ = loadavg();
    memcpy_s_ = copy_alone();
    sync_write();
    iter_none_ = compute_alone();
    for (int k : {1, 2, 4}) drain(k);
    // Checkpoints far enough apart that a version drains between two (1.5 x the 1-agent drain time).
    double drain1 = drain_s_.empty() ? 0 : drain_s_[0];
    every_ = std::max(1, static_cast<int>(std::ceil(1.5 * drain1 / std::max(iter_none_, 1e-6))));
    every_ = std::min(every_, 2000);
    loop("embedded");
    loop("service");
    if (g_rank == 0) report();
  }

 private:
  void sweep() {
    const float add = static_cast<float>(g_rank + 1) * 1e-3f;
    for (size_t i = 0; i < n_; ++i) state_[i] = state_[i] * 0.9990234375f + add;
  }

  // What an MPI-IO code pays at each checkpoint: every rank writes its state and fsyncs, all at once.
  void sync_write() {
    std::string path = o_.child_dir + "/sync-write.r" + std::to_string(g_rank);
    std::vector<double> t;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) die("open " + path + ": " + strerror(errno));
      const char* p = reinterpret_cast<const char*>(state_.data());
      for (uint64_t off = 0, len = n_ * sizeof(float); off < len;) {
        ssize_t w = ::pwrite(fd, p + off, std::min<uint64_t>(64u << 20, len - off), static_cast<off_t>(off));
        if (w <= 0 && errno != EINTR) die("write " + path + ": " + strerror(errno));
        if (w > 0) off += static_cast<uint64_t>(w);
      }
      if (fsync(fd) != 0) die("fsync " + path + ": " + strerror(errno));
      close(fd);
      double s = slowest(now() - t0);
      unlink(path.c_str());
      if (i) t.push_back(s);
    }
    sync_s_ = median(t);
  }

  // The floor of any checkpoint's blocking time: one memcpy of the state (into pages already faulted in).
  double copy_alone() {
    std::vector<float> dst(n_, 0.0f);
    std::vector<double> t;
    for (int i = 0; i < 2 + o_.reps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      memcpy(dst.data(), state_.data(), n_ * sizeof(float));
      double s = slowest(now() - t0);
      if (i >= 2) t.push_back(s);
    }
    return median(t);
  }

  double compute_alone() {
    std::vector<double> t;
    for (int i = 0; i < 3 + 5 * o_.reps; ++i) {
      double t0 = now();
      sweep();
      if (i >= 3) t.push_back(now() - t0);
    }
    return slowest(median(t));
  }

  // One cairn session: its own prefix and job, L2 off (the figures are about L3), every version flushed.
  void open_session(const std::string& name, bool service, int agents) {
    std::string base = stdfs::path(o_.child_dir).filename().string();
    prefix_ = o_.child_dir + "/" + name;
    job_ = base + "-" + name;
    setenv("CAIRN_PREFIX", prefix_.c_str(), 1);
    setenv("CAIRN_CACHE_DIR", o_.cache_dir.c_str(), 1);
    setenv("CAIRN_JOB", job_.c_str(), 1);
    setenv("CAIRN_NODE", ("node" + std::to_string(g_rank)).c_str(), 1);
    setenv("CAIRN_REDUNDANCY", "single", 1);
    setenv("CAIRN_FLUSH_EVERY", "1", 1);
    setenv("CAIRN_FLUSH_ON_FINALIZE", "false", 1);
    setenv("CAIRN_SERVICE_TIMEOUT", "300", 1);
    setenv("CAIRN_SERVICE_PROVIDER", o_.provider.c_str(), 1);
    setenv("CAIRN_SERVICE_AGENTS", std::to_string(agents).c_str(), 1);
    setenv("CAIRN_LOG", g_rank == 0 ? "info" : "warn", 1);
    if (service)
      setenv("CAIRN_SERVICE", o_.child_service.c_str(), 1);
    else
      unsetenv("CAIRN_SERVICE");
    // Rank 0's log says, per version, who wrote L3: kept to count them.
    if (g_rank == 0) {
      fflush(stderr);
      saved_err_ = dup(2);
      int fd = ::open((o_.child_dir + "/rank0.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd >= 0) dup2(fd, 2), close(fd);
    }
    check(cairn_init(MPI_COMM_WORLD, nullptr), "cairn_init");
    check(cairn_protect("data", state_.data(), n_, CAIRN_FLOAT), "cairn_protect");
    for (int i = 0; i < 2; ++i) {  // the slots exist and are registered before anything is timed
      check(cairn_checkpoint(), "cairn_checkpoint");
      check(cairn_wait(), "cairn_wait");
    }
  }

  // Closes the session; the versions rank 0's log says went through the service and through the embedded flusher.
  std::pair<int, int> close_session() {
    check(cairn_finalize(), "cairn_finalize");
    std::pair<int, int> via{0, 0};
    if (g_rank == 0) {
      fflush(stderr);
      dup2(saved_err_, 2);
      close(saved_err_);
      std::ifstream in(o_.child_dir + "/rank0.log");
      for (std::string line; std::getline(in, line);) {
        if (line.find(" GB/s, service)") != std::string::npos) ++via.first;
        else if (line.find(" GB/s, embedded)") != std::string::npos) ++via.second;
        else if (line.find(" warn: ") != std::string::npos || line.find(" error: ") != std::string::npos)
          fprintf(stderr, "%s\n", line.c_str());
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ec;
    if (g_rank == 0) stdfs::remove_all(prefix_, ec);
    stdfs::remove_all(o_.cache_dir + "/cairn-" + job_, ec);
    MPI_Barrier(MPI_COMM_WORLD);
    return via;
  }

  // One version's way through k agents: from cairn_checkpoint's return to the version committed.
  void drain(int k) {
    open_session("drain" + std::to_string(k), true, k);
    std::vector<double> t;
    for (int i = 0; i < o_.reps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      check(cairn_checkpoint(), "cairn_checkpoint");
      double t0 = now();
      check(cairn_wait(), "cairn_wait");
      t.push_back(slowest(now() - t0));
    }
    auto via = close_session();
    drain_s_.push_back(median(t));
    drain_via_.push_back(via);
  }

  // The compute loop with a checkpoint every `every_` iterations: cairn_checkpoint's time, and the
  // iterations' time while the versions drain.
  void loop(const std::string& how) {
    open_session("loop-" + how, how == "service", 1);
    std::vector<double> blocked, iters;
    for (int c = 0; c < o_.reps + 1; ++c) {
      for (int i = 0; i < every_; ++i) {
        double t0 = now();
        sweep();
        iters.push_back(now() - t0);
      }
      double t0 = now();
      check(cairn_checkpoint(), "cairn_checkpoint");
      blocked.push_back(slowest(now() - t0));
    }
    check(cairn_wait(), "cairn_wait");
    double mean = 0;
    for (double x : iters) mean += x;
    mean /= static_cast<double>(std::max<size_t>(iters.size(), 1));
    auto via = close_session();
    loop_[how] = {median(blocked), slowest(mean)};
    loop_via_[how] = via;
  }

  void report() {
    const double bytes_all = static_cast<double>(o_.size) * g_nranks;
    json out;
    out["mode"] = "service";
    out["raw_write_gbps"] = r3(static_cast<double>(o_.size) / sync_s_ / 1e9);
    out["raw_write_all_gbps"] = r3(bytes_all / sync_s_ / 1e9);
    out["checkpoint_blocking_ms"] = {{"service", r3(loop_["service"].first * 1e3)},
                                     {"embedded", r3(loop_["embedded"].first * 1e3)},
                                     {"sync_write", r3(sync_s_ * 1e3)},
                                     {"memcpy", r3(memcpy_s_ * 1e3)}};
    // The best the service-blocking ratio can be here: a checkpoint costs at least a copy of the state.
    out["ratios"] = {{"sync_write_vs_memcpy", r3(sync_s_ / memcpy_s_)},
                     {"service_blocking_vs_memcpy", r3(loop_["service"].first / memcpy_s_)}};
    json drain = json::object(), via = json::object();
    const int ks[] = {1, 2, 4};
    for (size_t i = 0; i < drain_s_.size(); ++i) {
      std::string k = std::to_string(ks[i]);
      drain[k] = r3(bytes_all / drain_s_[i] / 1e9);
      via["drain_" + k] = {{"service", drain_via_[i].first}, {"embedded", drain_via_[i].second}};
    }
    out["drain_gbps"] = drain;
    out["iteration_ms"] = {{"no_checkpoints", r3(iter_none_ * 1e3)},
                           {"service", r3(loop_["service"].second * 1e3)},
                           {"embedded", r3(loop_["embedded"].second * 1e3)}};
    for (const auto& [how, v] : loop_via_) via["loop_" + how] = {{"service", v.first}, {"embedded", v.second}};
    out["versions_via"] = via;
    json t;
    t["service_blocking"] = target("sync_write_ms / service blocking_ms", sync_s_ / loop_["service"].first, 20);
    for (size_t i = 0; i < drain_s_.size(); ++i)
      t["drain_" + std::to_string(ks[i]) + "_agents"] =
          target("drain_gbps / raw_write_all_gbps", sync_s_ / drain_s_[i], 0.7);
    t["compute_slowdown"] =
        target("iteration_ms without checkpoints / with the service draining (<= 5% slower)",
               iter_none_ / loop_["service"].second, 1 / 1.05);
    out["targets"] = t;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    out["run"] = {{"host", host}, {"cores_online", sysconf(_SC_NPROCESSORS_ONLN)}, {"ranks", g_nranks},
                  {"size_bytes", o_.size}, {"reps", o_.reps}, {"checkpoint_every_iterations", every_},
                  {"provider", o_.provider}, {"loadavg_1m_start", r3(load_start_)}, {"loadavg_1m_end", r3(loadavg())},
                  {"work_dir", o_.child_dir},
                  {"statistic", "median of reps; slowest rank; GB/s = 1e9 bytes/s; drain: all ranks' bytes"}};
    if (o_.json) {
      printf("%s\n", out.dump(2).c_str());
      return;
    }
    printf("cairn-bench --service  %d ranks x %.1f MiB, %s, load %.2f -> %.2f\n", g_nranks,
           static_cast<double>(o_.size) / 1048576, o_.provider.c_str(), load_start_, loadavg());
    printf("  cairn_checkpoint blocks: service %.2f ms, embedded %.2f ms; a synchronous write + fsync: %.2f ms; "
           "memcpy of the state: %.2f ms\n",
           loop_["service"].first * 1e3, loop_["embedded"].first * 1e3, sync_s_ * 1e3, memcpy_s_ * 1e3);
    printf("  drain: %s GB/s (1 agent), %s (2), %s (4); raw write of all ranks: %s GB/s\n", drain["1"].dump().c_str(),
           drain["2"].dump().c_str(), drain["4"].dump().c_str(), out["raw_write_all_gbps"].dump().c_str());
    printf("  compute per iteration: %.3f ms alone, %.3f ms while the service drains, %.3f ms with the embedded flusher\n",
           iter_none_ * 1e3, loop_["service"].second * 1e3, loop_["embedded"].second * 1e3);
    for (auto& [name, v] : t.items())
      printf("  target %-22s %-60s ratio %s (>= %.3f): %s\n", name.c_str(), v["what"].get<std::string>().c_str(),
             v["ratio"].dump().c_str(), v["min_ratio"].get<double>(),
             v["pass"].is_null() ? "n/a" : v["pass"].get<bool>() ? "met" : "MISSED");
  }

  const ServiceOptions& o_;
  size_t n_;
  std::vector<float> state_;
  std::string prefix_, job_;
  int saved_err_ = -1, every_ = 1;
  double load_start_ = 0, sync_s_ = 0, iter_none_ = 0, memcpy_s_ = 0;
  std::vector<double> drain_s_;
  std::vector<std::pair<int, int>> drain_via_;
  std::map<std::string, std::pair<double, double>> loop_;  // how -> (blocking s, iteration s)
  std::map<std::string, std::pair<int, int>> loop_via_;
};

}  // namespace

int run_service_child(const ServiceOptions& o, int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
  {
    Child c(o);
    c.run();
  }
  MPI_Finalize();
  return 0;
}

}  // namespace cairn::bench
