// cairn-bench: the speed of every level of cairn, each beside the machine's own limit measured in the
// same run (memcpy for L1, ISA-L's raw encode for L2, write+fsync for L3). How every figure is
// measured, and the figures of a reference machine: docs/performance.md.
//
// `cairn-bench --ranks 2 --size 256M --json` is a plain program (parent.cpp) that re-executes itself under
// mpirun; each rank of that job (CAIRN_BENCH_CHILD=1) runs one mode's measurements: levels.cpp (the
// default), redistribute.cpp (--redistribute) or snapshot_bench.cpp (--snapshot); --service is its own
// program (service_bench.cpp); rank 0 prints one JSON object (or a table). This file parses the command
// line and dispatches.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <CLI/CLI.hpp>

#include "bench.hpp"
#include "campaign.hpp"
#include "file_modes.hpp"
#include "migrate_bench.hpp"
#include "service_bench.hpp"

namespace bench {
namespace {

// One rank of the measuring MPI job: MPI up, what it was given recorded, then the mode.
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
  JobInfo job;
  job.thread_multiple = provided == MPI_THREAD_MULTIPLE;
  cpu_set_t set;
  int ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  job.cpus_per_rank.resize(static_cast<size_t>(g_nranks));
  CHECK_MPI(MPI_Gather(&ncpu, 1, MPI_INT, job.cpus_per_rank.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int rc = o.snapshot ? run_snapshot(o, job) : o.redistribute ? run_redistribute(o, job) : run_levels(o, job);
  MPI_Finalize();
  return rc;
}

// cairn-bench --migrate (migrate_bench.cpp), and the application it runs (--migrate-app).
int run_migrate_main(int argc, char** argv) {
  cairn::bench::MigrateBenchOptions o;
  std::string size_text = "64M", buffer_size_text = "8M";
  bool migrate = false, app_mode = false;
  CLI::App app{"cairn-bench --migrate: emptying a node of a running job three ways -- cairn migrate between the "
               "caches, cairn migrate over the fabric, halt + restart from L3 -- beside the machine's limits for "
               "each (a copy on the cache's file system, TCP over the loopback, the prefix's write and read). "
               "See docs/performance.md."};
  app.add_flag("--migrate", migrate, "this mode");
  app.add_flag("--migrate-app", app_mode)->group("");
  app.add_option("--ranks", o.ranks, "MPI ranks of the job")->check(CLI::Range(2, 4096))->capture_default_str();
  app.add_option("--nodes", o.nodes, "simulated nodes (node 1 is emptied; one spare more)")
      ->check(CLI::Range(2, 4096))->capture_default_str();
  app.add_option("--size", size_text, "bytes of state per rank; K, M, G suffixes")->capture_default_str();
  app.add_option("--reps", o.reps, "runs of each path (the median is reported)")->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--buffers", o.buffers, "the migration's pool: buffers")->check(CLI::Range(2, 1024))->capture_default_str();
  app.add_option("--buffer-size", buffer_size_text, "the migration's pool: bytes per buffer")->capture_default_str();
  app.add_option("--prefix", o.prefix_base, "where the work directory (the jobs' prefixes: L3) goes")->capture_default_str();
  app.add_option("--cache-dir", o.cache_dir, "base of the L1 cache (cache_dir)")->capture_default_str();
  app.add_option("--cairn", o.cairn, "the cairn tool (default: beside cairn-bench, or in the build tree)");
  app.add_flag("--json", o.json, "print one JSON object instead of a table");
  app.add_flag("-v,--verbose", o.verbose, "each migration's report and the library's info log");
  CLI11_PARSE(app, argc, argv);
  if (!parse_size(size_text, &o.size) || o.size < 4096) {
    fprintf(stderr, "cairn-bench: --size %s: expected a size of at least 4K, e.g. 64M\n", size_text.c_str());
    return 2;
  }
  if (!parse_size(buffer_size_text, &o.buffer_size) || o.buffer_size < 4096) {
    fprintf(stderr, "cairn-bench: --buffer-size %s: expected a size of at least 4K\n", buffer_size_text.c_str());
    return 2;
  }
  if (app_mode) return cairn::bench::run_migrate_app(argc, argv, o.size);
  return cairn::bench::run_migrate_bench(o);
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  for (int i = 1; i < argc; ++i) {  // the service and migration modes have options of their own
    if (strcmp(argv[i], "--service") == 0) return cairn_bench_service::main(argc, argv);
    if (strcmp(argv[i], "--migrate") == 0 || strcmp(argv[i], "--migrate-app") == 0) return run_migrate_main(argc, argv);
    if (strcmp(argv[i], "--campaign") == 0) return cairn::bench::run_campaign_main(argc, argv);
  }
  Options o;
  CLI::App app{"cairn-bench: the speed of every cairn level beside the machine's own limits "
               "(memcpy, ISA-L encode, write+fsync), measured in one MPI run. See docs/performance.md."};
  app.add_option("--ranks", o.ranks, "MPI ranks, each its own simulated node (node0, node1, ...)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--size", o.size_text, "bytes of state per rank; K, M, G suffixes (binary); with --snapshot a list");
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
  cairn::bench::FileModeOptions files;  // --scr / --interpose: file_modes.cpp
  app.add_flag("--scr", files.scr, "checkpoints through the SCR-compatible library beside the code's own writes");
  app.add_flag("--file-api", files.file_api,
               "cairn's file API: cairn_complete_output's blocking time beside the code's own write to the routed path");
  app.add_flag("--interpose", files.interpose,
               "checkpoint files through the LD_PRELOAD interposer beside the memory API and the code's own writes");
  app.add_option("--interpose-lib", files.interpose_lib, "--interpose: libcairn_interpose.so (default: found)");
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
  if (o.snapshot && (o.redistribute || !o.only_text.empty() || files.scr || files.interpose || files.file_api)) {
    fprintf(stderr, "cairn-bench: --snapshot goes without --redistribute, --only, --scr, --file-api and --interpose\n");
    return 2;
  }
  if (files.scr || files.interpose || files.file_api) {
    files.ranks = o.ranks;
    files.size = o.size;
    files.reps = o.reps;
    files.prefix_base = o.prefix_base;
    files.cache_dir = o.cache_dir;
    files.json = o.json;
    files.verbose = o.verbose;
    return cairn::bench::run_file_modes(files, argc, argv);
  }
  if (o.only_text.empty()) {
    o.only.insert(kPhases.begin(), kPhases.end());
  } else {
    std::stringstream ss(o.only_text);
    for (std::string w; std::getline(ss, w, ',');) {
      if (w.empty()) continue;
      if (std::find(kPhases.begin(), kPhases.end(), w) == kPhases.end()) {
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
    return bench::run_child(o, argc, argv);
  }
  return run_parent(o, argc, argv);
}

