#include "job_state.hpp"

#include <charconv>

#include "base/fsutil.hpp"

namespace cairn::tool {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

template <class T>
void parse_number(const std::string& text, T* out) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size()) *out = v;
}

}  // namespace

JobState parse_job_state(std::string_view text) {
  JobState s;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(trim(line.substr(0, eq)));
    std::string value(trim(line.substr(eq + 1)));
    if (key.empty()) continue;
    if (key == "version") parse_number(value, &s.version);
    else if (key == "phase") s.phase = value;
    else if (key == "l1") parse_number(value, &s.l1);
    else if (key == "l2") parse_number(value, &s.l2);
    else if (key == "l3") parse_number(value, &s.l3);
    else if (key == "restart_version") parse_number(value, &s.restart_version);
    else if (key == "restart_level") s.restart_level = value;
    else if (key == "nranks") parse_number(value, &s.nranks);
    else if (key == "redundancy") s.redundancy = value;
    s.values[key] = value;
  }
  return s;
}

Result<std::optional<JobState>> read_job_state(const std::string& path) {
  if (!fs::exists(path)) return std::optional<JobState>();
  auto text = fs::read_file(path);
  if (!text) return text.status();
  return std::optional<JobState>(parse_job_state(*text));
}

}  // namespace cairn::tool
