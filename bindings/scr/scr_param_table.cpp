// SCR's parameters as data rows, and how each kind of value is applied (scr_param_table.hpp).
// docs/scr.md shows the same table; tests/unit/scr/scr_params_test.cpp holds the rows to the knob table.
#include "scr_param_table.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <utility>

namespace cairn::scr::table {
namespace {

// ---- values ----------------------------------------------------------------------------------------

std::optional<long long> parse_int(const std::string& v) {
  if (v.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno || *end) return std::nullopt;
  return x;
}

std::optional<double> parse_float(const std::string& v) {
  if (v.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (errno || *end) return std::nullopt;
  return x;
}

std::optional<bool> parse_bool(const std::string& v) {
  std::string u = upper(v);
  if (u == "1" || u == "YES" || u == "TRUE" || u == "ON") return true;
  if (u == "0" || u == "NO" || u == "FALSE" || u == "OFF") return false;
  return std::nullopt;
}

// SCR's byte counts: a number with an optional KB/MB/GB (binary) suffix, written in cairn's size syntax
// ("1MB" -> "1M"), and its value in bytes.
struct Bytes {
  std::string text;
  long long value = 0;
};
std::optional<Bytes> parse_size(const std::string& v) {
  std::string u = upper(v);
  for (const char* sfx : {"KB", "MB", "GB", "K", "M", "G"}) {
    std::string s(sfx);
    if (u.size() > s.size() && u.compare(u.size() - s.size(), s.size(), s) == 0) {
      auto num = parse_int(u.substr(0, u.size() - s.size()));
      if (!num || *num < 0) return std::nullopt;
      int shift = s[0] == 'K' ? 10 : s[0] == 'M' ? 20 : 30;
      long long value = *num > (LLONG_MAX >> shift) ? LLONG_MAX : *num << shift;
      return Bytes{std::to_string(*num) + s.substr(0, 1), value};
    }
  }
  auto num = parse_int(u);
  if (!num || *num < 0) return std::nullopt;
  return Bytes{std::to_string(*num), *num};
}

// 65536 -> "64K", as cairn's size syntax writes it.
std::string bytes_text(long long b) {
  for (auto [shift, unit] : {std::pair{30, "G"}, std::pair{20, "M"}, std::pair{10, "K"}})
    if (b > 0 && b % (1LL << shift) == 0) return std::to_string(b >> shift) + unit;
  return std::to_string(b);
}

std::string bounds(const Row& r) { return std::to_string(r.lo) + ".." + std::to_string(r.hi); }

void warn_if_on(Mapping* out, const std::string& name, const std::string& value, const char* why) {
  auto b = parse_bool(value);
  if (b && !*b) return note_only(out, name, value, "the default; nothing to do");
  out->warnings.push_back(name + "=" + value + " is not supported: " + why);
}

void apply_library(const LibraryField& field, const std::string& name, const std::string& value, Mapping* out) {
  LibrarySettings& lib = out->library;
  if (auto* f = std::get_if<bool LibrarySettings::*>(&field)) {
    auto b = parse_bool(value);
    if (!b) return refuse(out, name, value, "0 or 1");
    lib.*(*f) = *b;
  } else if (auto* f = std::get_if<long LibrarySettings::*>(&field)) {
    auto x = parse_int(value);
    if (!x || *x < 0) return refuse(out, name, value, "an integer >= 0");
    lib.*(*f) = static_cast<long>(*x);
  } else if (auto* f = std::get_if<double LibrarySettings::*>(&field)) {
    auto x = parse_float(value);
    if (!x || *x < 0) return refuse(out, name, value, "a number >= 0");
    lib.*(*f) = *x;
  } else if (auto* f = std::get_if<std::string LibrarySettings::*>(&field)) {
    lib.*(*f) = value;
  }
}

}  // namespace

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::optional<std::string> copy_type(const std::string& v) {
  std::string u = upper(v);
  if (u == "SINGLE") return "single";
  if (u == "PARTNER") return "partner";
  if (u == "XOR") return "xor";
  if (u == "RS") return "rs";
  return std::nullopt;
}

void set_knob(Mapping* out, const std::string& env, const std::string& value, const std::string& from) {
  out->cairn_env[env] = value;
  out->origin[env] = from;
}

void refuse(Mapping* out, const std::string& name, const std::string& value, const std::string& accepted) {
  out->warnings.push_back(name + "=" + value + ": not " + accepted + "; ignored");
}

void note_only(Mapping* out, const std::string& name, const std::string& value, const std::string& why) {
  out->notes.push_back(name + "=" + value + ": " + why);
}

std::string env_name(const char* knob) { return "CAIRN_" + upper(knob); }

std::string becomes(const Row& r) {
  if (r.knob) return std::string(r.knob) + " (" + env_name(r.knob) + ")";
  return r.kind == Kind::library ? "this library" : "nothing";
}

void apply(const Row& r, const std::string& name, const std::string& value, Mapping* out) {
  const std::string env = r.knob ? env_name(r.knob) : std::string();
  switch (r.kind) {
    case Kind::text:
      if (auto* f = std::get_if<std::string LibrarySettings::*>(&r.field)) out->library.*(*f) = value;
      return set_knob(out, env, value, name);
    case Kind::integer: {
      // An integer outside [lo, hi] still becomes the knob, which refuses it at load with an error naming
      // this parameter (`SCR_SET_SIZE=1`): the knob table is the one judge of a knob's values.
      auto x = parse_int(value);
      if (!x) return refuse(out, name, value, "an integer (" + std::string(r.knob) + ": " + bounds(r) + ")");
      set_knob(out, env, std::to_string(*x), name);
      if (*x == 0 && r.note) out->notes.push_back(name + "=0: " + r.note);
      return;
    }
    case Kind::at_least: {
      auto x = parse_int(value);  // above hi: the knob refuses it, as for `integer`
      if (!x || *x < 0) return refuse(out, name, value, "an integer >= 0");
      if (*x < r.lo && r.note) out->notes.push_back(name + "=" + std::to_string(*x) + ": " + r.note);
      return set_knob(out, env, std::to_string(std::max(*x, r.lo)), name);
    }
    case Kind::keep_all: {
      auto x = parse_int(value);
      if (!x || *x < 0) return refuse(out, name, value, "an integer >= 0");
      return set_knob(out, env, std::to_string(*x == 0 ? r.hi : std::min(*x, r.hi)), name);
    }
    case Kind::seconds: {
      auto x = parse_float(value);
      if (!x || *x < 0) return refuse(out, name, value, "a number >= 0");
      return set_knob(out, env, value, name);
    }
    case Kind::bytes: {
      auto b = parse_size(value);  // above hi: the knob refuses it, as for `integer`
      if (!b) return refuse(out, name, value, "a byte count");
      return set_knob(out, env, b->value < r.lo ? bytes_text(r.lo) : b->text, name);
    }
    case Kind::copy_type: {
      if (upper(value) == "FILE") return;  // the CKPT descriptor decides (map_parameters)
      auto t = copy_type(value);
      if (!t) return refuse(out, name, value, "SINGLE, PARTNER, XOR, RS or FILE");
      return set_knob(out, env, *t, name);
    }
    case Kind::log_level: {
      auto x = parse_int(value);
      if (!x || *x < 0) return refuse(out, name, value, "an integer >= 0");
      return set_knob(out, env, *x == 0 ? "warn" : *x == 1 ? "info" : "debug", name);
    }
    case Kind::library: return apply_library(r.field, name, value, out);
    case Kind::unsupported: return warn_if_on(out, name, value, r.note);
    case Kind::node_group:
      if (upper(value) == "NODE") return note_only(out, name, value, "the default");
      out->warnings.push_back(name + "=" + value + " is not supported: cairn's failure group is the node (CAIRN_NODE)");
      return;
    case Kind::no_effect:
      if (r.note) note_only(out, name, value, r.note);
      return;
  }
}

// ---- the rows --------------------------------------------------------------------------------------

const std::vector<Row>& rows() {
  using L = LibrarySettings;
  constexpr long long KiB = 1024, GiB = KiB * KiB * KiB;
  static const std::vector<Row> table = {
      {"SCR_PREFIX", "prefix", Kind::text,
       "the directory on the parallel file system: cairn's L3 versions and state go there, and output datasets' files "
       "must lie under it (unset: the working directory, as in SCR, for output files; cairn's default prefix for L3)",
       nullptr, 0, 0, &L::prefix},
      {"SCR_CACHE_BASE", "cache_dir", Kind::text, "the node-local cache directory (default /dev/shm in both)"},
      {"SCR_CACHE_SIZE", "cache_versions", Kind::at_least,
       "checkpoints kept in each node's cache; 0 (no cache) becomes 1, cairn's least",
       "cairn keeps at least one version in cache; using 1", 1, 64},
      {"SCR_COPY_TYPE", "redundancy", Kind::copy_type,
       "SINGLE, PARTNER, XOR or RS become single, partner, xor or rs; FILE takes TYPE from the CKPT descriptor"},
      {"SCR_SET_SIZE", "set_size", Kind::integer, "nodes per XOR/RS set (SCR's default 8, cairn's 4)", nullptr, 2, 255},
      {"SCR_SET_FAILURES", "rs_parity", Kind::integer, "lost nodes per RS set that can be rebuilt", nullptr, 1, 254},
      {"SCR_FLUSH", "flush_every", Kind::integer,
       "every N-th checkpoint goes to the prefix. 0 stops the periodic flushes only: cairn still flushes the newest "
       "checkpoint at SCR_Finalize (SCR drops that one too, which loses the run when the job's nodes go)",
       "no periodic flush; the newest checkpoint is still flushed at SCR_Finalize", 0, 1000000},
      {"SCR_HALT_SECONDS", "halt_seconds", Kind::seconds,
       "exit this long before the allocation ends (cairn reads the end from Slurm or CAIRN_END_TIME)"},
      {"SCR_CHECKPOINT_SECONDS", "interval_seconds", Kind::seconds,
       "SCR_Need_checkpoint says 1 this long after the last checkpoint"},
      {"SCR_PREFIX_SIZE", "keep_flushed", Kind::keep_all,
       "checkpoints kept in the prefix; 0 (keep all) becomes 1000, cairn's most", nullptr, 1, 1000},
      {"SCR_DEBUG", "log", Kind::log_level, "0: warn, 1: info, 2 and more: debug"},
      {"SCR_MPI_BUF_SIZE", "exchange_chunk", Kind::bytes,
       "bytes per message of the redundancy exchange; below 64K becomes 64K, cairn's least", nullptr, 64 * KiB, GiB},
      {"SCR_ENABLE", nullptr, Kind::library, "0: every call does nothing and succeeds; files go where their names say",
       nullptr, 0, 0, &L::enabled},
      {"SCR_CHECKPOINT_INTERVAL", nullptr, Kind::library, "every N-th call of SCR_Need_checkpoint says 1", nullptr,
       0, 0, &L::checkpoint_interval},
      {"SCR_CHECKPOINT_OVERHEAD", nullptr, Kind::library,
       "SCR_Need_checkpoint says 1 while the mean checkpoint time stays below this percentage of the run", nullptr, 0,
       0, &L::checkpoint_overhead},
      {"SCR_HALT_EXIT", nullptr, Kind::library,
       "1: after a checkpoint that a halt condition asked for, the job finalizes cairn and MPI and exits with status "
       "0 (SCR exits without MPI_Finalize, which the MPI launcher reports as a failure)",
       nullptr, 0, 0, &L::halt_exit},
      {"SCR_CURRENT", nullptr, Kind::library,
       "at SCR_Init, the checkpoint of this name becomes the newest: the ones after it are deleted", nullptr, 0, 0,
       &L::current},
      {"SCR_CONF_FILE", nullptr, Kind::library, "the user config file (default <SCR_PREFIX>/.scrconf)"},
      {"SCR_CACHE_BYPASS", nullptr, Kind::unsupported,
       "cairn always caches: checkpoint files are written to node-local storage and read from there. 1 (write on "
       "the parallel file system, for files that several ranks share) is not supported",
       "cairn writes every checkpoint file to the node-local cache; a file must be written and read by one rank"},
      {"SCR_FLUSH_ASYNC", nullptr, Kind::no_effect, "cairn always flushes in the background",
       "cairn always flushes in the background"},
      {"SCR_FLUSH_TYPE", nullptr, Kind::no_effect, "cairn always flushes in the background with its own writer",
       "cairn always flushes in the background"},
      {"SCR_FLUSH_WIDTH", nullptr, Kind::no_effect,
       "cairn limits writers per node with turnstile_width (CAIRN_TURNSTILE_WIDTH)",
       "see turnstile_width (CAIRN_TURNSTILE_WIDTH)"},
      {"SCR_FETCH_WIDTH", nullptr, Kind::no_effect, "every rank reads its own L3 file at restart", "no effect"},
      {"SCR_FETCH", nullptr, Kind::no_effect, "restart always considers L1, L2 and L3, newest version first",
       "restart always considers every level"},
      {"SCR_FETCH_BYPASS", nullptr, Kind::no_effect, "restart always considers L1, L2 and L3, newest version first",
       "restart always considers every level"},
      {"SCR_DISTRIBUTE", nullptr, Kind::no_effect, "restart always rebuilds from L2 what a lost node held",
       "restart always rebuilds from L2"},
      {"SCR_CNTL_BASE", nullptr, Kind::no_effect, "cairn keeps its records beside the cached data",
       "cairn keeps its records beside the cached data"},
      {"SCR_GROUP", nullptr, Kind::node_group, "the failure group is the node (CAIRN_NODE); only NODE is accepted"},
      {"SCR_CACHE_PURGE", nullptr, Kind::unsupported,
       "not supported (1 warns): remove the job's cache directory before the run",
       "remove the job's cache directory before the run"},
      {"SCR_PREFIX_PURGE", nullptr, Kind::unsupported,
       "not supported (1 warns): remove the prefix's checkpoints before the run",
       "remove the prefix's checkpoints before the run"},
      {"SCR_GLOBAL_RESTART", nullptr, Kind::unsupported,
       "not supported (1 warns): each rank reads its own files at restart",
       "a restarting rank reads the files it wrote, from L1, L2 or L3"},
      {"SCR_FLUSH_ON_RESTART", nullptr, Kind::unsupported,
       "not supported (1 warns); `cairn flush` copies a version to the prefix", "use `cairn flush`"},
      {"SCR_FLUSH_POSTSTAGE", nullptr, Kind::unsupported, "not supported (1 warns)",
       "the newest checkpoint is flushed at SCR_Finalize"},
      {"SCR_RUNS", nullptr, Kind::no_effect, "a launcher setting: `cairn run --retries`", "use cairn run --retries"},
      {"SCR_RETRIES", nullptr, Kind::no_effect, "a launcher setting: `cairn run --retries`",
       "use cairn run --retries"},
      {"SCR_MIN_NODES", nullptr, Kind::no_effect, "a launcher setting: `cairn run --no-spare`", "a launcher setting"},
      {"SCR_EXCLUDE_NODES", nullptr, Kind::no_effect, "a launcher setting", "a launcher setting"},
      {"SCR_WATCHDOG_TIMEOUT", nullptr, Kind::no_effect, "`cairn watch --stall` watches for hung jobs",
       "see cairn watch --stall"},
      {"SCR_WATCHDOG_TIMEOUT_PFS", nullptr, Kind::no_effect, "`cairn watch --stall` watches for hung jobs",
       "see cairn watch --stall"},
      {"SCR_FILE_BUF_SIZE", nullptr, Kind::no_effect, "cairn copies with its own buffers", "no effect"},
      {"SCR_HOP_DISTANCE", nullptr, Kind::no_effect, "sets span nodes in the order of the job's ranks", "no effect"},
      {"SCR_CRC_ON_COPY", nullptr, Kind::no_effect, "cairn checksums every chunk of every version",
       "always on in cairn"},
      {"SCR_CRC_ON_DELETE", nullptr, Kind::no_effect, "cairn checksums every chunk of every version",
       "always on in cairn"},
      {"SCR_CRC_ON_FLUSH", nullptr, Kind::no_effect, "cairn checksums every chunk of every version",
       "always on in cairn"},
      {"SCR_LOG_ENABLE", nullptr, Kind::no_effect,
       "cairn keeps a job history in the prefix (`cairn plot`, docs/tools.md)", "see docs/tools.md"},
      {"SCR_LOG_TXT_ENABLE", nullptr, Kind::no_effect, "cairn keeps a job history in the prefix", "see docs/tools.md"},
      {"SCR_LOG_SYSLOG_ENABLE", nullptr, Kind::no_effect, "cairn keeps a job history in the prefix",
       "see docs/tools.md"},
      {"SCR_LOG_DB_ENABLE", nullptr, Kind::no_effect, "cairn keeps a job history in the prefix", "see docs/tools.md"},
      {"SCR_USER_NAME", nullptr, Kind::no_effect, "an identifier for SCR's logs", "no effect"},
      {"SCR_JOB_ID", nullptr, Kind::no_effect, "an identifier for SCR's logs", "no effect"},
      {"SCR_JOB_NAME", nullptr, Kind::no_effect, "an identifier for SCR's logs", "no effect"},
      {"SCR_CLUSTER_NAME", nullptr, Kind::no_effect, "an identifier for SCR's logs", "no effect"},
  };
  return table;
}

const Row* find(const std::string& scr_name) {
  for (const auto& r : rows())
    if (scr_name == r.scr) return &r;
  return nullptr;
}

}  // namespace cairn::scr::table
