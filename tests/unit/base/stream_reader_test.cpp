// Reading a snapshot stream with every chunk verified as it lands (cache/stream_reader.hpp): the bytes
// arrive bit-exact in scattered destinations, any damage or truncation is an error naming the place,
// and the L3 reader does the same for every layout (a file per rank, N-to-M files, zstd).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "cache/snapshot_slot.hpp"
#include "base/copy_streaming.hpp"
#include "base/stream_reader.hpp"
#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"
#include "../damage.hpp"

namespace cairn {
namespace {

std::string scratch(const char* tag) {
  std::string d = "/tmp/cairn-streamreader-" + std::string(tag) + "-" + std::to_string(getpid());
  fs::remove_tree(d).ignore();
  EXPECT_TRUE(fs::make_dirs(d).is_ok());
  return d;
}

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i / 5) % 11 == 0 ? rng() : i % 253);
  return s;
}

Manifest manifest_of(const std::string& data, uint32_t chunk, const std::vector<uint64_t>& region_sizes) {
  Manifest m;
  m.version = 3;
  m.rank = 0;
  m.nranks = 1;
  m.chunk_size = chunk;
  m.total_size = data.size();
  uint64_t off = 0;
  for (size_t i = 0; i < region_sizes.size(); ++i) {
    RegionEntry e;
    e.name = "r" + std::to_string(i);
    e.count = e.size = region_sizes[i];
    e.offset = off;
    off += e.size;
    m.regions.push_back(e);
  }
  m.chunk_hashes = chunk_hashes(data.data(), data.size(), m.chunk_size);
  return m;
}

// One buffer per region, as the application's regions would be; extents in stream order.
struct Regions {
  std::vector<std::string> bufs;
  std::vector<StreamExtent> extents;
  explicit Regions(const Manifest& m) {
    for (const auto& e : m.regions) bufs.emplace_back(e.size, '\x77');
    for (size_t i = 0; i < m.regions.size(); ++i)
      extents.push_back({m.regions[i].offset, m.regions[i].size,
                         bufs[i].empty() ? nullptr : reinterpret_cast<uint8_t*>(bufs[i].data())});
  }
  std::string joined() const {
    std::string s;
    for (const auto& b : bufs) s += b;
    return s;
  }
};

std::string write_file(const std::string& dir, const std::string& bytes) {
  std::string path = dir + "/stream";
  EXPECT_TRUE(fs::write_file_atomic(path, bytes, false).is_ok());
  return path;
}

TEST(StreamReader, ScattersIntoRegionsBitExact) {
  std::string dir = scratch("scatter");
  // Chunks of 64 KiB, pieces of 256 KiB, region boundaries on neither (and an empty region).
  const uint32_t chunk = 64 * 1024;
  std::vector<uint64_t> sizes{1, 100000, 0, 3 * kStreamPiece + 17, 4096, 77777};
  uint64_t total = 0;
  for (auto s : sizes) total += s;
  std::string data = random_bytes(total, 1);
  Manifest m = manifest_of(data, chunk, sizes);
  std::string path = write_file(dir, data);
  auto fd = fs::open_file(path, O_RDONLY);
  ASSERT_TRUE(fd.is_ok());
  Regions r(m);
  Status st = read_verified(m, r.extents, pread_source(fd->get(), 0, path));
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(r.joined(), data);
  // At an offset inside a larger file (N-to-M L3 files): base shifts every read.
  std::string padded = std::string(12345, 'p') + data + "tail";
  path = write_file(dir, padded);
  auto fd2 = fs::open_file(path, O_RDONLY);
  ASSERT_TRUE(fd2.is_ok());
  std::string whole(total, '\0');
  st = read_verified(m, whole_stream(m, reinterpret_cast<uint8_t*>(whole.data())), pread_source(fd2->get(), 12345, path));
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(whole, data);
  fs::remove_tree(dir).ignore();
}

