// SCR's parameters as data: one row per parameter SCR documents -- {SCR name, cairn knob, kind, meaning,
// note} -- and how a value of each kind is read and applied. A knob's bounds in its row are the knob
// table's (src/base/knob_table.cpp), and the unit tests hold every row to that table; the rows use them
// only where SCR's meaning differs from cairn's (SCR_CACHE_SIZE=0 becomes 1). A well-formed value outside
// the bounds becomes the knob all the same, which refuses it at load with an error naming the SCR
// parameter (SCR_SET_SIZE=1: set_size is 2..255); a malformed one is a warning, and ignored, as SCR_Init
// ignores it. Internal to bindings/scr (scr_params.cpp uses it).
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "scr_params.hpp"

namespace cairn::scr::table {

enum class Kind {
  text,         // the knob takes the value as written (and `field`, when there is one)
  integer,      // an integer (the knob's bounds [lo, hi] are the knob's to enforce); 0 is said with `note`
  at_least,     // an integer >= 0; below lo becomes lo, said with `note` (SCR_CACHE_SIZE=0)
  keep_all,     // an integer >= 0; 0 (SCR: keep them all) and anything above hi become hi
  seconds,      // a number >= 0
  bytes,        // a byte count (KB, MB, GB); below lo becomes lo
  copy_type,    // SINGLE, PARTNER, XOR, RS; FILE: the CKPT descriptor decides
  log_level,    // 0: warn, 1: info, 2 and more: debug
  library,      // a setting of this library: `field` (its type says how the value is read), or none
  unsupported,  // 0 is the default and changes nothing; anything else warns, with `note`
  node_group,   // NODE is the default; anything else warns
  no_effect,    // accepted, and noted with `note`
};

using LibraryField = std::variant<std::monostate, bool LibrarySettings::*, long LibrarySettings::*,
                                  double LibrarySettings::*, std::string LibrarySettings::*>;

struct Row {
  const char* scr;               // "SCR_SET_SIZE"
  const char* knob;              // "set_size": the knob it sets (CAIRN_SET_SIZE); nullptr: none
  Kind kind;
  const char* meaning;           // the docs' table (docs/scr.md)
  const char* note = nullptr;    // what is said where the kind says so (above)
  long long lo = 0, hi = 0;      // integer, at_least, keep_all, bytes: the knob's bounds
  LibraryField field = {};       // library (and text): the setting of this library it sets
};

// Every row, in the order of the docs' table.
const std::vector<Row>& rows();
// The row of an SCR parameter, or nullptr.
const Row* find(const std::string& scr_name);
// "set_size" -> "CAIRN_SET_SIZE".
std::string env_name(const char* knob);
// The docs' "becomes" column: "set_size (CAIRN_SET_SIZE)", "this library" or "nothing".
std::string becomes(const Row& row);
// Applies `value` by the row's kind into *out. `name` is what the user wrote ("SCR_SET_SIZE", or
// "CKPT=0 SET_SIZE" for a descriptor's child): warnings and notes say it, and it becomes the origin of
// the CAIRN_* variable set.
void apply(const Row& row, const std::string& name, const std::string& value, Mapping* out);

// What the parser and the descriptors share with the rows.
std::string upper(std::string s);
std::optional<std::string> copy_type(const std::string& value);  // "XOR" -> "xor"
void set_knob(Mapping* out, const std::string& env, const std::string& value, const std::string& from);
void refuse(Mapping* out, const std::string& name, const std::string& value, const std::string& accepted);
void note_only(Mapping* out, const std::string& name, const std::string& value, const std::string& why);

}  // namespace cairn::scr::table
