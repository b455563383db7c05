// The interposer's index of one rank's files in one version: which cairn file name (f0, f1, ...) holds
// which path of the application, of which step and mode. It travels inside the version as the file
// "cairn-interpose.index", so a restart knows the files without asking the application. Format
// (docs/interpose.md): "cairn-interpose 1\n", then per file "<name> <step> <mode, octal> <size> <length>:<path>\n",
// then "end\n". A file of an older step that was still there when the version was taken is listed with
// the name "-" and no content: after a restart it exists (stat, ls, unlink) but reading it is an error.
// decode accepts exactly that format and nothing else (fuzzed in tests/unit/interpose/interpose_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::interpose {

inline constexpr const char* kIndexName = "cairn-interpose.index";

struct IndexEntry {
  std::string name;  // the cairn file name: [a-z0-9], 1..32 bytes; "-" for a file without content
  uint64_t step = 0;
  uint32_t mode = 0644;  // permission bits (07777 at most)
  uint64_t size = 0;
  std::string path;      // absolute, no NUL, no newline
  bool operator==(const IndexEntry&) const = default;
};

std::string encode_index(const std::vector<IndexEntry>& entries);
std::optional<std::vector<IndexEntry>> decode_index(std::string_view bytes);

}  // namespace cairn::interpose
