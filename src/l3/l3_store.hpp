// L3: versions on the parallel file system under the prefix. One directory per version, one data
// file and one manifest per rank, and a COMMIT file written last by rank 0 once every rank's files
// are durable. A directory without COMMIT is never read. Layout in docs/format.md ("L3").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/fsutil.hpp"
#include "base/stream_reader.hpp"
#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"
#include "l3/l3_chunks.hpp"
#include "l3/l3_placement.hpp"

namespace cairn::l3 {

struct Committed {
  uint64_t version = 0;
  uint32_t nranks = 0;
  std::string label;
};

// COMMIT's text (docs/format.md, "L3"): "cairn-commit 1", then "version N", "nranks P" and "label L"
// lines. A line break in the label is written as a space.
std::string encode_commit(const Committed& c);
// ERR_FORMAT: not a COMMIT file; ERR_CORRUPT: its version or nranks is missing or malformed. Lines it
// does not know are skipped (a newer writer's).
Result<Committed> decode_commit(std::string_view text);

// The files of a rank in a version directory: rank-<r>.data, rank-<r>.manifest, rank-<r>.where,
// rank-<r>.chunks. The parser accepts exactly the names data_path/manifest_path/where_path/chunks_path make.
enum class RankFile { data, manifest, where, chunks };
bool parse_rank_file_name(std::string_view name, uint32_t* rank, RankFile* kind);

std::string data_path(const Layout& l, uint64_t v, uint32_t rank);
std::string manifest_path(const Layout& l, uint64_t v, uint32_t rank);
std::string commit_path(const Layout& l, uint64_t v);
std::string where_path(const Layout& l, uint64_t v, uint32_t rank);
std::string chunks_path(const Layout& l, uint64_t v, uint32_t rank);

// Write one rank's data and manifest durably (data, fsync, where-record or chunk record, then manifest).
// `after_data` runs between the data and the manifest (failure injection of the "flush" phase). `opts`
// chooses the layout (N-to-M files, prefixes, turnstile, compression); nullptr or legacy(): rank-<r>.data.
// It is place_rank and a RankWriter over the whole stream. With opts->full_every > 1 in the legacy
// layout, a version whose chunks partly match the newest committed version of the same rank (same shape)
// is written incremental: rank-<r>.data holds only its changed chunks and rank-<r>.chunks names where
// every chunk lies (l3_chunks.hpp); otherwise, and when a version it would name is being removed, full.
// `written` (may be null) gets the bytes put into the rank's data file once they are durable: the whole
// stream, its compressed chunks, or an incremental version's changed chunks only.
Status write_rank(const Layout& l, const Manifest& m, const uint8_t* data,
                  const std::function<void()>& after_data = {}, const WriteOptions* opts = nullptr,
                  uint64_t* written = nullptr);

// Where one rank's stored bytes go, decided before any of them is written: its own file in the version
// directory (no where-record), or the place a where-record names (a file of its own or a shared file at
// a reserved offset, on any prefix; compressed chunks).
struct RankPlacement {
  bool recorded = false;  // a where-record names the place; else rank-<r>.data, no record
  bool shared = false;    // recorded in a file other ranks write too: never truncated
  Where where;            // recorded: file, offset, stored, compression
};
// Place `stored` bytes of rank m.rank under `opts` (nullptr or legacy(): its own file, no record):
// choose_data_file, and for shared files reserve_extent on this node. Uncompressed unless the caller
// fills where.zstd and where.chunk_stored.
Result<RankPlacement> place_rank(const Layout& l, const Manifest& m, uint64_t stored, const WriteOptions* opts);

// One rank's files of one version written as its bytes arrive, in write_rank's order: open() creates
// the version directory and the data file (entering the node's turnstile when the layout has one),
// write() puts stored bytes at their offset (in any order), finish() makes them durable (fsync), then
// writes the where-record (if any) and the manifest last. The service's agents write each verified
// chunk as it lands with it; write_rank writes a whole slot. Nothing counts until finish() returned.
// A data file of the rank's own is written under a temporary name and renamed into place by finish():
// the name appears only complete, so two writers of the same version (an agent that was given up on,
// and the embedded flusher that took over) can only ever replace it with the same verified bytes. A
// writer destroyed before finish() removes its temporary file. A rank's own file is the recycle pool's
// file of that rank where there is one (overwritten, and cut to what was written at finish()), else new.
class RankWriter {
 public:
  RankWriter() = default;
  RankWriter(const RankWriter&) = delete;
  RankWriter& operator=(const RankWriter&) = delete;
  ~RankWriter();
  Status open(const Layout& l, const Manifest& m, const RankPlacement& p, const WriteOptions* opts);
  // `offset` counts from the rank's first stored byte.
  Status write(uint64_t offset, const uint8_t* data, uint64_t len);
  // How finish() ended: the rank's version written (its manifest last), or, for an incremental write
  // (record_chunks), nothing committed because a version its chunk record names is being removed: the
  // caller writes the version full instead. A write without a chunk record is always `written`.
  enum class Finished { written, base_removed };
  Result<Finished> finish(const std::function<void()>& after_data = {});
  // The bytes written were zstd chunks of these stored sizes (before finish(): the where-record says so;
  // a writer that compresses as the bytes arrive knows the sizes only at the end).
  void record_compressed(std::vector<uint64_t> chunk_stored);
  // The bytes written are the changed chunks of an incremental version: finish() writes this chunk
  // record after the data and then checks that every version it names is still committed
  // (Finished::base_removed if one is being removed). Without it, finish() removes a chunk record an
  // earlier attempt at the version may have left.
  void record_chunks(ChunkRecord record);
  uint64_t written() const { return written_; }

