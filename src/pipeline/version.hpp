// One version of this rank on its way through the levels. The stages (pipeline/stages.cpp) run in
// this order, each at most once:
//
//   snapshot        the regions' bytes into the lent L1 slot      (application thread: the blocking part)
//   land            wait for the snapshot: the slot holds the version's bytes          (worker, no MPI)
//   seal            hash every chunk, write the L1 record                              (worker, no MPI)
//   exchange        beside the seal: L2's data exchange and encode within the set, which need the
//                   slot's bytes but not their hashes; written only into this version's own slot's
//                   redundancy data, nothing that makes it count                (team + protector)
//   agree_local     every rank sealed? else the version is discarded everywhere       (team)
//   protect         L2's set record (the members' manifests, with their hashes), then the protected
//                   marker                                                        (team + protector)
//   flush           post to the flusher and wait for it: after protect, or, when the team's stages
//                   run in the application's calls, right after seal            (worker, flusher)
//   agree_flushed   every rank's flusher done? rank 0 writes COMMIT                    (team)
//
// The team's stages (exchange onwards) run on the team thread, or inside the application's calls without
// mpi_in_worker (pipeline/pipeline.hpp), one version after the other; the worker lands and seals the next
// versions meanwhile. The version leaves the pipeline after its last stage; only then is its slot given
// back.
#pragma once

#include <atomic>
#include <memory>
#include <cstdint>

#include "base/manifest.hpp"
#include "base/status.hpp"
#include "cache/snapshot.hpp"
#include "cache/version_view.hpp"
#include "pipeline/flusher.hpp"

namespace cairn::pipeline {

struct Version {
  uint64_t number = 0;
  int slot = 0;
  bool flush = false;       // goes to L3
  bool protect = true;      // gets L2 redundancy (PipelineConfig::l2_every)
  Manifest manifest;        // chunk hashes filled by seal
  const uint8_t* data = nullptr;  // the stream: the slot's bytes, or the view's
  std::shared_ptr<VersionView> view;  // a version with files: the slot and the files as one stream
  double t_copy = 0;        // blocking time of the snapshot (s)
  bool snapshot_begun = false;  // begin() succeeded: seal must complete() it, whatever failed after
  SnapshotReport snapshot;  // after seal
  // The chunk hashes of what the slot held before (its previous version, chunked alike; empty when
  // unknown): what an incremental copy compares with, and the seal's count of unchanged chunks.
  std::vector<uint64_t> held_hashes;
  uint64_t held_version = 0;     // the version those hashes are of (0: unknown)
  uint64_t held_generation = 0;  // the snapshotter's snapshot that wrote it (0: unknown)
  bool held_protected = false;   // it was protected at L2: the slot's redundancy data is its, whole
  // The delta base: the newest version sealed by this process into another slot, protected at L2 and
  // chunked alike, whose bytes and redundancy data the L2 exchange may bring the parity up from
  // (redundancy/exchange/set_exchange.hpp, DeltaBase); 0: none. Its slot is not prepared while this
  // version is in flight (it is read).
  uint64_t base_version = 0;
  int base_slot = -1;
  std::vector<uint64_t> base_hashes;
  double unchanged = -1;    // share of the chunks the seal found as the slot held them (-1: unknown)
  double t_seal = 0, t_l2 = 0, t_l3 = 0;
  double l2_start = 0;      // when its L2 began: the exchange (seconds since the epoch)
  std::string via;  // who moved it to L3 on this rank: the flusher's name (FlushRequest::via)
  // Bytes put into L3 files (FlushRequest::written): this rank's, and on rank 0 after agree_flushed the
  // sum over every rank. kUnknownBytes when the flusher did not say (on any rank, for the sum).
  static constexpr uint64_t kUnknownBytes = UINT64_MAX;
  uint64_t l3_written = kUnknownBytes, l3_written_all = kUnknownBytes;
  Status landed_status;     // the snapshot on this rank (set before `landed`; the exchange reads it)
  Status local_status;      // snapshot and seal on this rank (set before `sealed`)
  Status l3_status;         // this rank's flusher outcome
  FlushTicket ticket = 0;   // while posted to the flusher
  // Set once, under the pipeline's lock (waiters test them there):
  std::atomic<bool> landed{false};      // the snapshot is complete: the slot's bytes are final
  std::atomic<bool> sealed{false};
  std::atomic<bool> l2_decided{false};  // agree_local and (when on) protect are through
  std::atomic<bool> l3_done{false};     // the flusher finished with it (l3_status, t_l3 set)
  std::atomic<bool> done{false};        // left the pipeline
  // Decided by the team (the same on every rank):
  bool local_ok = false, protected_ok = false, flushed_ok = false;
  bool prune = false;  // rank 0 prunes L3 once the version is through
};

}  // namespace cairn::pipeline
