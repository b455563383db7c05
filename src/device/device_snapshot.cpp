#include "device/device_snapshot.hpp"

#include <sched.h>

#include <algorithm>

#include "base/chunk_check.hpp"
#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/xxh.hpp"
#include "device/pinned.hpp"

namespace cairn::device {

DeviceSnapshotter::DeviceSnapshotter(std::unique_ptr<Snapshotter> host, CopyOptions options)
    : host_(std::move(host)), options_(options) {
  // No more hashing threads than the CPUs this process may run on (a rank bound to one core would
  // otherwise time-share them, and the thread waiting for the copy with them).
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) options_.hash_threads = std::min(options_.hash_threads, CPU_COUNT(&cpus));
  options_.hash_threads = std::max(1, options_.hash_threads);
  options_.piece = std::max<uint64_t>(options_.piece, 1);
}

DeviceSnapshotter::~DeviceSnapshotter() {
  if (in_flight_) (void)finish_pieces();
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    work_cv_.notify_all();
  }
  for (auto& t : pool_) t.join();
  if (!driver_ || !ctx_ || !make_current(*driver_, ctx_).is_ok()) return;
  const Api& a = driver_->api();
  if (stream_) (void)a.cuStreamSynchronize(stream_);
  for (CUevent e : events_) (void)a.cuEventDestroy(e);
  if (copied_) (void)a.cuEventDestroy(copied_);
  if (app_done_) (void)a.cuEventDestroy(app_done_);
  if (stream_) (void)a.cuStreamDestroy(stream_);
}

void DeviceSnapshotter::set_chunking(uint32_t chunk_size, uint64_t stream_len) {
  chunk_size_ = chunk_size;
  stream_len_ = stream_len;
  host_->set_chunking(chunk_size, stream_len);
}

