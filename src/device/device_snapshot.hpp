// The snapshotter for versions with device (GPU) regions. It wraps the host snapshotter the snapshot knob
// chose (copy or cow), which takes the host regions, and copies every device region into the version's
// L1 slot itself:
//
//   - the slot's bytes for a device region are registered as pinned memory once (device/pinned.hpp);
//   - the copy runs on a stream of cairn's own, in pieces of device_piece bytes (cuMemcpyDtoHAsync, an
//     event after each), ordered after the application's stream when it named one (cairn_device_stream);
//   - device_hash_threads threads hash each piece's checksum chunks on the host as soon as the piece's
//     event fires, so hashing overlaps the copy, and the seal hashes only what is left (host regions,
//     chunks that straddle a region's edge).
//
// Two modes (the device_copy knob; docs/gpu.md). wait: begin() returns once the last device byte is in
// the slot -- the application may write its device buffers at once. return: begin() returns at once (the
// ordering after the application's stream is recorded; one of the hashing threads queues the copies, which
// costs the driver time for each piece: docs/performance.md, "Device memory"); the application orders its
// next write of a protected device buffer after copied_event() (cairn_device_wait_copied, which first waits
// until the copies are queued). Either way complete() returns when every piece landed and was hashed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/manifest.hpp"
#include "cache/snapshot.hpp"
#include "device/driver.hpp"

namespace cairn::device {

enum class CopyMode { wait, return_at_once };

struct CopyOptions {
  CopyMode mode = CopyMode::wait;
  uint64_t piece = 64ull << 20;  // bytes per copy piece (rounded to whole checksum chunks; larger when a
                                 // version would have more than kMaxPieces)
  int hash_threads = 8;
  // Each piece's copy and event cost the driver time to queue: few pieces keep return mode short.
  static constexpr uint64_t kMaxPieces = 16;
  // A restart's pieces: each is hashed before it is copied (so the bus reads bytes the hashing just
  // brought into the cache). The bus idles until the first piece is hashed, so the first round of pieces
  // (one per hashing thread) is kRestorePiece >> kRestoreRamp and each later round twice the one before,
  // up to kRestorePiece.
  static constexpr uint64_t kRestorePiece = 16ull << 20;
  static constexpr int kRestoreRamp = 3;
};

class DeviceSnapshotter final : public Snapshotter {
 public:
  DeviceSnapshotter(std::unique_ptr<Snapshotter> host, CopyOptions options);
  ~DeviceSnapshotter() override;

  const char* name() const override { return host_->name(); }
  Status begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) override;
  Status complete() override;
  SnapshotReport report() const override;
  void wait_copied() override;
  void set_chunking(uint32_t chunk_size, uint64_t stream_len) override;
  // To the host snapshotter. A copy uses it for a version without device regions only (with them the
  // host regions leave gaps in the stream, and are copied whole); a tracking cow counts the chunks with
  // device bytes as changed and leaves only wholly tracked ones in place.
  void set_previous(std::vector<uint64_t> previous, uint64_t generation) override {
    host_->set_previous(std::move(previous), generation);
  }
  bool tracks_writes() const override { return host_->tracks_writes(); }
  void forget(const void* base, uint64_t len) override;

  // The driver of the device regions (set when the first one is protected).
  void set_driver(const Driver* driver) { driver_ = driver; }
  // The application's stream whose queued work a checkpoint's copy follows (nullptr: none; the
  // application then finishes its device writes before cairn_checkpoint).
  Status set_app_stream(CUstream stream);
  // The event recorded after the newest version's last device piece (nullptr before any); once its
  // copies are queued.
  CUevent copied_event();
  // Make `stream` wait for the newest copy (cuStreamWaitEvent), or with nullptr block the calling
  // thread until it is done.
  Status wait_copied_on(CUstream stream);
  // Copy `bytes` of host memory at src into device memory at dst (of context ctx) on cairn's stream, and
  // wait for it: a restart's last step, once the version is verified.
  Status copy_to_device(void* ctx, void* dst, const void* src, uint64_t bytes);
  // Stream bytes [offset, offset + size) of a version whose stream lies at `stream` go to device memory dst.
  struct DeviceExtent {
    uint64_t offset = 0, size = 0;
    void* dst = nullptr;
  };
  // The restart from L1 into device memory: the extents' checksum chunks are verified against the
  // manifest's (base/chunk_check) on device_hash_threads threads, piece by piece, and each piece is copied
  // into the device once its chunks verified (from pinned memory when the slot was pinned by this
  // process's checkpoints). ERR_CORRUPT names the first chunk that fails; the device buffers may then hold
  // verified pieces of the version.
  Status restore_verified(void* ctx, const uint8_t* stream, const Manifest& m,
                          const std::vector<DeviceExtent>& extents);

 private:
  struct Piece {
    uint64_t begin = 0, end = 0;  // stream offsets
    CUevent landed = nullptr;
    CUdeviceptr src = 0;          // its first device byte
  };
  Status enqueue();          // queue every piece's copy and event, then copied_; sets enqueued_
  void wait_enqueued();      // until enqueue() ran (at once when nothing is in flight)
  Status setup(CUcontext ctx);  // the stream and the events, once
  Status event(size_t i, CUevent* out);
  void hash_worker();      // hash the pieces of the version in flight, one after another
  void pool_loop();        // a hashing thread: hash_worker() for every version begin() hands out
  Status finish_pieces();  // wait for the hashing, gather the first error

  std::unique_ptr<Snapshotter> host_;
  CopyOptions options_;
  const Driver* driver_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUstream app_stream_ = nullptr;
  CUevent app_done_ = nullptr;
  CUevent copied_ = nullptr;
  std::vector<CUevent> events_;  // one per piece, reused by later versions

  uint32_t chunk_size_ = 0;
  uint64_t stream_len_ = 0;
  uint8_t* slot_ = nullptr;
  std::vector<Piece> pieces_;
  std::atomic<size_t> next_piece_{0};
  std::vector<std::thread> pool_;  // started at the first device version, stopped by the destructor
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  uint64_t generation_ = 0;  // versions handed to the pool
  size_t hashing_ = 0;       // pool threads still at work on the current version
  bool quit_ = false;
  bool enqueued_ = true;          // the copies of the version in flight are queued (under mu_)
  bool enqueue_claimed_ = true;   // a pool thread took the queuing (return mode; under mu_)
  std::condition_variable enqueued_cv_;
  Status hash_error_;
  std::atomic<bool> in_flight_{false};  // device pieces queued and not yet complete()d
  double t_begin_ = 0;
  std::atomic<double> t_landed_{0};
  SnapshotReport report_;
  std::string unpinned_why_;
  std::string names_;  // the device regions of the version in flight, for messages  // the last reason a slot could not be pinned (warned once)
};

}  // namespace cairn::device
