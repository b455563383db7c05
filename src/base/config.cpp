// The knob table and everything made from it: the TOML and environment parsers, validation, the
// `cairn config --list` listing, the docs' markdown table and the sample config.
#include "base/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <variant>

#include <toml++/toml.h>

#include "base/signal_names.hpp"

extern char** environ;

namespace cairn {
namespace {

// ---- the table ----------------------------------------------------------------------------------

enum class Kind { integer, floating, boolean, string, choice, level, size };
// Checks beyond type and bounds.
enum class Rule { none, not_empty, path_component, multiple_of_64, signal_name };

using Member = std::variant<int Config::*, int64_t Config::*, uint64_t Config::*, double Config::*,
                            bool Config::*, std::string Config::*, Redundancy Config::*,
                            log::Level Config::*, IntervalMode Config::*, SnapshotMode Config::*>;

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr int64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct Knob {
  const char* name;
  Kind kind;
  Member member;
  // The default, written as in an environment variable and parsed by the same code. For node and job
  // "" means derived at load time (the hostname; a name from the prefix).
  const char* default_text;
  int64_t min = 0;  // integer, size: inclusive bounds; floating: lower bound only
  int64_t max = kNoMax;
  std::vector<const char*> choices = {};  // choice, level: in the order of the C++ enum
  Rule rule = Rule::none;
  const char* default_doc = nullptr;  // shown in the docs instead of default_text
  const char* description = "";
};

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = {
      {.name = "prefix", .kind = Kind::string, .member = &Config::prefix,
       .default_text = "cairn-checkpoints", .rule = Rule::not_empty,
       .description = "Directory of the level-3 checkpoints (the parallel file system) and of the job's "
                      "state files; every rank must see the same directory. A relative path is taken "
                      "from the working directory. Point it at a scratch file system, not at $HOME."},
      {.name = "cache_dir", .kind = Kind::string, .member = &Config::cache_dir,
       .default_text = "/dev/shm", .rule = Rule::not_empty,
       .description = "Base directory of the node-local level-1 cache (a subdirectory per job and "
                      "node). It must be local to the node and fast. /dev/shm is memory and counts "
                      "against the job's memory; use a node-local SSD (e.g. /tmp or $TMPDIR) when "
                      "memory is tight."},
      {.name = "cache_versions", .kind = Kind::integer, .member = &Config::cache_versions,
       .default_text = "2", .min = 1, .max = 64,
       .description = "Checkpoint versions kept in each node's level-1 cache. Each costs one copy of "
                      "the protected memory (plus redundancy data) in cache_dir. 2 keeps the last "
                      "good version while the next is written; use 1 only when memory is short."},
      {.name = "snapshot", .kind = Kind::choice, .member = &Config::snapshot,
       .default_text = "auto", .choices = {"copy", "cow", "auto"},
       .description = "How a checkpoint's bytes reach the level-1 cache. copy: cairn_checkpoint copies "
                      "the protected memory (the application waits for one memcpy). cow: copy-on-write: "
                      "cairn_checkpoint only write-protects the memory (userfaultfd, Linux 6.4) and a "
                      "thread copies it in the background; a write to a page not yet copied waits for "
                      "that page. Memory that cannot be write-protected (shared, file-backed, hugetlb) "
                      "is copied; between checkpoints the protected memory is gathered into transparent "
                      "huge pages, which makes protecting it cheap. auto: cow unless the kernel or permissions forbid it or the node has "
                      "RDMA devices (a NIC writing protected memory by DMA is not seen); cairn_init "
                      "logs the choice and why (docs/architecture.md)."},
      {.name = "redundancy", .kind = Kind::choice, .member = &Config::redundancy,
       .default_text = "xor", .choices = {"single", "partner", "xor", "rs"},
       .description = "Level-2 protection against lost nodes. single: none (a lost node means a "
                      "restart from level 3). partner: a full copy on another node of the set "
                      "(doubles cache memory). xor: parity across set_size nodes, survives one lost "
                      "node per set for 1/(set_size-1) extra memory. rs: Reed-Solomon, survives "
                      "rs_parity lost nodes per set."},
      {.name = "set_size", .kind = Kind::integer, .member = &Config::set_size,
       .default_text = "4", .min = 2, .max = 255,
       .description = "Failure groups (nodes) per redundancy set for partner, xor and rs. Larger sets "
                      "cost less extra memory for xor and rs, but the same number of losses is then "
                      "tolerated among more nodes and rebuilding reads more data. 4 to 8 is typical."},
      {.name = "rs_parity", .kind = Kind::integer, .member = &Config::rs_parity,
       .default_text = "2", .min = 1, .max = 254,
       .description = "Parity shards per set for redundancy = rs: how many nodes of one set may be "
                      "lost together and still be rebuilt from level 2. Costs rs_parity/(set_size - "
                      "rs_parity) extra memory. Must be less than set_size when redundancy = rs."},
      {.name = "flush_every", .kind = Kind::integer, .member = &Config::flush_every,
       .default_text = "10", .min = 0, .max = 1000000,
       .description = "Copy every N-th checkpoint version to level 3 in the background. 0: only at "
                      "finalize (see flush_on_finalize). Lower it when whole-job failures (power, "
                      "network) are likely; raise it when the parallel file system is slow or busy."},
      {.name = "keep_flushed", .kind = Kind::integer, .member = &Config::keep_flushed,
       .default_text = "2", .min = 1, .max = 1000,
       .description = "Flushed versions kept in prefix; older ones are deleted once a newer flush is "
                      "complete. Keep at least 2 if you also want a fallback when the newest one "
                      "turns out to be damaged."},
      {.name = "files_per_node", .kind = Kind::integer, .member = &Config::files_per_node,
       .default_text = "0", .min = 0, .max = 4096,
       .description = "Level-3 files per node and version: 0 writes a file per rank; N > 0 lets the "
                      "ranks of a node share N files (rank i of the node writes into file i mod N), "
                      "which spares the file system's metadata server at scale (Pliris' N-to-M)."},
      {.name = "turnstile_width", .kind = Kind::integer, .member = &Config::turnstile_width,
       .default_text = "0", .min = 0, .max = 4096,
       .description = "Ranks of a node that write to level 3 at the same time (the others wait their "
                      "turn). 0: no limit. 1 or 2 often flushes faster on file systems that suffer "
                      "from many concurrent writers per client."},
      {.name = "data_prefixes", .kind = Kind::string, .member = &Config::data_prefixes,
       .default_text = "", .default_doc = "the prefix only",
       .description = "Spread level-3 data files over several file systems: PATH[:WEIGHT],... "
                      "(absolute paths, weights > 0, default 1); a file goes to a path with "
                      "probability proportional to its weight. Manifests and COMMIT stay in prefix. "
                      "Every path must be visible to every rank and at restart."},
      {.name = "compress", .kind = Kind::string, .member = &Config::compress,
       .default_text = "none",
       .description = "Compression of level-3 data: none, zstd or zstd:LEVEL (1..19, default 3), "
                      "chunk by chunk so restart can verify and decompress in pieces. Pays off on "
                      "compressible states and slow file systems; costs CPU in the background."},
      {.name = "flush_on_finalize", .kind = Kind::boolean, .member = &Config::flush_on_finalize,
       .default_text = "true",
       .description = "Flush the newest checkpoint to level 3 at finalize, so that a later job, on "
                      "any nodes, can restart from it. Turn off for throw-away runs and benchmarks."},
      {.name = "interval", .kind = Kind::choice, .member = &Config::interval,
       .default_text = "fixed", .choices = {"fixed", "auto"},
       .description = "How cairn_need_checkpoint() times checkpoints. fixed: every interval_seconds "
                      "of computation. auto: at Daly's optimum interval for mtbf_seconds and the "
                      "measured cost of this run's checkpoints (the mean time the last 8 blocked "
                      "the application), recomputed after each checkpoint; see docs/intervals.md. "
                      "Halts, signals and the end time ask for checkpoints in both modes."},
      {.name = "interval_seconds", .kind = Kind::floating, .member = &Config::interval_seconds,
       .default_text = "0", .min = 0,
       .description = "Seconds of computation after which cairn_need_checkpoint() says a checkpoint "
                      "is due (interval = fixed). 0 turns the timer off: checkpoints are then taken "
                      "when the application decides, or before a halt. `cairn interval` computes a "
                      "good value. With interval = auto: the interval until a checkpoint has been "
                      "measured (0: mtbf_seconds / 10)."},
      {.name = "mtbf_seconds", .kind = Kind::floating, .member = &Config::mtbf_seconds,
       .default_text = "0", .min = 0,
       .description = "Mean time between failures of the whole job (a node's MTBF divided by the "
                      "number of nodes), in seconds. Needed (> 0) by interval = auto; 0: unknown. "
                      "Count the failures the job restarts from: lost nodes and interrupts."},
      {.name = "halt_seconds", .kind = Kind::floating, .member = &Config::halt_seconds,
       .default_text = "0", .min = 0,
       .description = "Seconds before end_time at which the application is told to take a last "
                      "checkpoint and exit (cairn_should_exit()). Give it more than a checkpoint and "
                      "its flush take. Also the margin of a halt file's before= condition "
                      "(docs/halt.md); otherwise no effect while end_time is 0."},
      {.name = "end_time", .kind = Kind::integer, .member = &Config::end_time,
       .default_text = "0", .min = 0,
       .description = "When the job's allocation ends, in Unix seconds (e.g. from the scheduler's "
                      "time limit: $(date -d '+2 hours' +%s)). 0: inside a Slurm job, the job's end "
                      "time as Slurm reports it at cairn_init; elsewhere no known end. Used with "
                      "halt_seconds to save the run before it is killed."},
      {.name = "exit_signal", .kind = Kind::string, .member = &Config::exit_signal,
       .default_text = "USR1", .rule = Rule::signal_name,
       .description = "The signal that asks the job to checkpoint and exit (Slurm: sbatch "
                      "--signal=USR1@300 or scancel --signal=USR1): cairn_need_checkpoint() then "
                      "says a checkpoint is due, and cairn_should_exit() says exit after it. SIGTERM "
                      "is caught as well. A signal the application handles itself is left alone. "
                      "See docs/halt.md."},
      {.name = "node", .kind = Kind::string, .member = &Config::node, .default_text = "",
       .rule = Rule::path_component, .default_doc = "the hostname",
       .description = "Failure group of this rank: ranks with the same node lose their level-1 cache "
                      "together, and redundancy sets span different nodes. Empty means the hostname. "
                      "Set it per rank only to simulate several nodes on one machine, or when "
                      "several hostnames fail together. Names a cache subdirectory."},
      {.name = "log", .kind = Kind::level, .member = &Config::log_level, .default_text = "warn",
       .choices = {"error", "warn", "info", "debug"},
       .description = "Messages written to stderr. info adds one summary line per checkpoint on rank "
                      "0 (bytes, time and bandwidth per level); debug is verbose, for bug reports."},
      {.name = "chunk_size", .kind = Kind::size, .member = &Config::chunk_size,
       .default_text = "1M", .min = 4 * KiB, .max = GiB, .rule = Rule::multiple_of_64,
       .description = "Bytes per checksum (xxh3) and per verification unit at restart; accepts K, M "
                      "and G suffixes. Smaller chunks pinpoint damage but enlarge the manifest; "
                      "larger ones suit states of many gigabytes per rank."},
      {.name = "exchange_chunk", .kind = Kind::size, .member = &Config::exchange_chunk,
       .default_text = "4M", .min = 64 * KiB, .max = GiB,
       .description = "Bytes per message of the level-2 exchange between nodes; accepts K, M and G "
                      "suffixes. A few are in flight per rank: larger values can raise bandwidth on "
                      "fast networks and cost memory; lower it when memory is tight."},
      {.name = "job", .kind = Kind::string, .member = &Config::job, .default_text = "",
       .rule = Rule::path_component, .default_doc = "derived from prefix",
       .description = "Name of the job in the cache path (cache_dir/cairn-JOB). Empty derives it "
                      "from the absolute prefix, so a relaunch finds its level-1 cache again. Set it "
                      "when the same job reaches its prefix by different paths."},
  };
  return table;
}

// Environment variables of the launcher and tools that are not knobs (no "unknown" warning).
const char* const kNonKnobVariables[] = {
    "CAIRN_CONFIG",    "CAIRN_INJECT",       "CAIRN_INJECT_DIR",  "CAIRN_MPIRUN",
    "CAIRN_MPIRUN_ARGS", "CAIRN_LAUNCHER", "CAIRN_SRUN", "CAIRN_SRUN_ARGS", "CAIRN_BENCH_CHILD",
    "CAIRN_TEST_NO_SRUN",  // read at configure time by cmake/CairnMpiTest.cmake
    // read by scripts/slurm-cluster.sh (the one-host test cluster)
    "CAIRN_SLURM_CPUS", "CAIRN_SLURM_TIMEOUT", "CAIRN_SLURM_PORTS",
    // set by `cairn run` for its --between-attempts hook
    "CAIRN_ATTEMPT",   "CAIRN_CACHE_JOB",    "CAIRN_KILLED_NODES",
};

std::string env_name(const Knob& k) {
  std::string s = std::string("CAIRN_") + k.name;
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const char* type_name(Kind kind) {
  switch (kind) {
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::boolean: return "bool";
    case Kind::string: return "string";
    case Kind::choice: return "enum";
    case Kind::level: return "level";
    case Kind::size: return "size";
  }
  return "?";
}

// ---- values -------------------------------------------------------------------------------------

// A parsed value before it is stored: int64_t for integers, sizes and choice indexes.
using Value = std::variant<int64_t, double, bool, std::string>;

std::string format_size(int64_t bytes) {
  if (bytes != 0 && bytes % GiB == 0) return std::to_string(bytes / GiB) + "G";
  if (bytes != 0 && bytes % MiB == 0) return std::to_string(bytes / MiB) + "M";
  if (bytes != 0 && bytes % KiB == 0) return std::to_string(bytes / KiB) + "K";
  return std::to_string(bytes);
}

// Shortest text that reads back to the same double; a TOML float literal when `toml` ("0.0").
std::string format_float(double v, bool toml) {
  char buf[64];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  std::string s(buf, end);
  if (toml && s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The value as a TOML literal: what `cairn config --list` and the sample config show.
std::string format_toml(const Knob& k, const Value& v) {
  switch (k.kind) {
    case Kind::integer: return std::to_string(std::get<int64_t>(v));
    case Kind::floating: return format_float(std::get<double>(v), true);
    case Kind::boolean: return std::get<bool>(v) ? "true" : "false";
    case Kind::string: return quoted(std::get<std::string>(v));
    case Kind::choice:
    case Kind::level: return quoted(k.choices[std::get<int64_t>(v)]);
    case Kind::size: return quoted(format_size(std::get<int64_t>(v)));
  }
  return "";
}

void store(Config& c, const Knob& k, const Value& v) {
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(c.*member)>;
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, std::string>)
          c.*member = std::get<T>(v);
        else
          c.*member = static_cast<T>(std::get<int64_t>(v));  // ints, sizes, choice indexes
      },
      k.member);
}

Value load(const Config& c, const Knob& k) {
  return std::visit(
      [&](auto member) -> Value {
        using T = std::remove_cvref_t<decltype(c.*member)>;
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, std::string>)
          return c.*member;
        else
          return static_cast<int64_t>(c.*member);
      },
      k.member);
}

