// A manifest for a stream of bytes, as the library seals one: one region "x" holding the whole stream
// (none for an empty stream) and the checksum of every chunk_size chunk. For the tests of the formats and
// the stores, which need real manifests of real bytes.
#pragma once

#include <cstdint>
#include <string>

#include "base/manifest.hpp"

namespace cairn {

struct StreamOf {
  uint64_t version = 1;
  uint32_t rank = 0, nranks = 1;
  uint32_t chunk_size = 4096;
  std::string node = "n0";
  std::string label;
};

inline Manifest stream_manifest(const std::string& data, const StreamOf& s) {
  Manifest m;
  m.version = s.version;
  m.label = s.label;
  m.rank = s.rank;
  m.nranks = s.nranks;
  m.node = s.node;
  m.chunk_size = s.chunk_size;
  m.total_size = data.size();
  if (!data.empty()) {
    RegionEntry e;
    e.name = "x";
    e.count = e.size = data.size();
    m.regions.push_back(e);
  }
  m.chunk_hashes = chunk_hashes(data.data(), data.size(), m.chunk_size);
  return m;
}

}  // namespace cairn
