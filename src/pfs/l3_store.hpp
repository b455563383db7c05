// L3: versions on the parallel file system under the prefix. One directory per version, one data
// file and one manifest per rank, and a COMMIT file written last by rank 0 once every rank's files
// are durable. A directory without COMMIT is never read. Layout in docs/format.md ("L3").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/stream_reader.hpp"
#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"
#include "pfs/l3_placement.hpp"

namespace cairn::l3 {

struct Committed {
  uint64_t version = 0;
  uint32_t nranks = 0;
  std::string label;
};

std::string data_path(const Layout& l, uint64_t v, uint32_t rank);
std::string manifest_path(const Layout& l, uint64_t v, uint32_t rank);
std::string commit_path(const Layout& l, uint64_t v);
std::string where_path(const Layout& l, uint64_t v, uint32_t rank);

// Write one rank's data and manifest durably (data, fsync, where-record, then manifest). `after_data`
// runs between the data and the manifest (failure injection of the "flush" phase). `opts` chooses the
// layout (N-to-M files, prefixes, turnstile, compression); nullptr or legacy(): rank-<r>.data.
Status write_rank(const Layout& l, const Manifest& m, const uint8_t* data,
                  const std::function<void()>& after_data = {}, const WriteOptions* opts = nullptr);
// Rank 0, after every rank's write_rank succeeded.
Status commit(const Layout& l, uint64_t v, uint32_t nranks, const std::string& label);
Result<Committed> read_commit(const Layout& l, uint64_t v);
// Committed versions, newest first. Directories without (or with an unreadable) COMMIT are skipped.
std::vector<Committed> list_committed(const Layout& l);
// Highest version number with a directory at all (committed or not); 0 if none.
uint64_t max_version_present(const Layout& l);

Result<Manifest> read_manifest(const Layout& l, uint64_t v, uint32_t rank);
// Read the rank's data (m.total_size bytes) into dst, whatever layout wrote it.
Status read_data(const Layout& l, const Manifest& m, uint8_t* dst);
// The same, straight into `extents` (the stream's bytes scattered over several buffers, see
// cache/stream_reader.hpp), verifying every chunk against the manifest right after it landed: one pass,
// no staging copy. ERR_CORRUPT for the first bad chunk (the extents then hold partial data).
Status read_data_verified(const Layout& l, const Manifest& m, const std::vector<StreamExtent>& extents);
// Only the chunks that overlap `wanted` (cache/stream_reader.hpp, read_verified_ranges): a rank that
// restarts on another rank count reads just its pieces of an old rank's file.
Status read_ranges_verified(const Layout& l, const Manifest& m, const std::vector<StreamExtent>& wanted);

// Remove one version: COMMIT first, then the data files its where-records name on other prefixes,
// then its directory.
Status remove_version(const Layout& l, uint64_t v);
// Keep the `keep` newest committed versions; remove older committed ones and every uncommitted
// directory older than the newest committed version. Never removes the newest committed version.
Status prune(const Layout& l, int keep);

}  // namespace cairn::l3