// ---- parsing and validation ---------------------------------------------------------------------

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// What a knob accepts, for error messages and the docs' "accepted" column.
std::string accepted(const Knob& k, bool markdown = false) {
  auto bound = [&](int64_t v) { return k.kind == Kind::size ? format_size(v) : std::to_string(v); };
  switch (k.kind) {
    case Kind::integer:
    case Kind::size: {
      std::string s = k.max == kNoMax ? ">= " + bound(k.min) : bound(k.min) + ".." + bound(k.max);
      if (k.rule == Rule::multiple_of_64) s += ", a multiple of 64";
      return s;
    }
    case Kind::floating: return ">= " + std::to_string(k.min);
    case Kind::boolean: return "true, false";
    case Kind::choice:
    case Kind::level: {
      std::string s;
      for (const char* c : k.choices) s += std::string(s.empty() ? "" : markdown ? ", " : "|") + c;
      return s;
    }
    case Kind::string:
      if (k.rule == Rule::path_component)
        return markdown ? "letters, digits, `.` `_` `-`; not `.` or `..`"
                        : "letters, digits, '.', '_', '-' (not \".\" or \"..\"), or empty";
      if (k.rule == Rule::not_empty) return markdown ? "a path" : "a non-empty path";
      if (k.rule == Rule::signal_name) return exit_signal_choices();
      return "";
  }
  return "";
}

