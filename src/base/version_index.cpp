#include "base/version_index.hpp"

#include "base/fsutil.hpp"
#include "base/layout.hpp"
#include "base/state_file.hpp"

namespace cairn {
namespace {
constexpr uint64_t kMaxVersion = 99999999;  // the widest L3 directory name, v99999999
constexpr uint64_t kMaxRange = 1000000;     // versions one range may name (a bound on memory)
}  // namespace

std::string format_version_ranges(const std::set<uint64_t>& versions) {
  std::string out;
  for (auto it = versions.begin(); it != versions.end();) {
    uint64_t first = *it, last = first;
    for (++it; it != versions.end() && *it == last + 1; ++it) last = *it;
    out += (out.empty() ? "" : ",") + std::to_string(first);
    if (last != first) out += "-" + std::to_string(last);
  }
  return out;
}

bool parse_version_ranges(std::string_view text, std::set<uint64_t>* out) {
  out->clear();
  if (text.empty()) return true;
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    size_t dash = item.find('-');
    uint64_t first = 0, last = 0;
    if (!parse_decimal(item.substr(0, dash), kMaxVersion, &first) || first == 0) return false;
    last = first;
    if (dash != std::string_view::npos && (!parse_decimal(item.substr(dash + 1), kMaxVersion, &last) || last <= first))
      return false;
    if (last - first >= kMaxRange) return false;
    for (uint64_t v = first; v <= last; ++v) out->insert(v);
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

std::string encode_index(const VersionIndex& index) {
  return state_file::encode({{"cairn-index", "1"},
                             {"current", std::to_string(index.current)},
                             {"skip", format_version_ranges(index.skip)},
                             {"added", format_version_ranges(index.added)}},
                            "which versions a restart may use: cairn index (docs/tools.md)");
}

Result<VersionIndex> decode_index(std::string_view text) {
  const char* what = "version index";
  state_file::Values kv = state_file::decode(text);
  if (kv["cairn-index"] != "1") return make_error(Code::ERR_FORMAT, "%s: not a format-1 version index", what);
  VersionIndex index;
  if (!parse_decimal(kv["current"], kMaxVersion, &index.current))
    return make_error(Code::ERR_FORMAT, "%s: current '%s' is not a version", what, kv["current"].c_str());
  if (!parse_version_ranges(kv["skip"], &index.skip))
    return make_error(Code::ERR_FORMAT, "%s: skip '%s' is not a list of versions (e.g. 5-10,12)", what,
                      kv["skip"].c_str());
  if (!parse_version_ranges(kv["added"], &index.added))
    return make_error(Code::ERR_FORMAT, "%s: added '%s' is not a list of versions (e.g. 5-10,12)", what,
                      kv["added"].c_str());
  return index;
}

Result<VersionIndex> read_index(const std::string& path) {
  if (!fs::exists(path)) return VersionIndex{};
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(path));
  auto index = decode_index(text);
  if (!index) return Status(index.status().code(), path + ": " + index.status().message());
  return index;
}

Status write_index(const std::string& path, const VersionIndex& index) {
  return fs::write_file_atomic(path, encode_index(index));
}

bool restart_passes_over(const VersionIndex& index, uint64_t v, uint64_t restart_version) {
  return index.skip.count(v) > 0 || (restart_version > 0 && v > restart_version);
}

}  // namespace cairn
