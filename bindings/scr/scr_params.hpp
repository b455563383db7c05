// SCR's configuration parameters, as SCR reads them, mapped onto cairn's knobs. Pure string work (no MPI,
// no cairn internals): the SCR-compatible library (scr_api.cpp) and its unit tests use it.
//
// SCR takes a parameter from the first of: the environment, the user config file (SCR_CONF_FILE, else
// <SCR_PREFIX>/.scrconf), SCR_Config() calls, SCR's defaults. The table in scr_param_table.cpp says for every
// parameter SCR documents what it becomes here: a cairn knob (set as a CAIRN_* environment variable for
// cairn_init, below any CAIRN_* variable the user set), a setting of this library, or nothing (with the
// reason). docs/scr.md shows the same table.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::scr {

// One parameter as written: "SCR_FLUSH=10" (key, value) or a descriptor "CKPT=0 TYPE=XOR SET_SIZE=8"
// (key CKPT, value 0, children TYPE=XOR and SET_SIZE=8).
struct Setting {
  std::string key, value;
  std::vector<std::pair<std::string, std::string>> children;
};

// What an SCR_Config() string asks for.
struct ConfigRequest {
  enum class Op { set, unset, query } op = Op::query;
  Setting setting;          // for query: key (and value for "CKPT=0 TYPE"), children empty
  std::string query_child;  // "TYPE" in "CKPT=0 TYPE"
};

// Parses SCR_Config's argument: "KEY=VALUE", "KEY=" (unset), "KEY" (query), "PARENT=V CHILD=W ..."
// (a descriptor) or "PARENT=V CHILD" (query a child). Values may be quoted with "..." to hold spaces.
// nullopt with *error set for anything else (empty, "=X", a child without a parent value, ...).
std::optional<ConfigRequest> parse_config_request(std::string_view text, std::string* error);

// Parses an SCR config file: one setting per line, '#' starts a comment, blank lines are skipped,
// $VAR and ${VAR} in values are replaced from `env` (unset: empty). Lines that do not parse are
// reported in *errors as "LINE: message" and skipped.
using EnvLookup = std::function<const char*(const char*)>;
std::vector<Setting> parse_config_file(std::string_view text, const EnvLookup& env, std::vector<std::string>* errors);
std::string expand_env(std::string_view value, const EnvLookup& env);

// What the library itself does with SCR's settings (beyond cairn's knobs).
struct LibrarySettings {
  bool enabled = true;                // SCR_ENABLE
  long checkpoint_interval = 0;       // SCR_CHECKPOINT_INTERVAL: every N-th SCR_Need_checkpoint says 1
  double checkpoint_overhead = 0;     // SCR_CHECKPOINT_OVERHEAD: percent of run time for checkpoints
  bool halt_exit = false;             // SCR_HALT_EXIT
  std::string current;                // SCR_CURRENT: make this checkpoint the newest at SCR_Init
  std::string prefix;                 // SCR_PREFIX as given ("" : the working directory)
};

// The outcome of mapping every source.
struct Mapping {
  std::map<std::string, std::string> cairn_env;   // CAIRN_* variable -> value, for cairn_init
  std::map<std::string, std::string> origin;      // CAIRN_* variable -> the SCR parameter it came from
  LibrarySettings library;
  std::vector<std::string> warnings;  // unknown parameters, unsupported ones, bad values, conflicts
  std::vector<std::string> notes;     // parameters accepted that change nothing in cairn, and why
};

// The sources in SCR's order of precedence. `env` is the process environment (SCR_* and CAIRN_* names
// are read from it), `env_scr_names` the SCR_* variables present, `user_file` the parsed user config
// file and `app` what SCR_Config() set, in call order (later wins).
struct Sources {
  EnvLookup env;
  std::vector<std::string> env_scr_names;
  std::vector<Setting> user_file;
  std::vector<Setting> app;
};
Mapping map_parameters(const Sources& sources);

// The effective value of a simple parameter, or of a descriptor's child ("CKPT", "0", "TYPE"), from the
// sources in precedence order (what SCR_Config's query returns); nullopt when unset.
std::optional<std::string> lookup(const Sources& sources, const std::string& key, const std::string& parent_value = {},
                                  const std::string& child = {});

// For the docs' table and the unit tests: every SCR parameter the table knows, with what it becomes.
struct ParameterInfo {
  std::string name;     // SCR_FLUSH
  std::string becomes;  // "flush_every (CAIRN_FLUSH_EVERY)", "this library", "nothing"
  std::string meaning;  // how, or why nothing
  std::string knob;     // "flush_every": the knob it sets; empty: none
  long long lo = 0, hi = 0;  // the knob's bounds a value is held to (integers, sizes); 0, 0: none here
};
const std::vector<ParameterInfo>& parameter_table();

}  // namespace cairn::scr

namespace cairn::scr {

// The sources as this process sees them: its environment, the user config file (SCR_CONF_FILE, else
// <SCR_PREFIX>/.scrconf, both looked up in the environment and `app`; *file_used names the file read)
// and `app`. Lines of the file that do not parse are in *file_errors as "path:LINE: message".
Sources process_sources(std::vector<Setting> app, std::vector<std::string>* file_errors, std::string* file_used);

// For cairn's tools (`cairn run`, `list`, `halt`, ...): SCR's parameters from the environment and the
// user config file, set as the CAIRN_* variables they map to where those are unset, so the tools and
// the jobs they start find the same prefix and cache as an SCR code's SCR_Init does. What it did, so
// that a tool reports a value under the SCR name the user wrote (`origin`), and says what SCR_Init would
// say of the parameters (`warnings`: unknown parameters, values cairn does not accept, which are
// ignored as SCR_Init ignores them, and lines of the user config file that do not parse). The first call
// exports; later ones return the same.
struct Exported {
  std::map<std::string, std::string> origin;  // CAIRN_* variable set -> the SCR parameter it came from
  std::vector<std::string> warnings;
};
const Exported& export_cairn_variables();

}  // namespace cairn::scr
