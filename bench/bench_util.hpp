// What the modes of cairn-bench share on the child's side (one rank of the MPI job): timing, the
// rank's identity, the capture of the library's log, fatal errors, memory to measure with, and what the
// report says about the machine.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cairn::bench {

using json = nlohmann::ordered_json;

double now();
double median(std::vector<double> v);
// GB/s (1e9 bytes per second), rounded to 3 decimals; null when not measured.
json gbps(uint64_t bytes, double seconds);
json round3(double x);

extern int g_rank, g_nranks;

// stderr of a cairn session goes to a file (so that rank 0 can read the library's per-checkpoint
// summary lines); warnings and errors are passed on afterwards.
class StderrCapture {
 public:
  void start(const std::string& path);
  std::string stop();
  bool active() const { return saved_ >= 0; }

 private:
  int saved_ = -1;
  std::string path_;
};
extern StderrCapture g_capture;

// Prints the captured log and the message, then aborts the MPI job.
[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define CHECK_CAIRN(call)                                                                              \
  do {                                                                                                 \
    int rc_ = (call);                                                                                  \
    if (rc_ != 0) ::cairn::bench::die("%s failed: %s: %s", #call, cairn_strerror(rc_), cairn_last_error()); \
  } while (0)

#define CHECK_MPI(call)                                                                                \
  do {                                                                                                 \
    if ((call) != MPI_SUCCESS) ::cairn::bench::die("%s failed", #call);                               \
  } while (0)

double max_over_ranks(double x);
void barrier();

// Page-aligned memory, every page written (faulted in) before any timing.
uint8_t* alloc_faulted(uint64_t size);
// Non-trivial, incompressible data (splitmix64), different on every rank.
void fill_random(uint8_t* p, uint64_t size, uint64_t seed);
inline void clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }
// `size` bytes of a new file at `path` (in the cache directory), unlinked at once, mapped shared and
// pre-faulted: what an L1 slot is. munmap it when done; nothing is left behind.
uint8_t* map_slot_like(const std::string& path, uint64_t size);

const char* fs_type_name(const std::string& path);
std::string utc_now();
// The 1-minute load average: other work on the machine makes every figure lower.
double loadavg_1m();
std::string cpu_model();
// The head of a report's "run" object: date, host, cpu, cores, the load at the start and now, ranks.
json machine_info(double load_start);
// The number right after `key` in `line`.
bool number_after(const std::string& line, const std::string& key, double* out);

}  // namespace cairn::bench
