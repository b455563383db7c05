// The version pipeline: the progress engine that takes each version from the application's memory to
// the levels its policy asks for, in the background (the stages are listed in pipeline/version.hpp).
//
// It owns the lifecycle and nothing else: the levels sit behind narrow interfaces -- the L1 cache lends
// a slot per version (cache/slot_lender) and a Snapshotter fills it (cache/snapshot), a Protector does
// L2 (pipeline/protector), a Flusher writes L3 (pipeline/flusher) -- every collective decision goes
// through a Team (pipeline/team), and what happens is reported to one EventSink (pipeline/events).
//
// Threads. A worker thread runs the stages without collectives (land, seal, and without mpi_in_worker
// posting the flush). The team's stages run, in version order on every rank, on a team thread of their
// own with `mpi_in_worker` (MPI_THREAD_MULTIPLE), otherwise inside the application's next cairn call
// (drive()). Either way they begin once a version has landed, so that L2's exchange runs while the
// worker seals the same bytes.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/config.hpp"
#include "base/job_state.hpp"
#include "base/layout.hpp"
#include "cache/cache_store.hpp"
#include "cache/slot_lender.hpp"
#include "cache/snapshot.hpp"
#include "l3/l3_placement.hpp"
#include "pipeline/events.hpp"
#include "pipeline/flusher.hpp"
#include "pipeline/protector.hpp"
#include "pipeline/team.hpp"
#include "pipeline/version.hpp"

namespace cairn::pipeline {

// The newest version known complete at each level on every rank (0: none).
struct Marks {
  uint64_t local = 0;
  uint64_t protected_l2 = 0;
  uint64_t flushed = 0;
};

// l1_incremental = auto's rule: an incremental copy hashes every byte and copies the changed ones; it is
// taken when it is expected to block less than a plain copy, from the rank's own last figures: the share
// of chunks found unchanged (per mille; -1: not known yet), and the plain copy's and the seal's hashing's
// nanoseconds per byte (0: not measured yet): unchanged * copy > hash.
bool incremental_pays(int unchanged_permille, double copy_ns_per_byte, double hash_ns_per_byte);

struct PipelineConfig {
  Layout layout;
  int keep_flushed = 2;                // L3 versions rank 0 keeps after a commit
  bool recycle_flushed = true;         // pruned versions' data files to the recycle pool (l3_store.hpp)
  int l2_every = 1;                    // every N-th version is protected at L2 (0: none); the others L1 only
  bool mpi_in_worker = true;           // the worker runs the team's stages too
  l3::WriteOptions l3;                 // this rank's L3 layout (clean_below is filled per request)
  const FaultInjector* inject = nullptr;  // failure injection points (checkpoint, compute, flush)
  L1Incremental l1_incremental = L1Incremental::automatic;  // copy only the chunks changed in the slot
};

// A routed file of the file API that becomes a region of the version where it lies: mapped into the
// version's view at `offset` (page aligned; cache/version_view.hpp).
struct FileSource {
  std::string path;
  uint64_t offset = 0;
  uint64_t size = 0;
};

class Pipeline {
 public:
  // Borrowed, all outliving the pipeline: cache, team, events, snapshot, flusher (the flusher may be
  // replaced with set_flusher between versions); protector may be null (L2 off).
  Pipeline(PipelineConfig config, CacheStore* cache, Team* team, Protector* protector, Flusher* flusher,
           EventSink* events, Snapshotter* snapshot);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The application's blocking path for version `manifest.version` (regions and total_size filled, no
  // chunk hashes): wait until the versions in flight are decided at L2 (so the newest good version is
  // known), borrow a slot, snapshot `regions` into it, map it with `files` into the version's view (no
  // file is read here), hand the version on. A local
  // failure (`failed`, or one here) still enters the pipeline, marked failed, so that every rank runs the
  // same agreements, which then discard it everywhere. Returns this rank's outcome; *blocking_seconds:
  // the time of the snapshot itself.
  Status take(Manifest manifest, bool flush, const std::vector<SnapshotRegion>& regions,
              const std::vector<FileSource>& files, const Status& failed, double* blocking_seconds);

  // Without mpi_in_worker: run the team's stages of every version handed on, in order (application
  // thread, inside a cairn call). Does nothing with mpi_in_worker.
  void drive();
  // Block until every version has left the pipeline; returns the first background failure since the last
  // call (and forgets it).
  Status wait_all();
  // At finalize, with the pipeline idle: version v (complete at L1) to L3 now, committed by rank 0.
  Status flush_now(uint64_t v);
  // Stop the worker (after wait_all, or when a process leaves the job); later calls do nothing.
  void stop();

