// The write tracker's bookkeeping (cache/cow/write_tracker.hpp), without memory or userfaultfd: which
// chunks count as changed for a slot holding which snapshot, which pages a write un-protects, which
// must be protected again.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "cache/cow/write_tracker.hpp"

namespace cairn::cow {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kChunk = 4 * kPage;

std::vector<uint8_t> bits(std::initializer_list<int> v) { return std::vector<uint8_t>(v.begin(), v.end()); }

TEST(WriteTracker, ChangedSinceCountsTheWritesOfEveryLaterGeneration) {
  WriteTracker t;
  // One range of 8 chunks at stream offset 0.
  t.start({{0x100000, 0x100000 + 8 * kChunk, 0}}, kChunk, 8 * kChunk, 3);
  ASSERT_TRUE(t.on());
  EXPECT_EQ(t.changed_since(3, 4), bits({0, 0, 0, 0, 0, 0, 0, 0}));
  t.note(0, 0x100000 + kChunk, 0x100000 + kChunk + kPage, 3);          // chunk 1, after snapshot 3 began
  t.note(0, 0x100000 + 5 * kChunk - kPage, 0x100000 + 5 * kChunk + kPage, 4);  // chunks 4 and 5
  EXPECT_EQ(t.changed_since(3, 5), bits({0, 1, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(t.changed_since(4, 5), bits({0, 0, 0, 0, 1, 1, 0, 0}));
  // Unknown: before the tracking started, none, or not before the snapshot being taken.
  EXPECT_TRUE(t.changed_since(2, 5).empty());
  EXPECT_TRUE(t.changed_since(0, 5).empty());
  EXPECT_TRUE(t.changed_since(5, 5).empty());
  // The runs written in one generation, to protect again.
  EXPECT_EQ(t.written_in(4), (std::vector<std::pair<uint64_t, uint64_t>>{{4, 6}}));
  EXPECT_EQ(t.written_in(3), (std::vector<std::pair<uint64_t, uint64_t>>{{1, 2}}));
  EXPECT_TRUE(t.written_in(9).empty());
  t.stop();
  EXPECT_TRUE(t.changed_since(3, 5).empty());
}

TEST(WriteTracker, ChunksNotWhollyInTheRangesAlwaysCountAsChanged) {
  WriteTracker t;
  // A stream of 5 chunks, the last short; the range covers bytes [100, 4 chunks - a page + 100) of it
  // (a region whose first and last partial pages are copied in begin()).
  const uint64_t len = 4 * kChunk + 300;
  t.start({{0x200000, 0x200000 + 4 * kChunk - kPage, 100}}, kChunk, len, 1);
  EXPECT_EQ(t.chunks(), 5u);
  EXPECT_EQ(t.chunk_len(4), 300u);
  EXPECT_EQ(t.changed_since(1, 2), bits({1, 0, 0, 1, 1}));
}

TEST(WriteTracker, AWriteUnprotectsItsChunksPages) {
  WriteTracker t;
  // The range starts 1000 bytes into chunk 0 of the stream: chunk boundaries fall inside pages.
  const uint64_t base = 0x300000;
  t.start({{base, base + 8 * kPage, 1000}}, kChunk, 1000 + 8 * kPage, 1);
  uint64_t u0 = 0, u1 = 0;
  // Chunk 1 is stream [kChunk, 2 kChunk): addresses base + kChunk - 1000 ..., rounded out to pages.
  t.chunk_span(0, base + kChunk, kPage, &u0, &u1);
  EXPECT_EQ(u0, base + 3 * kPage);
  EXPECT_EQ(u1, base + 8 * kPage);  // clipped to the range
  t.chunk_span(0, base + 5, kPage, &u0, &u1);
  EXPECT_EQ(u0, base);
  EXPECT_EQ(u1, base + 4 * kPage);
  // Noting those pages marks both chunks that share the boundary page.
  t.note(0, base, base + 4 * kPage, 1);
  EXPECT_EQ(t.changed_since(1, 2), bits({1, 1, 0}));  // chunk 0 is not whole in the range anyway
  // Pages: wholly inside chunk 1, or touching it.
  std::vector<std::pair<uint64_t, uint64_t>> in, touching;
  t.pages_of(1, 2, kPage, true, [&](size_t r, uint64_t p0, uint64_t p1) {
    EXPECT_EQ(r, 0u);
    in.emplace_back(p0, p1);
  });
  t.pages_of(1, 2, kPage, false, [&](size_t, uint64_t p0, uint64_t p1) { touching.emplace_back(p0, p1); });
  EXPECT_EQ(in, (std::vector<std::pair<uint64_t, uint64_t>>{{4, 7}}));
  EXPECT_EQ(touching, (std::vector<std::pair<uint64_t, uint64_t>>{{3, 8}}));
}

// Blocks of 4 pages; two ranges: the first starts a page into its block (as a region not aligned to huge
// pages does), the second is aligned. Chunks (4 pages) straddle the first range's blocks.
constexpr uint64_t kBlock = 4 * kPage, base = 0x400000;
const std::vector<Watched> kTwoRanges{{base + kPage, base + 12 * kPage, 0}, {base + 16 * kPage, base + 24 * kPage, 11 * kPage}};

TEST(WriteTracker, AChunkIsCopiedOnlyInTheBlocksWrittenSince) {
  WriteTracker t;
  const std::vector<Watched>& r = kTwoRanges;
  t.start(r, kChunk, 19 * kPage, 1, kBlock);
  using Runs = std::vector<std::tuple<size_t, uint64_t, uint64_t>>;
  auto unwritten = [&](uint64_t held) {
    Runs out;
    t.unwritten_pages(0, t.chunks(), held, kPage, [&](size_t i, uint64_t p0, uint64_t p1) { out.emplace_back(i, p0, p1); });
    return out;
  };
  EXPECT_EQ(unwritten(1), (Runs{{0, 0, 11}, {1, 0, 8}}));  // nothing written: all of it
  // A write that un-protects the range's second block (pages 4-7 of the block grid: range pages 3-6)
  // marks chunks 0 and 1 (stream pages 0-7) changed, yet their pages in blocks 0 and 2 were not written.
  t.note(0, base + 4 * kPage, base + 8 * kPage, 2);
  EXPECT_EQ(t.changed_since(1, 3), bits({1, 1, 0, 0, 0}));
  EXPECT_EQ(unwritten(1), (Runs{{0, 0, 3}, {0, 7, 11}, {1, 0, 8}}));
  EXPECT_EQ(unwritten(2), (Runs{{0, 0, 3}, {0, 7, 11}, {1, 0, 8}}));
  EXPECT_EQ(unwritten(3), (Runs{{0, 0, 11}, {1, 0, 8}}));  // written before snapshot 3: held there
  // A write across the second range's two blocks, in the next generation.
  t.note(1, base + 19 * kPage, base + 21 * kPage, 3);
  EXPECT_EQ(unwritten(2), (Runs{{0, 0, 3}, {0, 7, 11}}));
  EXPECT_EQ(unwritten(3), (Runs{{0, 0, 11}}));
  // Not answered: before the tracking began, or without blocks.
  EXPECT_TRUE(unwritten(0).empty());
  t.start(r, kChunk, 19 * kPage, 5);
  EXPECT_TRUE(unwritten(5).empty());
}

// The blocks a generation's writes reached (what the snapshotter's huge-page gathering asks for), and
// whether a block was reached in a generation (a second write to it un-protects the rest).
TEST(WriteTracker, TheBlocksWrittenInAGenerationAreKnown) {
  WriteTracker t;
  t.start(kTwoRanges, kChunk, 19 * kPage, 1, kBlock);  // the ranges above
  using Blocks = std::vector<std::tuple<size_t, uint64_t, uint64_t>>;
  auto written = [&](uint64_t g) {
    Blocks out;
    t.blocks_written_in(g, [&](size_t i, uint64_t a, uint64_t b) { out.emplace_back(i, a, b); });
    return out;
  };
  EXPECT_TRUE(written(1).empty());
  EXPECT_FALSE(t.block_noted(0, base + 2 * kPage, 1));
  t.note(0, base + 3 * kPage, base + 4 * kPage, 1);  // the range's first block (from its second page: clipped)
  t.note(0, base + 9 * kPage, base + 12 * kPage, 2);  // its third block, from a page above its first
  t.note(1, base + 19 * kPage, base + 21 * kPage, 2);  // across the second range's two blocks
  EXPECT_EQ(written(1), (Blocks{{0, base + kPage, base + 4 * kPage}}));
  EXPECT_EQ(written(2), (Blocks{{0, base + 8 * kPage, base + 12 * kPage}, {1, base + 16 * kPage, base + 20 * kPage},
                                {1, base + 20 * kPage, base + 24 * kPage}}));
  EXPECT_TRUE(t.block_noted(0, base + 2 * kPage, 1));
  EXPECT_FALSE(t.block_noted(0, base + 2 * kPage, 2));  // written in 1, not since 2
  EXPECT_TRUE(t.block_noted(0, base + 8 * kPage, 2));   // any page of the block
  EXPECT_FALSE(t.block_noted(0, base + 5 * kPage, 1));  // the second block: never
  t.stop();
  EXPECT_TRUE(written(2).empty());
}

// The blocks to un-protect ahead of a snapshot: those written in each of the two generations before it,
// for at most `streak` snapshots in a row; and where a block's writes reached (the runs of pages of its
// written chunks).
TEST(WriteTracker, BlocksWrittenInTwoGenerationsInARowAreUnprotectedAheadForAStreak) {
  WriteTracker t;
  // One range of 8 blocks of 4 pages at stream offset 0 (a chunk is 4 pages: one chunk a block).
  const uint64_t b0 = 0x400000;
  t.start({{b0, b0 + 32 * kPage, 0}}, kChunk, 32 * kPage, 1, kChunk);
  auto ahead = [&](uint64_t g, uint32_t streak) {
    std::vector<uint64_t> out;
    t.blocks_to_unprotect_ahead(g, streak, [&](size_t r, uint64_t a, uint64_t b) {
      EXPECT_EQ(r, 0u);
      EXPECT_EQ(b - a, kChunk);
      out.push_back((a - b0) / kChunk);
    });
    return out;
  };
  auto write = [&](uint64_t block, uint64_t g) { t.note(0, b0 + block * kChunk + kPage, b0 + block * kChunk + 2 * kPage, g); };
  write(2, 1);
  write(5, 1);
  write(2, 2);
  EXPECT_EQ(ahead(3, 2), (std::vector<uint64_t>{2}));  // 5: written in 1 only
  EXPECT_TRUE(ahead(3, 0).empty());                    // 0: never
  t.note_ahead(0, b0 + 2 * kChunk, b0 + 3 * kChunk, 3);
  EXPECT_TRUE(t.block_noted(0, b0 + 2 * kChunk, 3));
  EXPECT_EQ(t.changed_since(3, 4), bits({0, 0, 1, 0, 0, 0, 0, 0}));  // noted written: copied next time
  EXPECT_EQ(ahead(4, 2), (std::vector<uint64_t>{2}));
  t.note_ahead(0, b0 + 2 * kChunk, b0 + 3 * kChunk, 4);
  EXPECT_TRUE(ahead(5, 2).empty());                    // two in a row: its writes are seen in 5
  EXPECT_EQ(ahead(5, 3), (std::vector<uint64_t>{2}));  // a longer streak goes on
  write(2, 5);                                         // seen: it starts again
  EXPECT_EQ(ahead(6, 2), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(ahead(7, 2).empty());                    // not written in 6

  // Where block 6's writes reached: a chunk of the stream that straddles pages (the range starts 1000
  // bytes into the stream), rounded out to pages; two runs, the second to the range's end.
  WriteTracker u;
  u.start({{b0, b0 + 16 * kPage, 1000}}, kChunk, 1000 + 16 * kPage, 1, 16 * kPage);
  u.note(0, b0 + 4 * kPage, b0 + 4 * kPage + 1, 1);    // stream 1000 + 4 pages: chunk 1
  u.note(0, b0 + 15 * kPage, b0 + 15 * kPage + 1, 1);  // chunk 3
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  u.noted_runs(0, b0, b0 + 16 * kPage, 1, kPage, [&](uint64_t a, uint64_t b) { runs.emplace_back((a - b0) / kPage, (b - b0) / kPage); });
  // Chunk 1: stream [4, 8) pages = addresses [4 pages - 1000, 8 pages - 1000): pages 3-7; chunk 3: pages 11-15.
  EXPECT_EQ(runs, (std::vector<std::pair<uint64_t, uint64_t>>{{3, 8}, {11, 16}}));
  runs.clear();
  u.noted_runs(0, b0, b0 + 16 * kPage, 2, kPage, [&](uint64_t a, uint64_t b) { runs.emplace_back(a, b); });
  EXPECT_TRUE(runs.empty());  // nothing since generation 2
}

TEST(WriteTracker, TheLayoutDecidesWhetherTrackingGoesOn) {
  WriteTracker t;
  std::vector<Watched> r{{0x100000, 0x140000, 0}, {0x200000, 0x210000, 0x40000}};
  EXPECT_FALSE(t.same_layout(r, kChunk, 0x50000));
  t.start(r, kChunk, 0x50000, 1);
  EXPECT_TRUE(t.same_layout(r, kChunk, 0x50000));
  EXPECT_FALSE(t.same_layout(r, kChunk * 2, 0x50000));
  EXPECT_FALSE(t.same_layout(r, kChunk, 0x60000));
  auto moved = r;
  moved[1].stream_off += kPage;
  EXPECT_FALSE(t.same_layout(moved, kChunk, 0x50000));
  // No chunking (a version with files): no tracking.
  t.start(r, 0, 0x50000, 2);
  EXPECT_FALSE(t.on());
}

}  // namespace
}  // namespace cairn::cow
