// The job state file, <prefix>/.cairn/state (docs/format.md, "The job state file"): key=value lines that
// the library's rank 0 rewrites atomically as the job moves (base/job_state.hpp), so that the launcher
// and the tools know where a job is without talking to it. This is its one codec: the writer encodes
// with it, every reader decodes with it. The launcher's control files (.cairn/launcher, migrate,
// migrate.result; docs/migration.md) are key=value lines of the same syntax and use it too. No MPI.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace cairn::state_file {

using Values = std::map<std::string, std::string>;

// "key=value\n" per pair, in the order given, after "# <comment>\n" when `comment` is not empty. A newline
// in a key or value is written as a space, and spaces around both are dropped (a reader trims
// them). A key that cannot be written -- empty, holding '=', or starting with '#' -- is left out.
std::string encode(const std::vector<std::pair<std::string, std::string>>& pairs, std::string_view comment = {});
std::string encode(const Values& values);  // in key order

// Lines "key=value", spaces and tabs around the key and the value trimmed (and a '\r' before the
// newline); blank lines, lines starting with '#', and lines without '=' or with an empty key are
// skipped; a key given twice keeps its last value. Never fails: what is not a line of the format is
// not read.
Values decode(std::string_view text);

// What the tools read from the state file: the keys the library writes, interpreted. A known key with
// a malformed number keeps its default; unknown keys are kept in `values`, so the library may add keys
// freely.
struct State {
  uint64_t version = 0;                // newest version started
  std::string phase;                   // what the job is doing (compute|checkpoint|flush|finalized...)
  uint64_t l1 = 0, l2 = 0, l3 = 0;     // newest complete version at each level; 0: none
  uint64_t restart_version = 0;        // the version this run restarted from; 0: none
  std::string restart_level = "none";  // none|L1|L2|L3
  int nranks = 0;
  std::string redundancy;
  Values values;                       // every key as read, known or not
};
State decode_state(std::string_view text);

// The state file at `path`; std::nullopt when it does not exist; ERR_FORMAT for a file without a
// phase= line (every state the library writes has one).
Result<std::optional<State>> read_state(const std::string& path);

}  // namespace cairn::state_file
