// One rank's part of the node-local L1 cache: its snapshot slots and, per version, the record that
// makes the version count at L1 (written last, atomically), the L2 set file and the protected marker.
// Layout in docs/format.md ("L1 cache"). The names of these files and the L1 record are made and
// parsed here only: the runtime, the tools and the out-of-process flush all go through this module.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/background_thread.hpp"
#include "cache/snapshot_slot.hpp"
#include "cache/version_view.hpp"
#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn {

// The most slots a rank's directory holds: cache_versions' upper bound (docs/config.md). A reader that
// does not know the job's cache_versions (the tools) accepts any slot below it.
constexpr int kMaxL1Slots = 64;

// ---- names ------------------------------------------------------------------------------------------
// <cache_job>/<node>/r<rank>/ holds, per version N, v<N>.l1 (the record), v<N>.set, v<N>.protected and
// v<N>.files/, and per slot i, slot-<i>.data and slot-<i>.red. Numbers are decimal without padding; a
// parser accepts exactly the names these functions make (so "v007.l1", "v7.l1.tmp.42" or "r+1" are
// not ours).
enum class VersionFile { record, set, protected_marker, files };  // .l1, .set, .protected, .files
enum class SlotFile { data, red };                                // .data, .red

std::string rank_dir_name(uint32_t rank);  // "r<rank>"
bool parse_rank_dir_name(std::string_view name, uint32_t* rank);
// <cache_job>/<node>/r<rank>: a rank's directory (Layout::node_cache holds the rank directories).
std::string rank_dir(const Layout& layout, const std::string& node, uint32_t rank);
std::string version_file_name(uint64_t v, VersionFile kind);
bool parse_version_file_name(std::string_view name, uint64_t* v, VersionFile* kind);
std::string slot_file_name(uint32_t slot, SlotFile kind);
bool parse_slot_file_name(std::string_view name, uint32_t* slot, SlotFile* kind);

// ---- the L1 record ----------------------------------------------------------------------------------

struct L1Record {
  uint32_t slot = 0;
  Manifest manifest;
};
// A u32 slot index (little-endian), then the encoded manifest.
std::string encode_l1_record(const L1Record& rec);
// ERR_CORRUPT when too short; the manifest decoder's errors otherwise. Checks against a version and
// the slots of a directory are the reader's (CacheStore::read_record).
Result<L1Record> decode_l1_record(std::string_view bytes);

// Versions with a record in the rank directory `dir`, ascending; none when there is no directory.
std::vector<uint64_t> recorded_versions(const std::string& dir);
// Whether any rank directory of the node directory <cache_job>/<node> (or, with node empty, of any node
// of the job's cache) holds a recorded version.
bool cache_holds_versions(const Layout& layout, const std::string& node);

// The version a record names, in the rank directory `dir`, as one read-only stream of the manifest's
// total_size bytes: its slot, and for a version of the file API its routed files (v<N>.files/<name>) at
// their offsets (cache/version_view.hpp), checked chunk by chunk against the record's manifest: what a
// reader outside the job (a tool, the out-of-process flush, the scavenge) reads. ERR_CORRUPT when the
// slot or a file is shorter than the manifest says or a chunk does not match.
Result<std::shared_ptr<VersionView>> map_verified_slot(const std::string& dir, const L1Record& rec);

class CacheStore {
 public:
  CacheStore() = default;
  CacheStore(const CacheStore&) = delete;
  CacheStore& operator=(const CacheStore&) = delete;
  ~CacheStore();

  // Creates the directory if needed. nslots: cache_versions.
  Status open(const std::string& rank_dir, int nslots);
  const std::string& dir() const { return dir_; }
  int nslots() const { return static_cast<int>(slots_.size()); }

  std::string slot_path(int slot) const;
  std::string red_path(int slot) const;
  std::string record_path(uint64_t v) const;
  std::string set_path(uint64_t v) const;
  std::string protected_path(uint64_t v) const;
  std::string files_dir(uint64_t v) const;  // where restored/routed files of version v live

