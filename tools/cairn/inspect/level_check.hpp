// What the data of a version says at a level: every rank's chunks read and checked against their
// manifest (`cairn verify`, `index`, `clean`). The inventory's verdicts (inventory.hpp) read no data.
#pragma once

#include <cstdint>
#include <string>

#include "base/layout.hpp"
#include "inspect/inventory.hpp"
#include "progress.hpp"

namespace cairn::tool {

// The outcome of checking one version at one level.
struct LevelCheck {
  enum class State { good, bad, incomplete, absent };
  State state = State::absent;
  uint32_t nranks = 0;         // ranks the version has
  uint32_t ranks_checked = 0;  // ranks whose data was read and checked
  uint32_t ranks_good = 0;
  uint64_t chunks = 0, bytes = 0;  // checked
  std::string error;               // the first bad rank and chunk (verify_stream's message), or why incomplete
};
const char* state_name(LevelCheck::State s);  // "good", "bad", "incomplete", "absent"

// Bytes a check of the version at L1 / L3 reads (for progress bars).
uint64_t l1_check_bytes(const VersionInfo& v);
uint64_t l3_check_bytes(const VersionInfo& v);
// L1: every readable record's slot against its manifest (verify_stream). An unreadable record is
// bad; missing ranks make it incomplete (the ranks present are still checked).
LevelCheck check_l1(const VersionInfo& v, Progress* progress);
// L3: a committed version, every rank's manifest and data file. Missing files of a committed version
// are bad; an uncommitted directory is incomplete and not read (restart never reads it either).
LevelCheck check_l3(const Layout& layout, const VersionInfo& v, Progress* progress);

}  // namespace cairn::tool
