// SCR's parameters: the parser of SCR_Config strings and SCR config files, and the one table of what
// every parameter becomes in cairn (see scr_params.hpp; docs/scr.md shows the table).
#include "scr_params.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

namespace cairn::scr {
namespace {

bool is_key(std::string_view k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// One word of a setting: KEY, KEY= or KEY=VALUE (VALUE may be "quoted").
struct Word {
  std::string key, value;
  bool has_eq = false;
};

// Splits on spaces and tabs, honouring "..." in values. false with *error on an unclosed quote.
bool split_words(std::string_view text, std::vector<Word>* out, std::string* error) {
  size_t i = 0, n = text.size();
  while (i < n) {
    while (i < n && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i == n) break;
    Word w;
    while (i < n && text[i] != '=' && text[i] != ' ' && text[i] != '\t') w.key += text[i++];
    // SCR also accepts spaces around '=' ("KEY = VALUE").
    size_t j = i;
    while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j < n && text[j] == '=') {
      i = j + 1;
      w.has_eq = true;
      while (i < n && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i < n && text[i] == '"') {
        size_t close = text.find('"', i + 1);
        if (close == std::string_view::npos) {
          *error = "unclosed quote in '" + std::string(text) + "'";
          return false;
        }
        w.value = std::string(text.substr(i + 1, close - i - 1));
        i = close + 1;
      } else {
        while (i < n && text[i] != ' ' && text[i] != '\t') w.value += text[i++];
      }
    }
    out->push_back(std::move(w));
  }
  return true;
}

std::optional<Setting> setting_from_words(const std::vector<Word>& words, std::string* error) {
  if (words.empty()) {
    *error = "empty setting";
    return std::nullopt;
  }
  Setting s;
  for (size_t i = 0; i < words.size(); ++i) {
    const Word& w = words[i];
    if (!is_key(w.key)) {
      *error = "'" + w.key + "' is not a parameter name (letters, digits and _)";
      return std::nullopt;
    }
    if (!w.has_eq || w.value.empty()) {
      *error = "'" + w.key + "' has no value (write " + w.key + "=VALUE)";
      return std::nullopt;
    }
    if (i == 0) s.key = w.key, s.value = w.value;
    else s.children.emplace_back(w.key, w.value);
  }
  return s;
}

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

// SCR's byte counts: a number with an optional KB/MB/GB (binary) suffix; cairn's size syntax.
std::optional<std::string> parse_size(const std::string& v) {
  std::string u = upper(v);
  for (const char* sfx : {"KB", "MB", "GB", "K", "M", "G"}) {
    std::string s(sfx);
    if (u.size() > s.size() && u.compare(u.size() - s.size(), s.size(), s) == 0) {
      auto num = parse_int(u.substr(0, u.size() - s.size()));
      if (!num || *num < 0) return std::nullopt;
      return std::to_string(*num) + s.substr(0, 1);
    }
  }
  auto num = parse_int(u);
  if (!num || *num < 0) return std::nullopt;
  return std::to_string(*num);
}

// ---- the table -------------------------------------------------------------------------------------

struct Context {
  Mapping* out;
  void knob(const std::string& env, const std::string& value, const std::string& from) {
    out->cairn_env[env] = value;
    out->origin[env] = from;
  }
  void warn(const std::string& w) { out->warnings.push_back(w); }
  void note(const std::string& n) { out->notes.push_back(n); }
  void bad(const std::string& name, const std::string& value, const std::string& accepted) {
    warn(name + "=" + value + ": not " + accepted + "; ignored");
  }
};

using Apply = void (*)(Context&, const std::string& name, const std::string& value);

struct Param {
  const char* name;
  const char* becomes;
  const char* meaning;
  Apply apply;                 // nullptr: only noted (`note`), or nothing at all
  const char* note = nullptr;  // where a setting has no effect in cairn: the note's reason
};

void apply_int_knob(Context& c, const std::string& name, const std::string& value, const char* env, long long lo) {
  auto x = parse_int(value);
  if (!x || *x < lo) return c.bad(name, value, "an integer >= " + std::to_string(lo));
  c.knob(env, std::to_string(*x), name);
}
void apply_float_knob(Context& c, const std::string& name, const std::string& value, const char* env) {
  auto x = parse_float(value);
  if (!x || *x < 0) return c.bad(name, value, "a number >= 0");
  c.knob(env, value, name);
}
void note_only(Context& c, const std::string& name, const std::string& value, const char* why) {
  c.note(name + "=" + value + ": " + why);
}
void warn_if_on(Context& c, const std::string& name, const std::string& value, const char* why) {
  auto b = parse_bool(value);
  if (b && !*b) return note_only(c, name, value, "the default; nothing to do");
  c.warn(name + "=" + value + " is not supported: " + why);
}

std::optional<std::string> copy_type(const std::string& v) {
  std::string u = upper(v);
  if (u == "SINGLE") return "single";
  if (u == "PARTNER") return "partner";
  if (u == "XOR") return "xor";
  if (u == "RS") return "rs";
  return std::nullopt;
}

const char* const kRedundancy = "redundancy (CAIRN_REDUNDANCY)";

const std::vector<Param>& params() {
  static const std::vector<Param> table = {
      {"SCR_PREFIX", "prefix (CAIRN_PREFIX)",
       "the directory on the parallel file system: cairn's L3 versions and state go there, and output datasets' files "
       "must lie under it (unset: the working directory, as in SCR, for output files; cairn's default prefix for L3)",
       [](Context& c, const std::string& n, const std::string& v) {
         c.out->library.prefix = v;
         c.knob("CAIRN_PREFIX", v, n);
       }},
      {"SCR_CACHE_BASE", "cache_dir (CAIRN_CACHE_DIR)", "the node-local cache directory (default /dev/shm in both)",
       [](Context& c, const std::string& n, const std::string& v) { c.knob("CAIRN_CACHE_DIR", v, n); }},
      {"SCR_CACHE_SIZE", "cache_versions (CAIRN_CACHE_VERSIONS)",
       "checkpoints kept in each node's cache; 0 (no cache) becomes 1, cairn's least",
       [](Context& c, const std::string& n, const std::string& v) {
         auto x = parse_int(v);
         if (!x || *x < 0) return c.bad(n, v, "an integer >= 0");
         if (*x == 0) c.note(n + "=0: cairn keeps at least one version in cache; using 1");
         c.knob("CAIRN_CACHE_VERSIONS", std::to_string(std::max<long long>(*x, 1)), n);
       }},
      {"SCR_COPY_TYPE", kRedundancy,
       "SINGLE, PARTNER, XOR or RS become single, partner, xor or rs; FILE takes TYPE from the CKPT descriptor",
       [](Context& c, const std::string& n, const std::string& v) {
         if (upper(v) == "FILE") return;  // the CKPT descriptor decides (map_parameters)
         auto r = copy_type(v);
         if (!r) return c.bad(n, v, "SINGLE, PARTNER, XOR, RS or FILE");
         c.knob("CAIRN_REDUNDANCY", *r, n);
       }},
      {"SCR_SET_SIZE", "set_size (CAIRN_SET_SIZE)", "nodes per XOR/RS set (SCR's default 8, cairn's 4)",
       [](Context& c, const std::string& n, const std::string& v) { apply_int_knob(c, n, v, "CAIRN_SET_SIZE", 1); }},
      {"SCR_SET_FAILURES", "rs_parity (CAIRN_RS_PARITY)", "lost nodes per RS set that can be rebuilt",
       [](Context& c, const std::string& n, const std::string& v) { apply_int_knob(c, n, v, "CAIRN_RS_PARITY", 1); }},
      {"SCR_FLUSH", "flush_every (CAIRN_FLUSH_EVERY)",
       "every N-th checkpoint goes to the prefix. 0 stops the periodic flushes only: cairn still flushes the newest "
       "checkpoint at SCR_Finalize (SCR drops that one too, which loses the run when the job's nodes go)",
       [](Context& c, const std::string& n, const std::string& v) {
         auto x = parse_int(v);
         if (!x || *x < 0) return c.bad(n, v, "an integer >= 0");
         c.knob("CAIRN_FLUSH_EVERY", std::to_string(*x), n);
         if (*x == 0) c.note(n + "=0: no periodic flush; the newest checkpoint is still flushed at SCR_Finalize");
       }},
      {"SCR_HALT_SECONDS", "halt_seconds (CAIRN_HALT_SECONDS)",
       "exit this long before the allocation ends (cairn reads the end from Slurm or CAIRN_END_TIME)",
       [](Context& c, const std::string& n, const std::string& v) { apply_float_knob(c, n, v, "CAIRN_HALT_SECONDS"); }},
      {"SCR_CHECKPOINT_SECONDS", "interval_seconds (CAIRN_INTERVAL_SECONDS)",
       "SCR_Need_checkpoint says 1 this long after the last checkpoint",
       [](Context& c, const std::string& n, const std::string& v) {
         apply_float_knob(c, n, v, "CAIRN_INTERVAL_SECONDS");
       }},
      {"SCR_PREFIX_SIZE", "keep_flushed (CAIRN_KEEP_FLUSHED)",
       "checkpoints kept in the prefix; 0 (keep all) becomes 1000, cairn's most",
       [](Context& c, const std::string& n, const std::string& v) {
         auto x = parse_int(v);
         if (!x || *x < 0) return c.bad(n, v, "an integer >= 0");
         c.knob("CAIRN_KEEP_FLUSHED", std::to_string(*x == 0 ? 1000 : std::min<long long>(*x, 1000)), n);
       }},
      {"SCR_DEBUG", "log (CAIRN_LOG)", "0: warn, 1: info, 2 and more: debug",
       [](Context& c, const std::string& n, const std::string& v) {
         auto x = parse_int(v);
         if (!x || *x < 0) return c.bad(n, v, "an integer >= 0");
         c.knob("CAIRN_LOG", *x == 0 ? "warn" : *x == 1 ? "info" : "debug", n);
       }},
      {"SCR_MPI_BUF_SIZE", "exchange_chunk (CAIRN_EXCHANGE_CHUNK)",
       "bytes per message of the redundancy exchange; below 64K becomes 64K, cairn's least",
       [](Context& c, const std::string& n, const std::string& v) {
         auto s = parse_size(v);
         if (!s) return c.bad(n, v, "a byte count");
         auto plain = parse_int(*s);
         c.knob("CAIRN_EXCHANGE_CHUNK", plain && *plain < 65536 ? "64K" : *s, n);
       }},
      {"SCR_ENABLE", "this library", "0: every call does nothing and succeeds; files go where their names say",
       [](Context& c, const std::string& n, const std::string& v) {
         auto b = parse_bool(v);
         if (!b) return c.bad(n, v, "0 or 1");
         c.out->library.enabled = *b;
       }},
      {"SCR_CHECKPOINT_INTERVAL", "this library", "every N-th call of SCR_Need_checkpoint says 1",
       [](Context& c, const std::string& n, const std::string& v) {
         auto x = parse_int(v);
         if (!x || *x < 0) return c.bad(n, v, "an integer >= 0");
         c.out->library.checkpoint_interval = static_cast<long>(*x);
       }},
      {"SCR_CHECKPOINT_OVERHEAD", "this library",
       "SCR_Need_checkpoint says 1 while the mean checkpoint time stays below this percentage of the run",
       [](Context& c, const std::string& n, const std::string& v) {
         auto x = parse_float(v);
         if (!x || *x < 0) return c.bad(n, v, "a number >= 0");
         c.out->library.checkpoint_overhead = *x;
       }},
      {"SCR_HALT_EXIT", "this library",
       "1: after a checkpoint that a halt condition asked for, the job finalizes cairn and MPI and exits with status "
       "0 (SCR exits without MPI_Finalize, which the MPI launcher reports as a failure)",
       [](Context& c, const std::string& n, const std::string& v) {
         auto b = parse_bool(v);
         if (!b) return c.bad(n, v, "0 or 1");
         c.out->library.halt_exit = *b;
       }},
      {"SCR_CURRENT", "this library",
       "at SCR_Init, the checkpoint of this name becomes the newest: the ones after it are deleted",
       [](Context& c, const std::string&, const std::string& v) { c.out->library.current = v; }},
      {"SCR_CONF_FILE", "this library", "the user config file (default <SCR_PREFIX>/.scrconf)", nullptr},
      {"SCR_CACHE_BYPASS", "nothing",
       "cairn always caches: checkpoint files are written to node-local storage and read from there. 1 (write on "
       "the parallel file system, for files that several ranks share) is not supported",
       [](Context& c, const std::string& n, const std::string& v) {
         warn_if_on(c, n, v, "cairn writes every checkpoint file to the node-local cache; a file must be written and "
                             "read by one rank");
       }},
      {"SCR_FLUSH_ASYNC", "nothing", "cairn always flushes in the background",
       nullptr, "cairn always flushes in the background"},
      {"SCR_FLUSH_TYPE", "nothing", "cairn always flushes in the background with its own writer",
       nullptr, "cairn always flushes in the background"},
      {"SCR_FLUSH_WIDTH", "nothing", "cairn limits writers per node with turnstile_width (CAIRN_TURNSTILE_WIDTH)",
       nullptr, "see turnstile_width (CAIRN_TURNSTILE_WIDTH)"},
      {"SCR_FETCH_WIDTH", "nothing", "every rank reads its own L3 file at restart",
       nullptr, "no effect"},
      {"SCR_FETCH", "nothing", "restart always considers L1, L2 and L3, newest version first",
       nullptr, "restart always considers every level"},
      {"SCR_FETCH_BYPASS", "nothing", "restart always considers L1, L2 and L3, newest version first",
       nullptr, "restart always considers every level"},
      {"SCR_DISTRIBUTE", "nothing", "restart always rebuilds from L2 what a lost node held",
       nullptr, "restart always rebuilds from L2"},
      {"SCR_CNTL_BASE", "nothing", "cairn keeps its records beside the cached data",
       nullptr, "cairn keeps its records beside the cached data"},
      {"SCR_GROUP", "nothing", "the failure group is the node (CAIRN_NODE); only NODE is accepted",
       [](Context& c, const std::string& n, const std::string& v) {
         if (upper(v) == "NODE") return note_only(c, n, v, "the default");
         c.warn(n + "=" + v + " is not supported: cairn's failure group is the node (CAIRN_NODE)");
       }},
      {"SCR_CACHE_PURGE", "nothing", "not supported (1 warns): remove the job's cache directory before the run",
       [](Context& c, const std::string& n, const std::string& v) {
         warn_if_on(c, n, v, "remove the job's cache directory before the run");
       }},
      {"SCR_PREFIX_PURGE", "nothing", "not supported (1 warns): remove the prefix's checkpoints before the run",
       [](Context& c, const std::string& n, const std::string& v) {
         warn_if_on(c, n, v, "remove the prefix's checkpoints before the run");
       }},
      {"SCR_GLOBAL_RESTART", "nothing", "not supported (1 warns): each rank reads its own files at restart",
       [](Context& c, const std::string& n, const std::string& v) {
         warn_if_on(c, n, v, "a restarting rank reads the files it wrote, from L1, L2 or L3");
       }},
      {"SCR_FLUSH_ON_RESTART", "nothing", "not supported (1 warns); `cairn flush` copies a version to the prefix",
       [](Context& c, const std::string& n, const std::string& v) { warn_if_on(c, n, v, "use `cairn flush`"); }},
      {"SCR_FLUSH_POSTSTAGE", "nothing", "not supported (1 warns)",
       [](Context& c, const std::string& n, const std::string& v) {
         warn_if_on(c, n, v, "the newest checkpoint is flushed at SCR_Finalize");
       }},
      {"SCR_RUNS", "nothing", "a launcher setting: `cairn run --retries`",
       nullptr, "use cairn run --retries"},
      {"SCR_RETRIES", "nothing", "a launcher setting: `cairn run --retries`",
       nullptr, "use cairn run --retries"},
      {"SCR_MIN_NODES", "nothing", "a launcher setting: `cairn run --no-spare`",
       nullptr, "a launcher setting"},
      {"SCR_EXCLUDE_NODES", "nothing", "a launcher setting",
       nullptr, "a launcher setting"},
      {"SCR_WATCHDOG_TIMEOUT", "nothing", "`cairn watch --stall` watches for hung jobs",
       nullptr, "see cairn watch --stall"},
      {"SCR_WATCHDOG_TIMEOUT_PFS", "nothing", "`cairn watch --stall` watches for hung jobs",
       nullptr, "see cairn watch --stall"},
      {"SCR_FILE_BUF_SIZE", "nothing", "cairn copies with its own buffers",
       nullptr, "no effect"},
      {"SCR_HOP_DISTANCE", "nothing", "sets span nodes in the order of the job's ranks",
       nullptr, "no effect"},
      {"SCR_CRC_ON_COPY", "nothing", "cairn checksums every chunk of every version",
       nullptr, "always on in cairn"},
      {"SCR_CRC_ON_DELETE", "nothing", "cairn checksums every chunk of every version",
       nullptr, "always on in cairn"},
      {"SCR_CRC_ON_FLUSH", "nothing", "cairn checksums every chunk of every version",
       nullptr, "always on in cairn"},
      {"SCR_LOG_ENABLE", "nothing", "cairn keeps a job history in the prefix (`cairn plot`, docs/tools.md)",
       nullptr, "see docs/tools.md"},
      {"SCR_LOG_TXT_ENABLE", "nothing", "cairn keeps a job history in the prefix",
       nullptr, "see docs/tools.md"},
      {"SCR_LOG_SYSLOG_ENABLE", "nothing", "cairn keeps a job history in the prefix",
       nullptr, "see docs/tools.md"},
      {"SCR_LOG_DB_ENABLE", "nothing", "cairn keeps a job history in the prefix",
       nullptr, "see docs/tools.md"},
      {"SCR_USER_NAME", "nothing", "an identifier for SCR's logs",
       nullptr, "no effect"},
      {"SCR_JOB_ID", "nothing", "an identifier for SCR's logs",
       nullptr, "no effect"},
      {"SCR_JOB_NAME", "nothing", "an identifier for SCR's logs",
       nullptr, "no effect"},
      {"SCR_CLUSTER_NAME", "nothing", "an identifier for SCR's logs",
       nullptr, "no effect"},
  };
  return table;
}

const Param* find_param(const std::string& name) {
  for (const auto& p : params())
    if (name == p.name) return &p;
  return nullptr;
}

bool is_descriptor(const std::string& key) { return key == "CKPT" || key == "STORE" || key == "GROUPS"; }

// The CKPT descriptor cairn follows: the one with INTERVAL=1 (or no INTERVAL), lowest index first.
void apply_descriptors(const Sources& s, bool copy_type_set, Context& c) {
  std::map<std::string, std::map<std::string, std::string>> ckpt;  // index -> key -> value (later wins)
  std::set<std::string> stores;
  bool groups = false;
  auto take = [&](const std::vector<Setting>& list) {
    for (const auto& st : list) {
      if (st.key == "CKPT")
        for (const auto& [k, v] : st.children) ckpt[st.value][k] = v;
      else if (st.key == "STORE")
        stores.insert(st.value);
      else if (st.key == "GROUPS")
        groups = true;
    }
  };
  take(s.app);
  take(s.user_file);  // the user file is above SCR_Config: its values win
  if (!stores.empty())
    c.warn("STORE descriptors are not used: cairn caches in one directory per node (SCR_CACHE_BASE, "
           "CAIRN_CACHE_DIR)");
  if (groups) c.warn("GROUPS descriptors are not used: cairn's failure group is the node (CAIRN_NODE)");
  if (ckpt.empty()) return;
  if (copy_type_set) {
    c.warn("CKPT descriptors are ignored: SCR_COPY_TYPE is set (SCR_COPY_TYPE=FILE uses them)");
    return;
  }
  std::string chosen;
  for (const auto& [index, keys] : ckpt) {
    auto it = keys.find("INTERVAL");
    if (it == keys.end() || it->second == "1") {
      chosen = index;
      break;
    }
  }
  if (chosen.empty()) {
    c.warn("no CKPT descriptor has INTERVAL=1; CKPT descriptors are ignored");
    return;
  }
  if (ckpt.size() > 1)
    c.warn("cairn applies one redundancy scheme to every checkpoint: using CKPT=" + chosen +
           " (INTERVAL=1), ignoring the other CKPT descriptors");
  const std::string from = "CKPT=" + chosen;
  for (const auto& [k, v] : ckpt[chosen]) {
    if (k == "TYPE") {
      auto r = copy_type(v);
      if (!r) c.bad(from + " TYPE", v, "SINGLE, PARTNER, XOR or RS");
      else c.knob("CAIRN_REDUNDANCY", *r, from + " TYPE");
    } else if (k == "SET_SIZE") {
      apply_int_knob(c, from + " SET_SIZE", v, "CAIRN_SET_SIZE", 1);
    } else if (k == "SET_FAILURES") {
      apply_int_knob(c, from + " SET_FAILURES", v, "CAIRN_RS_PARITY", 1);
    } else if (k == "STORE") {
      c.knob("CAIRN_CACHE_DIR", v, from + " STORE");
    } else if (k != "INTERVAL") {
      c.note(from + " " + k + "=" + v + ": not used by cairn");
    }
  }
}

// The effective value of a simple parameter: environment, user file, SCR_Config (later calls win).
std::optional<std::pair<std::string, std::string>> effective(const Sources& s, const std::string& key) {
  if (key.rfind("SCR_", 0) == 0 && s.env)
    if (const char* v = s.env(key.c_str()); v && *v) return std::make_pair(std::string(v), std::string("environment"));
  for (auto it = s.user_file.rbegin(); it != s.user_file.rend(); ++it)
    if (it->key == key && it->children.empty()) return std::make_pair(it->value, std::string("config file"));
  for (auto it = s.app.rbegin(); it != s.app.rend(); ++it)
    if (it->key == key && it->children.empty()) return std::make_pair(it->value, std::string("SCR_Config"));
  return std::nullopt;
}

}  // namespace

std::optional<ConfigRequest> parse_config_request(std::string_view text, std::string* error) {
  std::vector<Word> words;
  if (!split_words(text, &words, error)) return std::nullopt;
  if (words.empty()) {
    *error = "empty configuration string";
    return std::nullopt;
  }
  ConfigRequest r;
  const Word& first = words[0];
  if (!is_key(first.key)) {
    *error = "'" + first.key + "' is not a parameter name (letters, digits and _)";
    return std::nullopt;
  }
  if (!first.has_eq) {
    if (words.size() > 1) {
      *error = "a query names one parameter: '" + std::string(text) + "'";
      return std::nullopt;
    }
    r.op = ConfigRequest::Op::query;
    r.setting.key = first.key;
    return r;
  }
  if (first.value.empty()) {
    if (words.size() > 1) {
      *error = "'" + first.key + "=' unsets a parameter and takes nothing after it";
      return std::nullopt;
    }
    r.op = ConfigRequest::Op::unset;
    r.setting.key = first.key;
    return r;
  }
  if (words.size() == 2 && !words[1].has_eq) {  // "CKPT=0 TYPE": query a descriptor's child
    if (!is_key(words[1].key)) {
      *error = "'" + words[1].key + "' is not a parameter name";
      return std::nullopt;
    }
    r.op = ConfigRequest::Op::query;
    r.setting.key = first.key;
    r.setting.value = first.value;
    r.query_child = words[1].key;
    return r;
  }
  auto s = setting_from_words(words, error);
  if (!s) return std::nullopt;
  r.op = ConfigRequest::Op::set;
  r.setting = std::move(*s);
  return r;
}

std::string expand_env(std::string_view value, const EnvLookup& env) {
  std::string out;
  for (size_t i = 0; i < value.size();) {
    if (value[i] != '$' || i + 1 >= value.size()) {
      out += value[i++];
      continue;
    }
    bool braced = value[i + 1] == '{';
    size_t b = i + (braced ? 2 : 1), e = b;
    while (e < value.size() && (std::isalnum(static_cast<unsigned char>(value[e])) || value[e] == '_')) ++e;
    if (e == b || (braced && (e >= value.size() || value[e] != '}'))) {
      out += value[i++];  // not a variable: keep the '$'
      continue;
    }
    std::string name(value.substr(b, e - b));
    const char* v = env ? env(name.c_str()) : nullptr;
    if (v) out += v;
    i = braced ? e + 1 : e;
  }
  return out;
}

std::vector<Setting> parse_config_file(std::string_view text, const EnvLookup& env, std::vector<std::string>* errors) {
  std::vector<Setting> out;
  size_t line_no = 0, pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    // '#' starts a comment unless it is inside quotes.
    bool quoted = false;
    size_t cut = line.size();
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '"') quoted = !quoted;
      if (line[i] == '#' && !quoted) {
        cut = i;
        break;
      }
    }
    line = line.substr(0, cut);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
    if (line.empty()) continue;
    std::vector<Word> words;
    std::string error;
    std::optional<Setting> s;
    if (split_words(line, &words, &error)) s = setting_from_words(words, &error);
    if (!s) {
      if (errors) errors->push_back(std::to_string(line_no) + ": " + error);
      continue;
    }
    s->value = expand_env(s->value, env);
    for (auto& [k, v] : s->children) v = expand_env(v, env);
    out.push_back(std::move(*s));
  }
  return out;
}