TEST(StreamReader, NoSourceCallCrossesAChunk) {
  std::string data = random_bytes(300000, 2);
  Manifest m = manifest_of(data, 4096, {120000, 180000});
  Regions r(m);
  int calls = 0;
  Status st = read_verified(m, r.extents, [&](uint64_t off, uint64_t len, uint8_t* dst) {
    ++calls;
    EXPECT_EQ(off / m.chunk_size, (off + len - 1) / m.chunk_size) << "piece " << off << "+" << len;
    memcpy(dst, data.data() + off, len);
    return Status::ok();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(r.joined(), data);
  EXPECT_GE(calls, static_cast<int>(m.chunk_hashes.size()));
}

TEST(StreamReader, DamageIsCaughtAndNamed) {
  std::string dir = scratch("damage");
  std::string data = random_bytes(200000, 3);
  Manifest m = manifest_of(data, 65536, {50000, 150000});
  std::string bad = data;
  bad[140000] ^= 0x01;  // chunk 2
  std::string path = write_file(dir, bad);
  auto fd = fs::open_file(path, O_RDONLY);
  ASSERT_TRUE(fd.is_ok());
  Regions r(m);
  Status st = read_verified(m, r.extents, pread_source(fd->get(), 0, path));
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT);
  EXPECT_NE(st.message().find("chunk 2 "), std::string::npos) << st.message();
  // Truncated: the read fails, it never passes for a shorter stream.
  path = write_file(dir, data.substr(0, 100000));
  auto fd2 = fs::open_file(path, O_RDONLY);
  ASSERT_TRUE(fd2.is_ok());
  st = read_verified(m, r.extents, pread_source(fd2->get(), 0, path));
  EXPECT_EQ(st.code(), Code::ERR_TRUNCATED) << st.message();
  fs::remove_tree(dir).ignore();
}

// With threads (a restart's reading threads, core/restart_inplace.cpp) each takes a run of whole chunks:
// the same bytes land, region boundaries inside chunks and runs included, and damage names the lowest
// failing chunk whichever thread met it.
TEST(StreamReader, ThreadsReadRunsOfChunks) {
  std::string data = random_bytes((48u << 20) + 12345, 6);  // 3 runs of at least 16 MiB
  const uint32_t chunk = 1u << 20;
  Manifest m = manifest_of(data, chunk, {5u << 20, 0, (17u << 20) + 333, 1, (26u << 20) + 12011});
  for (int threads : {2, 3, 8}) {
    Regions r(m);
    std::atomic<int> crossing{0};
    Status st = read_verified(m, r.extents, [&](uint64_t off, uint64_t len, uint8_t* dst) {
      if (off / chunk != (off + len - 1) / chunk) ++crossing;
      memcpy(dst, data.data() + off, len);
      return Status::ok();
    }, threads);
    ASSERT_TRUE(st.is_ok()) << threads << " threads: " << st.message();
    EXPECT_EQ(r.joined(), data) << threads << " threads";
    EXPECT_EQ(crossing.load(), 0);
  }
  std::string bad = data;
  bad[(40u << 20) + 7] ^= 0x10;  // chunk 40, in the last run
  bad[(20u << 20) + 9] ^= 0x10;  // chunk 20, in the second
  Regions r(m);
  Status st = read_verified(m, r.extents, copy_source(reinterpret_cast<const uint8_t*>(bad.data())), 3);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT);
  EXPECT_NE(st.message().find("chunk 20 "), std::string::npos) << st.message();
}