  // The mapped snapshot slot / redundancy buffer of a slot, grown to at least `size` bytes (created and
  // faulted in when it is not, which costs the caller a page allocation per page). Waits while the slot
  // is being prepared. Thread-safe per slot.
  Result<MappedFile*> slot(int slot, uint64_t size);
  Result<MappedFile*> red(int slot, uint64_t size);
  // Off the caller's path: create and fault in every slot to hold `size` bytes and its redundancy twin
  // `red_size` bytes, on a thread of the store's own, so that the first checkpoints cost no more than
  // the later ones. Slots only grow. A slot for which `in_use(slot)` is true is left alone (growing it
  // would move a mapping that somebody reads); the check is made under the slot's lock, so a user that
  // marks a slot in use before its first slot() call is safe. A failure here is not reported: slot()
  // meets it again, on the path where it can be reported.
  void prepare(uint64_t size, uint64_t red_size, std::function<bool(int)> in_use);
  // Waits for a preparation under way. Calls from one thread (the application's).
  void finish_prepare();
  // Stops a preparation under way within one piece (MappedFile::kPrefaultPiece) and waits for it; the
  // next prepare() goes on where it stopped. For a restart, which must not wait for slots it may never use.
  void stop_prepare();
  // While one is held, a preparation under way waits at the end of its current piece. A checkpoint
  // holds one while it copies into a slot that is ready: where the application's core is the one the
  // preparation runs on, the preparation of the next slot beside the copy would double the copy's time
  // (docs/performance.md, "The first checkpoints: the preparation waits while a checkpoint copies").
  // Take it only with the slot in hand: slot() waits for a slot being prepared, which would wait for
  // the hold.
  class PrepareHold {
   public:
    explicit PrepareHold(CacheStore& c);
    ~PrepareHold();
    PrepareHold(const PrepareHold&) = delete;
    PrepareHold& operator=(const PrepareHold&) = delete;

   private:
    CacheStore& c_;
  };

  Status write_record(uint64_t v, const L1Record& rec);
  Result<L1Record> read_record(uint64_t v) const;
  Status write_set(uint64_t v, const std::string& bytes);
  Result<std::string> read_set(uint64_t v) const;
  Status mark_protected(uint64_t v);
  bool is_protected(uint64_t v) const;
  // Forget version v at L1 (record first, so a crash in between leaves no half-valid version).
  Status drop(uint64_t v);
  // Before `slot` is overwritten: forget every version whose record names it, or cannot be read.
  Status release_slot(int slot);

  // Versions with a record file, ascending (recorded_versions(dir())).
  std::vector<uint64_t> versions() const;
  // The version whose record points at `slot`, or 0.
  uint64_t version_in_slot(int slot) const;

 private:
  // skip: checked under the slot's lock; when it says so, nothing is mapped (nullptr).
  Result<MappedFile*> map(std::vector<std::unique_ptr<MappedFile>>& files, int s, const std::string& path,
                          uint64_t size, const std::function<bool(int)>& skip = {}, const MappedFile::PieceGate& gate = {});
  // The preparation's second pass over slot s of `files`: its pages touched (MappedFile::touch) while no
  // caller of map() waits for a slot.
  void touch(std::vector<std::unique_ptr<MappedFile>>& files, int s, const std::function<bool(int)>& skip,
             const MappedFile::PieceGate& gate);
  // The preparation's gate between two pieces: waits while a PrepareHold is held; false once stopped.
  bool prepare_may_go_on();

  std::string dir_;
  std::vector<std::unique_ptr<MappedFile>> slots_, reds_;
  std::unique_ptr<std::mutex[]> slot_mu_;  // one per slot: guards slots_[s] and reds_[s]
  // preparation: one thread at a time, which goes on while the target grows
  std::mutex prep_mu_;
  BackgroundThread preparer_;
  bool preparing_ = false;
  std::atomic<bool> prep_stop_{false};
  std::atomic<int> map_waiters_{0};  // callers of map() without a gate (a checkpoint, a restart) not through yet
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  int holds_ = 0;  // PrepareHolds alive, under hold_mu_
  uint64_t prep_size_ = 0, prep_red_ = 0;  // wanted
  uint64_t done_size_ = 0, done_red_ = 0;  // prepared (or tried)
  std::function<bool(int)> prep_in_use_;
};

}  // namespace cairn
