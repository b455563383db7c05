// Reading a version's snapshot stream into memory with every chunk verified as it lands. Restart from L1
// (the slot file) and from L3 (the data file) both go through here: the bytes are read piece by piece
// straight into their destination (the application's regions where the layout allows, else one staging
// buffer), and each checksum chunk is hashed right after its last piece arrived, while it is still in the
// CPU cache -- one pass over the data. A stream already in memory (a mapped slot, a rebuilt buffer) is
// hashed where it lies and copied on from the cache (read_verified_in_memory).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/chunk_check.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"

namespace cairn {

// Stream bytes [offset, offset + size) land at dst.
struct StreamExtent {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint8_t* dst = nullptr;
};

// Produces the stream's bytes [off, off + len) at dst. Called in stream order, never across a
// checksum chunk boundary.
using StreamSource = std::function<Status(uint64_t off, uint64_t len, uint8_t* dst)>;

// Bytes per read: small enough that a piece is still in the L2 cache when it is hashed.
constexpr uint64_t kStreamPiece = 256 * 1024;

// Fill `extents` (sorted by offset, back to back, covering [0, m.total_size) exactly; empty extents
// are allowed) from `source`, hashing every chunk right after it landed. The first chunk whose xxh3
// differs from the manifest is ERR_CORRUPT naming it; the extents then hold partial data. A manifest
// whose chunk table does not fit its size, or extents that do not tile the stream, are ERR_CORRUPT
// before anything is read. With `threads` > 1 the stream is cut into that many runs of whole chunks
// (none under 16 MiB), read at once by as many threads: `source` must then be safe to call from several
// threads at once (pread_source and copy_source are); the error is then the lowest failing chunk's.
Status read_verified(const Manifest& m, const std::vector<StreamExtent>& extents, const StreamSource& source,
                     int threads = 1);

// The same, from a stream already in memory (a mapping of the slot, a rebuilt buffer), each byte read
// from memory once: whole chunks inside one destination are hashed as they are copied, in one pass
// (base/xxh3_copy.hpp); the others (a chunk across two destinations, a short last chunk) every kMemoryStep
// bytes hashed where they lie and then copied on from the CPU cache (docs/performance.md has both
// measured). A stream of kStreamingCopyFrom bytes or more is copied with stores that bypass the cache
// (base/copy_streaming.hpp), a smaller one stays in cache for the application. An extent whose dst is
// the stream's own bytes (stream + offset) is verified where it lies: hashed, not copied (a reader that
// sends those bytes on from there). The stream must not change while it is read (nothing writes a slot
// during a restart). Same errors and threads as read_verified.
constexpr uint64_t kMemoryPiece = 64 * 1024;
constexpr uint64_t kMemoryStep = 4 * 1024;
constexpr uint64_t kStreamingCopyFrom = 16ull << 20;
Status read_verified_in_memory(const Manifest& m, const std::vector<StreamExtent>& extents, const uint8_t* stream,
                               int threads = 1);

// read_verified_in_memory where pread may still be the faster way into these destinations. The probe
// above reads into new memory of the process, as a relaunched application's regions are; but what pread
// costs depends on the destination: on a guest with shadow paging the kernel's first write into a page of
// the process costs a fault of the host's (the process's own writes do not spare it), so pread into pages
// the kernel has written before runs several times faster than into new ones (docs/performance.md: 0.6-0.8
// against 5-7 GB/s), and a destination may hold both kinds. So each thread reads its run in parts of
// kPreadTrial bytes (whole chunks): with `source` (pread) while each part, timed, runs at `mapped_gbps` or
// faster; after a slower one out of `stream` as read_verified_in_memory does, trying `source` again on a
// quarter of a part (at least one chunk) after kPreadRetry parts out of `stream`, then after twice as many
// each time it is still slower (a retry costs little where pread stays slow, and finds the pages that the
// kernel has written). Nothing is read twice. *tried (reset first) says how the bytes came. Same errors
// as read_verified.
constexpr uint64_t kPreadTrial = 4ull << 20;
constexpr uint64_t kPreadRetry = 8;
struct TriedRead {
  uint64_t source_bytes = 0, memory_bytes = 0;
  double source_gbps_min = 0, source_gbps_max = 0;  // over the parts read with `source`
};
Status read_verified_tried(const Manifest& m, const std::vector<StreamExtent>& extents, const uint8_t* stream,
                           const StreamSource& source, double mapped_gbps, int threads, TriedRead* tried);

// Chunks [c0, c1) only, on this thread, into `extents` (sorted, tiling exactly those chunks' bytes; the
// manifest's chunk table already checked): out of `stream` when it is not null, as read_verified_in_memory
// does, else from `source`, as read_verified does. For a reader that lands a stream a part at a time and
// hands each part on (redistribute/exec/reshape_stream.cpp). The first chunk that differs is ERR_CORRUPT.
Status read_chunks_verified(const Manifest& m, const std::vector<StreamExtent>& extents, uint64_t c0, uint64_t c1,
                            const uint8_t* stream, const StreamSource& source);

// Only part of the stream: `wanted` (sorted by offset, disjoint, inside the stream) says where bytes go;
// every checksum chunk that overlaps a wanted extent is read whole and verified, its bytes outside the
// wanted extents landing in a scratch buffer only to be hashed. Chunks that overlap nothing are not read.
// Same errors as read_verified; nothing is read when `wanted` is malformed.
Status read_verified_ranges(const Manifest& m, const std::vector<StreamExtent>& wanted, const StreamSource& source);

// One extent: the whole stream into dst.
inline std::vector<StreamExtent> whole_stream(const Manifest& m, uint8_t* dst) {
  return {StreamExtent{0, m.total_size, dst}};
}

// A stream that lands in pieces in any order (a rebuild at L2, set_exchange.hpp's `Place`), each byte
// once. Either the bytes arrive in the stream's memory and landed(off, len) says so: each checksum chunk
// is hashed as soon as its last byte landed, while it is likely still in cache; or they arrive in a buffer
// of the sender's side of things (a receive buffer that stays in the CPU cache) and place(off, src, len)
// copies them into the stream, the chunks that lie whole in the piece hashed as they are copied
// (xxh3_copy, with stores that go past the caches) and the others as landed() does. result() is the
// first chunk that failed, else the chunks that never landed, else success.
class LandingVerifier {
 public:
  LandingVerifier(const Manifest& m, uint8_t* stream);
  void landed(uint64_t off, uint64_t len);
  void place(uint64_t off, const uint8_t* src, uint64_t len);
  Status result() const;