// The restart's reader that tries pread into the destinations (read_verified_tried): each thread reads
// its first part with the source, timed, goes on with it while it keeps up with the mapping's figure, else
// copies out of memory and tries the source again later, on a quarter of a part, the wait doubling. Here the
// source is made slow (a sleep of 50 ms per call: 5 MB/s) or fast (a copy) on purpose, and the thresholds
// sit far from both (a fast 4 MiB part has 200 ms at 0.02 GB/s); whichever way, the same bytes land, every
// byte is read once, and damage is named.
TEST(StreamReader, TriedReadGoesOnWithTheFasterWayAndLandsTheSameBytes) {
  static_assert(kPreadTrial == (4u << 20) && kPreadRetry == 8, "the counts below follow these");
  const uint32_t chunk = 1u << 20;
  std::string data = random_bytes((49u << 20) + 4321, 11);  // 50 chunks, the last short
  Manifest m = manifest_of(data, chunk, {(3u << 20) + 5, 0, (30u << 20) + 77, (16u << 20) + 4239});
  const auto* stream = reinterpret_cast<const uint8_t*>(data.data());
  // Chunks in [slow_from, slow_below) come slowly (pages the kernel has not written), the others at once.
  auto source = [&](uint64_t slow_from, uint64_t slow_below) {
    return StreamSource([&, slow_from, slow_below](uint64_t off, uint64_t len, uint8_t* dst) {
      if (off / chunk >= slow_from && off / chunk < slow_below) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      memcpy(dst, data.data() + off, len);
      return Status::ok();
    });
  };
  auto bytes_of_chunks = [&](uint64_t a, uint64_t b) { return std::min<uint64_t>(b * chunk, data.size()) - a * chunk; };
  struct Case {
    uint64_t slow_from, slow_below;
    double mapped_gbps;
    int threads;
    uint64_t source_bytes;  // read with the source
  };
  // 1. Fast throughout: all with the source. 2. Slow throughout: the first part (chunks 0-3), then 8 parts
  // out of memory (4-35), a retry of one chunk (36), slow again; the next retry would come after 16 more
  // parts, past the end. 3. Slow below chunk 32 only: the retry at chunk 36 keeps up, so 36-49 come with
  // it. 4. Three threads (runs of chunks 0-15, 16-32, 33-49), the middle run slow: its first part with the
  // source, the rest of it (13 chunks, under 8 parts) out of memory; the other runs all with the source.
  const Case cases[] = {{0, 0, 0.001, 1, bytes_of_chunks(0, 50)},
                        {0, 1000, 1e6, 1, bytes_of_chunks(0, 4) + bytes_of_chunks(36, 37)},
                        {0, 32, 0.02, 1, bytes_of_chunks(0, 4) + bytes_of_chunks(36, 50)},
                        {16, 33, 0.02, 3, bytes_of_chunks(0, 16) + bytes_of_chunks(16, 20) + bytes_of_chunks(33, 50)}};
  for (const Case& c : cases) {
    Regions r(m);
    TriedRead tried;
    tried.memory_bytes = 12345;  // stale: reset by the call
    Status st = read_verified_tried(m, r.extents, stream, source(c.slow_from, c.slow_below), c.mapped_gbps, c.threads,
                                    &tried);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(r.joined(), data) << "slow " << c.slow_from << "-" << c.slow_below;
    EXPECT_EQ(tried.source_bytes, c.source_bytes) << "slow " << c.slow_from << "-" << c.slow_below;
    EXPECT_EQ(tried.source_bytes + tried.memory_bytes, data.size());
    EXPECT_GT(tried.source_gbps_max, 0);
  }
  // Damage in a part read with the source and in one copied out of memory: each named.
  for (uint64_t bad_chunk : {uint64_t{2}, uint64_t{40}}) {
    std::string bad = data;
    bad[bad_chunk * chunk + 99] ^= 0x04;
    const auto* bad_stream = reinterpret_cast<const uint8_t*>(bad.data());
    Regions r(m);
    TriedRead tried;
    Status st = read_verified_tried(m, r.extents, bad_stream, copy_source(bad_stream), 1e6, 1, &tried);
    EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << bad_chunk;
    EXPECT_NE(st.message().find("chunk " + std::to_string(bad_chunk) + " "), std::string::npos) << st.message();
  }
  // Destinations that do not tile the stream: refused before anything is read, *tried reset.
  Regions r(m);
  r.extents.pop_back();
  TriedRead tried;
  tried.source_bytes = 777;
  EXPECT_EQ(read_verified_tried(m, r.extents, stream, source(0, 0), 1, 1, &tried).code(), Code::ERR_CORRUPT);
  EXPECT_EQ(tried.source_bytes + tried.memory_bytes, 0u);
}

