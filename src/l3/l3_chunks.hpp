// Incremental L3 versions: the chunk record rank-<r>.chunks, which names for every checksum chunk of a
// rank's stream the version whose data file holds it and the offset there, and the plan that makes one
// from the previous committed version (docs/format.md, "L3"; docs/architecture.md, "Incremental
// versions"). A record names the holder of each chunk directly, never a version that names another: a
// reader opens at most the files named, and follows no chain.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn::l3 {

// Chunks first .. first+count-1 of the stream lie back to back in version `holder`'s
// rank-<r>.data, from byte `offset`.
struct ChunkRun {
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t holder = 0;
  uint64_t offset = 0;
  bool operator==(const ChunkRun&) const = default;
};

struct ChunkRecord {
  uint64_t version = 0;  // the version whose record this is
  uint64_t chunks = 0;   // chunks of the stream; the runs cover 0..chunks-1 in order
  uint32_t chunk_size = 0;  // the manifest's chunk_size (every chunk but the stream's last is this long)
  uint32_t depth = 0;    // incremental versions since the last full one, this one included (>= 1)
  uint64_t stored = 0;   // bytes of this version's own data file (its changed chunks)
  std::vector<ChunkRun> runs;
  bool operator==(const ChunkRecord&) const = default;
};

// The text of docs/format.md: "cairn-chunks 1", then "version", "chunks", "depth", "stored" lines and one
// "run FIRST COUNT HOLDER OFFSET" line per run.
std::string encode_chunk_record(const ChunkRecord& r);
// ERR_FORMAT: not a chunk record, another format, or an unknown key (a newer writer: the record says
// where data lives, so nothing in it may be skipped). ERR_CORRUPT: a field missing or malformed, runs
// that do not cover the chunks in order, a holder newer than the version, depth 0, an extent past 2^64.
// Counts are checked against the text's length before anything is allocated.
Result<ChunkRecord> decode_chunk_record(std::string_view text);

// The versions other than r.version that hold some of its chunks.
std::set<uint64_t> holders_of(const ChunkRecord& r);

// Where chunk `c` lies: its holder and its offset in the holder's data file (c < r.chunks, the record
// decoded).
struct ChunkPlace {
  uint64_t holder = 0;
  uint64_t offset = 0;
};
ChunkPlace place_of(const ChunkRecord& r, uint64_t chunk);

// The previous committed version of the same rank, as the writer sees it.
struct BaseVersion {
  const Manifest* manifest = nullptr;
  const ChunkRecord* record = nullptr;  // nullptr: a full version (its data file holds every chunk)
};

// The plan of an incremental version of `m` on `base`: the record to write and the chunks whose bytes
// go into this version's own data file, in stream order, back to back. Returns an error (the reason, for
// the log) when the version must be full: full_every <= 1, a base of another shape (nranks, rank,
// chunk_size, total_size, regions), a chain that reached full_every, or nothing unchanged.
struct IncrementalPlan {
  ChunkRecord record;
  std::vector<uint64_t> changed;  // chunk numbers written to this version's data file
};
Result<IncrementalPlan> plan_incremental(const Manifest& m, const BaseVersion& base, int full_every);

}  // namespace cairn::l3
