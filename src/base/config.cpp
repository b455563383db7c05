// Loading a configuration from the knob table (knob_table.hpp): defaults, then the TOML file, then the
// CAIRN_* environment, every value checked before it is applied, with messages that name the knob, the
// source and what is accepted.
#include "base/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <variant>

#include <toml++/toml.h>

#include "base/knob_table.hpp"
#include "base/units.hpp"

extern char** environ;

namespace cairn {
namespace {

using namespace knob;

// A TOML value to a Value; a reason when of the wrong type or malformed.
std::variant<Value, std::string> from_toml(const Knob& k, const toml::node& node) {
  switch (k.kind) {
    case Kind::integer:
      if (auto i = node.as_integer()) return Value(i->get());
      return std::string(node.is_string() ? "a string, not an integer (write it without quotes)"
                                          : "not an integer");
    case Kind::floating:
      if (auto d = node.as_floating_point()) return Value(d->get());
      if (auto i = node.as_integer()) return Value(static_cast<double>(i->get()));
      return std::string(node.is_string() ? "a string, not a number (write it without quotes)"
                                          : "not a number");
    case Kind::boolean:
      if (auto b = node.as_boolean()) return Value(b->get());
      return std::string(node.is_string() ? "a string, not a boolean (write true or false, unquoted)"
                                          : "not a boolean");
    case Kind::string:
      if (auto s = node.as_string()) return Value(s->get());
      return std::string("not a string (write it in quotes)");
    case Kind::choice:
    case Kind::level:
      if (auto s = node.as_string()) {
        if (auto i = parse_choice(k, s->get())) return Value(*i);
        return std::string("unknown value");
      }
      return std::string("not a string (write it in quotes)");
    case Kind::size:
      if (auto i = node.as_integer()) return Value(i->get());
      if (auto s = node.as_string()) {
        if (auto i = parse_size(s->get())) return Value(*i);
        return std::string("not a size");
      }
      return std::string("not a size (bytes as an integer, or a string such as \"1M\")");
    case Kind::duration:
      if (auto d = node.as_floating_point()) return Value(d->get());
      if (auto i = node.as_integer()) return Value(static_cast<double>(i->get()));
      if (auto s = node.as_string()) {
        if (auto d = units::parse_duration(s->get())) return Value(*d);
        return std::string("not a duration");
      }
      return std::string("not a duration (seconds as a number, or a string such as \"15m\")");
  }
  return std::string("unsupported");
}

std::string describe_toml(const toml::node& node) {
  if (node.is_table()) return "{...}";
  if (node.is_array()) return "[...]";
  std::ostringstream os;
  node.visit([&](const auto& value) { os << value; });
  return os.str();
}

// Optimal string alignment distance: edits, with a swap of neighbours counting as one.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The nearest candidate within 2 edits (1 for words of up to 5 letters, so that "foo" does not
// suggest "log"), or "". `common` is a prefix that all names share and that does not count.
std::string suggest(const std::string& word, const std::vector<std::string>& candidates,
                    const std::string& common = "") {
  auto stem = [&](const std::string& s) {
    return lower(s.rfind(common, 0) == 0 ? s.substr(common.size()) : s);
  };
  std::string best;
  size_t best_distance = std::min<size_t>(2, std::max<size_t>(1, stem(word).size() / 3)) + 1;
  for (const std::string& c : candidates) {
    size_t dist = edit_distance(stem(word), stem(c));
    if (dist < best_distance) best = c, best_distance = dist;
  }
  return best;
}

// ---- loading ------------------------------------------------------------------------------------

// The configuration being built, with where each knob's value came from (in table order).
struct Staging {
  Config config;
  std::vector<std::string> origins;
  std::vector<bool> from_file;
};

Status bad_value(const Knob& k, const std::string& shown, const std::string& source,
                 const std::string& reason) {
  return Status(Code::ERR_CONFIG, std::string(k.name) + " = " + shown + " (" + source +
                                      "): " + reason + "; accepted: " + accepted(k));
}

Status apply_parsed(Staging& s, size_t index, const std::variant<Value, std::string>& parsed,
                    const std::string& shown, const std::string& source) {
  const Knob& k = knobs()[index];
  if (auto reason = std::get_if<std::string>(&parsed)) return bad_value(k, shown, source, *reason);
  const Value& v = std::get<Value>(parsed);
  std::string reason = check(k, v);
  if (!reason.empty()) return bad_value(k, shown, source, reason);
  store(s.config, k, v);
  s.origins[index] = source;
  return Status::ok();
}

std::vector<std::string> knob_names() {
  std::vector<std::string> names;
  for (const Knob& k : knobs()) names.push_back(k.name);
  return names;
}

std::optional<size_t> find_knob(const std::string& name) {
  for (size_t i = 0; i < knobs().size(); ++i)
    if (name == knobs()[i].name) return i;
  return std::nullopt;
}

Status apply_table(Staging& s, const toml::table& table, const std::string& path, bool nested) {
  // In file order, so that the first error reported is the first in the file.
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, node] : table) entries.emplace_back(&key, &node);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin < b.first->source().begin;
  });
  for (auto [key, node] : entries) {
    std::string name(key->str());
    std::string where = path + ":" + std::to_string(key->source().begin.line);
    if (!nested && name == "cairn") {
      if (!node->is_table())
        return make_error(Code::ERR_CONFIG, "%s: \"cairn\" must be a table ([cairn]) of knobs",
                          where.c_str());
      CAIRN_TRY(apply_table(s, *node->as_table(), path, true));
      continue;
    }
    std::optional<size_t> index = find_knob(name);
    if (!index) {
      std::vector<std::string> candidates = knob_names();
      if (!nested) candidates.push_back("cairn");
      std::string near = suggest(name, candidates);
      return Status(Code::ERR_CONFIG,
                    "unknown key \"" + name + "\" in " + where +
                        (near.empty() ? "" : " (did you mean \"" + near + "\"?)") +
                        "; `cairn config --list` shows the knobs");
    }
    if (s.from_file[*index])
      return Status(Code::ERR_CONFIG, name + " is set twice in " + path + " (" +
                                          s.origins[*index] + " and " + where +
                                          "); keep one, at top level or in [cairn]");
    CAIRN_TRY(apply_parsed(s, *index, from_toml(knobs()[*index], *node), describe_toml(*node),
                           where));
    s.from_file[*index] = true;
  }
  return Status::ok();
}