// A stream already in memory (the cache's mapping of a slot, a rebuilt buffer): hashed where it lies and
// copied on, past the cache for a large stream (copy_streaming) and with memcpy for a small one; the same
// bytes land at destinations of any alignment, with threads too, and damage names the lowest bad chunk.
TEST(StreamReader, InMemoryStreamsLandBitExactAtAnyAlignment) {
  for (uint64_t total : {uint64_t{300000}, kStreamingCopyFrom + 98765}) {
    std::string data = random_bytes(static_cast<size_t>(total), 8);
    const uint64_t a = 1, b = 70001, c = total - a - b;  // regions at odd stream offsets
    Manifest m = manifest_of(data, 1u << 16, {a, b, c});
    const auto* src = reinterpret_cast<const uint8_t*>(data.data());
    for (int threads : {1, 3}) {
      std::string dst(static_cast<size_t>(total) + 64, '\x55');
      auto* base = reinterpret_cast<uint8_t*>(dst.data()) + 3;  // no destination 16-byte aligned
      std::vector<StreamExtent> extents{{0, a, base}, {a, b, base + a}, {a + b, c, base + a + b}};
      Status st = read_verified_in_memory(m, extents, src, threads);
      ASSERT_TRUE(st.is_ok()) << total << " bytes, " << threads << " threads: " << st.message();
      EXPECT_EQ(dst.substr(3, static_cast<size_t>(total)), data) << total << " bytes, " << threads << " threads";
      EXPECT_EQ(dst.substr(0, 3), std::string(3, '\x55'));  // nothing written outside the extents
      EXPECT_EQ(dst.substr(static_cast<size_t>(total) + 3), std::string(61, '\x55'));
    }
    std::string bad = data;
    bad[static_cast<size_t>(total) - 5] ^= 0x20;  // the last chunk
    bad[(3u << 16) + 11] ^= 0x20;                 // chunk 3
    std::string dst(static_cast<size_t>(total), '\0');
    Status st = read_verified_in_memory(m, whole_stream(m, reinterpret_cast<uint8_t*>(dst.data())),
                                        reinterpret_cast<const uint8_t*>(bad.data()), 2);
    EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << total;
    EXPECT_NE(st.message().find("chunk 3 "), std::string::npos) << st.message();
  }
}

