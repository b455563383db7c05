// The job state file, <prefix>/.cairn/state: key=value lines that the library's rank 0 rewrites
// (atomically) as the job moves, so the launcher and the tools know where a job is without talking to
// it. Unknown keys are kept but not interpreted, so the library may add keys freely.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace cairn::tool {

struct JobState {
  uint64_t version = 0;                // newest version started
  std::string phase;                   // what the job is doing (compute|checkpoint|flush|...)
  uint64_t l1 = 0, l2 = 0, l3 = 0;     // newest complete version at each level; 0: none
  uint64_t restart_version = 0;        // the version this run restarted from; 0: none
  std::string restart_level = "none";  // none|L1|L2|L3
  int nranks = 0;
  std::string redundancy;
  std::map<std::string, std::string> values;  // every key as read, known or not
};

// Lines "key=value" (spaces around both trimmed); blank lines, '#' comments and malformed lines are
// skipped; a known key with a malformed number keeps its default.
JobState parse_job_state(std::string_view text);

// The state at `path`; std::nullopt when the file does not exist.
Result<std::optional<JobState>> read_job_state(const std::string& path);

}  // namespace cairn::tool
