// cairn-bench's parent: a plain program that re-executes itself under mpirun ($CAIRN_MPIRUN, default
// mpirun, with $CAIRN_MPIRUN_ARGS split on whitespace), one app context per rank so that every rank is its
// own simulated node (CAIRN_NODE=node<r>); the child (CAIRN_BENCH_CHILD=1) measures. The parent owns the
// work directory and the job's cache directory and removes both at the end, whatever happened to the
// MPI job. --redistribute and --restart-after-loss run several jobs one after the other on that directory
// and cache (the latter relaunching the same job, new processes each time, as a real code's restart is).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench.hpp"

namespace cairn::bench {
namespace {

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

}  // namespace

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
  if (o.restart_after_loss) {
    // One job writes the version; then, --reps times, a relaunched job restarts it with the caches intact
    // and one after the loss of a node's cache. Each job's file is kept under the repetition's name.
    double load_start = loadavg_1m();
    std::string date = utc_now();
    auto stage_args = [&](const char* stage) {
      std::vector<std::string> args = extra;
      args.insert(args.end(), {"--child-stage", stage});
      return args;
    };
    rc = launch(o, o.ranks, stage_args("write"), argc, argv, exe);
    for (int i = 0; rc == 0 && i < o.reps; ++i)
      for (const char* stage : {"intact", "lost"}) {
        rc = launch(o, o.ranks, stage_args(stage), argc, argv, exe);
        if (rc != 0) break;
        std::string file = dir + "/loss-" + stage;
        if (rename((file + ".json").c_str(), (file + "-" + std::to_string(i) + ".json").c_str()) != 0) {
          fprintf(stderr, "cairn-bench: the %s job wrote no %s.json: %s\n", stage, file.c_str(), strerror(errno));
          rc = 1;
          break;
        }
      }
    if (rc == 0) rc = report_restart_after_loss(o, dir, cache_job, load_start, date);
  } else if (!o.redistribute) {
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

}  // namespace cairn::bench
