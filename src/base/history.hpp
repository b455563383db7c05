// The job history, <prefix>/.cairn/history: an append-only file of JSON lines written by rank 0, one
// line per event (a launch began, a restart, a version reached a level or failed at one, a version was
// discarded, the launch finalized). Unlike the state file, which says where the job is now, and the
// versions on disk, which pruning removes, the history keeps every launch and every version, so
// `cairn plot` and `cairn watch` can show a whole campaign. Format: docs/format.md ("The job history").
//
// Three parts: the line codec (LineWriter, parse_line), the reader (parse_history, read_history) and a
// summary per launch and version (summarize) for the tools, all without MPI; and the Writer the
// runtime's rank 0 appends with (core/job_state.hpp holds it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.hpp"
#include "base/layout.hpp"
#include "base/status.hpp"

namespace cairn::history {

// The line format this code writes, and the newest it reads ("v" of every line).
constexpr int kFormat = 1;

// <prefix>/.cairn/history
std::string path(const Layout& layout);

// "L1", "L2", "L3" for levels 1..3; "none" otherwise. level_number("L2") == 2; 0 when unknown.
const char* level_name(int level);
int level_number(std::string_view name);

// ---- the line codec --------------------------------------------------------------------------------

// One value of a line. Integers are kept exactly (nanosecond times do not fit a double); arrays hold
// strings only in format 1 (a parser skips other arrays and nested objects, so a writer may add them).
struct Value {
  enum class Kind { null, boolean, integer, real, string, list };
  Kind kind = Kind::null;
  bool boolean = false;
  bool negative = false;  // integer: the value is -magnitude
  uint64_t magnitude = 0; // integer: absolute value
  double real = 0;        // real; for an integer, its value as a double
  std::string text;       // string
  std::vector<std::string> list;
};

// One parsed line: its fields by name.
struct Line {
  std::map<std::string, Value> fields;

  bool has(const std::string& key) const { return fields.count(key) != 0; }
  int format() const { return static_cast<int>(i64("v", 0)); }
  std::string event() const { return str("ev"); }
  std::string str(const std::string& key, const std::string& fallback = "") const;
  // Integers as such; a real is truncated; anything else (or a negative value for u64) is `fallback`.
  int64_t i64(const std::string& key, int64_t fallback = 0) const;
  uint64_t u64(const std::string& key, uint64_t fallback = 0) const;
  double num(const std::string& key, double fallback = 0) const;  // integer or real
  bool flag(const std::string& key, bool fallback = false) const;
  std::vector<std::string> strings(const std::string& key) const;
};

// Builds one line: {"v":1,"ev":"<event>", then the fields in the order added, then "}\n". Strings are
// escaped as JSON requires (quote, backslash, control characters; bytes that are not UTF-8 as \u00XX).
class LineWriter {
 public:
  explicit LineWriter(std::string_view event);
  LineWriter& str(std::string_view key, std::string_view value);
  LineWriter& i64(std::string_view key, int64_t value);
  LineWriter& u64(std::string_view key, uint64_t value);
  LineWriter& real(std::string_view key, double value);  // 9 significant digits; NaN/inf as null
  LineWriter& boolean(std::string_view key, bool value);
  LineWriter& strings(std::string_view key, const std::vector<std::string>& values);
  std::string finish();  // the line, with its newline; the writer is spent

 private:
  void key(std::string_view k);
  std::string out_;
};

// Appends `text` as a JSON string (with its quotes).
void append_json_string(std::string* out, std::string_view text);

// Parses one line (without its newline) into its fields. ERR_FORMAT "…: <what> at byte N" when the
// line is not one JSON object; a line without a "v" field is ERR_FORMAT too.
Result<Line> parse_line(std::string_view text);

// ---- reading ---------------------------------------------------------------------------------------

struct Parsed {
  std::vector<Line> lines;            // in file order, only lines of a format this reader knows
  std::vector<std::string> warnings;  // lines skipped, one message each (at most a few, then a count)
  uint64_t consumed = 0;              // bytes of `text` accounted for (complete lines)
  uint64_t line_count = 0;            // complete lines in those bytes
};

// Parses the bytes of a history file. A line that is not valid is skipped with a warning; so is a
// line of a newer format (v > kFormat). The bytes after the last newline are a line still being
// written, or one torn by a crash: with `at_end` they are skipped with a warning ("torn last line"),
// without it they are left unconsumed for the next read (a reader following a running job).
// Warnings number lines from `first_line`.
Parsed parse_history(std::string_view text, bool at_end, uint64_t first_line = 1);

// The whole file. `exists` false (and no error) when there is no history.
struct HistoryFile {
  bool exists = false;
  std::string path;
  Parsed parsed;
};
Result<HistoryFile> read_history(const std::string& path);

// ---- the summary the tools draw and print ------------------------------------------------------------

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
  bool at_finalize = false;          // L3: written by cairn_finalize (flush_on_finalize)
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

// ---- writing (the runtime's rank 0) ------------------------------------------------------------------

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
  // The open writer of this process (rank 0 of a running job), for the C API edge; nullptr elsewhere.
  static Writer* current();
  std::string launch() const { return launch_; }

  void start(const StartInfo& info);
  // cairn_restart_available found a version: the restart's clock starts here, if not already running.
  void restart_probe();
  // Restored version v at level (1..3); start_ns of the cairn_restart call (or of the probe before it).
  void restart(uint64_t v, int level, int64_t start_ns);
  void restart_rejected(uint64_t v, int level);
  // Version v complete at L1 on every rank: the copy began at start_ns (rank 0's manifest), took
  // copy_s, sealing seal_s; bytes over every rank, rank 0's bytes.
  void l1(uint64_t v, int64_t start_ns, double copy_s, double seal_s, uint64_t bytes, uint64_t rank_bytes);
  // Version v protected everywhere; the encode stage began at start_ns; redundancy bytes over every rank.
  void l2(uint64_t v, int64_t start_ns, uint64_t redundancy_bytes, const std::string& scheme);
  // Rank 0 begins writing version v to L3 (at_finalize: from cairn_finalize).
  void l3_began(uint64_t v, bool at_finalize);
  // Version v committed in L3; rank 0 wrote for write_s.
  void l3(uint64_t v, double write_s, uint64_t rank_bytes);
  void failed(uint64_t v, int level, const std::string& error);
  void discarded(uint64_t v, const std::string& error);
  void end(const std::string& status, uint64_t versions, bool exit_requested);

 private:
  LineWriter line(std::string_view event);  // with "launch" and "t"
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

int64_t now_ns();

}  // namespace cairn::history
