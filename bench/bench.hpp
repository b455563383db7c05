// cairn-bench's shared harness: the options, the statistics and units every figure uses, what the run
// records about the machine, and the child's MPI side (every rank of the measuring job). Each mode of
// the bench is a file of its own, in its folder (levels/levels.cpp, levels/redistribute.cpp, ...), on top
// of this and of session.hpp; main.cpp parses the command line and dispatches. docs/performance.md says
// how each figure is measured.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "cairn/cairn.h"
#include "options.hpp"

namespace cairn::bench {

namespace stdfs = std::filesystem;
using json = nlohmann::ordered_json;

// ---- options ----------------------------------------------------------------------------------------

// The phases of the default mode (--only); memcpy always runs.
extern const std::vector<std::string> kPhases;

// The levels (no mode), --redistribute, --snapshot and --restart-after-loss: one MPI job (or a few).
struct Options : CommonOptions {
  Options() { size_text = "256M"; }
  std::string only_text;
  std::set<std::string> only;
  bool redistribute = false;  // --redistribute: N -> M restart beside N -> N (docs/performance.md)
  bool snapshot = false;      // --snapshot: copy against copy-on-write snapshots (levels/snapshot_bench.cpp)
  std::vector<uint64_t> sizes;  // every size of --size (a comma-separated list only with --snapshot)
  int rounds = 1;             // --snapshot: sessions per mode and writer (--rounds)
  int to = 0;                 // M; 0 = ranks + 1
  bool restart_after_loss = false;  // --restart-after-loss: a relaunched job's restart after a lost node
  std::string redundancy = "partner";  // its L2 scheme (--redundancy)
  // Set by the parent for the MPI job.
  std::string child_dir, child_job, child_stage;
  bool wants(const char* phase) const { return only.count(phase) != 0; }
};

// "256M", "8m", "1G", "4096", "64KiB": binary multiples.
bool parse_size(const std::string& text, uint64_t* out);
std::vector<std::string> split_words(const char* s);

// ---- programs the parents start -------------------------------------------------------------------

// Starts args (PATH searched); with `log`, its stdout and stderr are appended there.
pid_t spawn(const std::vector<std::string>& args, const std::string& log = "");
// Waits for it: its exit status, or 128 + the signal that ended it.
int wait_exit(pid_t pid);
// A file's contents; "" when it cannot be read.
std::string slurp(const std::string& path);
// `given` when not empty; else the executable `name` beside cairn-bench (installed: the same bin
// directory) or at `build_rel` from the bench's build directory (build tree); else `name` (PATH).
std::string find_program(const std::string& given, const std::string& name, const std::string& build_rel);

// ---- statistics and units ---------------------------------------------------------------------------

double now();  // seconds, steady clock
double median(std::vector<double> v);
// The q-quantile of v (linear between neighbours); 0 when empty.
double quantile(std::vector<double> v, double q);
// The 2.5 % and 97.5 % quantiles of median(a*) / median(b*) over 2000 resamplings (a fixed seed), drawing
// whole sessions of `per_session` repetitions with replacement, then repetitions within each: how far the
// ratio of two medians moves with the luck of the draw ({0, 0} with fewer than two of either).
std::pair<double, double> ratio_interval(const std::vector<double>& a, const std::vector<double>& b, size_t per_session);
// GB/s (1e9 bytes per second), rounded to 3 decimals; null when not measured.
json gbps(uint64_t bytes, double seconds);
json round3(double x);

// ---- the machine --------------------------------------------------------------------------------------

const char* fs_type_name(const std::string& path);  // "tmpfs", "ext4", ...
// The page size a slot-sized file in dir gets, as its st_blksize says (2 MiB on a tmpfs mounted with
// huge=always or huge=within_size, the size the library also looks at: map_to_read); 0 when unknown.
long cache_page_bytes(const std::string& dir);
std::string page_size_text(long page_bytes);  // "4 KiB pages", "2048 KiB pages", "page size unknown"
std::string utc_now();                              // 2026-11-24T10:15:01Z
double loadavg_1m();                                // other work on the machine makes every figure lower
std::string cpu_model();
std::string first_line_of(const std::string& path);  // "" when it cannot be read (a /proc or /sys file)
// The head of a report's "run" object: date (now), host, cpu, cores, the load at the start and now, ranks.
json machine_info(double load_start, int ranks);
// Where a run kept its files, in its "run" object: cache_dir with its file system and page size,
// work_dir (the prefix's file system: prefix_fs) and the job's directory in the cache.
void describe_dirs(json& run, const std::string& cache_dir, const std::string& work_dir, const std::string& cache_job);

// The L2 sets the library cuts nranks ranks (one per node here) into, set_size each; a tail of one
// joins the previous set.
std::vector<int> set_sizes(int nranks, int set_size);
// The sets every measuring job asks for: set_size 4 (the default) or fewer when there are fewer nodes; rs
// keeps at least one data shard per stripe: rs_parity = min(2, smallest set - 1).
struct SetPlan {
  int set_size = 2, rs_parity = 1;
};
SetPlan default_sets(int nranks);

// ---- the child: one rank of the measuring MPI job ----------------------------------------------------

extern int g_rank, g_nranks;

// What the MPI job was given, for the run's record.
struct JobInfo {
  bool thread_multiple = false;    // MPI_THREAD_MULTIPLE granted
  std::vector<int> cpus_per_rank;  // CPUs each rank may run on (rank 0 only)
  int cpus = 0;                    // CPUs this rank may run on (0: not known)
};

// stderr of a cairn session goes to a file (the library's log, kept out of the bench's output);
// end_capture() restores stderr and returns what was written. No capture: the log goes to stderr.
void start_capture(const std::string& path);
std::string end_capture();

// Prints the message (after the library's captured log), and ends the whole MPI job.
[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define CHECK_CAIRN(call)                                                                              \
  do {                                                                                                 \
    int rc_ = (call);                                                                                  \
    if (rc_ != 0) ::cairn::bench::die("%s failed: %s: %s", #call, cairn_strerror(rc_), cairn_last_error());  \
  } while (0)

#define CHECK_MPI(call)                                                                                \
  do {                                                                                                 \
    if ((call) != MPI_SUCCESS) ::cairn::bench::die("%s failed", #call);                                      \
  } while (0)

double max_over_ranks(double x);
void barrier();

// Page-aligned memory, every page written (faulted in) before any timing.
uint8_t* alloc_faulted(uint64_t size);
// `size` bytes of a new file at `path` (in the cache directory), unlinked at once, mapped shared and
// pre-faulted: what an L1 slot is. munmap it when done; nothing is left behind.
uint8_t* map_slot_like(const std::string& path, uint64_t size);
// The next number of the splitmix64 sequence whose state is *x.
inline uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// Non-trivial, incompressible data (splitmix64), different for every seed.
void fill_random(uint8_t* p, uint64_t size, uint64_t seed);
inline void clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }
// The piece a rank writes or reads at a time: the L3 writer's.
void write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path);
void read_all(int fd, uint8_t* p, uint64_t n, const std::string& path);
// Drop the page cache of every file under `dir`, so that reads come from the device.
void evict(const std::string& dir);

// ---- the modes ----------------------------------------------------------------------------------------

// The parent (parent.cpp): starts the measuring MPI job(s) and cleans up after them.
int run_parent(const Options& o, int argc, char** argv);

// The modes' child sides (each in its own file), run on every rank once MPI is up.
int run_levels(const Options& o, const JobInfo& job);        // levels/levels.cpp: the default figures
int run_redistribute(const Options& o, const JobInfo& job);  // levels/redistribute.cpp: one N -> M stage
int run_snapshot(const Options& o, const JobInfo& job);      // levels/snapshot_bench.cpp: copy against cow
void print_snapshot_table(const json& out);                 // levels/snapshot_report.cpp: its table
int run_restart_after_loss(const Options& o, const JobInfo& job);  // levels/restart_after_loss.cpp: one job
// The parent side of --redistribute: the report from the stages' files.
int report_redistribute(const Options& o, const std::string& dir, const std::string& cache_job, double load_start,
                        const std::string& date);
// The parent side of --restart-after-loss: the report from the relaunched jobs' files.
int report_restart_after_loss(const Options& o, const std::string& dir, const std::string& cache_job,
                              double load_start, const std::string& date);

}  // namespace cairn::bench
