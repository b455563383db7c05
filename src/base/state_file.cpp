#include "base/state_file.hpp"

#include <charconv>

#include "base/fsutil.hpp"

namespace cairn::state_file {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// One line's worth of `s`: newlines as spaces, then trimmed as a reader would.
std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c == '\n') c = ' ';
  return std::string(trim(out));
}

template <class T>
void parse_number(const std::string& text, T* out) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size()) *out = v;
}

}  // namespace

std::string encode(const std::vector<std::pair<std::string, std::string>>& pairs, std::string_view comment) {
  std::string out;
  if (!comment.empty()) out += "# " + one_line(comment) + "\n";
  for (const auto& [k, v] : pairs) {
    std::string key = one_line(k);
    if (key.empty() || key.front() == '#' || key.find('=') != std::string::npos) continue;
    out += key + "=" + one_line(v) + "\n";
  }
  return out;
}

std::string encode(const Values& values) {
  return encode(std::vector<std::pair<std::string, std::string>>(values.begin(), values.end()));
}

Values decode(std::string_view text) {
  Values out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(trim(line.substr(0, eq)));
    if (key.empty()) continue;
    out[key] = std::string(trim(line.substr(eq + 1)));
  }
  return out;
}

State decode_state(std::string_view text) {
  State s;
  s.values = decode(text);
  for (const auto& [key, value] : s.values) {
    if (key == "version") parse_number(value, &s.version);
    else if (key == "phase") s.phase = value;
    else if (key == "l1") parse_number(value, &s.l1);
    else if (key == "l2") parse_number(value, &s.l2);
    else if (key == "l3") parse_number(value, &s.l3);
    else if (key == "restart_version") parse_number(value, &s.restart_version);
    else if (key == "restart_level") s.restart_level = value;
    else if (key == "nranks") parse_number(value, &s.nranks);
    else if (key == "redundancy") s.redundancy = value;
  }
  return s;
}

Result<std::optional<State>> read_state(const std::string& path) {
  if (!fs::exists(path)) return std::optional<State>();
  auto text = fs::read_file(path);
  if (!text) return text.status();
  State s = decode_state(*text);
  // Every state the library writes has a phase; a file without one is not a job state (a stray file).
  if (!s.values.count("phase"))
    return make_error(Code::ERR_FORMAT, "%s: not a cairn job state (no phase= line)", path.c_str());
  return std::optional<State>(std::move(s));
}

}  // namespace cairn::state_file