 private:
  std::optional<fs::Fd> take_recycled(const std::string& pooled);

  Layout layout_;
  Manifest manifest_;
  RankPlacement place_;
  std::optional<ChunkRecord> chunks_;
  std::string path_, temp_;  // temp_: where the bytes go until finish() (empty for shared files)
  fs::Fd fd_;
  Turnstile turn_;
  uint64_t base_ = 0, written_ = 0;
  uint64_t end_ = 0;        // past the last byte written (from base_)
  bool recycled_ = false;   // temp_ is a file of the recycle pool: cut to end_ at finish()
};
// Rank 0, after every rank's write_rank succeeded.
Status commit(const Layout& l, uint64_t v, uint32_t nranks, const std::string& label);
Result<Committed> read_commit(const Layout& l, uint64_t v);
// Committed versions, newest first. Directories without (or with an unreadable) COMMIT are skipped.
std::vector<Committed> list_committed(const Layout& l);
// Version numbers with a directory (committed or not), newest first.
std::vector<uint64_t> version_dirs(const Layout& l);
// Highest version number with a directory at all (committed or not); 0 if none.
uint64_t max_version_present(const Layout& l);

Result<Manifest> read_manifest(const Layout& l, uint64_t v, uint32_t rank);
// Read the rank's data (m.total_size bytes) into dst, whatever layout wrote it; an incremental version's
// chunks from the data files its chunk record names (a file missing or too short: ERR_CORRUPT).
Status read_data(const Layout& l, const Manifest& m, uint8_t* dst);
// The same, straight into `extents` (the stream's bytes scattered over several buffers, see
// cache/stream_reader.hpp), verifying every chunk against the manifest right after it landed: one pass,
// no staging copy. ERR_CORRUPT for the first bad chunk (the extents then hold partial data).
Status read_data_verified(const Layout& l, const Manifest& m, const std::vector<StreamExtent>& extents);
// Only the chunks that overlap `wanted` (cache/stream_reader.hpp, read_verified_ranges): a rank that
// restarts on another rank count reads just its pieces of an old rank's file.
Status read_ranges_verified(const Layout& l, const Manifest& m, const std::vector<StreamExtent>& wanted);

// The versions other than v whose data files hold chunks of version v: what its ranks' chunk records
// name (empty for a full version). A record that does not decode is ERR_CORRUPT/ERR_FORMAT, naming it.
Result<std::set<uint64_t>> holders_named_by(const Layout& l, uint64_t v);

// Removing versions (l3_remove.cpp). Remove one version: COMMIT first, then the data files its
// where-records name on other prefixes, then its directory. A committed version whose chunks another
// committed version names is refused (ERR_INVALID_ARG, naming it: remove that one first); one that an
// incremental version being written names is kept (its COMMIT put back) and refused the same way.
Status remove_version(const Layout& l, uint64_t v);
// Remove `versions` as remove_version would one by one, newest first, with the same refusals, and
// each version's outcome: the chunk records of the prefix are read once (who names whom), not once per
// version removed. A version a refused or kept one names is refused too. All COMMITs go before the one
// look for records being written, then what that look keeps gets its COMMIT back, then the directories
// go.
std::map<uint64_t, Status> remove_versions(const Layout& l, const std::set<uint64_t>& versions, bool recycle = false);
// Keep the `keep` newest committed versions and every version whose chunks they name (logged at info,
// with the reason); remove older committed ones and every uncommitted directory older than the newest
// committed version. Never removes the newest committed version. With `recycle`, the data files of the
// removed versions go to the recycle pool instead of being deleted (see below).
Status prune(const Layout& l, int keep, bool recycle = false);

// The recycle pool (<prefix>/.cairn/recycle, docs/format.md): at most one data file per rank, taken from
// a pruned version (its COMMIT already gone), for the next writer of that rank to open and overwrite in
// place (RankWriter::open renames it to its temporary name) instead of creating a file. Freeing a file's
// blocks and allocating new ones costs the device work on some file systems (ext4 mounted with discard,
// thin-provisioned volumes, an object store's destroy): done for the version two back while the next
// version is written, it slows that write. What the pool holds is old, unreadable data under no version;
// drop_recycled removes it (rank 0 at the end of the job).
std::string recycle_dir(const Layout& l);
std::string recycle_path(const Layout& l, uint32_t rank);
Status drop_recycled(const Layout& l);

}  // namespace cairn::l3