// "" when the value is acceptable, else the reason.
std::string check(const Knob& k, const Value& v) {
  if (k.kind == Kind::integer || k.kind == Kind::size) {
    int64_t i = std::get<int64_t>(v);
    if (i < k.min || i > k.max) return "out of range";
    if (k.rule == Rule::multiple_of_64 && i % 64 != 0) return "not a multiple of 64";
  } else if (k.kind == Kind::floating) {
    double d = std::get<double>(v);
    if (!std::isfinite(d)) return "not a finite number";
    if (d < static_cast<double>(k.min)) return "out of range";
  } else if (k.kind == Kind::string) {
    const std::string& s = std::get<std::string>(v);
    if (k.rule == Rule::not_empty && s.empty()) return "empty";
    if (k.rule == Rule::signal_name && parse_exit_signal(s) == 0)
      return "not a signal that can ask for an exit";
    if (k.rule == Rule::path_component && !s.empty()) {
      if (s == "." || s == "..") return "not a usable directory name";
      for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
          return "contains a character that is not safe in a directory name";
    }
  }
  return "";
}

std::optional<int64_t> parse_int(const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// "1M", "64KiB", "4096" -> bytes; nullopt when malformed. Values past int64 saturate (then fail bounds).
std::optional<int64_t> parse_size(const std::string& text) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (end == text.data() || (ec != std::errc() && ec != std::errc::result_out_of_range))
    return std::nullopt;
  std::string unit = lower(std::string(end, text.data() + text.size()));
  int64_t mult = unit.empty()                     ? 1
                 : unit == "k" || unit == "kib" ? KiB
                 : unit == "m" || unit == "mib" ? MiB
                 : unit == "g" || unit == "gib" ? GiB
                                                  : 0;
  if (mult == 0) return std::nullopt;
  if (ec != std::errc() || n > static_cast<uint64_t>(kNoMax / mult)) return kNoMax;
  return static_cast<int64_t>(n) * mult;
}