Status apply_file(Staging& s, const std::string& path, const std::string& named_by) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(Code::ERR_CONFIG, "config file %s%s is a directory", path.c_str(),
                      named_by.c_str());
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(Code::ERR_CONFIG, "config file %s%s cannot be read: %s", path.c_str(),
                      named_by.c_str(), errno != 0 ? strerror(errno) : "open failed");
  std::ostringstream text;
  text << in.rdbuf();
  toml::table table;
  try {
    table = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {
    return make_error(Code::ERR_CONFIG, "%s:%u:%u: TOML syntax error: %.*s", path.c_str(),
                      e.source().begin.line, e.source().begin.column,
                      static_cast<int>(e.description().size()), e.description().data());
  }
  return apply_table(s, table, path, false);
}

Status apply_env(Staging& s, const EnvLookup& env) {
  for (size_t i = 0; i < knobs().size(); ++i) {
    std::string name = env_name(knobs()[i]);
    const char* value = env(name.c_str());
    if (value == nullptr || *value == '\0') continue;  // empty counts as unset
    CAIRN_TRY(apply_parsed(s, i, from_text(knobs()[i], value), quoted(value),
                           "environment variable " + name));
  }
  return Status::ok();
}

Status check_across_knobs(const Staging& s) {
  const Config& c = s.config;
  if (c.interval == IntervalMode::automatic && c.mtbf_seconds <= 0)
    return make_error(Code::ERR_CONFIG,
                      "interval = \"auto\" (%s) needs the job's mean time between failures, but "
                      "mtbf_seconds = 0 (%s); accepted: mtbf_seconds > 0, or interval = \"fixed\"",
                      s.origins[*find_knob("interval")].c_str(), s.origins[*find_knob("mtbf_seconds")].c_str());
  if (c.l3_mtbf_seconds > 0 && c.mtbf_seconds > 0 && c.l3_mtbf_seconds < c.mtbf_seconds)
    return make_error(Code::ERR_CONFIG,
                      "l3_mtbf_seconds = %g (%s) is less than mtbf_seconds = %g (%s), but the failures only "
                      "level 3 recovers are a part of all failures; accepted: l3_mtbf_seconds >= "
                      "mtbf_seconds, or 0 (none)",
                      c.l3_mtbf_seconds, s.origins[*find_knob("l3_mtbf_seconds")].c_str(), c.mtbf_seconds,
                      s.origins[*find_knob("mtbf_seconds")].c_str());
  if (c.redundancy == Redundancy::rs && c.rs_parity >= c.set_size) {
    auto origin = [&](const char* name) { return s.origins[*find_knob(name)]; };
    return make_error(Code::ERR_CONFIG,
                      "rs_parity = %d (%s) must be less than set_size = %d (%s) with redundancy = "
                      "\"rs\"; accepted: rs_parity 1..%d, or a larger set_size",
                      c.rs_parity, origin("rs_parity").c_str(), c.set_size,
                      origin("set_size").c_str(), c.set_size - 1);
  }
  if (c.full_every > 1) {
    // Incremental versions name chunks at offsets of other versions' own files: shared files, other
    // file systems and compressed chunks have no such offsets.
    const char* other = c.files_per_node > 0 ? "files_per_node" : !c.data_prefixes.empty() ? "data_prefixes"
                        : c.compress != "none"                  ? "compress"
                                                                : nullptr;
    if (other)
      return make_error(Code::ERR_CONFIG,
                        "full_every = %d (%s) writes incremental L3 versions, which need the file-per-rank "
                        "layout, uncompressed; %s (%s) changes it; accepted: full_every 0 or 1, or "
                        "files_per_node = 0, data_prefixes empty and compress = \"none\"",
                        c.full_every, s.origins[*find_knob("full_every")].c_str(), other,
                        s.origins[*find_knob(other)].c_str());
  }
  if (c.service_buffer_pool < c.service_chunk) {
    auto origin = [&](const char* name) { return s.origins[*find_knob(name)]; };
    return make_error(Code::ERR_CONFIG,
                      "service_buffer_pool = %llu bytes (%s) holds not even one service_chunk of %llu bytes (%s); "
                      "accepted: service_buffer_pool >= service_chunk",
                      static_cast<unsigned long long>(c.service_buffer_pool), origin("service_buffer_pool").c_str(),
                      static_cast<unsigned long long>(c.service_chunk), origin("service_chunk").c_str());
  }
  return Status::ok();
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h = buf;
  for (char& c : h)  // hostnames are safe already; be sure, since it names a directory
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return h;
}