Status DeviceSnapshotter::setup(CUcontext ctx) {
  if (!driver_) return make_error(Code::ERR_NOT_SUPPORTED, "a device region without a loaded CUDA driver");
  if (ctx_ && ctx != ctx_)
    return make_error(Code::ERR_NOT_SUPPORTED, "device regions of two CUDA contexts (devices): cairn copies the "
                      "device regions of one context per process");
  ctx_ = ctx;
  CAIRN_TRY(make_current(*driver_, ctx_));
  const Api& a = driver_->api();
  if (!stream_) CAIRN_TRY(driver_->check(a.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  if (!copied_) CAIRN_TRY(driver_->check(a.cuEventCreate(&copied_, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  if (!app_done_) CAIRN_TRY(driver_->check(a.cuEventCreate(&app_done_, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  return Status::ok();
}

Status DeviceSnapshotter::event(size_t i, CUevent* out) {
  while (events_.size() <= i) {
    CUevent e = nullptr;
    CAIRN_TRY(driver_->check(driver_->api().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    events_.push_back(e);
  }
  *out = events_[i];
  return Status::ok();
}

Status DeviceSnapshotter::set_app_stream(CUstream stream) {
  app_stream_ = stream;
  return Status::ok();
}

Status DeviceSnapshotter::begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) {
  const double t0 = now_seconds();
  report_ = {};
  std::vector<SnapshotRegion> host, dev;
  for (const auto& r : regions) (r.device ? dev : host).push_back(r);
  if (dev.empty()) return host_->begin(regions, slot);
  CAIRN_TRY(host_->begin(host, slot));
  // From here the host snapshot is begun: whatever fails, complete() ends it (the pipeline calls it
  // only after a successful begin, so a failure here completes it before returning).
  auto fail = [&](Status st) {
    if (stream_) (void)driver_->api().cuStreamSynchronize(stream_);  // no copy may land after we return
    (void)host_->complete();
    return st;
  };
  Status st = setup(static_cast<CUcontext>(dev.front().device_context));
  if (!st.is_ok()) return fail(st);
  const Api& a = driver_->api();
  if (app_stream_) {
    st = driver_->check(a.cuEventRecord(app_done_, app_stream_), "cuEventRecord (the application's stream)");
    if (st.is_ok()) st = driver_->check(a.cuStreamWaitEvent(stream_, app_done_, 0), "cuStreamWaitEvent");
    if (!st.is_ok()) return fail(st);
  }
  std::sort(dev.begin(), dev.end(), [](const SnapshotRegion& x, const SnapshotRegion& y) { return x.offset < y.offset; });
  uint64_t device_total = 0;
  for (const auto& r : dev) device_total += r.size;
  uint64_t step = std::max(options_.piece, (device_total + CopyOptions::kMaxPieces - 1) / CopyOptions::kMaxPieces);
  if (chunk_size_) step = std::max<uint64_t>(chunk_size_, (step + chunk_size_ - 1) / chunk_size_ * chunk_size_);
  pieces_.clear();
  // One pinned range per slot over every device region's bytes (regions that share a page must not
  // register it twice, which the driver refuses).
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& r : dev) {
    if (r.device_context != dev.front().device_context)
      return fail(make_error(Code::ERR_NOT_SUPPORTED, "region '%s' lives on another device (CUDA context) than "
                             "region '%s': one per process", r.name.c_str(), dev.front().name.c_str()));
    if (r.size) lo = std::min(lo, r.offset), hi = std::max(hi, r.offset + r.size);
  }
  if (hi > lo) {
    bool pinned = true;
    std::string why;
    st = pinned_ranges().ensure(*driver_, ctx_, slot + lo, hi - lo, &pinned, &why);
    if (!st.is_ok()) return fail(st);
    if (!pinned && why != unpinned_why_) {
      unpinned_why_ = why;
      LOG_WARN("the L1 slot of the device regions could not be pinned (%s): their copies run from pageable memory, "
               "at a fraction of the bus's speed", why.c_str());
    }
  }
  for (const auto& r : dev) {
    if (!r.size) continue;
    const auto src = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(r.src));
    for (uint64_t b = r.offset, end = r.offset + r.size; b < end;) {
      uint64_t e = std::min(end, (b / step + 1) * step);
      CUevent ev = nullptr;
      st = event(pieces_.size(), &ev);
      if (!st.is_ok()) return fail(st);
      pieces_.push_back({b, e, ev, src + (b - r.offset)});
      b = e;
    }
    report_.device_bytes += r.size;
  }
  slot_ = slot;
  names_.clear();
  for (const auto& r : dev) names_ += (names_.empty() ? "'" : ", '") + r.name + "'";
  const bool wait = options_.mode == CopyMode::wait;
  {
    std::lock_guard<std::mutex> lock(mu_);
    enqueued_ = false;
    enqueue_claimed_ = wait;  // wait mode queues here; return mode leaves it to a pool thread
  }
  if (wait) {
    st = enqueue();
    if (!st.is_ok()) return fail(st);
  }
  in_flight_ = true;
  t_begin_ = t0;
  t_landed_ = t0;
  hash_error_ = Status::ok();
  if (chunk_size_ && stream_len_) {
    uint64_t n = (stream_len_ + chunk_size_ - 1) / chunk_size_;
    report_.chunk_hashes.assign(n, 0);
    report_.chunk_known.assign(n, 0);
  }
  next_piece_ = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (pool_.size() < static_cast<size_t>(options_.hash_threads)) pool_.emplace_back([this] { pool_loop(); });
    hashing_ = pool_.size();
    ++generation_;
    work_cv_.notify_all();
  }
  if (wait) {
    st = driver_->check(a.cuEventSynchronize(copied_), "cuEventSynchronize (the device copy)");
    if (!st.is_ok()) {
      (void)finish_pieces();
      in_flight_ = false;
      return fail(st.prefixed("copying the device regions into the L1 slot"));
    }
  }
  report_.blocking_seconds = now_seconds() - t0;
  return Status::ok();
}

Status DeviceSnapshotter::enqueue() {
  const Api& a = driver_->api();
  Status st = Status::ok();
  for (const Piece& p : pieces_) {
    st = driver_->check(a.cuMemcpyDtoHAsync(slot_ + p.begin, p.src, p.end - p.begin, stream_), "cuMemcpyDtoHAsync");
    if (st.is_ok()) st = driver_->check(a.cuEventRecord(p.landed, stream_), "cuEventRecord");
    if (!st.is_ok()) break;
  }
  if (st.is_ok()) st = driver_->check(a.cuEventRecord(copied_, stream_), "cuEventRecord");
  if (!st.is_ok()) {
    (void)a.cuStreamSynchronize(stream_);  // what was queued lands before anyone reads the slot
    st = st.prefixed("copying device region(s) " + names_ + " into the L1 slot");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!st.is_ok() && hash_error_.is_ok()) hash_error_ = st;
  enqueued_ = true;
  enqueued_cv_.notify_all();
  return st;
}

void DeviceSnapshotter::wait_enqueued() {
  std::unique_lock<std::mutex> lock(mu_);
  enqueued_cv_.wait(lock, [&] { return enqueued_; });
}

CUevent DeviceSnapshotter::copied_event() {
  wait_enqueued();
  return copied_;
}

void DeviceSnapshotter::hash_worker() {
  bool current = false;
  {
    // Return mode: the first thread here queues the copies; every thread waits until they are queued
    // (an event not yet recorded would "fire" at once).
    std::unique_lock<std::mutex> lock(mu_);
    if (!enqueue_claimed_) {
      enqueue_claimed_ = true;
      lock.unlock();
      Status st = make_current(*driver_, ctx_);
      current = st.is_ok();
      if (st.is_ok()) (void)enqueue();
      else {
        std::lock_guard<std::mutex> relock(mu_);
        if (hash_error_.is_ok()) hash_error_ = st;
        enqueued_ = true;
        enqueued_cv_.notify_all();
      }
      lock.lock();
    }
    enqueued_cv_.wait(lock, [&] { return enqueued_; });
    if (!hash_error_.is_ok()) return;  // nothing (more) will land
  }
  for (size_t i; (i = next_piece_.fetch_add(1)) < pieces_.size();) {
    const Piece& p = pieces_[i];
    Status st = current ? Status::ok() : make_current(*driver_, ctx_);
    current = st.is_ok();
    if (st.is_ok()) st = driver_->check(driver_->api().cuEventSynchronize(p.landed), "cuEventSynchronize (a device piece)");
    if (!st.is_ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (hash_error_.is_ok()) hash_error_ = st.prefixed("copying the device regions into the L1 slot");
      continue;
    }
    double t = now_seconds(), seen = t_landed_.load();
    while (t > seen && !t_landed_.compare_exchange_weak(seen, t)) {
    }
    if (report_.chunk_known.empty()) continue;
    // The checksum chunks that lie wholly inside this piece, hashed while the piece is fresh.
    const uint64_t cs = chunk_size_;
    for (uint64_t c = (p.begin + cs - 1) / cs; c * cs < p.end; ++c) {
      uint64_t cb = c * cs, ce = std::min(cb + cs, stream_len_);
      if (ce > p.end) break;
      report_.chunk_hashes[c] = XXH3_64bits(slot_ + cb, ce - cb);
      report_.chunk_known[c] = 1;
    }
  }
}

void DeviceSnapshotter::pool_loop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
    if (quit_) return;
    seen = generation_;
    lock.unlock();
    hash_worker();
    lock.lock();
    if (--hashing_ == 0) done_cv_.notify_all();
  }
}

Status DeviceSnapshotter::finish_pieces() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return hashing_ == 0; });
  return hash_error_;
}

Status DeviceSnapshotter::complete() {
  Status host = host_->complete();
  if (!in_flight_) return host;
  Status dev = finish_pieces();
  in_flight_ = false;
  report_.device_copy_seconds = t_landed_.load() - t_begin_;
  if (!dev.is_ok()) {
    report_.chunk_known.clear();
    report_.chunk_hashes.clear();
  }
  return host.is_ok() ? dev : host;
}

SnapshotReport DeviceSnapshotter::report() const {
  SnapshotReport r = host_->report();
  if (report_.device_bytes == 0) return r;
  r.bytes += report_.device_bytes;
  r.device_bytes = report_.device_bytes;
  r.device_copy_seconds = report_.device_copy_seconds;
  r.blocking_seconds = report_.blocking_seconds;
  r.copy_seconds = std::max(r.copy_seconds, report_.device_copy_seconds);
  r.chunk_hashes = report_.chunk_hashes;
  r.chunk_known = report_.chunk_known;
  return r;
}

void DeviceSnapshotter::wait_copied() {
  host_->wait_copied();
  wait_enqueued();
  if (in_flight_ && driver_ && make_current(*driver_, ctx_).is_ok()) (void)driver_->api().cuEventSynchronize(copied_);
}

void DeviceSnapshotter::forget(const void* base, uint64_t len) {
  wait_copied();
  host_->forget(base, len);
}

Status DeviceSnapshotter::wait_copied_on(CUstream stream) {
  wait_enqueued();
  if (!copied_ || !driver_) return Status::ok();
  CAIRN_TRY(make_current(*driver_, ctx_));
  if (stream) return driver_->check(driver_->api().cuStreamWaitEvent(stream, copied_, 0), "cuStreamWaitEvent");
  return driver_->check(driver_->api().cuEventSynchronize(copied_), "cuEventSynchronize");
}

Status DeviceSnapshotter::copy_to_device(void* ctx, void* dst, const void* src, uint64_t bytes) {
  if (in_flight_) (void)complete();  // never the case after wait_all; kept safe
  CAIRN_TRY(setup(static_cast<CUcontext>(ctx)));
  const Api& a = driver_->api();
  const auto d = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst));
  const auto* s = static_cast<const uint8_t*>(src);
  for (uint64_t off = 0; off < bytes; off += options_.piece) {
    uint64_t len = std::min(options_.piece, bytes - off);
    Status st = driver_->check(a.cuMemcpyHtoDAsync(d + off, s + off, len, stream_), "cuMemcpyHtoDAsync");
    if (!st.is_ok()) {
      (void)a.cuStreamSynchronize(stream_);
      return st;
    }
  }
  return driver_->check(a.cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

Status DeviceSnapshotter::restore_verified(void* ctx, const uint8_t* stream, const Manifest& m,
                                           const std::vector<DeviceExtent>& extents) {
  if (in_flight_) (void)complete();
  CAIRN_TRY(setup(static_cast<CUcontext>(ctx)));
  CAIRN_TRY(check_chunk_table(m).status());
  if (m.chunk_size == 0) return make_error(Code::ERR_CORRUPT, "the manifest has no chunk size");  // steps below divide by it
  const uint64_t total = m.total_size, chunk_size = m.chunk_size;
  const uint64_t per_round = static_cast<uint64_t>(std::max(1, options_.hash_threads));
  // The i-th piece's size: small in the first rounds (one piece per thread), so that the first copy
  // starts early; whole chunks, at least one.
  auto piece = [&](size_t i) {
    const int shift = std::max<int>(0, CopyOptions::kRestoreRamp - static_cast<int>(i / per_round));
    return std::max<uint64_t>(chunk_size, (CopyOptions::kRestorePiece >> shift) / chunk_size * chunk_size);
  };
  struct Work {
    uint64_t begin, end;
    const DeviceExtent* ext;
  };
  std::vector<Work> work;
  for (const auto& x : extents) {
    if (x.offset + x.size > total) return make_error(Code::ERR_CORRUPT, "a region runs past the version's stream");
    for (uint64_t b = x.offset, end = x.offset + x.size; b < end;) {
      // ends on a chunk boundary (past b, since a piece is at least a chunk), or at the region's end
      uint64_t e = std::min(end, (b + piece(work.size())) / chunk_size * chunk_size);
      work.push_back({b, e, &x});
      b = e;
    }
  }
  const ChunkCheck check(m);
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  Status first = Status::ok();
  auto note = [&](Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (first.is_ok()) first = std::move(st);
    stop = true;
  };
  auto worker = [&] {
    if (Status st = make_current(*driver_, ctx_); !st.is_ok()) return note(st);
    for (size_t i; !stop && (i = next.fetch_add(1)) < work.size();) {
      const Work& w = work[i];
      // The whole chunks the piece touches (a chunk two pieces share is checked by both).
      const uint64_t cb = w.begin / chunk_size * chunk_size;
      const uint64_t ce = std::min<uint64_t>((w.end + chunk_size - 1) / chunk_size * chunk_size, total);
      if (Status st = check.whole(cb, stream + cb, ce - cb); !st.is_ok()) return note(st);
      const auto dst = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(w.ext->dst)) + (w.begin - w.ext->offset);
      Status st = driver_->check(driver_->api().cuMemcpyHtoDAsync(dst, stream + w.begin, w.end - w.begin, stream_),
                                 "cuMemcpyHtoDAsync");
      if (!st.is_ok()) return note(st);
    }
  };
  std::vector<std::thread> threads;
  size_t n = std::min<size_t>(static_cast<size_t>(options_.hash_threads), work.size());
  for (size_t i = 1; i < n; ++i) threads.emplace_back(worker);
  if (n > 0) worker();
  for (auto& t : threads) t.join();
  Status synced = driver_->check(driver_->api().cuStreamSynchronize(stream_), "cuStreamSynchronize");
  return first.is_ok() ? synced : first;
}

}  // namespace cairn::device
