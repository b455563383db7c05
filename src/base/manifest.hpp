// The manifest: what one rank wrote for one version, and how to check it. Stored beside the data at
// every level (L1 slot, L2 set replicas, L3 files). Byte layout in docs/format.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn {

enum class RegionKind : uint32_t { memory = 0, file = 1 };

struct RegionEntry {
  std::string name;         // region name (memory) or routed file name (file)
  RegionKind kind = RegionKind::memory;
  uint32_t type = 0;        // cairn_type for memory regions; 0 for files
  uint32_t elem_size = 1;
  uint64_t count = 0;       // elements
  uint64_t offset = 0;      // byte offset of the region in the rank's snapshot stream
  uint64_t size = 0;        // bytes (count * elem_size)
  uint32_t distribution = 0;           // 0 = private (issue 3 adds more); reserved
  std::vector<uint64_t> dist_params;   // distribution parameters; empty for private
  bool operator==(const RegionEntry&) const = default;
};

struct Manifest {
  uint64_t version = 0;
  std::string label;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  std::string node;          // failure group that wrote it
  int64_t created_unix_ns = 0;
  uint32_t chunk_size = 0;   // checksum granularity
  uint64_t total_size = 0;   // bytes in the snapshot stream
  std::vector<RegionEntry> regions;
  std::vector<uint64_t> chunk_hashes;  // xxh3-64 of each chunk of the stream, in order
  bool operator==(const Manifest&) const = default;
};

constexpr uint32_t kManifestFormat = 1;

// Serialize to the documented little-endian byte layout (ends with an xxh3 of everything before).
std::string encode_manifest(const Manifest& m);
// Parse and check a serialized manifest: magic, format version (older versions accepted), lengths,
// trailing checksum. Never reads out of bounds; bad input is ERR_FORMAT or ERR_CORRUPT.
Result<Manifest> decode_manifest(const void* data, size_t len);

// xxh3-64 of every chunk_size piece of [data, data + len).
std::vector<uint64_t> chunk_hashes(const void* data, uint64_t len, uint32_t chunk_size);
// "region 'grid'", "region 'a', file 'out.h5'": the regions that share a byte with [begin, end), the
// first three by name ("... and 2 more"); "no region" when none does.
std::string regions_in(const std::vector<RegionEntry>& regions, uint64_t begin, uint64_t end);
// The number of chunks of the manifest's stream, once its chunk table fits it (a chunk size for a
// non-empty stream, one checksum per chunk_size piece of total_size bytes); ERR_CORRUPT otherwise.
Result<uint64_t> check_chunk_table(const Manifest& m);
// Check a stream against the manifest (ChunkCheck::whole over all of it); the message names the first bad
// chunk and its regions.
Status verify_stream(const Manifest& m, const void* data, uint64_t len);

}  // namespace cairn