// A destination that is the stream's own bytes is verified where it lies, never written: the stream sits
// in a read-only mapping (a write would fault), beside regions that are copied, with extent boundaries
// inside chunks (hashed piece by piece) and runs of whole chunks (hashed four at a time); whole and in
// parts (read_chunks_verified, as the reshaping hosts read a unit at a time). Damage inside the in-place
// extent is caught and named as anywhere else.
TEST(StreamReader, InPlaceExtentsAreVerifiedWithoutAWrite) {
  const uint64_t total = 9 * 65536 + 4321;
  std::string data = random_bytes(static_cast<size_t>(total), 21);
  Manifest m = manifest_of(data, 1u << 16, {70001, 400000, total - 470001});
  auto read_only = [&](const std::string& bytes) {
    void* p = mmap(nullptr, bytes.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    memcpy(p, bytes.data(), bytes.size());
    EXPECT_EQ(mprotect(p, bytes.size(), PROT_READ), 0);
    return static_cast<uint8_t*>(p);
  };
  uint8_t* stream = read_only(data);
  std::string first(70001, '\0'), last(static_cast<size_t>(total - 470001), '\0');
  std::vector<StreamExtent> extents{{0, 70001, reinterpret_cast<uint8_t*>(first.data())},
                                    {70001, 400000, stream + 70001},
                                    {470001, total - 470001, reinterpret_cast<uint8_t*>(last.data())}};
  for (int threads : {1, 3}) {
    first.assign(first.size(), '\0');
    last.assign(last.size(), '\0');
    Status st = read_verified_in_memory(m, extents, stream, threads);
    ASSERT_TRUE(st.is_ok()) << threads << " threads: " << st.message();
    EXPECT_EQ(first, data.substr(0, 70001));
    EXPECT_EQ(last, data.substr(470001));
  }
  // Chunks 1..7 alone: the in-place extent and the chunks that straddle its ends.
  std::vector<StreamExtent> part{{65536, 70001 - 65536, reinterpret_cast<uint8_t*>(first.data()) + 65536},
                                 {70001, 400000, stream + 70001},
                                 {470001, 8 * 65536 - 470001, reinterpret_cast<uint8_t*>(last.data())}};
  first.assign(first.size(), '\0');
  last.assign(last.size(), '\0');
  Status st = read_chunks_verified(m, part, 1, 8, stream, nullptr);
  EXPECT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(first.substr(65536), data.substr(65536, 70001 - 65536));
  EXPECT_EQ(first.substr(0, 65536), std::string(65536, '\0'));  // chunk 0 not read
  EXPECT_EQ(last.substr(0, 8 * 65536 - 470001), data.substr(470001, 8 * 65536 - 470001));
  EXPECT_EQ(last.substr(8 * 65536 - 470001), std::string(last.size() - (8 * 65536 - 470001), '\0'));
  EXPECT_EQ(munmap(stream, data.size()), 0);
  for (uint64_t at : {uint64_t{70001 + 5}, uint64_t{3 * 65536 + 100}}) {  // a straddling chunk (1), a whole one (3)
    std::string bad = data;
    bad[static_cast<size_t>(at)] ^= 0x40;
    uint8_t* damaged = read_only(bad);
    std::vector<StreamExtent> at_bad = extents;
    at_bad[1].dst = damaged + 70001;
    st = read_verified_in_memory(m, at_bad, damaged, 1);
    EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << at;
    EXPECT_NE(st.message().find("chunk " + std::to_string(at / 65536) + " "), std::string::npos) << st.message();
    EXPECT_EQ(munmap(damaged, bad.size()), 0);
  }
}

TEST(StreamReader, StreamingCopyCopiesEveryLengthAndAlignment) {
  std::string src = random_bytes(4096, 9);
  for (size_t s_off : {0, 1, 7, 16}) {
    for (size_t d_off : {0, 3, 8, 15}) {
      for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 200, 1000, 4000}) {
        std::string dst(4200, '\x11');
        copy_streaming(reinterpret_cast<uint8_t*>(dst.data()) + d_off, reinterpret_cast<const uint8_t*>(src.data()) + s_off, n);
        streaming_fence();
        EXPECT_EQ(dst.substr(d_off, n), src.substr(s_off, n)) << s_off << " " << d_off << " " << n;
        EXPECT_EQ(dst.substr(0, d_off), std::string(d_off, '\x11'));
        EXPECT_EQ(dst.substr(d_off + n), std::string(4200 - d_off - n, '\x11')) << s_off << " " << d_off << " " << n;
      }
    }
  }
}

// A stream landing in pieces in any order (an L2 rebuild): each chunk verified once whole, damage named,
// a chunk that never landed reported.
TEST(StreamReader, LandingVerifierChecksChunksAsTheyComplete) {
  std::string data = random_bytes(300000, 7);
  Manifest m = manifest_of(data, 65536, {300000});
  auto bytes = reinterpret_cast<uint8_t*>(data.data());
  {
    LandingVerifier v(m, bytes);
    for (uint64_t off : {200000u, 0u, 100000u}) v.landed(off, 100000);  // out of order, across chunks
    EXPECT_TRUE(v.result().is_ok()) << v.result().message();
  }
  {
    LandingVerifier v(m, bytes);
    v.landed(0, 250000);
    EXPECT_EQ(v.result().code(), Code::ERR_INTERNAL);  // chunk 3 (196608..262143) and 4 are short
    EXPECT_NE(v.result().message().find("chunk 3: "), std::string::npos) << v.result().message();
  }
  std::string bad = data;
  bad[70000] ^= 1;  // chunk 1
  LandingVerifier v(m, reinterpret_cast<uint8_t*>(bad.data()));
  v.landed(0, 300000);
  EXPECT_EQ(v.result().code(), Code::ERR_CORRUPT);
  EXPECT_NE(v.result().message().find("chunk 1 "), std::string::npos) << v.result().message();
}