std::optional<int64_t> parse_choice(const Knob& k, const std::string& text) {
  std::string t = lower(text);
  for (size_t i = 0; i < k.choices.size(); ++i)
    if (t == k.choices[i]) return static_cast<int64_t>(i);
  return std::nullopt;
}

// An environment value (or a table default) to a Value; a reason when malformed.
std::variant<Value, std::string> from_text(const Knob& k, const std::string& raw) {
  std::string text = k.kind == Kind::string ? raw : trim(raw);
  switch (k.kind) {
    case Kind::integer:
      if (auto i = parse_int(text)) return Value(*i);
      return std::string("not an integer");
    case Kind::floating: {
      double d = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
      if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return Value(d);
      return std::string("not a number");
    }
    case Kind::boolean: {
      std::string t = lower(text);
      if (t == "1" || t == "true" || t == "yes" || t == "on") return Value(true);
      if (t == "0" || t == "false" || t == "no" || t == "off") return Value(false);
      return std::string("not a boolean");
    }
    case Kind::string: return Value(text);
    case Kind::choice:
    case Kind::level:
      if (auto i = parse_choice(k, text)) return Value(*i);
      return std::string("unknown value");
    case Kind::size:
      if (auto i = parse_size(text)) return Value(*i);
      return std::string("not a size");
  }
  return std::string("unsupported");
}

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
  if (c.redundancy == Redundancy::rs && c.rs_parity >= c.set_size) {
    auto origin = [&](const char* name) { return s.origins[*find_knob(name)]; };
    return make_error(Code::ERR_CONFIG,
                      "rs_parity = %d (%s) must be less than set_size = %d (%s) with redundancy = "
                      "\"rs\"; accepted: rs_parity 1..%d, or a larger set_size",
                      c.rs_parity, origin("rs_parity").c_str(), c.set_size,
                      origin("set_size").c_str(), c.set_size - 1);
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
  known.insert(known.end(), std::begin(kNonKnobVariables), std::end(kNonKnobVariables));
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

const std::vector<KnobInfo>& knob_table() {
  static const std::vector<KnobInfo> table = [] {
    std::vector<KnobInfo> out;
    for (const Knob& k : knobs())
      out.push_back({k.name, env_name(k), type_name(k.kind),
                     k.default_doc ? k.default_doc : k.default_text, accepted(k), k.description});
    return out;
  }();
  return table;
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

std::string render_knob_list(const Config& effective, const std::vector<std::string>& origins) {
  size_t width = 0;
  for (const Knob& k : knobs()) width = std::max(width, std::string(k.name).size());
  std::string out;
  for (size_t i = 0; i < knobs().size(); ++i) {
    const Knob& k = knobs()[i];
    std::string line = k.name;
    line.resize(width, ' ');
    line += " = " + format_toml(k, load(effective, k));
    if (i < origins.size() && !origins[i].empty()) {
      line.resize(std::max(line.size(), width + 24), ' ');
      line += "  # " + origins[i];
    }
    out += line + "\n";
  }
  return out;
}

std::string render_knob_list(const LoadedConfig& loaded) {
  return render_knob_list(loaded.config, loaded.origins);
}

std::string render_knob_markdown() {
  std::string out =
      "| knob | environment | type | default | accepted | description |\n"
      "|---|---|---|---|---|---|\n";
  for (const Knob& k : knobs()) {
    std::string def = k.default_doc ? k.default_doc : "`" + std::string(k.default_text) + "`";
    std::string acc = accepted(k, true);
    out += "| `" + std::string(k.name) + "` | `" + env_name(k) + "` | " + type_name(k.kind) +
           " | " + def + " | " + acc + " | " + k.description + " |\n";
  }
  return out;
}

std::string render_sample_toml() {
  std::string out =
      "# cairn sample configuration: every knob at its default, commented out.\n"
      "# Uncomment and edit what you need. Precedence: CAIRN_* environment variables over this\n"
      "# file over the defaults. Pass the file to cairn_init() or name it in CAIRN_CONFIG.\n"
      "# The same keys may also be written under a [cairn] table. Reference: docs/config.md.\n";
  for (const Knob& k : knobs()) {
    out += "\n";
    // The description, wrapped at 100 columns.
    std::istringstream words(k.description);
    std::string word, line = "#";
    while (words >> word) {
      if (line.size() + 1 + word.size() > 100) out += line + "\n", line = "#";
      line += " " + word;
    }
    out += line + "\n";
    std::string acc = accepted(k);
    out += "# type: " + std::string(type_name(k.kind)) + (acc.empty() ? "" : "; accepted: " + acc) +
           "\n# environment: " + env_name(k) + "\n";
    Value def = std::get<Value>(from_text(k, k.default_text));
    out += "# " + std::string(k.name) + " = " + format_toml(k, def) + "\n";
  }
  return out;
}

}  // namespace cairn
