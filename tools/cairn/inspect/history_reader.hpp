// Reading the job history, <prefix>/.cairn/history (docs/format.md, "The job history"): its lines,
// decoded by the library's line codec (base/history_line.hpp), with the reader's rules for torn, bad
// and newer lines. The library only writes the history (base/history.hpp); `cairn plot` and
// `cairn watch` read it, summarised per launch and version by history_summary.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/history_line.hpp"
#include "base/status.hpp"

namespace cairn::history {

// One decoded line: a JSON object. Each accessor gives `fallback` for a field that is missing or of
// another kind, so a reader ignores what it does not know (nested objects, arrays of anything but
// strings, the fields of a newer writer).
class Line {
 public:
  Line() = default;
  explicit Line(nlohmann::json object) : j_(std::move(object)) {}

  bool has(const std::string& key) const { return j_.is_object() && j_.contains(key); }
  uint64_t format() const { return u64("v", 0); }
  std::string event() const { return str("ev"); }
  std::string str(const std::string& key, const std::string& fallback = "") const;
  // Integers exactly; a real is truncated; a value out of range (or negative for u64) is `fallback`.
  int64_t i64(const std::string& key, int64_t fallback = 0) const;
  uint64_t u64(const std::string& key, uint64_t fallback = 0) const;
  double num(const std::string& key, double fallback = 0) const;  // integer or real
  bool flag(const std::string& key, bool fallback = false) const;
  // An array of strings; empty for anything else.
  std::vector<std::string> strings(const std::string& key) const;
  const nlohmann::json& json() const { return j_; }

 private:
  const nlohmann::json* field(const std::string& key) const;
  nlohmann::json j_ = nlohmann::json::object();
};

// decode_line (base/history_line.hpp) as a Line: ERR_FORMAT when the text is not one.
Result<Line> parse_line(std::string_view text);

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

}  // namespace cairn::history
