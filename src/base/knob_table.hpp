// The knob table: every knob of the configuration declared once (name, type, member, default, bounds,
// rules, description), and what a knob's declaration says about its values -- how they are parsed from
// text, checked, stored and shown. config.cpp loads a configuration through it; config_render.cpp renders
// it (`cairn config --list`, docs/config.md, the sample config). Internal to base: others use config.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/config.hpp"

namespace cairn::knob {

// size and duration: written as base/units.hpp parses them ("64K", "15m"); a duration is stored as
// seconds in a double.
enum class Kind { integer, floating, boolean, string, choice, level, size, duration };
// Checks beyond type and bounds.
enum class Rule { none, not_empty, not_empty_text, path_component, multiple_of_64, signal_name, host_port };

using Member = std::variant<int Config::*, int64_t Config::*, uint64_t Config::*, double Config::*,
                            bool Config::*, std::string Config::*, Redundancy Config::*,
                            log::Level Config::*, IntervalMode Config::*, ServiceMode Config::*,
                            SnapshotMode Config::*, ServiceRestart Config::*, MigrateTransport Config::*,
                            DeviceCopy Config::*, L1Incremental Config::*, IfUnrecoverable Config::*>;

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr int64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct Knob {
  const char* name;
  Kind kind;
  Member member;
  // The default, written as in an environment variable and parsed by the same code. For node and job
  // "" means derived at load time (the hostname; a name from the prefix).
  const char* default_text;
  int64_t min = 0;  // integer, size: inclusive bounds; floating, duration: lower bound only (seconds)
  int64_t max = kNoMax;
  std::vector<const char*> choices = {};  // choice, level: in the order of the C++ enum
  Rule rule = Rule::none;
  const char* default_doc = nullptr;  // shown in the docs instead of default_text
  const char* description = "";
};

// Every knob, in the order of the docs' table.
const std::vector<Knob>& knobs();
// Environment variables of the launcher and tools that are not knobs (no "unknown" warning).
const std::vector<const char*>& non_knob_variables();

std::string env_name(const Knob& k);  // "CAIRN_CACHE_VERSIONS"
const char* type_name(Kind kind);     // "int", "float", ...

// A parsed value before it is stored: int64_t for integers, sizes and choice indexes.
using Value = std::variant<int64_t, double, bool, std::string>;

std::string format_size(int64_t bytes);           // "1M", "64K", "4095"
std::string format_float(double v, bool toml);    // shortest text that reads back the same
std::string quoted(const std::string& s);          // a TOML basic string
std::string format_toml(const Knob& k, const Value& v);  // the value as a TOML literal
void store(Config& c, const Knob& k, const Value& v);
Value load(const Config& c, const Knob& k);

std::string lower(std::string s);
std::string trim(const std::string& s);
// What a knob accepts, for error messages and the docs' "accepted" column.
std::string accepted(const Knob& k, bool markdown = false);
// "" when the value is acceptable, else the reason.
std::string check(const Knob& k, const Value& v);
// "1M", "64KiB", "4096" -> bytes (units::parse_size); nullopt when malformed. Values past int64 saturate
// (then fail bounds).
std::optional<int64_t> parse_size(const std::string& text);
std::optional<int64_t> parse_choice(const Knob& k, const std::string& text);
// An environment value (or a table default) to a Value; a reason when malformed.
std::variant<Value, std::string> from_text(const Knob& k, const std::string& raw);

}  // namespace cairn::knob
