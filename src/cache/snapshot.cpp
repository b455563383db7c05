#include "cache/snapshot.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/copy_streaming.hpp"
#include "base/stream_reader.hpp"
#include "base/xxh.hpp"
#include "base/xxh3_copy.hpp"

namespace cairn {
namespace {
class CopySnapshotter final : public Snapshotter {
 public:
  const char* name() const override { return "copy"; }
  Status begin(const std::vector<SnapshotRegion>& regions, uint8_t* slot) override {
    auto t0 = std::chrono::steady_clock::now();
    report_ = {};
    std::vector<uint64_t> previous = std::move(previous_);
    previous_.clear();
    const uint64_t chunks = chunk_size_ ? (stream_len_ + chunk_size_ - 1) / chunk_size_ : 0;
    if (!previous.empty() && tiles_stream(regions, previous.size())) {
      copy_changed(regions, slot, previous);
    } else if (stream_len_ >= kStreamingCopyFrom && xxh3_copy_fused() && chunk_size_ > 240 && tiles_stream(regions, chunks)) {
      // A stream this large is copied at the memory's speed, and hashing as it copies costs no more (a
      // smaller one is copied from and into the CPU caches, where the hashing would show: the seal does it).
      copy_hashing(regions, slot, chunks);
    } else {
      for (const auto& r : regions) {
        if (r.size) memcpy(slot + r.offset, r.src, r.size);
        report_.bytes += r.size;
      }
    }
    report_.blocking_seconds = report_.copy_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return Status::ok();
  }
  Status complete() override { return Status::ok(); }
  SnapshotReport report() const override { return report_; }
  void set_chunking(uint32_t chunk_size, uint64_t stream_len) override {
    chunk_size_ = chunk_size;
    stream_len_ = stream_len;
    previous_.clear();  // a previous stream is told for one begin() only, after this
  }
  void set_previous(std::vector<uint64_t> previous, uint64_t) override { previous_ = std::move(previous); }

 private:
  // The host regions, in offset order, cover [0, stream_len) without gap or overlap, in as many chunks as
  // the previous stream had.
  bool tiles_stream(const std::vector<SnapshotRegion>& regions, uint64_t chunks) const {
    if (chunk_size_ == 0 || stream_len_ == 0) return false;
    if (chunks != (stream_len_ + chunk_size_ - 1) / chunk_size_) return false;
    uint64_t at = 0;
    for (const auto& r : regions) {
      if (r.device || r.offset != at) return false;
      at += r.size;
    }
    return at == stream_len_;
  }
  // Chunk by chunk: hash the regions' bytes of the chunk (a chunk may span regions), copy them only when
  // the hash differs from the slot's. Every hash is reported, so the seal hashes nothing.
  void copy_changed(const std::vector<SnapshotRegion>& regions, uint8_t* slot, const std::vector<uint64_t>& previous) {
    const uint64_t n = previous.size();
    report_.chunk_hashes.assign(n, 0);
    report_.chunk_known.assign(n, 1);
    size_t r = 0;        // the region holding the chunk's first byte
    uint64_t in_r = 0;   // offset of that byte in region r
    XXH3_state_t* state = XXH3_createState();
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t begin = i * chunk_size_, len = std::min<uint64_t>(chunk_size_, stream_len_ - begin);
      while (r < regions.size() && in_r == regions[r].size) ++r, in_r = 0;
      uint64_t h;
      const auto* src = static_cast<const uint8_t*>(regions[r].src);
      if (regions[r].size - in_r >= len) {  // within one region
        h = XXH3_64bits(src + in_r, len);
      } else {
        XXH3_64bits_reset(state);
        size_t rr = r;
        uint64_t at = in_r, left = len;
        while (left > 0) {
          const uint64_t take = std::min(left, regions[rr].size - at);
          XXH3_64bits_update(state, static_cast<const uint8_t*>(regions[rr].src) + at, take);
          left -= take;
          at += take;
          if (at == regions[rr].size) ++rr, at = 0;
        }
        h = XXH3_64bits_digest(state);
      }
      report_.chunk_hashes[i] = h;
      // Copy (or skip) the chunk's pieces, moving r/in_r past it.
      uint64_t left = len;
      while (left > 0) {
        while (in_r == regions[r].size) ++r, in_r = 0;
        const uint64_t take = std::min(left, regions[r].size - in_r);
        if (h != previous[i]) memcpy(slot + regions[r].offset + in_r, static_cast<const uint8_t*>(regions[r].src) + in_r, take);
        in_r += take;
        left -= take;
      }
      report_.bytes += len;
      if (h == previous[i]) report_.unchanged_bytes += len;
    }
    XXH3_freeState(state);
  }

