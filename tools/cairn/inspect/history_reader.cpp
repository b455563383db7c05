#include "inspect/history_reader.hpp"

#include <cmath>

#include "base/fsutil.hpp"

namespace cairn::history {

const nlohmann::json* Line::field(const std::string& key) const {
  if (!j_.is_object()) return nullptr;
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

std::string Line::str(const std::string& key, const std::string& fallback) const {
  const nlohmann::json* v = field(key);
  return v && v->is_string() ? v->get<std::string>() : fallback;
}

int64_t Line::i64(const std::string& key, int64_t fallback) const {
  const nlohmann::json* v = field(key);
  if (!v) return fallback;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    return u <= static_cast<uint64_t>(INT64_MAX) ? static_cast<int64_t>(u) : fallback;
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return fallback;
}

uint64_t Line::u64(const std::string& key, uint64_t fallback) const {
  const nlohmann::json* v = field(key);
  if (!v) return fallback;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer()) return v->get<int64_t>() >= 0 ? static_cast<uint64_t>(v->get<int64_t>()) : fallback;
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d >= 0 && d < 1.8e19) return static_cast<uint64_t>(d);
  }
  return fallback;
}

double Line::num(const std::string& key, double fallback) const {
  const nlohmann::json* v = field(key);
  return v && v->is_number() ? v->get<double>() : fallback;
}

bool Line::flag(const std::string& key, bool fallback) const {
  const nlohmann::json* v = field(key);
  return v && v->is_boolean() ? v->get<bool>() : fallback;
}

std::vector<std::string> Line::strings(const std::string& key) const {
  const nlohmann::json* v = field(key);
  std::vector<std::string> out;
  if (!v || !v->is_array()) return out;
  for (const auto& item : *v) {
    if (!item.is_string()) return {};
    out.push_back(item.get<std::string>());
  }
  return out;
}

Result<Line> parse_line(std::string_view text) {
  auto j = decode_line(text);
  if (!j) return j.status();
  return Line(std::move(j).value());
}

Parsed parse_history(std::string_view text, bool at_end, uint64_t first_line) {
  constexpr int kMaxWarnings = 5;
  Parsed out;
  size_t pos = 0;
  uint64_t line_no = 0, newer = 0, bad = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (at_end) {
        out.warnings.push_back("line " + std::to_string(first_line + line_no) + ": torn last line (" +
                               std::to_string(text.size() - pos) + " bytes without a newline: a write cut short), skipped");
        pos = text.size();
      }
      break;
    }
    std::string_view one = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (one.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto line = parse_line(one);
    if (!line) {
      if (++bad <= kMaxWarnings)
        out.warnings.push_back("line " + std::to_string(first_line + line_no - 1) + ": " + line.status().message() +
                               "; skipped");
      continue;
    }
    if (line->format() > static_cast<uint64_t>(kFormat)) {
      ++newer;
      continue;
    }
    out.lines.push_back(std::move(line).value());
  }
  out.consumed = pos;
  out.line_count = line_no;
  if (bad > kMaxWarnings)
    out.warnings.push_back(std::to_string(bad - kMaxWarnings) + " more line(s) that are not history lines, skipped");
  if (newer)
    out.warnings.push_back(std::to_string(newer) + " line(s) of a newer format (v > " + std::to_string(kFormat) +
                           ", written by a newer cairn), skipped");
  return out;
}

Result<HistoryFile> read_history(const std::string& file) {
  HistoryFile h;
  h.path = file;
  if (!fs::exists(file)) return h;
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(file));
  h.exists = true;
  h.parsed = parse_history(text, /*at_end=*/true);
  return h;
}

}  // namespace cairn::history
