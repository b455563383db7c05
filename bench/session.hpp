// One cairn session of a measurement: a fresh cache and prefix, the configuration set in the environment
// before cairn_init, the regions protected; and after cairn_finalize, the library's own timings of each
// version, read from the job history (<prefix>/.cairn/history, docs/format.md "The job history"), never
// from its log.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cache/cache_store.hpp"

namespace cairn::bench {

class Session {
 public:
  explicit Session(const Options& o);
  const std::string& dir() const { return dir_; }              // the work directory
  const std::string& prefix() const { return prefix_; }        // <work dir>/prefix
  const std::string& cache_job() const { return cache_job_; }  // <cache_dir>/cairn-<job>
  // The L2 sets every session of this job asks for (CAIRN_SET_SIZE, CAIRN_RS_PARITY).
  void set_sets(int set_size, int rs_parity) { set_size_ = set_size, rs_parity_ = rs_parity; }

  // Every level's files of earlier sessions gone: a session starts from an empty cache and prefix.
  void clean_levels();
  // cairn_init with the configuration of one measurement, then `protect` (the regions). The library's
  // log goes to a file until close().
  void open(const char* redundancy, int flush_every, const std::function<void()>& protect);
  // cairn_finalize; returns the session's log. Lines other than info are passed on to stderr (all of
  // them with --verbose).
  std::string close();

  // One timed restart: `lose` on rank 0 (what the failure took), `clear` on every rank (the regions
  // zeroed: the restart must bring every byte back), a fresh session, then timed (the slowest rank's):
  // cairn_restart_available() + cairn_restart(), as applications call them (`available_first`), or
  // cairn_restart() alone. Ends the job unless the version came from `want_level` (CAIRN_LEVEL_*). The
  // time, this rank's own times of the session's opening (cairn_init + `protect`) and of the calls, and
  // the session's log.
  struct Restart {
    double seconds = 0;
    double init_s = 0, calls_s = 0;
    std::string log;
  };
  Restart timed_restart(const char* redundancy, int flush_every, int want_level, const std::function<void()>& lose,
                        const std::function<void()>& clear, const std::function<void()>& protect,
                        bool available_first = true);

 private:
  const Options& o_;
  std::string dir_, prefix_, cache_job_;
  int set_size_ = 2, rs_parity_ = 1;
};

// The data file of rank `rank`'s newest L1 slot in the session's cache (its node is node<rank>; -1: this
// rank): what a restart from L1 reads; with SlotFile::red, the same slot's redundancy file.
std::string newest_slot_file(const Session& s, int rank = -1, cairn::SlotFile which = cairn::SlotFile::data);
// What reading that file into private memory costs on this machine, two ways (the faster differs between
// machines and file systems): pread(2) into `dst`, and a populated read-only mapping + memcpy into `dst`;
// `dst` zeroed before each read. One warm-up, then the median of `reps` reads, each the slowest rank's.
struct SlotRead {
  double pread_s = 0, map_memcpy_s = 0;
  // The untimed first pass of each (not in the medians): the first pread of the file in this process,
  // the first mapping of it (see docs/performance.md, "The first access of a page in a process").
  double pread_first_s = 0, map_memcpy_first_s = 0;
  double best_s() const { return std::min(pread_s, map_memcpy_s); }
};
SlotRead timed_slot_read(const std::string& path, uint8_t* dst, uint64_t size, int reps);

// The session's job history (rank 0, after close()): the lines of a format this build reads that name a
// version >= first_version (torn lines left out), in file order, with that version. Empty without one.
struct HistoryLine {
  uint64_t version = 0;
  nlohmann::json line;
};
std::vector<HistoryLine> history_version_lines(const Session& s, uint64_t first_version);
// A number of a history line; -1 when the line has none under `key`.
double history_number(const nlohmann::json& line, const char* key);

// The library's own timings (ms) of each version, from the history: copy and seal from the l1 event
// (copy_s, seal_s), l2 from the l2 event (end_ns - start_ns: the encode began .. protected on every
// rank), l3 from the l3 event (write_s: rank 0's write).
struct StageTimes {
  std::vector<double> copy, seal, l2, l3;
};
// Rank 0, after close(): the versions >= first_version of the session's history. Empty without one.
StageTimes history_stage_times(const Session& s, uint64_t first_version);
// Medians: <stage>_ms and <stage>_gbps for `bytes` per rank, for each stage measured.
json stage_json(const StageTimes& t, uint64_t bytes);

}  // namespace cairn::bench
