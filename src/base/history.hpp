// The job history, <prefix>/.cairn/history: an append-only file of JSON lines written by rank 0, one
// line per event (a launch began, a restart, a version reached a level or failed at one, a version was
// discarded, the launch finalized). Unlike the state file, which says where the job is now, and the
// versions on disk, which pruning removes, the history keeps every launch and every version, so
// `cairn plot` and `cairn watch` can show a whole campaign. Format: docs/format.md ("The job history").
//
// The library only writes it: the Writer below, which the runtime's rank 0 appends with
// (base/job_state.hpp holds it), encodes through the line codec of base/history_line.hpp. The reader
// and the summary per launch and version belong to the tools (tools/cairn/inspect/history_reader.hpp,
// history_summary.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.hpp"
#include "base/layout.hpp"

namespace cairn::history {

// The line format this code writes, and the newest it reads ("v" of every line).
constexpr int kFormat = 1;

// A byte count the caller does not know (the field is left out of the line).
constexpr uint64_t kUnknownBytes = UINT64_MAX;

// <prefix>/.cairn/history
std::string path(const Layout& layout);

// "L1", "L2", "L3" for levels 1..3; "none" otherwise. level_number("L2") == 2; 0 when unknown.
const char* level_name(int level);
int level_number(std::string_view name);

// What a launch records about itself when it starts.
struct StartInfo {
  uint64_t ranks = 0;
  std::vector<std::string> groups;  // failure group of every rank, in rank order (the line lists each once)
  std::string redundancy;
  bool l2 = false;                  // L2 active (enough failure groups)
  int set_size = 0, rs_parity = 0, flush_every = 0, cache_versions = 0, keep_flushed = 0;
  uint64_t chunk_size = 0;
  std::string compress;
  bool flush_on_finalize = false;
  std::string progress;             // "thread" (MPI_THREAD_MULTIPLE) or "calls"
  uint64_t newest_version = 0;      // the newest version any level held at start
  std::string job;
};

// The start line's contents from the job's configuration and placement.
StartInfo start_info(const Config& cfg, uint64_t ranks, const std::vector<std::string>& groups, bool l2,
                     bool thread_progress, uint64_t newest_version);

// Appends lines to the history. Only the writer (rank 0) opens the file; on every other rank each
// call does nothing. Cheap: one write(2) per line on a file opened once with O_APPEND, no fsync. The
// first failure to write is logged as a warning and ends the history for this process (the job goes
// on). Thread-safe: the application thread and the pipeline's worker both call it.
class Writer {
 public:
  Writer() = default;
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void open(const std::string& path, bool writer);
  void close();
  bool active();
  std::string launch() const { return launch_; }

  void start(const StartInfo& info);
  // cairn_restart_available found a version: the restart's clock starts here, if not already running.
  void restart_probe();
  // Restored version v at level (1..3); start_ns of the cairn_restart call (or of the probe before it).
  void restart(uint64_t v, int level, int64_t start_ns);
  void restart_rejected(uint64_t v, int level);
  // Version v complete at L1 on every rank: the copy began at start_ns (rank 0's manifest), took
  // copy_s, sealing seal_s; bytes over every rank, rank 0's bytes, and `copied`, over every rank, the
  // bytes copied into the slots (fewer when an incremental snapshot left unchanged ones in place; left
  // out of the line when kUnknownBytes).
  void l1(uint64_t v, int64_t start_ns, double copy_s, double seal_s, uint64_t bytes, uint64_t rank_bytes,
          uint64_t copied = kUnknownBytes);
  // Version v protected everywhere; the encode stage began at start_ns; redundancy bytes over every rank;
  // `sent`, over every rank, the bytes the set exchanges sent, and `full_sent` those full exchanges would
  // have sent (fewer sent when only the changes moved; both left out of the line when full_sent is 0).
  void l2(uint64_t v, int64_t start_ns, uint64_t redundancy_bytes, const std::string& scheme, uint64_t sent = 0,
          uint64_t full_sent = 0);
  // Rank 0 begins writing version v to L3 (at_finalize: from cairn_finalize).
  void l3_began(uint64_t v, bool at_finalize);
  // Version v committed in L3; rank 0 wrote for write_s. `via` names who moved the bytes: the flusher
  // ("embedded": the job's own worker; "service": the checkpoint service's agents). `written`, over
  // every rank, and `rank_written`, rank 0's: the bytes put into L3 files (an incremental version's
  // changed chunks, compressed chunks), each left out of the line when kUnknownBytes.
  void l3(uint64_t v, double write_s, uint64_t rank_bytes, std::string_view via = "embedded",
          uint64_t written = kUnknownBytes, uint64_t rank_written = kUnknownBytes);
  void failed(uint64_t v, int level, const std::string& error);
  void discarded(uint64_t v, const std::string& error);
  void end(const std::string& status, uint64_t versions, bool exit_requested);

 private:
  void emit(const std::string& line);
  uint64_t bytes_of(uint64_t v);             // aggregate bytes known for v, else 0 (caller holds mu_)
  void remember_bytes(uint64_t v, uint64_t bytes);
  uint64_t lookup_bytes_in_file(uint64_t v);

  std::mutex mu_;
  int fd_ = -1;
  bool writer_ = false;
  std::string path_, launch_;
  std::map<uint64_t, uint64_t> bytes_;                     // aggregate bytes of recent versions
  std::map<uint64_t, std::pair<int64_t, bool>> l3_start_;  // L3 writes begun: start, at_finalize
  int64_t probe_ns_ = 0;
  bool torn_ = false;  // the file ends inside a line (a launch died writing it): start with a newline
};

// Unix time in nanoseconds (the history's clock).
int64_t now_ns();

}  // namespace cairn::history
