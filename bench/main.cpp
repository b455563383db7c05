// cairn-bench: the speed of every level of cairn, each beside the machine's own limit measured in the
// same run (memcpy for L1, ISA-L's raw encode for L2, write+fsync for L3). How every figure is
// measured, and the figures of a reference machine: docs/performance.md.
//
// `cairn-bench --ranks 2 --size 256M --json` is a plain program (parent.cpp) that re-executes itself
// under mpirun; each rank of that job (CAIRN_BENCH_CHILD=1) runs one mode's measurements:
// levels/levels.cpp (the default), levels/redistribute.cpp (--redistribute), levels/restart_after_loss.cpp
// (--restart-after-loss: relaunched jobs) or levels/snapshot_bench.cpp (--snapshot); --service
// (service/service_bench.cpp), --migrate (migrate/migrate_bench.cpp) and the file modes
// (files/file_modes.cpp) have parents of their own; rank 0 prints one JSON object (or a table). --device
// (device/device_bench.cpp) runs in the process itself, --campaign (campaign/campaign.cpp) runs jobs
// under cairn run. This file holds the one command line of every
// mode (`cairn-bench --help` lists them all, with their defaults; `cairn-bench --campaign --help` the
// campaign's) and dispatches.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <CLI/CLI.hpp>

#include "bench.hpp"
#include "campaign/campaign.hpp"
#include "cli_style.hpp"
#include "device/device_bench.hpp"
#include "levels/incremental_l3.hpp"
#include "files/file_modes.hpp"
#include "migrate/migrate_bench.hpp"
#include "service/service_bench.hpp"

