// Halt requests and time limits: the halt file <prefix>/.cairn/halt (format in docs/halt.md), what
// its conditions ask of a running job, the times they name, and the job's end time from Slurm.
// Parsing and decisions are pure functions; HaltWatcher (rank 0's reading of the file) and
// slurm_end_time() (which runs squeue/scontrol) do the I/O.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace cairn::policy {

// ---- the halt file --------------------------------------------------------------------------------

// The conditions in a halt file. A file that exists but sets no condition (empty, only comments, or
// nothing readable) is a plain halt: checkpoint at the next chance, then exit.
struct HaltConditions {
  std::optional<int64_t> checkpoints;        // exit once version checkpoints_from + checkpoints is taken
  std::optional<uint64_t> checkpoints_from;  // the newest version number when the halt was set
  std::optional<int64_t> before;             // Unix s: checkpoint and exit once now >= before - halt seconds
  std::optional<int64_t> after;              // Unix s: exit after the first checkpoint taken at or after it
  std::optional<int64_t> seconds;            // checkpoint and exit once end_time - now <= seconds
  bool immediate = false;                    // exit at the next cairn_should_exit, without a checkpoint

  bool plain() const { return !checkpoints && !before && !after && !seconds && !immediate; }
  bool operator==(const HaltConditions&) const = default;
};

struct ParsedHalt {
  HaltConditions conditions;
  // One line each, e.g. "line 2: unknown key 'checkpoint' (did you mean 'checkpoints'?); line ignored".
  std::vector<std::string> warnings;
};

// Never fails: malformed lines, unknown keys and bad values are skipped with a warning.
ParsedHalt parse_halt_file(std::string_view text);
// A comment header, then one key=value line per condition set, in a fixed order (what `cairn halt`
// writes). parse_halt_file(format_halt_file(c)).conditions == c.
std::string format_halt_file(const HaltConditions& c);

// What a halt asks of the job at one moment. The values are ordered (a max-reduction keeps the
// strongest) and travel in the runtime's reduction.
enum class HaltAction {
  none = 0,                  // nothing yet
  checkpoint_then_exit = 1,  // a checkpoint at the next cairn_need_checkpoint, then exit
  exit_now = 2,              // exit at the next cairn_should_exit; no further checkpoint
};

struct HaltVerdict {
  HaltAction action = HaltAction::none;
  std::string reason;  // the condition that decided, e.g. "before=1795456800 (...) with 300 s to spare"
};

struct HaltContext {
  double now = 0;                  // Unix seconds
  int64_t end_time = 0;            // the job's end (Unix seconds); 0: unknown
  double halt_seconds = 0;         // the halt_seconds knob; the file's seconds=N replaces it for before=
  uint64_t newest_version = 0;     // the newest version number started, by this run or an earlier one
  double last_checkpoint_end = 0;  // Unix s at which this run's newest checkpoint was taken; 0: none yet
};

// exit_now wins over checkpoint_then_exit. checkpoints=N without checkpoints_from counts from 0
// (HaltWatcher fills checkpoints_from in before it asks).
HaltVerdict evaluate_halt(const HaltConditions& c, const HaltContext& ctx);

// Rank 0's view of the halt file. A stat() on every call; the file is read again only when its
// inode, size or modification time changed. An empty file counts only once it is 0.5 s old (by its
// mtime or by how long this watcher has seen it), so that `echo checkpoints=2 > halt`, which
// creates the file empty first, is not taken for a plain halt.
class HaltWatcher {
 public:
  // The verdict for the file at `path` (none when it does not exist). `messages` gets the parse
  // warnings of a file read anew and a line whenever the verdict's action changes.
  HaltVerdict observe(const std::string& path, const HaltContext& ctx, std::vector<std::string>* messages);

 private:
  bool present_ = false;
  ino_t inode_ = 0;
  off_t size_ = 0;
  int64_t mtime_ns_ = 0;
  double first_seen_ = 0;  // ctx.now when this version of the file was first seen
  bool settled_ = false;   // read and parsed (an empty file waits to settle)
  HaltConditions conditions_;
  HaltAction last_action_ = HaltAction::none;
};

// ---- times --------------------------------------------------------------------------------------

// A point in time for --before/--after: Unix seconds ("1795456800"), ISO 8601 in local time
// ("2026-11-22T18:00", "2026-11-22 18:00:30", "2026-11-22") or with a zone ("...Z", "...+01:00"),
// or relative to `now` ("+2h", "+30m", "+1h30m", "+90s", "+1d"). ERR_INVALID_ARG says what is wrong.
Result<int64_t> parse_time_spec(std::string_view text, int64_t now);
// A duration in whole seconds: "300", "90s", "5m", "2h", "1d", "1h30m" (units::parse_whole_seconds).
// ERR_INVALID_ARG when malformed.
Result<int64_t> parse_duration(std::string_view text);
// "2026-11-22T18:00:00+01:00" in local time.
std::string format_time(int64_t unix_seconds);

// ---- the job's end time from Slurm ---------------------------------------------------------------

// Slurm's time format as squeue and scontrol print it ("2026-11-22T18:00:00", local time);
// nullopt for "N/A", "Unknown", "NONE", "" or anything malformed.
std::optional<int64_t> parse_slurm_time(std::string_view text);
// The output of `squeue -h -j ID -o %e`: the first non-empty line.
std::optional<int64_t> parse_squeue_end_time(std::string_view output);
// The output of `scontrol show job ID`: the EndTime= field.
std::optional<int64_t> parse_scontrol_end_time(std::string_view output);

// Runs a command (argv[0] looked up in PATH) and returns its standard output, or nullopt when it
// cannot be started, fails or exceeds its time limit.
using CommandRunner = std::function<std::optional<std::string>(const std::vector<std::string>& argv)>;
// posix_spawnp with stdin and stderr on /dev/null; killed after `timeout_seconds`.
std::optional<std::string> run_command(const std::vector<std::string>& argv, double timeout_seconds);

struct SlurmEndTime {
  int64_t end_time = 0;  // Unix seconds; 0: not found
  std::string source;    // "SLURM_JOB_END_TIME", "squeue", "scontrol"
  std::string problem;   // why nothing was found, when in a job
};
// Inside a Slurm job (SLURM_JOB_ID set): SLURM_JOB_END_TIME when set (newer Slurm), else the output
// of `squeue -h -j ID -o %e`, else of `scontrol show job ID`. Outside a job: end_time 0, no problem.
SlurmEndTime slurm_end_time(const std::function<const char*(const char*)>& env, const CommandRunner& run);

}  // namespace cairn::policy
