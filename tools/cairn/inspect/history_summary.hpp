// The job history summarised for the tools that draw and print it (`cairn plot`, `cairn watch`): per
// launch (its restarts, the versions it wrote), per version and level (when it got there, bytes,
// bandwidth) and the failures. Built from the lines history_reader.hpp reads (docs/format.md, "The job
// history").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "inspect/history_reader.hpp"

namespace cairn::history {

// A version's passage through one level.
struct LevelRecord {
  bool reached = false;
  int64_t start_ns = 0, end_ns = 0;  // L1: the copy began .. every rank sealed; L2: encode began ..
                                     // protected everywhere; L3: rank 0 began writing .. committed
  double seconds = 0;                // the duration bandwidth is computed over: L1 the blocking copy
                                     // (rank 0); L2, L3 end - start
  uint64_t bytes = 0;                // snapshot bytes over every rank (0: unknown)
  uint64_t rank_bytes = 0;           // rank 0's snapshot bytes (L1, L3)
  uint64_t redundancy_bytes = 0;     // L2: redundancy data written over every rank
  // L1: bytes copied into the slots over every rank (an incremental snapshot copies fewer); L2: bytes the
  // set exchanges sent, and those full exchanges would have sent. kUnknown: the line did not say.
  static constexpr uint64_t kUnknown = ~0ull;
  uint64_t copied_bytes = kUnknown;
  uint64_t sent_bytes = kUnknown, full_sent_bytes = kUnknown;
  uint64_t l3_bytes_written = 0;     // L3: bytes put into L3 files over every rank (an incremental
                                     // version's changed chunks, compressed chunks); 0: unknown
  bool at_finalize = false;          // L3: written by cairn_finalize (flush_on_finalize)
  std::string via;                   // L3: who wrote it ("embedded", "service"); empty when the line says not
  size_t launch = 0;                 // index into Summary::launches
  // Aggregate bytes per second: bytes / seconds; 0 when either is unknown.
  double bandwidth() const { return bytes && seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
};

struct Failure {
  uint64_t version = 0;
  int level = 0;  // 1..3; 0 for a version discarded by the application (file API, valid = 0)
  int64_t t_ns = 0;
  std::string error;
  size_t launch = 0;
};

struct VersionRecord {
  uint64_t version = 0;
  LevelRecord level[3];  // L1, L2, L3 (the latest record of each, should a version be written twice)
  bool discarded = false;
  size_t launch = 0;     // the launch that wrote it (its first record)
};

struct Restart {
  uint64_t version = 0;
  int level = 0;  // 1..3
  int64_t start_ns = 0, end_ns = 0;
  uint64_t bytes = 0;     // the version's bytes over every rank, when the history knew them
  bool rejected = false;  // the application rejected it (cairn_complete_restart(0))
};

struct Launch {
  std::string id;
  bool started = false;               // its "start" line was read
  int64_t start_ns = 0;               // its start line, else its first line
  int64_t last_ns = 0;                // its last line
  bool finalized = false;             // an "end" line: cairn_finalize ran
  std::string end_status;             // "ok" or the error cairn_finalize returned
  bool exit_requested = false;
  uint64_t ranks = 0, nodes = 0;
  std::vector<std::string> groups;    // failure groups (nodes), in rank order
  Line start;                         // the whole start line (configuration)
  std::vector<Restart> restarts;      // usually none or one
  std::vector<uint64_t> versions;     // versions it wrote at L1, in order
};

struct Summary {
  std::vector<Launch> launches;                // in file order
  std::map<uint64_t, VersionRecord> versions;  // every version any line names
  std::vector<Failure> failures;               // level failures and discards, in file order
  int64_t first_ns = 0, last_ns = 0;           // the span of every time in the history
};
// Builds a Summary line by line (a reader following a running job adds lines as they come).
class Summarizer {
 public:
  void add(const Line& line);
  const Summary& summary() const { return s_; }

 private:
  Summary s_;
  std::map<std::string, size_t> index_;  // launch id -> index
};
Summary summarize(const std::vector<Line>& lines);

// Bandwidth of one level over the history: the newest version's, and the mean (every byte over every
// second: the sum of the versions' bytes over the sum of their durations). 0 where unknown.
struct LevelStats {
  uint64_t samples = 0;       // versions with a known bandwidth at the level
  uint64_t last_version = 0;  // the newest version that reached the level (with or without bandwidth)
  int64_t last_end_ns = 0;    // when it did
  double last = 0;            // bandwidth of the newest version with a known one
  double mean = 0;
};
LevelStats level_stats(const Summary& s, int level);

}  // namespace cairn::history