 private:
  bool inside(uint64_t off, uint64_t len);  // else first_failure_ says where the bytes fell
  const Manifest& m_;
  uint8_t* stream_;
  ChunkCheck check_;               // each chunk as its last byte lands
  Status table_;                   // the manifest's chunk table, checked once
  std::vector<uint64_t> missing_;  // bytes of each chunk not landed yet
  Status first_failure_ = Status::ok();
};

// A source that preads the stream from an open file, stream byte `off` at file byte `base + off`.
// A file that ends early is ERR_TRUNCATED.
StreamSource pread_source(int fd, uint64_t base, const std::string& path);
// A source that copies from memory holding the whole stream (a mapping of the file).
StreamSource copy_source(const uint8_t* base);

// How the reshaping readers (redistribute/exec) read a file of the L1 cache: mapped when the file system
// hands out huge pages (st_blksize of 2 MiB or more, as tmpfs reports with huge=always/within_size), else
// with pread, chunk by chunk into their ring (a fault per 4 KiB page of an unpopulated mapping costs more
// than read()).
bool map_to_read(uint64_t st_blksize);

// The same-count L1 restart's choice (core/restart_inplace.cpp) of how to read a slot of `size` bytes open
// as `fd`: with pread; through the cache's own mapping of the slot, kept for the checkpoints (so the unmap is
// not the restart's, and the preparation may have populated it); or through a new read-only mapping whose
// pages fault in as they are read, dropped after. A file system that hands out huge pages is read through
// the cache's mapping. On 4 KiB pages, which way is fastest depends on the machine (docs/performance.md has
// the machines where each won: on a guest with shadow paging a new mapping read 3-4 times faster than the
// cache's). The first call for a file of kSlotReadProbeFrom bytes or more times the three as the restart
// does them (hashing included), kSlotReadProbeRounds times on kSlotReadProbe fresh bytes of that file each
// (a small fraction of reading the file), and keeps the answer for the process (logged at info): the
// cache's mapping unless another way was clearly (10 %) faster, then the faster of the other two. Smaller
// files are read with pread. Thread-safe.
enum class SlotRead { pread, cache_mapping, own_mapping };
constexpr uint64_t kSlotReadProbe = 2ull << 20;
constexpr uint64_t kSlotReadProbeRounds = 4;
constexpr uint64_t kSlotReadProbeFrom = 128ull << 20;
// The probe's figures, GB/s: each way as it read into new memory of the process; zeros where the answer
// was not measured (huge pages, a small file, a test's answer, a probe that could not read every way).
struct SlotReadRates {
  double pread = 0, cache_mapping = 0, own_mapping = 0;
};
SlotRead slot_read_way(uint64_t st_blksize, int fd, uint64_t size, SlotReadRates* rates = nullptr);
const char* slot_read_name(SlotRead way);
// For tests, which read slots far smaller than kSlotReadProbeFrom: the answer of the call above for every
// file of this process from now on, unmeasured; nullopt goes back to measuring.
void decide_slot_read_for_tests(std::optional<SlotRead> way);

}  // namespace cairn