  Marks marks() const;
  void set_marks(const Marks& m);  // a restart sets what it restored
  // Prepare every slot of the cache for versions of `size` bytes (and `red_size` of L2 redundancy data) in
  // the background (cache/cache_store prepare), leaving alone the slots lent to versions in flight.
  void prepare_slots(uint64_t size, uint64_t red_size);
  // A slot for rebuilding a version into this rank's cache (restart from L2), with nothing in flight.
  int slot_for_rebuild();
  void set_flusher(Flusher* flusher);  // between versions (service fallback)
  Flusher* flusher() const;
  // How this rank writes L3 now (the configured layout; offset counters of versions flushed everywhere
  // may be cleaned): for the embedded flusher.
  l3::WriteOptions l3_options() const;

 private:
  // stages (pipeline/stages.cpp)
  void land(Version& v);
  void seal(Version& v);
  // Post to the flusher and wait: l3_status, t_l3, then l3_done. report_start: tell the events sink.
  void flush(Version& v, bool report_start = true);
  Status run_team_stages(Version& v);
  Status exchange(Version& v);
  Status agree_local(Version& v);
  Status protect(Version& v);
  Status agree_flushed(Version& v);
  void fail(const Version& v, int level, const Status& why);  // report, remember the first failure
  void log_summary(const Version& v) const;

  // the engine (pipeline/pipeline.cpp)
  void worker_loop();
  void team_loop();  // with mpi_in_worker
  // The next version after number `after` to come (null once stopped with none left); mu_ held.
  std::shared_ptr<Version> next_after(uint64_t after, std::unique_lock<std::mutex>& lock);
  void wait_flag(const std::atomic<bool>& flag);
  void wait_for_l2();
  int choose_slot();
  void leave(Version& v);  // the version is through: slot back, out of the queue
  // Rank 0, after a commit: ask the pruner thread to remove the L3 versions beyond keep_flushed. Pruning
  // runs beside the pipeline, never on a version's path (deleting files takes time on some file systems).
  void prune_l3();
  void pruner_loop();
  void set_flag(std::atomic<bool>& flag);

  PipelineConfig cfg_;
  CacheStore* cache_;
  Team* team_;
  Protector* protector_;
  Flusher* flusher_;
  EventSink* events_;
  Snapshotter* snapshot_;
  SlotLender lender_;
  // l1_incremental = auto: the share of chunks (per mille) the last sealed version found unchanged in its
  // slot (-1 before any), and what a plain copy and the seal's hashing cost per byte on this rank (the last
  // plain version's; 0 before any).
  std::atomic<int> last_unchanged_permille_{-1};
  std::atomic<double> copy_ns_per_byte_{0}, hash_ns_per_byte_{0};
  // What this process sealed into each slot (the stream's chunking and hashes): an incremental copy trusts
  // only that, never a record found on disk, and only while the slot's record still names that version.
  struct Sealed {
    uint64_t version = 0, total_size = 0;
    uint32_t chunk_size = 0;
    std::vector<uint64_t> hashes;
    uint64_t generation = 0;  // the snapshotter's snapshot that wrote it (SnapshotReport::generation)
    int slot = -1;            // set by delta_base
  };
  std::vector<Sealed> sealed_;  // by slot; mu_
  Sealed held(int slot, const Manifest& next);
  // The delta base for a version going into `slot` (Version::base_version): a copy of what was sealed into
  // another slot, or none.
  Sealed delta_base(int slot, const Manifest& next);
  // Slots read as a delta base by versions in flight (counts by slot), which their preparation leaves
  // alone: growing one would move the mapping that the exchange reads.
  std::mutex base_mu_;
  std::vector<int> base_readers_;
  void read_base(const Version& v, int delta);
  bool base_read(int slot);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Version>> queue_;  // in flight, oldest first
  std::thread worker_;
  std::thread team_thread_;   // with mpi_in_worker
  std::thread pruner_;        // started at the first prune
  bool prune_requested_ = false;
  bool pruner_stop_ = false;  // set by stop() once nothing can ask for a prune any more
  bool rank0_ = false;        // this rank prunes, and empties the recycle pool at stop()
  bool stop_ = false;
  Status first_failure_;
  Marks marks_;
};

}  // namespace cairn::pipeline