std::vector<std::string> unknown_env_warnings(const std::vector<std::string>& names) {
  std::vector<std::string> known;
  for (const Knob& k : knobs()) known.push_back(env_name(k));
  known.insert(known.end(), non_knob_variables().begin(), non_knob_variables().end());
  std::vector<std::string> warnings;
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string near = suggest(name, known, "CAIRN_");
    warnings.push_back("unknown environment variable " + name + " ignored" +
                       (near.empty() ? "" : " (did you mean " + near + "?)"));
  }
  return warnings;
}

std::string origin_of_default(const Knob& k) {
  return k.default_doc ? std::string("default: ") + k.default_doc : "default";
}

}  // namespace

const char* redundancy_name(Redundancy r) {
  switch (r) {
    case Redundancy::single: return "single";
    case Redundancy::partner: return "partner";
    case Redundancy::xor_set: return "xor";
    case Redundancy::rs: return "rs";
  }
  return "unknown";
}

EnvLookup process_env() {
  return [](const char* name) -> const char* { return getenv(name); };
}

std::vector<std::string> process_env_cairn_names() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    if (entry.rfind("CAIRN_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  return names;
}

Result<LoadedConfig> load_config(const char* path, const EnvLookup& env,
                                 const std::vector<std::string>& env_cairn_names) {
  Staging s;
  s.origins.resize(knobs().size());
  s.from_file.resize(knobs().size());
  for (size_t i = 0; i < knobs().size(); ++i) {
    const Knob& k = knobs()[i];
    CAIRN_TRY(apply_parsed(s, i, from_text(k, k.default_text), k.default_text, "table default")
                  .prefixed("config table"));
    s.origins[i] = origin_of_default(k);
  }

  std::string file, named_by;  // how the file was named, for messages
  if (path != nullptr) {
    file = path;
  } else if (const char* from_env = env("CAIRN_CONFIG")) {
    file = from_env;
    named_by = " (from environment variable CAIRN_CONFIG)";
  }
  if (!file.empty()) CAIRN_TRY(apply_file(s, file, named_by));
  CAIRN_TRY(apply_env(s, env));
  CAIRN_TRY(check_across_knobs(s));

  if (s.config.node.empty()) s.config.node = hostname();
  LoadedConfig loaded;
  loaded.config = std::move(s.config);
  loaded.origins = std::move(s.origins);
  loaded.warnings = unknown_env_warnings(env_cairn_names);
  return loaded;
}

}  // namespace cairn