  // Every chunk copied and hashed in one pass (xxh3_copy) where it lies inside one region; a chunk across
  // regions hashed piece by piece, then copied. Every hash is reported, so the seal hashes nothing.
  void copy_hashing(const std::vector<SnapshotRegion>& regions, uint8_t* slot, uint64_t n) {
    if (!hash_probed_) probe_hashing(regions);
    report_.hashed_copy = true;
    report_.chunk_hashes.assign(n, 0);
    report_.chunk_known.assign(n, 1);
    const bool streaming = stream_len_ >= kStreamingCopyFrom;
    XXH3_state_t* state = nullptr;
    uint64_t i = 0;
    size_t r = 0;
    while (i < n) {
      const uint64_t begin = i * chunk_size_, len = std::min<uint64_t>(chunk_size_, stream_len_ - begin);
      while (regions[r].offset + regions[r].size <= begin) ++r;
      const SnapshotRegion& reg = regions[r];
      const auto* src = static_cast<const uint8_t*>(reg.src) + (begin - reg.offset);
      const uint64_t whole = len == chunk_size_ ? (reg.offset + reg.size - begin) / chunk_size_ : 0;
      if (whole > 0) {
        const uint64_t k = std::min<uint64_t>(whole, n - i);
        xxh3_copy(slot + begin, src, chunk_size_, static_cast<size_t>(k), report_.chunk_hashes.data() + i, streaming);
        i += k;
        continue;
      }
      if (!state) state = XXH3_createState();
      XXH3_64bits_reset(state);
      for (uint64_t at = begin; at < begin + len;) {
        while (regions[r].offset + regions[r].size <= at) ++r;
        const uint64_t take = std::min(begin + len, regions[r].offset + regions[r].size) - at;
        const auto* p = static_cast<const uint8_t*>(regions[r].src) + (at - regions[r].offset);
        XXH3_64bits_update(state, p, take);
        memcpy(slot + at, p, take);
        at += take;
      }
      report_.chunk_hashes[i] = XXH3_64bits_digest(state);
      ++i;
    }
    if (streaming) streaming_fence();
    if (state) XXH3_freeState(state);
    report_.bytes = stream_len_;
  }

  // Once per snapshotter, for l1_incremental = auto (whose incremental copy hashes every chunk and copies
  // the changed ones only, against this copy that hashes as it copies): what hashing alone costs per byte,
  // timed over kHashProbe bytes from the middle of the largest region on (the application wrote its
  // state's ends last, if any part, so the middle is the least likely to be in a CPU cache), and the
  // regions after it where that one is shorter.
  void probe_hashing(const std::vector<SnapshotRegion>& regions) {
    constexpr uint64_t kHashProbe = 4ull << 20;
    hash_probed_ = true;
    size_t big = 0;
    for (size_t i = 1; i < regions.size(); ++i)
      if (regions[i].size > regions[big].size) big = i;
    uint64_t hashed = 0, sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = big; i < regions.size() && hashed < kHashProbe; ++i) {
      const uint64_t len = std::min(kHashProbe - hashed, regions[i].size);
      const uint64_t from = i == big ? (regions[i].size - len) / 2 : 0;
      sink ^= XXH3_64bits(static_cast<const uint8_t*>(regions[i].src) + from, static_cast<size_t>(len));
      hashed += len;
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    probe_sink_ = sink;
    if (hashed >= (1u << 20)) report_.hash_ns_per_byte = ns / static_cast<double>(hashed);
  }

  SnapshotReport report_;
  bool hash_probed_ = false;
  uint64_t probe_sink_ = 0;  // keeps the probe's hashing from being optimised away
  uint32_t chunk_size_ = 0;
  uint64_t stream_len_ = 0;
  std::vector<uint64_t> previous_;
};
}  // namespace

std::unique_ptr<Snapshotter> make_copy_snapshotter() { return std::make_unique<CopySnapshotter>(); }

}  // namespace cairn
