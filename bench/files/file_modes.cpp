// cairn-bench --scr / --file-api / --interpose (file_modes.hpp). Two MPI jobs, each rank its own simulated node:
//  1. "direct": the same bytes per rank written (a) by the code itself to a node-local file, (b) to the
//     file system with fsync, (c) through the memory API (cairn_checkpoint's blocking copy), (d) with
//     --file-api through cairn's file API (the code's write to the routed path and cairn_complete_output
//     timed apart) and (e) with --scr through SCR's API (SCR_Start_output .. SCR_Complete_output, the
//     code's own write included);
//  2. "interpose" (only with --interpose): the code's own open/write/close of a checkpoint file with
//     libcairn_interpose.so preloaded, which routes it into cairn.
// Every figure is the median over --reps of the slowest rank's time; background work (L2) is waited for
// between repetitions, outside the timed part. The parent prints the figures and the ratios
// beside their limits.
#include "files/file_modes.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "cairn/cairn.h"
#include "scr.h"

namespace cairn::bench {
namespace {


namespace stdfs = std::filesystem;
using json = nlohmann::ordered_json;


// ---- the parent ---------------------------------------------------------------------------------

int launch(const FileModeOptions& o, const std::vector<std::string>& env, const std::vector<std::string>& extra,
           int argc, char** argv) {
  std::error_code ec;
  std::string exe = stdfs::read_symlink("/proc/self/exe", ec).string();
  const char* mpirun = getenv("CAIRN_MPIRUN");
  std::vector<std::string> cmd{mpirun && *mpirun ? mpirun : "mpirun"};
  std::istringstream words(getenv("CAIRN_MPIRUN_ARGS") ? getenv("CAIRN_MPIRUN_ARGS") : "");
  for (std::string w; words >> w;) cmd.push_back(w);
  for (int r = 0; r < o.ranks; ++r) {
    if (r) cmd.push_back(":");
    for (const char* w : {"-np", "1", "env", "CAIRN_BENCH_CHILD=1"}) cmd.push_back(w);
    cmd.push_back("CAIRN_NODE=node" + std::to_string(r));
    cmd.insert(cmd.end(), env.begin(), env.end());
    cmd.push_back(exe);
    for (int i = 1; i < argc; ++i) cmd.push_back(argv[i]);
    cmd.insert(cmd.end(), extra.begin(), extra.end());
  }
  if (o.verbose) {
    std::string line;
    for (auto& w : cmd) line += " " + w;
    fprintf(stderr, "cairn-bench:%s\n", line.c_str());
  }
  std::vector<char*> cargv;
  for (auto& w : cmd) cargv.push_back(w.data());
  cargv.push_back(nullptr);
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::string find_interpose_lib(const FileModeOptions& o) {
  std::vector<std::string> candidates;
  if (!o.interpose_lib.empty()) candidates.push_back(o.interpose_lib);
  if (const char* e = getenv("CAIRN_INTERPOSE_LIB")) candidates.push_back(e);
  std::error_code ec;
  stdfs::path exe = stdfs::read_symlink("/proc/self/exe", ec);
  for (const char* lib : {"lib", "lib64", "lib/x86_64-linux-gnu"})
    candidates.push_back((exe.parent_path().parent_path() / lib / "libcairn_interpose.so").string());
  candidates.push_back((exe.parent_path().parent_path() / "bindings/interpose/libcairn_interpose.so").string());
  for (const auto& c : candidates)
    if (access(c.c_str(), R_OK) == 0) return stdfs::absolute(c).string();
  return "";
}

json target(const char* name, double value, const char* relation, double limit, const char* what) {
  bool met = value > 0 && (strcmp(relation, "<=") == 0 ? value <= limit : value >= limit);
  return json{{"name", name}, {"value", round3(value)}, {"limit", std::string(relation) + " " + std::to_string(limit).substr(0, 4)},
              {"met", met}, {"what", what}};
}

int report(const FileModeOptions& o, const std::string& dir, double load_start) {
  json direct, ipt;
  try {
    std::ifstream(dir + "/direct.json") >> direct;
    if (o.interpose) std::ifstream(dir + "/interpose.json") >> ipt;
  } catch (const std::exception& e) {
    fprintf(stderr, "cairn-bench: the measuring job left no readable figures: %s\n", e.what());
    return 1;
  }
  json out;
  out["mode"] = "files";
  out["ranks"] = o.ranks;
  out["size_per_rank_bytes"] = o.size;
  out["reps"] = o.reps;
  out["loadavg_1m_start"] = round3(load_start);
  out["loadavg_1m_end"] = round3(loadavg_1m());
  out["file_system"] = {{"prefix", fs_type_name(o.prefix_base)}, {"cache_dir", fs_type_name(o.cache_dir)}};
  out["figures"] = direct["figures"];
  if (o.interpose) out["figures"].update(ipt["figures"]);
  const json f = out["figures"];  // a copy: adding keys to an ordered_json moves its elements
  auto get = [&](const char* k) { return f.contains(k) && f[k].is_number() ? f[k].get<double>() : 0.0; };
  json targets = json::array();
  if (o.scr) {
    targets.push_back(target("scr_vs_local_write", get("scr_s") / get("local_write_s"), "<=", 1.3,
                             "SCR_Start_output..SCR_Complete_output over the code's own node-local write"));
    targets.push_back(target("pfs_fsync_vs_scr", get("pfs_write_fsync_s") / get("scr_s"), ">=", 5,
                             "the write to the file system with fsync over SCR's checkpoint"));
  }
  if (o.file_api)
    targets.push_back(target("file_api_complete_vs_write", get("file_api_complete_s") / get("file_api_write_s"), "<=",
                             0.2, "cairn_complete_output over the code's own write of the same bytes to the routed path"));
  if (o.interpose) {
    targets.push_back(target("interpose_vs_memory_api", get("interpose_s") / get("memory_api_s"), "<=", 1.5,
                             "open..close through the interposer over cairn_checkpoint's blocking copy"));
    targets.push_back(target("pfs_fsync_vs_interpose", get("pfs_write_fsync_s") / get("interpose_s"), ">=", 10,
                             "the write to the file system with fsync over the interposed write"));
  }
  out["targets"] = targets;
  out["notes"] = direct["notes"];
  if (o.interpose)
    for (const auto& n : ipt["notes"]) out["notes"].push_back(n);
  if (o.json) {
    printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  printf("cairn-bench files: %d ranks, %.1f MiB per rank, median of %d; load %.2f -> %.2f; prefix on %s, cache on %s\n",
         o.ranks, static_cast<double>(o.size) / 1048576.0, o.reps, load_start, loadavg_1m(),
         fs_type_name(o.prefix_base), fs_type_name(o.cache_dir));
  for (auto it = f.begin(); it != f.end(); ++it) {
    if (!it.value().is_number()) continue;
    double s = it.value().get<double>();
    printf("  %-28s %10.4f s  %8.2f GB/s\n", it.key().c_str(), s, s > 0 ? static_cast<double>(o.size) / s / 1e9 : 0.0);
  }
  for (auto& t : targets)
    printf("  %-28s %8.3f  (limit %s)  %s\n", t["name"].get<std::string>().c_str(), t["value"].get<double>(),
           t["limit"].get<std::string>().c_str(), t["met"].get<bool>() ? "met" : "NOT MET");
  for (auto& n : out["notes"]) printf("  note: %s\n", n.get<std::string>().c_str());
  return 0;
}

int run_parent(const FileModeOptions& o, int argc, char** argv) {
  std::error_code ec;
  std::string tmpl = stdfs::absolute(o.prefix_base, ec).string() + "/cairn-bench-files.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    fprintf(stderr, "cairn-bench: cannot create a work directory under %s: %s\n", o.prefix_base.c_str(), strerror(errno));
    return 1;
  }
  std::string dir = buf.data(), job = "bench-files-" + std::to_string(getpid());
  std::string lib = o.interpose ? find_interpose_lib(o) : "";
  if (o.interpose && lib.empty()) {
    fprintf(stderr, "cairn-bench: --interpose: libcairn_interpose.so not found (give --interpose-lib)\n");
    stdfs::remove_all(dir, ec);
    return 2;
  }
  double load_start = loadavg_1m();
  std::vector<std::string> extra{"--child-dir", dir, "--child-job", job};
  int rc = launch(o, {}, [&] { auto e = extra; e.insert(e.end(), {"--child-stage", "direct"}); return e; }(), argc, argv);
  if (rc == 0 && o.interpose) {
    std::vector<std::string> env{"LD_PRELOAD=" + lib, "CAIRN_INTERPOSE_PATTERN=" + dir + "/ipt/ckpt/step%d.rank%r.bin",
                                 "CAIRN_PREFIX=" + dir + "/prefix-ipt", "CAIRN_CACHE_DIR=" + o.cache_dir,
                                 "CAIRN_JOB=" + job + "-ipt", "CAIRN_FLUSH_EVERY=0", "CAIRN_FLUSH_ON_FINALIZE=false"};
    auto e = extra;
    e.insert(e.end(), {"--child-stage", "interpose"});
    rc = launch(o, env, e, argc, argv);
  }
  if (rc == 0) rc = report(o, dir, load_start);
  stdfs::remove_all(dir, ec);
  for (const char* s : {"", "-mem", "-fapi", "-scr", "-ipt"}) stdfs::remove_all(o.cache_dir + "/cairn-" + job + s, ec);
  return rc;
}

// ---- the child ----------------------------------------------------------------------------------

int g_rank = 0;

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "cairn-bench: rank %d: %s\n", g_rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

double slowest(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

void write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = write(fd, p, std::min<uint64_t>(n, 1u << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write " + path + ": " + strerror(errno));
    p += w;
    n -= static_cast<uint64_t>(w);
  }
}

// One checkpoint file written the way a code does it; fsync when asked.
void write_file(const std::string& path, const uint8_t* data, uint64_t size, bool sync) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("open " + path + ": " + strerror(errno));
  write_all(fd, data, size, path);
  if (sync && fsync(fd) != 0) die("fsync " + path + ": " + strerror(errno));
  if (close(fd) != 0) die("close " + path + ": " + strerror(errno));
}

// `reps` timed runs of `once(i)` after `warm` untimed ones, `between()` after each; the slowest rank's
// time of each, and its median.
// `before(i)`, if given, runs untimed before each.
template <class Once, class Between, class Before = void (*)(int)>
double timed(int warm, int reps, Once once, Between between, std::vector<double>* all = nullptr,
             Before before = [](int) {}) {
  std::vector<double> t;
  for (int i = 0; i < warm + reps; ++i) {
    before(i);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    once(i);
    double s = slowest(now() - t0);
    if (i >= warm) t.push_back(s);
    if (all) all->push_back(s);
    between(i);
  }
  return median(t);
}

void check_cairn(int rc, const char* call) {
  if (rc != CAIRN_SUCCESS) die(std::string(call) + ": " + cairn_strerror(rc) + ": " + cairn_last_error());
}

// The newest version complete at L2 (or L1), from the job's state file (rank 0; -1 if unreadable).
long newest_protected(const std::string& prefix, bool l2) {
  std::ifstream in(prefix + "/.cairn/state");
  long v = -1;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(l2 ? "l2=" : "l1=", 0) == 0) v = atol(line.c_str() + 3);
  return v;
}

int run_child(const FileModeOptions& o, int argc, char** argv) {
  int provided = 0, nranks = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const std::string dir = o.child_dir, job = o.child_job, stage = o.child_stage, r = std::to_string(g_rank);
  uint64_t rounded = (o.size + 4095) / 4096 * 4096;
  auto* data = static_cast<uint8_t*>(aligned_alloc(4096, rounded));
  if (!data) die("out of memory");
  for (uint64_t i = 0, x = 0x9E3779B97F4A7C15ull * (g_rank + 1); i < rounded / 8; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    reinterpret_cast<uint64_t*>(data)[i] = x;
  }
  json figures, notes = json::array();
  const int warm = 2;
  auto nothing = [](int) {};

  if (stage == "direct") {
    std::string local = o.cache_dir + "/cairn-" + job + "/node" + r;
    std::error_code ec;
    stdfs::create_directories(local, ec);
    stdfs::create_directories(dir + "/pfs", ec);
    figures["local_write_s"] = timed(warm, o.reps, [&](int i) {
      write_file(local + "/ckpt." + std::to_string(i % 2), data, o.size, false);
    }, nothing);
    figures["pfs_write_fsync_s"] = timed(1, o.reps, [&](int i) {
      write_file(dir + "/pfs/ckpt." + std::to_string(i % 2) + ".r" + r, data, o.size, true);
    }, nothing);
    stdfs::remove_all(local, ec);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) stdfs::remove_all(dir + "/pfs", ec);

    // The memory API: cairn_checkpoint's blocking copy; background work waited for outside the timing.
    setenv("CAIRN_PREFIX", (dir + "/prefix-mem").c_str(), 1);
    setenv("CAIRN_CACHE_DIR", o.cache_dir.c_str(), 1);
    setenv("CAIRN_JOB", (job + "-mem").c_str(), 1);
    setenv("CAIRN_FLUSH_EVERY", "0", 1);
    setenv("CAIRN_FLUSH_ON_FINALIZE", "false", 1);
    check_cairn(cairn_init(MPI_COMM_WORLD, nullptr), "cairn_init");
    check_cairn(cairn_protect("state", data, o.size, CAIRN_BYTE), "cairn_protect");
    figures["memory_api_s"] = timed(warm, o.reps, [&](int) { check_cairn(cairn_checkpoint(), "cairn_checkpoint"); },
                                    [&](int) { check_cairn(cairn_wait(), "cairn_wait"); });
    check_cairn(cairn_finalize(), "cairn_finalize");

    // cairn's own file API, its two parts timed apart: the code's write into the routed path (after
    // cairn_start_output and cairn_route_file), and cairn_complete_output, all that cairn adds to it.
    if (o.file_api) {
      setenv("CAIRN_JOB", (job + "-fapi").c_str(), 1);
      setenv("CAIRN_PREFIX", (dir + "/prefix-fapi").c_str(), 1);
      check_cairn(cairn_init(MPI_COMM_WORLD, nullptr), "cairn_init");
      std::vector<double> writes;
      figures["file_api_complete_s"] = timed(warm, o.reps, [&](int i) {
        // timed: cairn_complete_output only; the rest of the round is untimed but recorded
        (void)i;
        check_cairn(cairn_complete_output(1), "cairn_complete_output");
      }, [&](int) { check_cairn(cairn_wait(), "cairn_wait"); }, nullptr, [&](int i) {
        check_cairn(cairn_start_output(("ckpt." + std::to_string(i)).c_str(), 0),
                    "cairn_start_output");
        char file[4096];
        check_cairn(cairn_route_file(("rank_" + r + ".bin").c_str(), file, sizeof file), "cairn_route_file");
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        write_file(file, data, o.size, false);
        double s = slowest(now() - t0);
        if (i >= warm) writes.push_back(s);
      });
      figures["file_api_write_s"] = median(writes);
      check_cairn(cairn_finalize(), "cairn_finalize");
    }

    // SCR's API, as an SCR code checkpoints: the code's own write to the routed file included.
    if (o.scr) {
      setenv("CAIRN_JOB", (job + "-scr").c_str(), 1);
      setenv("CAIRN_PREFIX", (dir + "/prefix-scr").c_str(), 1);
      if (SCR_Init() != SCR_SUCCESS) die("SCR_Init failed");
      figures["scr_s"] = timed(warm, o.reps, [&](int i) {
        char file[SCR_MAX_FILENAME];
        if (SCR_Start_output(("ckpt." + std::to_string(i)).c_str(), SCR_FLAG_CHECKPOINT) != SCR_SUCCESS ||
            SCR_Route_file(("ckpt/rank_" + r + ".bin").c_str(), file) != SCR_SUCCESS)
          die("SCR_Start_output/SCR_Route_file failed");
        write_file(file, data, o.size, false);
        if (SCR_Complete_output(1) != SCR_SUCCESS) die("SCR_Complete_output failed");
      }, [&](int) { check_cairn(cairn_wait(), "cairn_wait"); });
      if (SCR_Finalize() != SCR_SUCCESS) die("SCR_Finalize failed");
    }
  } else if (stage == "interpose") {
    // The code's own open/write/close of a matching file; the interposer's agent takes each step as a
    // version in the background, waited for (the state file's L2 mark) outside the timing.
    std::string ckpt = dir + "/ipt/ckpt", prefix = getenv("CAIRN_PREFIX") ? getenv("CAIRN_PREFIX") : "";
    std::error_code ec;
    if (g_rank == 0) stdfs::create_directories(ckpt, ec);
    MPI_Barrier(MPI_COMM_WORLD);
    auto path = [&](int i) { return ckpt + "/step" + std::to_string(i + 1) + ".rank" + r + ".bin"; };
    std::vector<double> all;
    notes.push_back("interpose: between checkpoints the code computes for 3x the checkpoint's time (at least 0.2 s), in "
                    "which the interposer prepares the space of the file's next generation");
    figures["interpose_s"] = timed(warm, o.reps, [&](int i) { write_file(path(i), data, o.size, false); }, [&](int i) {
      long want = i + 1, got = -1;
      for (int k = 0; k < 60000 && got < want; ++k) {
        if (g_rank == 0) got = newest_protected(prefix, nranks > 1);
        MPI_Bcast(&got, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (got < want) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (got < want) die("the interposer took no version of step " + std::to_string(i + 1));
      if (i >= 2) unlink(path(i - 2).c_str());  // as a code drops its old checkpoints
      // The code computes between checkpoints: time for the interposer to prepare the file's next
      // generation (CAIRN_INTERPOSE_PREFAULT), as it has in a real run.
      std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.2, 3 * (all.empty() ? 0 : all.back()))));
    }, &all);
    figures["interpose_first_s"] = all.empty() ? 0.0 : all[0];
  } else {
    die("unknown stage " + stage);
  }
  if (g_rank == 0) {
    std::ofstream out(dir + "/" + stage + ".json");
    out << json{{"figures", figures}, {"notes", notes}}.dump();
  }
  free(data);
  MPI_Finalize();
  return 0;
}

}  // namespace

int run_file_modes(const FileModeOptions& o, int argc, char** argv) {
  const char* child = getenv("CAIRN_BENCH_CHILD");
  if (child && strcmp(child, "1") == 0) return run_child(o, argc, argv);
  return run_parent(o, argc, argv);
}

}  // namespace cairn::bench