namespace cairn::bench {
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
  job.cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  job.cpus_per_rank.resize(static_cast<size_t>(g_nranks));
  CHECK_MPI(MPI_Gather(&job.cpus, 1, MPI_INT, job.cpus_per_rank.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int rc = o.snapshot             ? run_snapshot(o, job)
           : o.redistribute       ? run_redistribute(o, job)
           : o.restart_after_loss ? run_restart_after_loss(o, job)
                                  : run_levels(o, job);
  MPI_Finalize();
  return rc;
}

// ---- the command line: one definition of every mode and option --------------------------------------
//
// Adding a mode: a flag in the "Modes" group below (add_mode) and in modes_given(), its own options in a
// group whose name mentions it (the group decides which options the mode accepts and its --help shows),
// its defaults in the descriptions of the common options it reads, and a line in main() that fills its
// options from CommandLine and runs it. Children re-run this parser with the parent's argv and
// their hidden --child-* options.
struct CommandLine {
  // Modes (at most one; none: the levels).
  bool redistribute = false, snapshot = false, scr = false, file_api = false, interpose = false, service = false,
       placement = false, migrate = false, migrate_app = false, device = false, campaign = false,
       restart_after_loss = false, incremental = false;
  // Common options; 0 or "": the mode's default.
  int ranks = 0, reps = 0;
  std::string size, prefix = "/tmp", cache_dir = "/dev/shm";
  bool json = false, verbose = false;
  // Per mode.
  std::string only, interpose_lib, cairnd, provider = "tcp;ofi_rxm", cairn;
  int to = 0, versions = 12, nodes = 0, buffers = 8, rounds = 1;
  double agent_mbs = 200;
  std::string buffer_size = "8M";
  std::string cuda_driver = "libcuda.so.1";
  CampaignOptions campaign_options;  // --campaign's own options, bound in place
  std::string factors = "0.5,0.71,1,1.41,2";
  std::string redundancy = "partner";
  bool no_l3_only = false;
  // Children (hidden).
  std::string child_dir, child_stage, child_job, child_service;
  int child_app = -1;
};

void define(CLI::App& app, CommandLine& c) {
  auto add_mode = [&](const char* flag, bool& on, const char* what) { app.add_flag(flag, on, what)->group("Modes"); };
  add_mode("--redistribute", c.redistribute,
           "restart a block-distributed version written by --ranks N ranks on --to M ranks, beside the same "
           "version restarted on N ranks, from L1, L2 and L3 (three MPI jobs), and beside the bare move of the "
           "same bytes to the same owners over the same MPI (the bound of N -> M from L1, and from L2 where the "
           "lost rank's set keeps a copy)");
  add_mode("--snapshot", c.snapshot,
           "what a checkpoint costs the application with snapshot = copy, = cow and = auto (L1 only), beside memcpy: "
           "the blocking and app_lost_ms, the extra time of a loop writing all or a tenth of the state until the "
           "version is through; --size may list sizes (256M,2G)");
  add_mode("--scr", c.scr, "checkpoints through the SCR-compatible library beside the code's own writes");
  add_mode("--file-api", c.file_api,
           "cairn's file API: cairn_complete_output's blocking time beside the code's own write to the routed path");
  add_mode("--interpose", c.interpose,
           "checkpoint files through the LD_PRELOAD interposer beside the memory API and the code's own writes");
  add_mode("--service", c.service,
           "the checkpoint service (cairnd on 127.0.0.1) beside the embedded flusher and a synchronous write: the "
           "blocking time per checkpoint, the agents' drain bandwidth for 1, 2 and 4 agents beside the raw write, "
           "the compute slowdown while versions drain");
  add_mode("--placement", c.placement,
           "with --service: three synthetic applications on two checkpoint nodes under each placement policy "
           "(stacking, bandwidth, interval), then interval with dynamic agents: agents and drain time per version "
           "beside the interval, each node's bandwidth use");
  add_mode("--migrate", c.migrate,
           "emptying a node of a running job three ways -- cairn migrate between the caches, over the fabric, "
           "halt + restart from L3 -- beside the machine's limit for each");
  add_mode("--device", c.device,
           "GPU memory (CUDA): checkpoint and restart of device buffers beside the bare pinned device-to-host and "
           "host-to-device copies of the same bytes, and the return mode's blocking time; --size may list sizes "
           "(default 1G,8G); one process, no MPI launch (docs/gpu.md)");
  add_mode("--campaign", c.campaign,
           "efficiency under failures: a synthetic job of a set amount of work under cairn run with failures at a "
           "set MTBF (one schedule from --seed for every policy), under each checkpoint policy (interval = auto, "
           "fixed multiples of Daly's optimum, L3 only): the useful fraction, the time lost per failure broken "
           "down, the levels restarted from, beside Daly's model fed the costs measured in the same run");
  add_mode("--restart-after-loss", c.restart_after_loss,
           "a relaunched job's restart after one simulated node lost its cache, as SCR's job rebuilds in SCR_Init: "
           "cairn_init + cairn_restart_available + cairn_restart (from L2) beside the same with every cache intact "
           "(from L1), into new and into pre-touched memory, beside first touch of new memory and the bare read of "
           "the same bytes (each repetition two relaunched MPI jobs)");
  add_mode("--incremental", c.incremental,
           "incremental L3 versions (full_every): the L3 bytes of a version with 10 % of its chunks rewritten "
           "against a full one's, and its restart's read speed against the full one's, one rank in this process "
           "(--size, default 256M; --reps, default 3)");
  app.add_flag("--migrate-app", c.migrate_app)->group("");

  app.add_option("--ranks", c.ranks,
                 "MPI ranks, each its own simulated node (default 2; --migrate, --campaign 4)")
      ->check(CLI::Range(1, 4096))->type_name("N");
  app.add_option("--size", c.size,
                 "bytes of state per rank, e.g. 64M (default 256M; --service, --migrate 64M; --campaign 16M); with "
                 "--snapshot and --device a list (256M,2G, or --size given again; --device 1G,8G)")
      ->delimiter(',')->multi_option_policy(CLI::MultiOptionPolicy::Join)->type_name("SIZE");
  app.add_option("--reps", c.reps, "timed repetitions per figure, the median reported (default 5; --service, "
                                   "--migrate, --device, --restart-after-loss 3)")
      ->check(CLI::Range(1, 1000))->type_name("N");
  app.add_option("--prefix", c.prefix,
                 "directory in which a fresh work directory (holding the L3 prefix) is made, removed at the end")
      ->capture_default_str()->type_name("DIR");
  app.add_option("--cache-dir", c.cache_dir, "base of the L1 cache (cache_dir)")->capture_default_str()->type_name("DIR");
  app.add_flag("--json", c.json, "print one JSON object instead of a table");
  app.add_flag("-v,--verbose", c.verbose, "show the launch command, the library's info log, the daemons' log on failure");

  app.add_option("--only", c.only, "levels: a comma-separated subset of l1,l2,l3,restart,codec,incremental (memcpy always runs; "
                 "incremental: an incremental version's bytes at every level against a full one's, over every rank)")
      ->group("Levels and --redistribute")->type_name("LIST");
  app.add_option("--to", c.to, "--redistribute: ranks of the N -> M restart (default N + 1)")
      ->check(CLI::Range(1, 4096))->group("Levels and --redistribute")->type_name("M");
  app.add_option("--rounds", c.rounds,
                 "sessions per mode and writer, their order turned each round (copy, cow, auto; then auto, cow, "
                 "copy), their repetitions pooled: what differs between two sessions of the same code averages out")
      ->check(CLI::Range(1, 100))->capture_default_str()->group("--snapshot")->type_name("N");
  app.add_option("--interpose-lib", c.interpose_lib, "--interpose: libcairn_interpose.so (default: found)")
      ->group("--scr, --file-api, --interpose")->type_name("FILE");
  const char* svc = "--service, --placement";
  app.add_option("--cairnd", c.cairnd, "the cairnd executable (default: beside cairn-bench, else PATH)")
      ->group(svc)->type_name("FILE");
  app.add_option("--provider", c.provider, "the libfabric provider (service_provider)")
      ->capture_default_str()->group(svc)->type_name("NAME");
  app.add_option("--versions", c.versions, "--placement: versions per application")
      ->check(CLI::Range(2, 1000))->capture_default_str()->group(svc)->type_name("N");
  app.add_option("--agent-bandwidth", c.agent_mbs,
                 "--placement: each agent's limit in MB/s (cairnd manager --agent-bandwidth), so that drains take "
                 "the time a busy file system gives them")
      ->check(CLI::Range(1.0, 1e6))->capture_default_str()->group(svc)->type_name("MB/S");
  app.add_option("--nodes", c.nodes, "simulated nodes (default 2; --campaign 4); --migrate empties node 1 onto "
                                     "one spare more")
      ->check(CLI::Range(2, 4096))->group("--migrate, --campaign")->type_name("K");
  app.add_option("--buffers", c.buffers, "the migration's pool: buffers")
      ->check(CLI::Range(2, 1024))->capture_default_str()->group("--migrate")->type_name("N");
  app.add_option("--buffer-size", c.buffer_size, "the migration's pool: bytes per buffer")
      ->capture_default_str()->group("--migrate")->type_name("SIZE");
  app.add_option("--cairn", c.cairn, "the cairn tool (default: beside cairn-bench, or in the build tree)")
      ->group("--migrate, --campaign")->type_name("FILE");

  CampaignOptions& k = c.campaign_options;
  const char* cam = "--campaign";
  app.add_option("--spares", k.spares, "spare nodes for the launcher to replace lost ones")
      ->check(CLI::Range(0, 4096))->capture_default_str()->group(cam)->type_name("N");
  app.add_option("--step-ms", k.step_ms, "compute time per step, milliseconds")
      ->check(CLI::Range(1.0, 60000.0))->capture_default_str()->group(cam)->type_name("MS");
  app.add_option("--work", k.work, "seconds of failure-free computation")
      ->check(CLI::Range(1.0, 1e6))->capture_default_str()->group(cam)->type_name("SECONDS");
  app.add_option("--mtbf", k.mtbf, "mean time between failures of the job, seconds (scaled down)")
      ->check(CLI::Range(0.5, 1e9))->capture_default_str()->group(cam)->type_name("SECONDS");
  app.add_option("--mix", k.mix_text, "failure kinds and their weights: node (a node and its cache lost), rank "
                                      "(one rank killed), job (every rank, every cache: only L3 serves)")
      ->capture_default_str()->group(cam)->type_name("MIX");
  app.add_option("--seed", k.seed, "seed of the failure schedule (the same seed gives the same failures)")
      ->capture_default_str()->group(cam)->type_name("N");
  app.add_option("--factors", c.factors, "fixed intervals to run, as multiples of Daly's optimum (empty: none)")
      ->capture_default_str()->group(cam)->type_name("LIST");
  app.add_flag("--no-l3-only", c.no_l3_only, "leave out the one-level (L3 only) policy")->group(cam);
  app.add_option("--flush-every", k.flush_every, "multilevel policies: every N-th version to L3")
      ->check(CLI::Range(1, 1000000))->capture_default_str()->group(cam)->type_name("N");
  app.add_option("--app", k.app, "the synthetic application (default: beside cairn-bench, or in the build tree)")
      ->group(cam)->type_name("FILE");
  app.add_option("--plot", k.plot, "draw the useful fraction per policy into FILE (.png, .svg, .pdf) with cairn plot")
      ->group(cam)->type_name("FILE");
  app.add_flag("--keep", k.keep, "keep the work directory: each run's prefix (history, run record) and log")->group(cam);
  app.add_flag("--schedule", k.schedule_only, "print the failure schedule the seed gives (as cairn run --fail-at "
                                              "takes it) and stop")->group(cam);
  app.add_option("--from", k.from, "report again from a saved --json report: the derived figures recomputed, no run")
      ->group(cam)->type_name("FILE");
  app.add_flag("--reanalyse", k.reanalyse, "with --from, of a campaign run with --keep: analyse each run again from "
                                           "the work directory the report names (its history, run record and log)")
      ->group(cam);

  app.add_option("--redundancy", c.redundancy, "the L2 scheme of the version (redundancy)")
      ->check(CLI::IsMember({"partner", "xor", "rs"}))->capture_default_str()->group("--restart-after-loss")
      ->type_name("SCHEME");

  app.add_option("--cuda-driver", c.cuda_driver, "the CUDA driver library (loaded at run time)")
      ->capture_default_str()->group("--device")->type_name("FILE");

  app.add_option("--child-dir", c.child_dir)->group("");
  app.add_option("--child-stage", c.child_stage)->group("");
  app.add_option("--child-job", c.child_job)->group("");
  app.add_option("--child-service", c.child_service)->group("");
  app.add_option("--child-app", c.child_app)->group("");
}

int usage(const char* what) {
  fprintf(stderr, "cairn-bench: %s (see 'cairn-bench --help')\n", what);
  return 2;
}

// The common options given on the command line, over the defaults the mode's options type starts with.
void fill_common(const CommandLine& c, CommonOptions& o) {
  if (c.ranks) o.ranks = c.ranks;
  if (c.reps) o.reps = c.reps;
  if (!c.size.empty()) o.size_text = c.size;
  o.prefix_base = c.prefix;
  o.cache_dir = c.cache_dir;
  o.json = c.json;
  o.verbose = c.verbose;
}

int run_migrate_mode(const CommandLine& c, int argc, char** argv) {
  MigrateBenchOptions o;
  fill_common(c, o);
  if (o.ranks < 2) return usage("--migrate: --ranks must be at least 2");
  if (c.reps > 100) return usage("--migrate: --reps at most 100");
  if (c.nodes) o.nodes = c.nodes;
  o.buffers = c.buffers;
  o.cairn = c.cairn;
  if (!parse_size(o.size_text, &o.size) || o.size < 4096) {
    fprintf(stderr, "cairn-bench: --size %s: expected a size of at least 4K, e.g. 64M\n", o.size_text.c_str());
    return 2;
  }
  if (!parse_size(c.buffer_size, &o.buffer_size) || o.buffer_size < 4096) {
    fprintf(stderr, "cairn-bench: --buffer-size %s: expected a size of at least 4K\n", c.buffer_size.c_str());
    return 2;
  }
  if (c.migrate_app) return run_migrate_app(argc, argv, o.size);
  return run_migrate_bench(o);
}

int run_service_mode(const CommandLine& c, int argc, char** argv) {
  ServiceOptions o;
  fill_common(c, o);
  if (c.reps > 100) return usage("--service: --reps at most 100");
  o.cairnd = c.cairnd;
  o.provider = c.provider;
  o.versions = c.versions;
  o.agent_mbs = c.agent_mbs;
  o.child_app = c.child_app;
  o.child_dir = c.child_dir;
  o.child_service = c.child_service;
  return run_service(o, c.placement, argc, argv);
}

int run_device_mode(const CommandLine& c) {
  DeviceOptions o;
  fill_common(c, o);
  if (c.reps > 100) return usage("--device: --reps at most 100");
  if (!c.size.empty()) {
    o.sizes.clear();
    std::stringstream ss(c.size);
    for (std::string w; std::getline(ss, w, ',');) {
      uint64_t bytes = 0;
      if (w.empty()) continue;
      if (!parse_size(w, &bytes) || bytes < 4096) {
        fprintf(stderr, "cairn-bench: --size %s: expected sizes of at least 4K, e.g. 1G,8G\n", c.size.c_str());
        return 2;
      }
      o.sizes.push_back(w);
    }
  }
  o.driver = c.cuda_driver;
  return run_device(o);
}

int run_campaign_mode(const CommandLine& c) {
  CampaignOptions o = c.campaign_options;  // its own options, bound in place; the common ones here
  fill_common(c, o);
  if (c.nodes) o.nodes = c.nodes;
  o.cairn = c.cairn;
  o.l3_only = !c.no_l3_only;
  if (int rc = check_campaign_options(o, o.size_text, c.factors); rc != 0) return rc;
  return run_campaign(o);
}

// The options a mode reads are the common ones and those of the groups whose names mention the mode
// ("Levels" when none is given). The modes given, by the names their groups use.
std::vector<std::string> modes_given(const CommandLine& c) {
  const std::pair<bool, const char*> modes[] = {
      {c.redistribute, "--redistribute"}, {c.snapshot, "--snapshot"}, {c.scr, "--scr"}, {c.file_api, "--file-api"},
      {c.interpose, "--interpose"},       {c.service, "--service"},   {c.placement, "--placement"},
      {c.migrate || c.migrate_app, "--migrate"}, {c.device, "--device"}, {c.campaign, "--campaign"},
      {c.restart_after_loss, "--restart-after-loss"}, {c.incremental, "--incremental"}};
  std::vector<std::string> given;
  for (const auto& [on, name] : modes)
    if (on) given.emplace_back(name);
  return given;
}

bool group_of_a_mode(const std::string& group) { return !group.empty() && group != "Modes" && group != "Options"; }

bool group_serves(const std::string& group, const std::vector<std::string>& modes) {
  if (modes.empty()) return group.find("Levels") != std::string::npos;
  for (const std::string& m : modes)
    if (group.find(m) != std::string::npos) return true;
  return false;
}

// With a mode given, --help shows only its options (`cairn-bench --campaign --help`): the groups of the
// other modes are hidden.
void focus_help_on_mode(CLI::App& app, const CommandLine& c) {
  const std::vector<std::string> given = modes_given(c);
  if (given.empty()) return;
  for (CLI::Option* opt : app.get_options())
    if (group_of_a_mode(opt->get_group()) && !group_serves(opt->get_group(), given)) opt->group("");
}

// An option of another mode's group is refused, not ignored: "--spares goes with --campaign".
int refuse_options_of_other_modes(const CLI::App& app, const CommandLine& c) {
  const std::vector<std::string> given = modes_given(c);
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || !group_of_a_mode(opt->get_group()) || group_serves(opt->get_group(), given)) continue;
    const std::string what = opt->get_name() + " goes with " +
                             (opt->get_group().rfind("Levels", 0) == 0 ? "the levels (no mode) or --redistribute"
                                                                       : opt->get_group());
    return usage(what.c_str());
  }
  return -1;
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  using namespace cairn::bench;
  CommandLine c;
  CLI::App app{"cairn-bench: the speed of every cairn level beside the machine's own limits (memcpy, ISA-L encode, "
               "write+fsync), measured in one MPI run; one mode at a time, the levels by default. See "
               "docs/performance.md.",
               "cairn-bench"};
  cairn::cli::use_help_style(app);
  define(app, c);
  bool help = false;  // after the parse, so that the help can show the options of the mode given with it
  app.set_help_flag();
  app.add_flag("-h,--help", help, "Print this help message and exit (with a mode: that mode's options)");
  if (int rc = cairn::cli::parse_command_line(app, argc, argv, "cairn-bench"); rc >= 0) return rc;
  if (help) {
    focus_help_on_mode(app, c);
    printf("%s", app.help().c_str());
    return 0;
  }
  const int modes = c.redistribute + c.snapshot + c.scr + c.file_api + c.interpose + c.service + c.migrate +
                    c.migrate_app + c.device + c.campaign + c.restart_after_loss + c.incremental;
  if (modes > 1 && !(c.scr + c.file_api + c.interpose == modes))  // the file modes may go together
    return usage("one mode at a time (--redistribute, --snapshot, --service, --migrate, --device, --campaign, "
                 "--restart-after-loss, --incremental; --scr, "
                 "--file-api and --interpose may go together)");
  if (c.placement && !c.service) return usage("--placement goes with --service");
  if (int rc = refuse_options_of_other_modes(app, c); rc >= 0) return rc;
  if (c.device) return run_device_mode(c);
  if (c.incremental) {
    IncrementalOptions o;
    if (!c.size.empty()) o.size_text = c.size;
    if (c.reps) o.reps = c.reps;
    o.prefix_base = c.prefix;
    o.json = c.json;
    return run_incremental(o);
  }
  if (c.campaign) return run_campaign_mode(c);
  if (c.migrate || c.migrate_app) return run_migrate_mode(c, argc, argv);
  if (c.service) return run_service_mode(c, argc, argv);

