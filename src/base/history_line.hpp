// The line codec of the job history, <prefix>/.cairn/history (docs/format.md, "The job history"): one
// JSON object per line, written and read through nlohmann_json. The library's Writer (history.hpp, which
// also holds the format number and the level names) encodes with it; the tools' reader
// (tools/cairn/inspect/history_reader.hpp) decodes with it. No MPI.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/history.hpp"
#include "base/status.hpp"

namespace cairn::history {

// Builds one line: {"v":1,"ev":"<event>", then the fields in the order added, then "}\n". Integers are
// written exactly (nanosecond times need 61 bits: not a double); a real that is not finite is null;
// strings are made valid UTF-8 first (to_utf8), then escaped as JSON requires.
class LineWriter {
 public:
  explicit LineWriter(std::string_view event);
  LineWriter& str(std::string_view key, std::string_view value);
  LineWriter& i64(std::string_view key, int64_t value);
  LineWriter& u64(std::string_view key, uint64_t value);
  LineWriter& real(std::string_view key, double value);
  LineWriter& boolean(std::string_view key, bool value);
  LineWriter& strings(std::string_view key, const std::vector<std::string>& values);
  std::string finish() const;  // the line, with its newline

 private:
  nlohmann::ordered_json line_;
};

// `text` as valid UTF-8: valid sequences are kept; any other byte stands for the character of the same
// value (U+0080..U+00FF, as Latin-1 would read it), so no name or message is ever lost or refused.
std::string to_utf8(std::string_view text);

// Decodes one line (without its newline): a JSON object whose "v" is an integer >= 1. Anything else is
// ERR_FORMAT "not a history line: <what> at byte N". Never throws.
Result<nlohmann::json> decode_line(std::string_view text);

}  // namespace cairn::history
