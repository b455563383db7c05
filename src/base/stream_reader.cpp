#include "base/stream_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "base/chunk_check.hpp"
#include "base/clock.hpp"
#include "base/copy_streaming.hpp"
#include "base/log.hpp"
#include "base/xxh.hpp"
#include "base/xxh3_copy.hpp"

namespace cairn {
namespace {
using ull = unsigned long long;
}  // namespace

namespace {
// Lands the stream's bytes [off, off + n) at dst and adds them to the chunk begun in `check`.
using PieceOp = std::function<Status(uint64_t off, uint64_t n, uint8_t* dst, ChunkCheck& check)>;
// Lands `count` whole chunks of chunk_size bytes from stream offset `off` at dst (all in one extent) and
// sets their digests.
using RunOp = std::function<void(uint64_t off, uint64_t count, uint8_t* dst, uint64_t* digests)>;
constexpr uint64_t kRunChunks = 16;  // chunks per RunOp call at most

// Chunks [c0, c1) of the stream into the extents (already checked to tile it): with `run`, each stretch
// of whole chunks inside one extent through it, and `piece` for each piece of the other chunks.
Status verify_chunks(const Manifest& m, const std::vector<StreamExtent>& extents, uint64_t piece_size,
                     const PieceOp& piece, const RunOp* run, uint64_t c0, uint64_t c1) {
  const uint64_t total = m.total_size;
  ChunkCheck check(m);
  CAIRN_TRY(check.status());
  // The first extent that holds byte c0 * chunk_size (extents are sorted and tile the stream).
  size_t x = static_cast<size_t>(
      std::upper_bound(extents.begin(), extents.end(), c0 * m.chunk_size,
                       [](uint64_t off, const StreamExtent& e) { return off < e.offset; }) - extents.begin());
  x = x ? x - 1 : 0;
  for (uint64_t c = c0; c < c1; ++c) {
    const uint64_t a = c * m.chunk_size, b = std::min<uint64_t>(a + m.chunk_size, total);
    if (run) {
      while (x < extents.size() && extents[x].offset + extents[x].size <= a) ++x;
      const StreamExtent& e = extents[x];
      // Whole chunks of full length from c on, up to the extent's end.
      const uint64_t end = std::min(total, e.offset + e.size);
      const uint64_t n = std::min({c1 - c, kRunChunks, end > a ? (end - a) / m.chunk_size : 0});
      if (n > 0) {
        uint64_t digests[kRunChunks];
        (*run)(a, n, e.dst + (a - e.offset), digests);
        for (uint64_t i = 0; i < n; ++i) CAIRN_TRY(check.compare(c + i, digests[i]));
        c += n - 1;
        continue;
      }
    }
    check.begin(c);
    for (uint64_t off = a; off < b;) {
      while (x < extents.size() && extents[x].offset + extents[x].size <= off) ++x;  // skips empty extents
      const StreamExtent& e = extents[x];
      const uint64_t n = std::min({b - off, e.offset + e.size - off, piece_size});
      CAIRN_TRY(piece(off, n, e.dst + (off - e.offset), check));
      off += n;
    }
    CAIRN_TRY(check.end());
  }
  return Status::ok();
}

// Bytes [0, n) of src to dst in steps of kMemoryStep: each step given to `hash` where it lies, the one read
// of it from memory, then copied on from the CPU cache, past the cache when `streaming` (fenced at the
// end). The steps are small, so that the reads of the next one overlap the stores of this one.
template <class Hash>
void hash_then_copy(uint8_t* dst, const uint8_t* src, uint64_t n, bool streaming, Hash&& hash) {
  for (uint64_t q = 0; q < n; q += kMemoryStep) {
    const uint64_t k = std::min(kMemoryStep, n - q);
    hash(src + q, k);
    if (streaming)
      copy_streaming(dst + q, src + q, k);
    else
      memcpy(dst + q, src + q, static_cast<size_t>(k));
  }
  if (streaming) streaming_fence();
}

// The extents checked to tile the stream; the number of chunks in *nchunks.
Status check_tiling(const Manifest& m, const std::vector<StreamExtent>& extents, uint64_t* nchunks) {
  const uint64_t total = m.total_size;
  CAIRN_ASSIGN_OR_RETURN(n, check_chunk_table(m));
  *nchunks = n;
  uint64_t at = 0;
  for (const auto& e : extents) {
    if (e.offset != at || (e.size && !e.dst))
      return make_error(Code::ERR_CORRUPT, "the destinations do not tile the %llu-byte stream (gap or overlap at byte %llu)",
                        static_cast<ull>(total), static_cast<ull>(std::min(at, e.offset)));
    at += e.size;
  }
  if (at != total)
    return make_error(Code::ERR_CORRUPT, "the destinations hold %llu bytes, the stream has %llu", static_cast<ull>(at),
                      static_cast<ull>(total));
  return Status::ok();
}

// Runs of whole chunks, one run per thread: range(i, c0, c1) reads chunks [c0, c1) as thread i.
using RangeOp = std::function<Status(uint64_t i, uint64_t c0, uint64_t c1)>;
Status over_threads(const Manifest& m, uint64_t nchunks, int threads, const RangeOp& range) {
  // Threads take contiguous runs of chunks, none under kMinBytesPerThread (a thread costs its start).
  constexpr uint64_t kMinBytesPerThread = 16ull << 20;
  const uint64_t total = m.total_size;
  const uint64_t worth = m.chunk_size ? std::max<uint64_t>(1, total / std::max<uint64_t>(kMinBytesPerThread, m.chunk_size)) : 1;
  const uint64_t t = std::min<uint64_t>({static_cast<uint64_t>(std::max(threads, 1)), nchunks ? nchunks : 1, worth});
  if (t <= 1) return range(0, 0, nchunks);
  std::vector<Status> results(static_cast<size_t>(t), Status::ok());
  std::vector<std::thread> pool;
  for (uint64_t i = 1; i < t; ++i)
    pool.emplace_back([&, i] { results[i] = range(i, nchunks * i / t, nchunks * (i + 1) / t); });
  results[0] = range(0, 0, nchunks / t);
  for (auto& th : pool) th.join();
  for (auto& r : results)  // the lowest failing chunk's error
    if (!r.is_ok()) return r;
  return Status::ok();
}

// The frame of both readers: the extents checked to tile the stream, then runs of whole chunks, one run
// per thread.
Status verify_tiled(const Manifest& m, const std::vector<StreamExtent>& extents, uint64_t piece_size,
                    const PieceOp& piece, int threads, const RunOp* run = nullptr) {
  uint64_t nchunks = 0;
  CAIRN_TRY(check_tiling(m, extents, &nchunks));
  return over_threads(m, nchunks, threads, [&](uint64_t, uint64_t c0, uint64_t c1) {
    return verify_chunks(m, extents, piece_size, piece, run, c0, c1);
  });
}
}  // namespace

namespace {
// read_verified's way: each piece from `source`, hashed where it landed.
PieceOp source_piece(const StreamSource& source) {
  return [source](uint64_t off, uint64_t n, uint8_t* dst, ChunkCheck& check) {
    CAIRN_TRY(source(off, n, dst));
    check.add(dst, n);  // in cache: it just landed
    return Status::ok();
  };
}

// read_verified_in_memory's way: whole chunks inside one destination hashed as they are copied, in one
// pass (xxh3_copy); the others (a chunk across two destinations, the short last one) piece by piece.
// A destination that is the stream's own bytes is verified where it lies: hashed, not copied.
RunOp memory_run(const uint8_t* stream, bool streaming, uint64_t chunk) {
  return [stream, streaming, chunk](uint64_t off, uint64_t count, uint8_t* dst, uint64_t* digests) {
    if (dst == stream + off) {
      xxh3_hash(stream + off, chunk, static_cast<size_t>(count), digests);
      return;
    }
    xxh3_copy(dst, stream + off, chunk, static_cast<size_t>(count), digests, streaming);
    if (streaming) streaming_fence();
  };
}
PieceOp memory_piece(const uint8_t* stream, bool streaming) {
  return [stream, streaming](uint64_t off, uint64_t n, uint8_t* dst, ChunkCheck& check) {
    if (dst == stream + off)
      check.add(dst, n);
    else
      hash_then_copy(dst, stream + off, n, streaming, [&check](const uint8_t* p, uint64_t k) { check.add(p, k); });
    return Status::ok();
  };
}
}  // namespace

Status read_verified(const Manifest& m, const std::vector<StreamExtent>& extents, const StreamSource& source,
                     int threads) {
  return verify_tiled(m, extents, kStreamPiece, source_piece(source), threads);
}

Status read_verified_in_memory(const Manifest& m, const std::vector<StreamExtent>& extents, const uint8_t* stream,
                               int threads) {
  const bool streaming = m.total_size >= kStreamingCopyFrom;
  const RunOp run = memory_run(stream, streaming, m.chunk_size);
  return verify_tiled(m, extents, kMemoryPiece, memory_piece(stream, streaming), threads, &run);
}

Status read_verified_tried(const Manifest& m, const std::vector<StreamExtent>& extents, const uint8_t* stream,
                           const StreamSource& source, double mapped_gbps, int threads, TriedRead* tried) {
  *tried = TriedRead{};
  uint64_t nchunks = 0;
  CAIRN_TRY(check_tiling(m, extents, &nchunks));
  const bool streaming = m.total_size >= kStreamingCopyFrom;
  const RunOp run = memory_run(stream, streaming, m.chunk_size);
  const PieceOp by_memory = memory_piece(stream, streaming), by_source = source_piece(source);
  const uint64_t chunk = std::max<uint64_t>(m.chunk_size, 1);
  const uint64_t per_part = std::max<uint64_t>(1, kPreadTrial / chunk);  // whole chunks per timed part
  std::mutex mu;
  return over_threads(m, nchunks, threads, [&](uint64_t, uint64_t c0, uint64_t c1) {
    TriedRead mine;
    bool with_source = true;        // the first part is read with `source`
    uint64_t wait = kPreadRetry;    // parts out of memory before `source` is tried again; doubles each time
    uint64_t waited = 0;
    Status st = Status::ok();
    for (uint64_t c = c0; c < c1 && st.is_ok();) {
      const bool retry = !with_source && ++waited > wait;
      uint64_t e = std::min(c1, c + per_part);
      if (retry) e = std::min(c1, c + std::max<uint64_t>(1, per_part / 4)), waited = 0, wait *= 2;
      const uint64_t bytes = std::min(e * chunk, m.total_size) - c * chunk;
      if (with_source || retry) {
        const double t0 = steady_seconds();
        st = verify_chunks(m, extents, kStreamPiece, by_source, nullptr, c, e);
        const double gbps = static_cast<double>(bytes) / std::max(steady_seconds() - t0, 1e-9) / 1e9;
        mine.source_bytes += bytes;
        mine.source_gbps_min = mine.source_gbps_min > 0 ? std::min(mine.source_gbps_min, gbps) : gbps;
        mine.source_gbps_max = std::max(mine.source_gbps_max, gbps);
        with_source = gbps >= mapped_gbps;
        if (with_source) wait = kPreadRetry;
      } else {
        st = verify_chunks(m, extents, kMemoryPiece, by_memory, &run, c, e);
        mine.memory_bytes += bytes;
      }
      c = e;
    }
    std::lock_guard<std::mutex> lock(mu);
    tried->source_bytes += mine.source_bytes;
    tried->memory_bytes += mine.memory_bytes;
    if (mine.source_gbps_min > 0)
      tried->source_gbps_min = tried->source_gbps_min > 0 ? std::min(tried->source_gbps_min, mine.source_gbps_min)
                                                          : mine.source_gbps_min;
    tried->source_gbps_max = std::max(tried->source_gbps_max, mine.source_gbps_max);
    return st;
  });
}

Status read_chunks_verified(const Manifest& m, const std::vector<StreamExtent>& extents, uint64_t c0, uint64_t c1,
                            const uint8_t* stream, const StreamSource& source) {
  if (!stream) return verify_chunks(m, extents, kStreamPiece, source_piece(source), nullptr, c0, c1);
  const bool streaming = m.total_size >= kStreamingCopyFrom;
  const RunOp run = memory_run(stream, streaming, m.chunk_size);
  return verify_chunks(m, extents, kMemoryPiece, memory_piece(stream, streaming), &run, c0, c1);
}

Status read_verified_ranges(const Manifest& m, const std::vector<StreamExtent>& wanted, const StreamSource& source) {
  const uint64_t total = m.total_size;
  CAIRN_TRY(check_chunk_table(m).status());
  uint64_t at = 0;
  for (const auto& e : wanted) {
    if (e.offset < at || e.offset + e.size > total || e.offset + e.size < e.offset || (e.size && !e.dst))
      return make_error(Code::ERR_CORRUPT, "the wanted ranges of the %llu-byte stream overlap or run past its end (byte %llu)",
                        static_cast<ull>(total), static_cast<ull>(e.offset));
    at = e.offset + e.size;
  }
  ChunkCheck check(m);
  CAIRN_TRY(check.status());
  std::vector<uint8_t> scratch;
  size_t x = 0;  // first wanted extent that may overlap the current chunk
  uint64_t next_chunk = 0;
  while (x < wanted.size()) {
    if (wanted[x].size == 0) {
      ++x;
      continue;
    }
    uint64_t c = std::max(next_chunk, wanted[x].offset / m.chunk_size);
    const uint64_t a = c * m.chunk_size, b = std::min<uint64_t>(a + m.chunk_size, total);
    check.begin(c);
    size_t y = x;
    for (uint64_t off = a; off < b;) {
      while (y < wanted.size() && wanted[y].offset + wanted[y].size <= off) ++y;
      uint8_t* dst;
      uint64_t n;
      if (y < wanted.size() && wanted[y].offset <= off) {  // inside a wanted extent
        n = std::min({b - off, wanted[y].offset + wanted[y].size - off, kStreamPiece});
        dst = wanted[y].dst + (off - wanted[y].offset);
      } else {  // a gap: into the scratch buffer, to be hashed only
        uint64_t gap_end = y < wanted.size() ? std::min(b, wanted[y].offset) : b;
        n = std::min(gap_end - off, kStreamPiece);
        if (scratch.size() < n) scratch.resize(static_cast<size_t>(n));
        dst = scratch.data();
      }
      CAIRN_TRY(source(off, n, dst));
      check.add(dst, n);
      off += n;
    }
    CAIRN_TRY(check.end());
    next_chunk = c + 1;
    while (x < wanted.size() && wanted[x].offset + wanted[x].size <= b) ++x;
  }
  return Status::ok();
}

LandingVerifier::LandingVerifier(const Manifest& m, uint8_t* stream) : m_(m), stream_(stream), check_(m) {
  auto n = check_chunk_table(m);
  table_ = n.status();
  if (!n) return;
  missing_.resize(static_cast<size_t>(*n));
  for (uint64_t c = 0; c < *n; ++c)
    missing_[static_cast<size_t>(c)] = std::min<uint64_t>(m.chunk_size, m.total_size - c * m.chunk_size);
}

bool LandingVerifier::inside(uint64_t off, uint64_t len) {
  if (off + len <= m_.total_size && off + len >= off) return true;
  if (first_failure_.is_ok())
    first_failure_ = make_error(Code::ERR_INTERNAL, "bytes %llu..%llu landed outside the %llu-byte stream",
                                static_cast<ull>(off), static_cast<ull>(off + len - 1), static_cast<ull>(m_.total_size));
  return false;
}

void LandingVerifier::place(uint64_t off, const uint8_t* src, uint64_t len) {
  if (!table_.is_ok() || len == 0 || !inside(off, len)) return;
  const uint64_t cs = m_.chunk_size, end = off + len;
  // [a0, whole_to): the chunks that lie whole in the piece (the stream's short last one included);
  // before and after it, parts of chunks that other pieces complete.
  const uint64_t a0 = std::min((off + cs - 1) / cs * cs, end);
  const uint64_t whole_to = std::max(a0, end == m_.total_size ? end : end / cs * cs);
  if (a0 > off) {
    memcpy(stream_ + off, src, static_cast<size_t>(a0 - off));
    landed(off, a0 - off);
  }
  constexpr size_t kGroup = 16;
  uint64_t got[kGroup];
  for (uint64_t a = a0; a < whole_to && first_failure_.is_ok();) {
    const uint64_t c = a / cs;
    size_t n = static_cast<size_t>(std::min<uint64_t>(kGroup, (whole_to - a) / cs));
    const uint64_t each = n == 0 ? whole_to - a : cs;  // n == 0: the stream's short last chunk
    n = std::max<size_t>(n, 1);
    xxh3_copy(stream_ + a, src + (a - off), each, n, got, /*streaming=*/true);
    for (size_t i = 0; i < n && first_failure_.is_ok(); ++i) {
      missing_[static_cast<size_t>(c + i)] = 0;
      first_failure_ = check_.compare(c + i, got[i]);
    }
    a += n * each;
  }
  if (whole_to > a0) streaming_fence();
  if (end > whole_to) {
    memcpy(stream_ + whole_to, src + (whole_to - off), static_cast<size_t>(end - whole_to));
    landed(whole_to, end - whole_to);
  }
}

void LandingVerifier::landed(uint64_t off, uint64_t len) {
  if (!table_.is_ok() || len == 0 || !inside(off, len)) return;
  // The chunks this landing completed, checked a run of neighbours at a time (ChunkCheck::whole hashes
  // whole chunks side by side).
  uint64_t run_from = 0, run_to = 0;
  auto check_run = [&] {
    if (run_to > run_from && first_failure_.is_ok()) first_failure_ = check_.whole(run_from, stream_ + run_from, run_to - run_from);
    run_from = run_to = 0;
  };
  for (uint64_t c = off / m_.chunk_size; c * m_.chunk_size < off + len; ++c) {
    const uint64_t a = c * m_.chunk_size, b = std::min<uint64_t>(a + m_.chunk_size, m_.total_size);
    const uint64_t in = std::min(b, off + len) - std::max(a, off);
    uint64_t& left = missing_[static_cast<size_t>(c)];
    left -= std::min(left, in);
    if (left != 0) {
      check_run();
      continue;
    }
    if (run_to != a) check_run(), run_from = a;
    run_to = b;
  }
  check_run();
}

Status LandingVerifier::result() const {
  CAIRN_TRY(table_);
  CAIRN_TRY(first_failure_);
  for (size_t c = 0; c < missing_.size(); ++c)
    if (missing_[c] != 0)
      return make_error(Code::ERR_INTERNAL, "chunk %zu: %llu bytes never landed", c, static_cast<ull>(missing_[c]));
  return Status::ok();
}

StreamSource pread_source(int fd, uint64_t base, const std::string& path) {
  return [fd, base, path](uint64_t off, uint64_t len, uint8_t* dst) -> Status {
    uint64_t pos = base + off;
    while (len > 0) {
      ssize_t n = ::pread(fd, dst, static_cast<size_t>(len), static_cast<off_t>(pos));
      if (n < 0) {
        if (errno == EINTR) continue;
        return posix_error("pread", path, errno);
      }
      if (n == 0)
        return make_error(Code::ERR_TRUNCATED, "%s: file ends at byte %llu, %llu bytes short", path.c_str(),
                          static_cast<ull>(pos), static_cast<ull>(len));
      dst += n;
      len -= static_cast<uint64_t>(n);
      pos += static_cast<uint64_t>(n);
    }
    return Status::ok();
  };
}

StreamSource copy_source(const uint8_t* base) {
  return [base](uint64_t off, uint64_t len, uint8_t* dst) -> Status {
    memcpy(dst, base + off, static_cast<size_t>(len));
    return Status::ok();
  };
}

bool map_to_read(uint64_t st_blksize) { return st_blksize >= (uint64_t{2} << 20); }

namespace {
std::mutex g_probe_mu;
std::optional<SlotRead> g_probed;  // measured once for the process
SlotReadRates g_probed_rates;       // what the probe measured (zeros where it could not)
std::optional<SlotRead> g_forced;  // decide_slot_read_for_tests
volatile uint64_t g_probe_sink = 0;  // the probe's hashes go here, so that no compiler drops them

// The three ways the restart reads a slot, timed as it does them, W bytes each way, into memory the
// process has touched, each over bytes no CPU cache holds yet: pread piece by piece, each piece hashed
// where it landed (read_verified); a populated writable mapping, as the cache's, hashed as it is copied,
// four chunks side by side (read_verified_in_memory's xxh3_copy), its unmap not counted (the restart reads
// through the cache's own mapping, which stays for the checkpoints); and a new read-only mapping whose
// pages fault in as they are read, copied the same way, its unmap counted (the restart makes and drops
// it). kSlotReadProbeRounds rounds over fresh ranges of the file, the order of the ways turning, so that
// one disturbed measurement does not decide for the whole process.
std::optional<SlotRead> probe_slot_read(int fd, double gbps[3]) {
  constexpr uint64_t W = kSlotReadProbe;
  uint8_t* scratch = nullptr;  // each way's destination: see the loop
  double seconds[3] = {0, 0, 0};
  uint64_t sink = 0;
  auto by_pread = [&](uint64_t at) {
    for (uint64_t done = 0; done < W;) {
      const uint64_t piece = std::min(kStreamPiece, W - done);
      for (uint64_t got = 0; got < piece;) {
        ssize_t n = ::pread(fd, scratch + done + got, piece - got, static_cast<off_t>(at + done + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += static_cast<uint64_t>(n);
      }
      sink ^= XXH3_64bits(scratch + done, piece);
      done += piece;
    }
    return true;
  };
  // The cache maps its slots writable (for the checkpoints), which costs more per page on some guests
  // than a read-only mapping: the probe maps the file so too where it may (the fd is read-only).
  const int rw = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR | O_CLOEXEC);
  struct CloseRw {
    int fd;
    ~CloseRw() {
      if (fd >= 0) ::close(fd);
    }
  } close_rw{rw};
  // like_cache: populated and (where rw opened) writable, as the cache's; else read-only, faulted in as read.
  auto by_map = [&](uint64_t at, bool like_cache, double* unmap_s) {
    const bool writable = like_cache && rw >= 0;
    void* p = ::mmap(nullptr, W, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                     MAP_SHARED | (like_cache ? MAP_POPULATE : 0), writable ? rw : fd, static_cast<off_t>(at));
    if (p == MAP_FAILED) return false;
    uint64_t digests[4];
    xxh3_copy(scratch, static_cast<const uint8_t*>(p), W / 4, 4, digests, /*streaming=*/true);
    streaming_fence();
    for (uint64_t d : digests) sink ^= d;
    const double t0 = now_seconds();
    ::munmap(p, W);
    *unmap_s = now_seconds() - t0;
    return true;
  };
  for (uint64_t r = 0; r < kSlotReadProbeRounds; ++r) {
    for (int i = 0; i < 3; ++i) {
      const int way = static_cast<int>((r + static_cast<uint64_t>(i)) % 3);
      const uint64_t at = (3 * r + static_cast<uint64_t>(i)) * W;
      // Into new memory the process has written (as an application's regions) but the kernel has not:
      // on some guests the kernel's first write into a page of the process (pread's copy) costs more
      // than the process's own, and a buffer reused across the rounds would hide that.
      void* dst = ::mmap(nullptr, W, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (dst == MAP_FAILED) return std::nullopt;
      scratch = static_cast<uint8_t*>(dst);
      memset(scratch, 1, W);
      double unmap_s = 0;
      const double t0 = now_seconds();
      const bool ok = way == 0 ? by_pread(at) : by_map(at, /*like_cache=*/way == 1, &unmap_s);
      const double t1 = now_seconds();
      ::munmap(dst, W);
      if (!ok) return std::nullopt;
      seconds[way] += t1 - t0 - (way == 1 ? unmap_s : 0);
    }
  }
  const double bytes = static_cast<double>(W * kSlotReadProbeRounds);
  for (int i = 0; i < 3; ++i) gbps[i] = bytes / std::max(seconds[i], 1e-9) / 1e9;
  g_probe_sink = sink;
  // The cache's mapping unless another way is clearly faster: the probe maps each range anew, which costs
  // more per byte than the cache's one mapping of a whole slot, often populated already by the preparation.
  if (!(std::min(seconds[0], seconds[2]) < 0.9 * seconds[1])) return SlotRead::cache_mapping;
  return seconds[0] <= seconds[2] ? SlotRead::pread : SlotRead::own_mapping;
}
}  // namespace

const char* slot_read_name(SlotRead way) {
  switch (way) {
    case SlotRead::pread:
      return "pread";
    case SlotRead::cache_mapping:
      return "the cache's mapping";
    case SlotRead::own_mapping:
      return "a new read-only mapping";
  }
  return "?";
}

void decide_slot_read_for_tests(std::optional<SlotRead> way) {
  std::lock_guard<std::mutex> lock(g_probe_mu);
  g_forced = way;
}

SlotRead slot_read_way(uint64_t st_blksize, int fd, uint64_t size, SlotReadRates* rates) {
  if (rates) *rates = SlotReadRates{};
  if (map_to_read(st_blksize)) return SlotRead::cache_mapping;
  std::lock_guard<std::mutex> lock(g_probe_mu);
  if (g_forced) return *g_forced;
  if (size < kSlotReadProbeFrom) return SlotRead::pread;
  if (!g_probed) {
    double gbps[3] = {0, 0, 0};
    g_probed = probe_slot_read(fd, gbps);
    if (g_probed) g_probed_rates = SlotReadRates{gbps[0], gbps[1], gbps[2]};
    if (!g_probed) g_probed = SlotRead::pread;  // the file could not be read every way
    LOG_INFO("L1 reads on this machine: %s (measured once, hashing as a restart does: pread %.2f GB/s, a "
             "populated writable mapping copied out %.2f GB/s, a new read-only mapping faulted in as it is "
             "read %.2f GB/s, %llu MiB each way)",
             slot_read_name(*g_probed), gbps[0], gbps[1], gbps[2],
             static_cast<ull>((kSlotReadProbe * kSlotReadProbeRounds) >> 20));
  }
  if (rates) *rates = g_probed_rates;
  return *g_probed;
}

}  // namespace cairn