// The same stream placed from pieces of another buffer (an L2 rebuild's receive buffer): pieces that hold
// whole chunks, parts of chunks at either end, chunks split across three pieces, the short last chunk,
// in any order; every byte ends up in place, each chunk checked once whole, damage named.
TEST(StreamReader, LandingVerifierPlacesPiecesCopyingAndChecking) {
  const uint64_t cs = 65536;
  std::string data = random_bytes(9 * cs + 1234, 8);
  Manifest m = manifest_of(data, static_cast<uint32_t>(cs), {data.size()});
  const auto* src = reinterpret_cast<const uint8_t*>(data.data());
  for (uint64_t piece : {cs, 2 * cs, cs / 3, 5 * cs / 2, 20 * cs}) {
    std::string out(data.size(), '\0');
    LandingVerifier v(m, reinterpret_cast<uint8_t*>(out.data()));
    std::vector<uint64_t> offs;
    for (uint64_t off = 0; off < data.size(); off += piece) offs.push_back(off);
    std::reverse(offs.begin(), offs.end());  // out of order
    for (uint64_t off : offs) {
      const uint64_t len = std::min<uint64_t>(piece, data.size() - off);
      std::string staged = data.substr(off, len);  // the piece in a buffer of its own
      v.place(off, reinterpret_cast<const uint8_t*>(staged.data()), len);
    }
    EXPECT_TRUE(v.result().is_ok()) << piece << ": " << v.result().message();
    EXPECT_EQ(out, data) << piece;
  }
  {  // a piece never placed
    std::string out(data.size(), '\0');
    LandingVerifier v(m, reinterpret_cast<uint8_t*>(out.data()));
    v.place(0, src, 4 * cs + 10);
    v.place(5 * cs, src + 5 * cs, data.size() - 5 * cs);
    EXPECT_EQ(v.result().code(), Code::ERR_INTERNAL);
    EXPECT_NE(v.result().message().find("chunk 4: "), std::string::npos) << v.result().message();
  }
  for (uint64_t at : {uint64_t{70000}, 2 * cs + 5, 9 * cs + 100}) {  // damage in a whole chunk, a split one, the short last
    std::string bad = data;
    bad[at] ^= 1;
    std::string out(data.size(), '\0');
    LandingVerifier v(m, reinterpret_cast<uint8_t*>(out.data()));
    for (uint64_t off = 0; off < bad.size(); off += 5 * cs / 2)
      v.place(off, reinterpret_cast<const uint8_t*>(bad.data()) + off, std::min<uint64_t>(5 * cs / 2, bad.size() - off));
    EXPECT_EQ(v.result().code(), Code::ERR_CORRUPT) << at;
    EXPECT_NE(v.result().message().find("chunk " + std::to_string(at / cs) + " "), std::string::npos) << v.result().message();
  }
  std::string out(data.size(), '\0');
  LandingVerifier v(m, reinterpret_cast<uint8_t*>(out.data()));
  v.place(data.size() - 10, src, 11);  // past the end
  EXPECT_EQ(v.result().code(), Code::ERR_INTERNAL);
}

