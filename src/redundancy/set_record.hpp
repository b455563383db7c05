// The L2 set record (v<N>.set in every member's cache): the scheme, the members (job ranks in member
// order) and every member's manifest, so that a lost member's manifest is recovered with its data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/redundancy_scheme.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn::redundancy {

struct SetRecord {
  Redundancy scheme = Redundancy::single;
  uint32_t n = 0, m = 0;
  std::vector<uint32_t> ranks;         // job rank of each member
  std::vector<std::string> manifests;  // encoded manifest of each member
};

// Layout in docs/format.md ("L1 cache", v<N>.set): magic, format, scheme, n, m, per member its job rank
// and manifest, an xxh3 of everything before it.
std::string encode_set_record(const SetRecord& r);
// ERR_FORMAT: not a set record, or of a format or scheme this code does not know; ERR_CORRUPT: the
// checksum, a length or a count is wrong. The members' manifests are not decoded here.
Result<SetRecord> decode_set_record(const std::string& bytes);

}  // namespace cairn::redundancy
