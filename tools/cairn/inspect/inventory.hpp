// What a job left on disk, as this machine sees it: every version in the L1 cache (each node
// directory under <cache_dir>/cairn-<job> that is visible here), its L2 markers and set records, and
// every version directory of L3, and the one verdict per level that the inventory alone gives. Shared by
// the inspection tools (list, show, verify, watch, plot) and by flush and clean; what the data says is
// level_check.hpp, when a version reached each level version_times.hpp. Reads only the formats of docs/format.md; needs no MPI (STYLE habit 12).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"
#include "common.hpp"
#include "l3/l3_store.hpp"
#include "redundancy/set_record.hpp"

namespace cairn::tool {

// Exit statuses of the inspection tools, beyond kExitOk/kExitFailure/kExitUsage (common.hpp).
constexpr int kExitNothing = 3;  // nothing to show, verify or flush (an empty prefix and cache)
constexpr int kExitStall = 4;    // `cairn watch --stall S`: no new checkpoint for S seconds

// One rank directory of the cache that holds a file of a version (record, marker or set record).
struct L1Copy {
  std::string node;          // node directory name (the failure group)
  std::string rank_dir;      // <cache_job>/<node>/r<rank>
  uint32_t rank = 0;         // from the directory name
  bool has_record = false;   // v<N>.l1 present and readable; `slot` and `manifest` valid
  std::string record_error;  // v<N>.l1 present but unreadable (why)
  uint32_t slot = 0;
  Manifest manifest;
  bool is_protected = false;    // v<N>.protected present
  bool has_set = false;         // v<N>.set present
  int64_t record_mtime_ns = 0;  // when the record was written (0: none)
  int64_t protected_mtime_ns = 0;
};

// "node1/r2": where a copy lies, for messages.
std::string node_rank(const L1Copy& c);

// One version directory of L3.
struct L3Version {
  bool present = false;      // the directory exists
  bool committed = false;    // COMMIT present and readable
  l3::Committed commit;      // valid when committed
  std::string commit_error;  // COMMIT present but unreadable (why)
  std::string dir;
  std::map<uint32_t, Manifest> manifests;  // readable rank-<r>.manifest files
  std::vector<std::string> errors;         // unreadable manifests, inconsistent COMMIT
  uint32_t data_files = 0;                 // ranks with a rank-<r>.data or rank-<r>.where file
  uint64_t bytes = 0;                      // every file of the directory together (data kept
                                           // elsewhere by an N-to-M layout is not counted)
  int64_t commit_mtime_ns = 0;             // when COMMIT was written (0: none)
  int64_t data_birth_ns = 0;               // earliest creation (statx birth time) of a rank's data file; 0: unknown
  std::set<uint64_t> needs;                // an incremental version: the versions its chunk records name
  std::string needs_error;                 // one of them is not committed here (why)
};

struct VersionInfo {
  uint64_t version = 0;
  std::vector<L1Copy> l1;                      // every rank directory holding a file of this version
  std::map<uint32_t, Manifest> set_manifests;  // manifests recovered from L2 set records, by rank
  std::vector<redundancy::SetRecord> sets;     // distinct set records (one per set)
  std::vector<std::string> l2_errors;          // unreadable set records
  L3Version l3;

  // Ranks of the job that wrote it (from any manifest, else COMMIT); 0 when unknown.
  uint32_t nranks() const;
  std::string label() const;
  // The rank's manifest from the best source: its L1 record, else an L2 set record, else L3.
  const Manifest* manifest(uint32_t rank) const;
  // The rank's readable L1 record (the newest one if several node directories hold one), or nullptr.
  const L1Copy* l1_copy(uint32_t rank) const;
  uint32_t l1_ranks() const;                  // distinct ranks with a readable record
  uint32_t l2_ranks() const;                  // distinct ranks with a protected marker
  bool l1_complete() const;                   // every rank 0..nranks-1 has a readable record here
  bool l2_complete() const;                   // every rank 0..nranks-1 has a protected marker here
  std::vector<std::string> l1_nodes() const;  // node directories holding a readable record
  uint32_t known_ranks() const;               // ranks whose manifest is known from some level
  uint64_t total_bytes() const;               // snapshot bytes over the ranks whose manifest is known
  int64_t created_unix_ns() const;            // the newest created_unix_ns among the known manifests; 0 if none
  std::string scheme() const;                 // L2 scheme from the set records; empty if none
};

struct Inventory {
  Layout layout;
  std::vector<std::string> nodes;                                    // node directories under layout.cache_job
  std::map<uint64_t, VersionInfo, std::greater<uint64_t>> versions;  // newest first
};

// What the inventory alone (records, COMMIT, manifests; no data read) says of a version at a level: the
// one verdict that list, show, index and verify give (verify then reads the data of what is complete).
struct LevelVerdict {
  enum class State { absent, incomplete, damaged, complete };
  State state = State::absent;
  std::string why;  // incomplete or damaged: why, in one line
};
// L1 (the cache visible here): damaged when a rank's record cannot be read, incomplete when ranks are
// missing here, complete when every rank has a readable record.
LevelVerdict l1_verdict(const VersionInfo& v);
// L3: damaged when COMMIT or a manifest of a committed version cannot be read, incomplete without COMMIT
// (never read by a restart), complete (committed) otherwise.
LevelVerdict l3_verdict(const VersionInfo& v);
// "absent", "incomplete", "damaged", and "complete" (L1) or "committed" (L3).
const char* verdict_name(const LevelVerdict& v, bool l3);

// Reads every record, marker, set record, COMMIT and L3 manifest (not the data). Never fails: what
// cannot be read is recorded in the VersionInfo (record_error, l2_errors, l3.errors).
Inventory scan_inventory(const Layout& layout);

// Where rank `rank`'s L3 data of version v lies: its rank-<r>.where record (N-to-M files, other
// prefixes, compression), or, without one, the whole rank-<r>.data file of the version directory.
Result<l3::Where> l3_where(const Layout& layout, uint64_t v, uint32_t rank);

}  // namespace cairn::tool
