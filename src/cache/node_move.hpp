// Moving a node's newest L1 version into another node's cache (process migration, docs/migration.md).
// Three parts, shared by both ways of moving the bytes -- `cairn run` copying between two caches of one
// machine (tools/cairn/migrate/migration.cpp), and a reader on the failing node with a writer on the spare,
// connected over libfabric (src/service/migrate/migrate_source.cpp, migrate_sink.cpp):
//   - the plan: the newest version every rank directory of the node holds at L1, as the files to stream
//     (slots, redundancy data, a file-API version's routed files) and the small files to copy after them
//     (set files, protected markers, and each rank's L1 record last);
//   - the writer at the destination: it checks every chunk of a slot against the version's manifest as it
//     arrives, writes it, and at the end makes the version count there (durable files, a file-API version
//     verified whole, the small files, the records last, the directories synced); until then nothing on
//     the destination names the version, and a writer given up on removes what it wrote;
//   - the pipe between whoever fills buffers (a reader thread, or RMA reads) and the writer's thread: a
//     bounded set of buffers, so the memory in flight is bounded whatever the version's size.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/chunk_check.hpp"
#include "base/fsutil.hpp"
#include "base/layout.hpp"
#include "base/pipe.hpp"
#include "base/status.hpp"
#include "cache/cache_store.hpp"

namespace cairn {

// A file streamed from the node's cache to the destination's, from offset 0.
struct MoveFile {
  uint32_t rank = 0;
  std::string name;     // under the rank directory: slot-<i>.data, slot-<i>.red, v<N>.files/<file>
  uint64_t length = 0;  // bytes streamed
  uint64_t size = 0;    // the destination's size (>= length: a slot keeps its size, it is reused)
  bool checked = false; // a memory-API version's slot: checked chunk by chunk against the manifest
};

// A small file copied whole after the streams.
struct MoveSmall {
  uint32_t rank = 0;
  std::string name;  // v<N>.set, v<N>.protected or v<N>.l1
  std::string bytes;
};

struct MovePlan {
  uint64_t version = 0;
  std::vector<MoveFile> files;
  std::vector<MoveSmall> smalls;  // every rank's record (v<N>.l1) after the other small files
  uint64_t stream_bytes() const;
};

// The newest version that every rank directory of `node` holds at L1, as a plan. ERR_NO_CHECKPOINT when
// the node has no cache or no version complete on all its ranks; ERR_CORRUPT when a slot is shorter than
// its manifest says or the ranks disagree on the chunk size.
Result<MovePlan> plan_node_move(const Layout& layout, const std::string& node);

// Where a file of the plan lies in `node`'s cache.
std::string move_path(const Layout& layout, const std::string& node, uint32_t rank, const std::string& name);

// A plan received from elsewhere (the wire) is used only when it passes: names of the cache's own grammar
// (cache_store.hpp) only -- no path steps --, every rank with one record of the plan's version last, a
// checked file only for a rank whose record it matches, sizes within the manifest's. ERR_FORMAT says what.
// *records: each rank's record, decoded, in the plan's order.
Status check_move_plan(const MovePlan& plan, std::vector<std::pair<uint32_t, L1Record>>* records);

// The destination's side. put() from one thread at a time.
class MoveWriter {
 public:
  // Creates the rank directories under node `to` and every destination file of the plan, sized.
  static Result<std::unique_ptr<MoveWriter>> open(const Layout& layout, const std::string& to, const MovePlan& plan);
  MoveWriter(const MoveWriter&) = delete;
  MoveWriter& operator=(const MoveWriter&) = delete;
  // Removes what it wrote unless commit() succeeded.
  ~MoveWriter();

  // Pieces of a checked file start on a multiple of this and are whole chunks (but the file's last).
  uint32_t chunk_unit() const { return chunk_unit_; }
  // Bytes [offset, offset + len) of file `file` (an index into the plan's files): checked against the
  // manifest when the file is checked (ERR_CORRUPT naming the rank, chunk and version), then written.
  Status put(size_t file, uint64_t offset, const uint8_t* data, uint64_t len);
  // Every byte was put: make the files durable, verify file-API versions whole, write the small files and
  // each rank's record last, sync the directories. After a failure the destination is as before.
  Status commit();
  uint64_t checked_bytes() const { return checked_; }
  size_t file_count() const { return plan_.files.size() + plan_.smalls.size(); }

 private:
  MoveWriter() = default;
  void undo();
  std::string to_node_;
  bool node_existed_ = false, committed_ = false;
  MovePlan plan_;
  std::vector<std::pair<uint32_t, L1Record>> records_;
  std::vector<std::unique_ptr<ChunkCheck>> check_of_;  // per file: against its rank's manifest, when checked
  std::vector<std::string> paths_, written_, dirs_;
  std::vector<fs::Fd> out_;
  std::vector<uint64_t> received_;
  uint32_t chunk_unit_ = 4096;
  uint64_t checked_ = 0;
};

// A piece of a file of the plan, in a buffer of the pipe.
struct MovePiece {
  size_t file = 0;
  uint64_t offset = 0, length = 0;
  uint32_t buffer = 0;
};

// The pipe of a move (base/pipe.hpp): pieces down to the writer's thread, their buffers back up. Buffers
// are indices; their memory is the user's (plain memory for the local copy, a registered pool for RMA).
class MovePipe : public Pipe<MovePiece, uint32_t> {
 public:
  explicit MovePipe(uint32_t buffers);
  // The filler: a free buffer (one not used yet, or one the writer handed back); wait = false: none now
  // (std::nullopt). nullopt as well once cancelled. From the filler's thread only.
  std::optional<uint32_t> take_free(bool wait);

 private:
  std::deque<uint32_t> free_;
};

// The writer's thread: each filled piece is put (checked and written) and its buffer given back, until
// the filler is done or the pipe cancelled (a failed put cancels it). progress: bytes put so far.
void drain_move_pipe(MovePipe& pipe, MoveWriter& writer, const std::function<const uint8_t*(uint32_t)>& buffer,
                     const std::function<void(uint64_t)>& progress);

}  // namespace cairn
