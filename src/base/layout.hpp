// Where everything lives, derived from the configuration alone, so the library, the launcher and the
// tools agree without talking to each other. See docs/architecture.md ("Where data lives").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/config.hpp"

namespace cairn {

struct Layout {
  std::string prefix;      // absolute L3 directory
  std::string control;     // <prefix>/.cairn: state file, halt file, failure-injection rendezvous
  std::string cache_job;   // <cache_dir>/cairn-<job>: this job's L1 cache, one subdirectory per node

  std::string state_file() const { return control + "/state"; }
  std::string halt_file() const { return control + "/halt"; }
  std::string inject_dir() const { return control + "/inject"; }
  // Prefix ownership (base/prefix_owner.hpp): the job holding the prefix, and whose checkpoints it holds.
  std::string owner_file() const { return control + "/owner"; }
  std::string identity_file() const { return control + "/identity"; }
  // Which versions a restart may use (base/version_index.hpp, `cairn index`).
  std::string index_file() const { return control + "/index"; }
  // Process migration (docs/migration.md): `cairn run`'s launcher file, `cairn migrate`'s request,
  // and the launcher's answer to it.
  std::string launcher_file() const { return control + "/launcher"; }
  std::string migrate_file() const { return control + "/migrate"; }
  std::string migrate_result_file() const { return control + "/migrate.result"; }
  std::string node_cache(const std::string& node) const;            // <cache_job>/<node>
  std::string rank_cache(const std::string& node, int rank) const;  // <cache_job>/<node>/r<rank>
  std::string l3_version_dir(uint64_t version) const;               // <prefix>/v<00000042>
  static std::string l3_version_name(uint64_t version);             // "v00000042"
  // Parse "v00000042" (exactly) into 42; false otherwise.
  static bool parse_l3_version_name(const std::string& name, uint64_t* version);
};

// A number as std::to_string writes it (decimal, no sign, no leading zero but "0"), at most `max`: the
// numbers of file names and small text records, so that their parsers accept exactly what was written.
bool parse_decimal(std::string_view digits, uint64_t max, uint64_t* out);

// The job name used in the cache path: Config::job, or "<basename of prefix>-<8 hex of xxh3(prefix)>".
std::string job_name(const Config& config);
Layout make_layout(const Config& config);

}  // namespace cairn