  Options o;
  fill_common(c, o);
  o.only_text = c.only;
  o.redistribute = c.redistribute;
  o.snapshot = c.snapshot;
  o.rounds = c.rounds;
  o.to = c.to;
  o.restart_after_loss = c.restart_after_loss;
  o.redundancy = c.redundancy;
  if (o.restart_after_loss) {
    if (!c.reps) o.reps = 3;
    if (o.ranks < 2) return usage("--restart-after-loss: --ranks must be at least 2 (a lost node needs a partner)");
  }
  o.child_dir = c.child_dir;
  o.child_stage = c.child_stage;
  o.child_job = c.child_job;
  FileModeOptions files;  // --scr / --file-api / --interpose: files/file_modes.cpp
  files.scr = c.scr;
  files.file_api = c.file_api;
  files.interpose = c.interpose;
  files.interpose_lib = c.interpose_lib;
  files.child_dir = c.child_dir;
  files.child_job = c.child_job;
  files.child_stage = c.child_stage;
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
    static_cast<CommonOptions&>(files) = o;  // the levels' common options, their size parsed
    return run_file_modes(files, argc, argv);
  }
  if (o.only_text.empty()) {
    o.only.insert(kPhases.begin(), kPhases.end());
  } else {
    std::stringstream ss(o.only_text);
    for (std::string w; std::getline(ss, w, ',');) {
      if (w.empty()) continue;
      if (std::find(kPhases.begin(), kPhases.end(), w) == kPhases.end()) {
        fprintf(stderr, "cairn-bench: --only: unknown phase '%s' (expected l1, l2, l3, restart, codec, incremental)\n", w.c_str());
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
  if (o.ranks < 2 && !o.only_text.empty() && (o.wants("l2") || o.wants("incremental")) && !o.redistribute) {
    // asked for explicitly
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

