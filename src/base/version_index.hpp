// <prefix>/.cairn/index: which versions a restart may use, as the user chose them with `cairn index`
// (SCR's scr_index; docs/tools.md "cairn index", docs/format.md "The version index"). Without the file
// every version may be used (the newest that can be rebuilt and verified wins). key=value lines:
//
//   cairn-index=1
//   current=4        the version `cairn index --current` chose (0: none); the versions newer than it at
//                    that moment are in skip
//   skip=5-10,12     versions a restart passes over (--current, --drop, a failed --add); their files stay
//   added=14         versions a verification accepted (--add)
//
// A restart passes over a version in skip, and with the restart_version knob (V > 0) every version
// newer than V. The codec and that rule are here; no MPI.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace cairn {

struct VersionIndex {
  uint64_t current = 0;
  std::set<uint64_t> skip;
  std::set<uint64_t> added;
  bool operator==(const VersionIndex&) const = default;
};

std::string encode_index(const VersionIndex& index);
// ERR_FORMAT for text that is not a format-1 index (the message says what is wrong).
Result<VersionIndex> decode_index(std::string_view text);
// The index at `path`; an empty one when there is no file; decode_index's errors otherwise.
Result<VersionIndex> read_index(const std::string& path);
// Written atomically (readers see the old index or the new one).
Status write_index(const std::string& path, const VersionIndex& index);

// Whether a restart passes over version v: skipped in the index, or newer than restart_version (> 0).
bool restart_passes_over(const VersionIndex& index, uint64_t v, uint64_t restart_version);

// "5-10,12" and back (ascending, ranges of consecutive numbers); false for text that is not that.
std::string format_version_ranges(const std::set<uint64_t>& versions);
bool parse_version_ranges(std::string_view text, std::set<uint64_t>* out);

}  // namespace cairn
