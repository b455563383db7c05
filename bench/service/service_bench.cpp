// cairn-bench --service, the parent: a cairnd controller and one manager on 127.0.0.1 (the checkpoint
// node), the measuring MPI job, then SIGTERM to the daemons and the work directory removed, whatever
// happened to the job.
#include "service/service_bench.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench.hpp"

namespace stdfs = std::filesystem;

namespace cairn::bench {

namespace {

int run_service_parent(const ServiceOptions& o, int argc, char** argv) {
  std::error_code ec;
  std::string tmpl = stdfs::absolute(o.prefix_base, ec).string() + "/cairn-bench-service.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    fprintf(stderr, "cairn-bench: cannot create a work directory under %s: %s\n", o.prefix_base.c_str(), strerror(errno));
    return 1;
  }
  std::string dir = buf.data();
  std::string cairnd = find_program(o.cairnd, "cairnd", "tools/cairnd");
  std::string af = dir + "/controller.address";
  pid_t ctl = spawn({cairnd, "controller", "--listen", "127.0.0.1:0", "--address-file", af, "--log",
                     dir + "/controller.log", "--log-level", "warn"});
  std::string address;
  for (int i = 0; i < 1000 && address.empty(); ++i) {
    std::ifstream in(af);
    std::getline(in, address);
    if (address.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int rc = 1;
  pid_t mgr = -1;
  if (address.empty()) {
    fprintf(stderr, "cairn-bench: the controller (%s) did not start; see %s/controller.log\n", cairnd.c_str(), dir.c_str());
  } else {
    mgr = spawn({cairnd, "manager", "--controller", address, "--name", "bench", "--agents", "8", "--work-dir",
                 dir + "/manager", "--log-level", "warn"});
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the child's cairn_init waits for agents anyway
    const char* mpirun = getenv("CAIRN_MPIRUN");
    std::vector<std::string> cmd{mpirun && *mpirun ? mpirun : "mpirun"};
    for (auto& w : split_words(getenv("CAIRN_MPIRUN_ARGS"))) cmd.push_back(w);
    std::string self = stdfs::read_symlink("/proc/self/exe", ec).string();
    cmd.push_back("-np");
    cmd.push_back(std::to_string(o.ranks));
    cmd.insert(cmd.end(), {"env", "CAIRN_BENCH_CHILD=1", self.empty() ? argv[0] : self});
    for (int i = 1; i < argc; ++i) cmd.push_back(argv[i]);
    cmd.insert(cmd.end(), {"--child-dir", dir, "--child-service", address});
    if (o.verbose) {
      std::string line;
      for (auto& w : cmd) line += " " + w;
      fprintf(stderr, "cairn-bench:%s\n", line.c_str());
    }
    signal(SIGINT, SIG_IGN);  // ^C reaches mpirun; the parent stays to stop the daemons
    rc = wait_exit(spawn(cmd));
    if (rc != 0) fprintf(stderr, "cairn-bench: the MPI job failed (exit status %d)\n", rc);
  }
  for (pid_t p : {mgr, ctl})
    if (p > 0) kill(p, SIGTERM);
  for (pid_t p : {mgr, ctl})
    if (p > 0 && wait_exit(p) != 0) fprintf(stderr, "cairn-bench: a daemon did not stop cleanly\n");
  if (rc != 0 && o.verbose) {
    std::ifstream in(dir + "/controller.log");
    fprintf(stderr, "%s", std::string(std::istreambuf_iterator<char>(in), {}).c_str());
  }
  stdfs::remove_all(dir, ec);
  return rc;
}

}  // namespace

// --service (and --placement): the command line is bench/main.cpp's, which fills `o`.
int run_service(ServiceOptions& o, bool placement, int argc, char** argv) {
  if (!parse_size(o.size_text, &o.size) || o.size < 65536) {
    fprintf(stderr, "cairn-bench: --size %s: expected at least 64K, e.g. 64M\n", o.size_text.c_str());
    return 2;
  }
  const char* child = getenv("CAIRN_BENCH_CHILD");
  if (placement) {
    if (child && strcmp(child, "1") == 0) return run_placement_child(o, argc, argv);
    return run_placement(o, argc, argv);
  }
  if (child && strcmp(child, "1") == 0) return run_service_child(o, argc, argv);
  return run_service_parent(o, argc, argv);
}

}  // namespace cairn::bench