TEST(StreamReader, RefusesBadTablesAndDestinationsBeforeReading) {
  std::string data = random_bytes(10000, 4);
  Manifest m = manifest_of(data, 4096, {4000, 6000});
  Regions r(m);
  int calls = 0;
  auto source = [&](uint64_t, uint64_t, uint8_t*) {
    ++calls;
    return Status::ok();
  };
  auto gap = r.extents;
  gap[1].offset += 1;
  EXPECT_EQ(read_verified(m, gap, source).code(), Code::ERR_CORRUPT);
  auto short_ = r.extents;
  short_[1].size -= 1;
  EXPECT_EQ(read_verified(m, short_, source).code(), Code::ERR_CORRUPT);
  Manifest few = m;
  few.chunk_hashes.pop_back();
  EXPECT_EQ(read_verified(few, r.extents, source).code(), Code::ERR_CORRUPT);
  Manifest zero = m;
  zero.chunk_size = 0;
  EXPECT_EQ(read_verified(zero, r.extents, source).code(), Code::ERR_CORRUPT);
  EXPECT_EQ(calls, 0);
  // An empty stream is fine and reads nothing.
  Manifest empty = manifest_of("", 4096, {});
  EXPECT_TRUE(read_verified(empty, {}, source).is_ok());
  EXPECT_EQ(calls, 0);
}

TEST(StreamReader, AnonymousStagingIsWritableZeroMemory) {
  auto buf = MappedFile::anonymous(5 << 20);
  ASSERT_TRUE(buf.is_ok()) << buf.status().message();
  ASSERT_GE(buf->size(), 5u << 20);
  EXPECT_EQ(buf->data()[0], 0);
  EXPECT_EQ(buf->data()[(5 << 20) - 1], 0);
  buf->data()[12345] = 7;
  EXPECT_EQ(buf->data()[12345], 7);
  auto tiny = MappedFile::anonymous(0);
  ASSERT_TRUE(tiny.is_ok());
  EXPECT_GE(tiny->size(), 1u);
}

// Populated staging has every page in memory before anything is written to it, and reads as zeros.
TEST(StreamReader, PopulatedStagingIsResidentBeforeItsFirstWrite) {
  const uint64_t len = (5 << 20) + 12345;
  const long page = sysconf(_SC_PAGESIZE);
  auto resident = [&](MappedFile& f) {
    std::vector<unsigned char> vec((f.size() + page - 1) / page);
    EXPECT_EQ(mincore(f.data(), f.size(), vec.data()), 0) << strerror(errno);
    size_t n = 0;
    for (unsigned char c : vec) n += c & 1;
    return std::pair<size_t, size_t>(n, vec.size());
  };
  auto lazy = MappedFile::anonymous(len);
  ASSERT_TRUE(lazy.is_ok());
  EXPECT_LT(resident(*lazy).first, resident(*lazy).second) << "a lazy mapping should not be faulted in whole";
  auto full = MappedFile::anonymous(len, /*populate=*/true);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  auto [in, all] = resident(*full);
  EXPECT_EQ(in, all);
  for (uint64_t off = 0; off < len; off += 4093) ASSERT_EQ(full->data()[off], 0) << off;
  EXPECT_EQ(full->data()[len - 1], 0);
}

// Every L3 layout reads back verified into scattered regions, as read_data reads it whole.
struct LayoutCase {
  int files_per_node;
  int zstd;
};