std::optional<std::string> lookup(const Sources& s, const std::string& key, const std::string& parent_value,
                                  const std::string& child) {
  if (child.empty()) {
    auto e = effective(s, key);
    if (e) return e->first;
    return std::nullopt;
  }
  for (const auto* list : {&s.user_file, &s.app})
    for (auto it = list->rbegin(); it != list->rend(); ++it)
      if (it->key == key && it->value == parent_value)
        for (auto c = it->children.rbegin(); c != it->children.rend(); ++c)
          if (c->first == child) return c->second;
  return std::nullopt;
}

Mapping map_parameters(const Sources& s) {
  Mapping m;
  Context c{&m};
  std::set<std::string> keys;
  for (const auto& n : s.env_scr_names) keys.insert(n);
  for (const auto* list : {&s.user_file, &s.app})
    for (const auto& st : *list)
      if (st.children.empty() && !is_descriptor(st.key)) keys.insert(st.key);
  bool copy_type_set = false;
  for (const auto& key : keys) {
    auto e = effective(s, key);
    if (!e) continue;
    const Param* p = find_param(key);
    if (!p) {
      c.warn("unknown SCR parameter " + key + "=" + e->first + " (" + e->second + "): ignored");
      continue;
    }
    if (key == "SCR_COPY_TYPE" && upper(e->first) != "FILE") copy_type_set = true;
    if (p->apply) p->apply(c, key, e->first);
    else if (p->note) note_only(c, key, e->first, p->note);
  }
  apply_descriptors(s, copy_type_set, c);
  // A CAIRN_* variable the user set is above anything SCR's parameters say.
  for (auto it = m.cairn_env.begin(); it != m.cairn_env.end();) {
    const char* mine = s.env ? s.env(it->first.c_str()) : nullptr;
    if (mine && *mine) {
      if (it->second != mine)
        c.warn(it->first + "=" + mine + " (environment) is used, not " + m.origin[it->first] + "'s " + it->second);
      m.origin.erase(it->first);
      it = m.cairn_env.erase(it);
    } else {
      ++it;
    }
  }
  return m;
}

const std::vector<ParameterInfo>& parameter_table() {
  static const std::vector<ParameterInfo> table = [] {
    std::vector<ParameterInfo> t;
    for (const auto& p : params()) t.push_back({p.name, p.becomes, p.meaning});
    t.push_back({"CKPT descriptor", "redundancy, set_size, rs_parity, cache_dir",
                 "the descriptor with INTERVAL=1: TYPE, SET_SIZE, SET_FAILURES, STORE; cairn applies one scheme to "
                 "every checkpoint, so other descriptors are ignored with a warning"});
    t.push_back({"STORE, GROUPS descriptors", "nothing", "ignored with a warning"});
    return t;
  }();
  return table;
}

}  // namespace cairn::scr