class L3Verified : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(L3Verified, EveryLayoutReadsIntoRegions) {
  const LayoutCase c = GetParam();
  std::string root = scratch(("l3-" + std::to_string(c.files_per_node) + "-" + std::to_string(c.zstd)).c_str());
  Config cfg;
  cfg.prefix = root + "/prefix";
  cfg.cache_dir = root + "/cache";
  Layout l = make_layout(cfg);
  const uint32_t nranks = 4;
  std::vector<std::string> streams;
  std::vector<std::thread> writers;
  std::vector<Status> results(nranks);
  for (uint32_t r = 0; r < nranks; ++r) streams.push_back(random_bytes(r == 2 ? 0 : 70000 + 4099 * r, 10 + r));
  for (uint32_t r = 0; r < nranks; ++r) {
    writers.emplace_back([&, r] {
      l3::WriteOptions o;
      o.files_per_node = c.files_per_node;
      o.zstd_level = c.zstd;
      o.node = "n" + std::to_string(r / 2);
      o.local_index = static_cast<int>(r % 2);
      o.node_dir = root + "/cache/" + o.node;
      o.clean_below = 1;
      const std::string& d = streams[r];
      Manifest m = manifest_of(d, 4096, d.empty() ? std::vector<uint64_t>{} : std::vector<uint64_t>{d.size() / 3, d.size() - d.size() / 3});
      m.version = 1;
      m.rank = r;
      m.nranks = nranks;
      results[r] = l3::write_rank(l, m, reinterpret_cast<const uint8_t*>(d.data()), {}, &o);
    });
  }
  for (auto& t : writers) t.join();
  for (auto& st : results) ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_TRUE(l3::commit(l, 1, nranks, "v").is_ok());
  for (uint32_t r = 0; r < nranks; ++r) {
    auto m = l3::read_manifest(l, 1, r);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    Regions regions(*m);
    Status st = l3::read_data_verified(l, *m, regions.extents);
    ASSERT_TRUE(st.is_ok()) << "rank " << r << ": " << st.message();
    EXPECT_EQ(regions.joined(), streams[r]) << "rank " << r;
  }
  // Damage rank 1's stored bytes: the verified read fails.
  auto m1 = l3::read_manifest(l, 1, 1);
  ASSERT_TRUE(m1.is_ok());
  test::damage_l3_data(l, 1, 1);
  Regions again(*m1);
  EXPECT_FALSE(l3::read_data_verified(l, *m1, again.extents).is_ok()) << "damage went unnoticed";
  fs::remove_tree(root).ignore();
}

INSTANTIATE_TEST_SUITE_P(Layouts, L3Verified,
                         ::testing::Values(LayoutCase{0, 0}, LayoutCase{0, 3}, LayoutCase{2, 0}, LayoutCase{1, 3}));

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

// The way an L1 file is read: huge pages through the cache's mapping; a small file with pread,
// unmeasured; a large one as measured once for the process (any of the three, the same every time).
TEST(StreamReader, TheWayToReadAnL1FileIsMeasuredOncePerProcess) {
  EXPECT_EQ(slot_read_way(2u << 20, -1, 4096), SlotRead::cache_mapping);
  EXPECT_EQ(slot_read_way(4096, -1, kSlotReadProbeFrom - 1), SlotRead::pread);  // no probe: the fd is not even read
  std::string path = "/dev/shm/cairn-probe-" + std::to_string(getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> block(1 << 20);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(i * 13 + 1);
  for (uint64_t off = 0; off < kSlotReadProbeFrom; off += block.size())
    ASSERT_EQ(::pwrite(fd, block.data(), block.size(), static_cast<off_t>(off)), static_cast<ssize_t>(block.size()));
  SlotReadRates rates;
  const SlotRead first = slot_read_way(4096, fd, kSlotReadProbeFrom, &rates);
  EXPECT_GT(rates.pread, 0);  // the probe's figures, for the restart's tried read
  EXPECT_GT(rates.cache_mapping, 0);
  EXPECT_GT(rates.own_mapping, 0);
  EXPECT_EQ(slot_read_way(4096, fd, kSlotReadProbeFrom), first);
  EXPECT_EQ(slot_read_way(4096, -1, kSlotReadProbeFrom), first);  // kept: not measured again
  EXPECT_STRNE(slot_read_name(first), "?");
  decide_slot_read_for_tests(SlotRead::own_mapping);  // a test's answer wins over the measured one
  EXPECT_EQ(slot_read_way(4096, -1, 4096, &rates), SlotRead::own_mapping);
  EXPECT_EQ(rates.own_mapping, 0);  // not measured: no figures
  EXPECT_EQ(slot_read_way(2u << 20, -1, 4096, &rates), SlotRead::cache_mapping);
  EXPECT_EQ(rates.pread, 0);
  EXPECT_EQ(slot_read_way(2u << 20, -1, 4096), SlotRead::cache_mapping);  // huge pages: always the cache's
  decide_slot_read_for_tests(std::nullopt);
  EXPECT_EQ(slot_read_way(4096, -1, kSlotReadProbeFrom), first);
  ::close(fd);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace cairn
