// Restart on another rank count on real MPI ranks (ctest runs it on 4): a version written by 4 ranks,
// with a region of every distribution that can move (block, block_cyclic, block_cols, block_rows,
// replicated), is restarted by 3 and by 2 of them. From L3 with cairn_restart alone and regions already
// of their new size, every rank reads its own pieces straight from the old files
// (reshaped_from_l3_direct); from L1 the hosts stream each verified chunk's pieces to their owners
// (reshaped_from_l1_streamed), or, with too many pieces, move them in one exchange; with a region that
// must be resized, the hosts read the old files and move the pieces. cairn_restart_available only names
// the version (from the records), and cairn_restart then reads it as it would alone.
// Every way, every element arrives where its global index says; a damaged old file or slot chunk sends
// the restart on (older version, or L3); a region no rank can fit makes no rank touch its buffers. From
// L2, a lost node's old ranks are rebuilt by their sets for the new layout (reshaped_from_l2).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cairn/cairn.h"
#include "cache/cache_store.hpp"
#include "base/fsutil.hpp"
#include "base/stream_reader.hpp"
#include "core/runtime.hpp"
#include "l3/l3_store.hpp"
#include "mpi/mpi_util.hpp"
#include "mpi_test_main.hpp"
#include "redistribute/exec/region_table.hpp"
#include "scratch_job.hpp"
#include "../damage.hpp"

namespace cairn {
namespace {

int g_rank = 0, g_size = 1;

using test::everywhere;

// Element g of the global arrays in version v.
uint64_t value(uint64_t g, int array, int v) { return (g + 1) * 0x9E3779B97F4A7C15ull ^ (array * 1000003ull + v); }

constexpr size_t kG = 300007;   // BLOCK array "a": odd, so the pieces are unequal
constexpr size_t kGc = 200003;  // BLOCK_CYCLIC array "c", blocks of 1000
constexpr size_t kBlock = 1000;

struct Arrays {
  std::vector<uint64_t> a, c, g, h;  // g: BLOCK_COLS grid (a piece per row), h: BLOCK_ROWS grid
  uint64_t step = 0;
};

void* resize_a(const char*, size_t n, void* user) {
  auto* s = static_cast<Arrays*>(user);
  s->a.assign(std::max<size_t>(n, 1), 0x77);
  return s->a.data();
}

class ReshapeDirect : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::start_scratch_job("reshapedirect", "direct", counter_++);
  }
  void TearDown() override {
    unsetenv("CAIRN_SET_SIZE");  // set by the L2 test; start_scratch_job sets the rest anew
    if (Runtime::instance()) Runtime::destroy().ignore();
    if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    test::end_scratch_job(root_);
  }

  static cairn_distribution block() { return {CAIRN_DIST_BLOCK, kG, 0, 0, 0}; }
  cairn_distribution cyclic() const { return {CAIRN_DIST_BLOCK_CYCLIC, kGc, block_, 0, 0}; }
  static cairn_distribution cols() { return {CAIRN_DIST_BLOCK_COLS, 0, 0, 41, 1003}; }
  static cairn_distribution rows() { return {CAIRN_DIST_BLOCK_ROWS, 0, 0, 517, 61}; }
  static cairn_distribution replicated() { return {CAIRN_DIST_REPLICATED, 1, 0, 0, 0}; }

  // Global indices of this rank's local elements of `d` on p ranks.
  std::vector<uint64_t> globals(const cairn_distribution& d, int p, int r) const {
    std::vector<uint64_t> out;
    auto piece = [&](uint64_t n, uint64_t* start, uint64_t* count) {  // BLOCK's split of n over p
      uint64_t q = n / p, rem = n % p;
      *start = r * q + std::min<uint64_t>(r, rem);
      *count = q + (static_cast<uint64_t>(r) < rem);
    };
    uint64_t at = 0, n = 0;
    if (d.kind == CAIRN_DIST_BLOCK) {
      piece(d.global_count, &at, &n);
      for (uint64_t i = 0; i < n; ++i) out.push_back(at + i);
    } else if (d.kind == CAIRN_DIST_BLOCK_ROWS) {
      piece(d.rows, &at, &n);
      for (uint64_t i = at; i < at + n; ++i)
        for (uint64_t j = 0; j < d.cols; ++j) out.push_back(i * d.cols + j);
    } else if (d.kind == CAIRN_DIST_BLOCK_COLS) {
      piece(d.cols, &at, &n);
      for (uint64_t i = 0; i < d.rows; ++i)
        for (uint64_t j = at; j < at + n; ++j) out.push_back(i * d.cols + j);
    } else {
      for (uint64_t j = r; j * d.block_size < d.global_count; j += p)
        for (uint64_t g = j * d.block_size; g < std::min<uint64_t>((j + 1) * d.block_size, d.global_count); ++g) out.push_back(g);
    }
    return out;
  }

  // Runtime on `p` ranks of the world (the others get MPI_COMM_NULL and stay out); regions sized for p
  // (or, with `wrong_a`, "a" one element short, with a resize callback), filled with `fill`.
  bool start(int p, bool wrong_a = false, uint64_t fill = 0) {
    if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < p ? 0 : MPI_UNDEFINED, g_rank, &comm_);
    if (comm_ == MPI_COMM_NULL) return false;
    EXPECT_TRUE(Runtime::create(comm_, nullptr).is_ok());
    arrays_.a.assign(globals(block(), p, g_rank).size() - (wrong_a ? 1 : 0), fill);
    arrays_.c.assign(globals(cyclic(), p, g_rank).size(), fill);
    arrays_.g.assign(globals(cols(), p, g_rank).size(), fill);
    arrays_.h.assign(globals(rows(), p, g_rank).size(), fill);
    arrays_.step = fill;
    cairn_distribution b = block(), c = cyclic(), r = replicated(), gd = cols(), hd = rows();
    auto* rt = Runtime::instance();
    EXPECT_TRUE(rt->protect_distributed("a", arrays_.a.data(), arrays_.a.size(), CAIRN_UINT64, &b).is_ok() || wrong_a);
    if (wrong_a) {  // protected with a count that is not its share: as a restart-time placeholder
      EXPECT_TRUE(rt->protect("a", arrays_.a.data(), arrays_.a.size(), CAIRN_UINT64).is_ok());
      EXPECT_TRUE(rt->set_resize("a", resize_a, &arrays_).is_ok());
    }
    EXPECT_TRUE(rt->protect_distributed("c", arrays_.c.data(), arrays_.c.size(), CAIRN_UINT64, &c).is_ok());
    EXPECT_TRUE(rt->protect_distributed("g", arrays_.g.data(), arrays_.g.size(), CAIRN_UINT64, &gd).is_ok());
    EXPECT_TRUE(rt->protect_distributed("h", arrays_.h.data(), arrays_.h.size(), CAIRN_UINT64, &hd).is_ok());
    EXPECT_TRUE(rt->protect_distributed("step", &arrays_.step, 1, CAIRN_UINT64, &r).is_ok());
    return true;
  }

  // Versions 1..n written by all 4 ranks, every one flushed to L3; then the caches removed.
  void write_versions(int n, bool keep_caches = false) {
    ASSERT_TRUE(start(g_size));
    for (int v = 1; v <= n; ++v) {
      auto ga = globals(block(), g_size, g_rank), gc = globals(cyclic(), g_size, g_rank);
      for (size_t i = 0; i < ga.size(); ++i) arrays_.a[i] = value(ga[i], 0, v);
      for (size_t i = 0; i < gc.size(); ++i) arrays_.c[i] = value(gc[i], 1, v);
      auto gg = globals(cols(), g_size, g_rank), gh = globals(rows(), g_size, g_rank);
      for (size_t i = 0; i < gg.size(); ++i) arrays_.g[i] = value(gg[i], 2, v);
      for (size_t i = 0; i < gh.size(); ++i) arrays_.h[i] = value(gh[i], 3, v);
      arrays_.step = 100 + v;
      ASSERT_TRUE(Runtime::instance()->checkpoint().is_ok());
      ASSERT_TRUE(Runtime::instance()->wait_all().is_ok());
    }
    ASSERT_TRUE(Runtime::destroy().is_ok());
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0 && !keep_caches) {
      ASSERT_TRUE(fs::remove_tree(root_ + "/cache").is_ok());
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  // Between the cases of a test: every version gone (caches and prefix), on every rank.
  void forget_versions() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
      ASSERT_TRUE(fs::remove_tree(root_ + "/cache").is_ok());
      ASSERT_TRUE(fs::remove_tree(root_ + "/prefix").is_ok());
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  // Flip a byte of old rank k's data in its L1 slot of version v (simulated node `node`).
  // red: its redundancy data (the copy of another member it keeps) instead.
  void damage_slot(const std::string& node, int k, uint64_t v, uint64_t at, bool red = false) {
    Config cfg;
    cfg.prefix = root_ + "/prefix";
    cfg.cache_dir = root_ + "/cache";
    cfg.job = "direct";
    Layout l = make_layout(cfg);
    CacheStore store;
    ASSERT_TRUE(store.open(l.rank_cache(node, k), cfg.cache_versions).is_ok());
    auto rec = store.read_record(v);
    ASSERT_TRUE(rec.is_ok());
    const int slot = static_cast<int>(rec->slot);
    test::flip_byte(red ? store.red_path(slot) : store.slot_path(slot), at, 0x10);
  }

  bool holds(int p, int v) const {
    auto ga = globals(block(), p, g_rank), gc = globals(cyclic(), p, g_rank);
    if (arrays_.a.size() != ga.size() || arrays_.c.size() != gc.size() || arrays_.step != static_cast<uint64_t>(100 + v))
      return false;
    for (size_t i = 0; i < ga.size(); ++i)
      if (arrays_.a[i] != value(ga[i], 0, v)) return false;
    for (size_t i = 0; i < gc.size(); ++i)
      if (arrays_.c[i] != value(gc[i], 1, v)) return false;
    auto gg = globals(cols(), p, g_rank), gh = globals(rows(), p, g_rank);
    if (arrays_.g.size() != gg.size() || arrays_.h.size() != gh.size()) return false;
    for (size_t i = 0; i < gg.size(); ++i)
      if (arrays_.g[i] != value(gg[i], 2, v)) return false;
    for (size_t i = 0; i < gh.size(); ++i)
      if (arrays_.h[i] != value(gh[i], 3, v)) return false;
    return true;
  }

  // On the first p ranks: a runtime (see start), cairn_restart, destroy. Whether this rank restarted
  // version v from `level` with the right bytes; true on the ranks outside the job.
  bool restarts(int p, int level, int v, bool wrong_a = false) {
    if (!start(p, wrong_a)) return true;
    Status st = Runtime::instance()->restart();
    int got_v = 0, got_level = 0;
    Runtime::instance()->restart_level(&got_v, &got_level);
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(got_level, level);
    bool ok = st.is_ok() && got_level == level && got_v == v && holds(p, v);
    EXPECT_TRUE(Runtime::destroy().is_ok());
    return ok;
  }

  std::string root_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  Arrays arrays_;
  uint64_t block_ = kBlock;  // of "c"
  static int counter_;
};
int ReshapeDirect::counter_ = 0;

TEST_F(ReshapeDirect, EveryRankReadsItsOwnPieces) {
  write_versions(1);
  for (int p : {3, 2}) EXPECT_TRUE(everywhere(restarts(p, CAIRN_LEVEL_L3, 1))) << "on " << p << " ranks";
}

TEST_F(ReshapeDirect, ResizeAndRestartAvailableTakeTheHostsPath) {
  write_versions(1);
  // "a" must be resized: the hosts read the old files and move the pieces (the callback runs).
  EXPECT_TRUE(everywhere(restarts(3, CAIRN_LEVEL_L3, 1, /*wrong_a=*/true)));
  // cairn_restart_available first: nothing is read into the regions before cairn_restart.
  bool in = start(3, false, 0x55);
  bool ok = true;
  if (in) {
    int avail = 0, version = 0;
    EXPECT_TRUE(Runtime::instance()->restart_available(&avail, &version).is_ok());
    ok = avail == 1 && version == 1 && arrays_.a[0] == 0x55 && arrays_.c.back() == 0x55;
    Status st = Runtime::instance()->restart();
    ok = ok && st.is_ok() && holds(3, 1);
    EXPECT_TRUE(Runtime::destroy().is_ok());
  }
  EXPECT_TRUE(everywhere(ok));
}

TEST_F(ReshapeDirect, DamagedOldFileFallsBackToTheOlderVersion) {
  write_versions(2);
  if (g_rank == 0) {
    Config cfg;
    cfg.prefix = root_ + "/prefix";
    cfg.job = "direct";
    Layout l = make_layout(cfg);
    test::flip_byte(l3::data_path(l, 2, 1), 4096, 1);  // old rank 1's file, read by new ranks 0 and 1
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(everywhere(restarts(3, CAIRN_LEVEL_L3, 1)));
}

// From L1: two ranks per simulated node, so that 3 of the 4 ranks still hold every old rank's cache
// (node0: old ranks 0 and 1, node1: old ranks 2 and 3, both hosted by new rank 2). Each host reads the
// pieces it keeps straight into its regions and sends the rest as each chunk is verified (streamed);
// with a resize, the hosts verify whole slots and then move everything (general path).
TEST_F(ReshapeDirect, FromL1HostsKeepTheirOwnPieces) {
  setenv("CAIRN_NODE", ("node" + std::to_string(g_rank / 2)).c_str(), 1);
  write_versions(1, /*keep_caches=*/true);
  for (bool resize : {false, true})
    EXPECT_TRUE(everywhere(restarts(3, CAIRN_LEVEL_L1, 1, resize))) << (resize ? "with" : "without") << " a resize";
}

// The same with restart_threads = 3: new rank 2 hosts old ranks 2 and 3 and reads their units side by
// side on two threads (the receivers post in that order), with pread, out of a mapping with the pieces
// for others sent from it (every rank on this host), or out of a mapping into the ring (the others
// treated as on other hosts); a damaged chunk in one of them still sends every rank to L3.
TEST_F(ReshapeDirect, FromL1HostsReadTheirStreamsSideBySide) {
  setenv("CAIRN_NODE", ("node" + std::to_string(g_rank / 2)).c_str(), 1);
  setenv("CAIRN_RESTART_THREADS", "3", 1);
  const char* way[] = {"pread", "mapped, sent from the mapping", "mapped, sent through the ring"};
  for (int w : {0, 1, 2}) {
    decide_slot_read_for_tests(w > 0 ? SlotRead::own_mapping : SlotRead::pread);
    treat_other_ranks_as_remote_for_tests(w == 2);
    for (uint64_t at : {uint64_t{0}, uint64_t{300000}}) {
      write_versions(1, /*keep_caches=*/true);
      if (g_rank == 0 && at) damage_slot("node1", 3, 1, at);
      MPI_Barrier(MPI_COMM_WORLD);
      EXPECT_TRUE(everywhere(restarts(3, at ? CAIRN_LEVEL_L3 : CAIRN_LEVEL_L1, 1))) << way[w] << ", damaged at byte " << at;
      forget_versions();
    }
  }
  treat_other_ranks_as_remote_for_tests(false);
  decide_slot_read_for_tests(std::nullopt);
  unsetenv("CAIRN_RESTART_THREADS");
}

// The ranks that share this host, as the streamed path asks: all four here, and in a communicator of
// two of them, those two in its own numbering.
TEST(HostShare, NamesTheRanksOfThisHost) {
  HostShare share;
  ASSERT_TRUE(host_share(MPI_COMM_WORLD, &share).is_ok());
  std::vector<int> all(static_cast<size_t>(g_size));
  for (int r = 0; r < g_size; ++r) all[static_cast<size_t>(r)] = r;
  EXPECT_EQ(share.here, all);
  EXPECT_EQ(share.ranks, g_size);
  EXPECT_TRUE(share.on_this_host(g_rank));
  EXPECT_FALSE(share.on_this_host(g_size));
  EXPECT_FALSE(share.on_this_host(-1));
  MPI_Comm half = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half), MPI_SUCCESS);
  HostShare in_half;
  ASSERT_TRUE(host_share(half, &in_half, /*busy=*/g_rank < 2).is_ok());
  int n = 0;
  MPI_Comm_size(half, &n);
  std::vector<int> mine(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) mine[static_cast<size_t>(r)] = r;
  EXPECT_EQ(in_half.here, mine);
  EXPECT_EQ(in_half.busy, 1);  // of ranks {0, 2} or {1, 3}, only rank 0 or rank 1 said busy
  MPI_Comm_free(&half);
}

// Blocks of one element in "c": a piece per element, too many messages to stream, so the hosts read
// their own pieces into the regions, verify the rest in place and move it in one exchange.
TEST_F(ReshapeDirect, FromL1ManySmallPiecesTakeOneExchange) {
  setenv("CAIRN_NODE", ("node" + std::to_string(g_rank / 2)).c_str(), 1);
  block_ = 1;
  write_versions(1, /*keep_caches=*/true);
  EXPECT_TRUE(everywhere(restarts(3, CAIRN_LEVEL_L1, 1)));
}

// A damaged chunk in the middle of a streamed slot: its host stops reading but still sends what the
// receivers wait for, every rank agrees that L1 failed, and the restart comes from L3 with the right
// bytes, on every rank. Damaged near the start of old rank 1's slot (a piece sent on to new rank 0)
// and in its middle (a piece its host, new rank 1, keeps).
TEST_F(ReshapeDirect, FromL1DamagedChunkFallsBackToL3) {
  setenv("CAIRN_NODE", ("node" + std::to_string(g_rank / 2)).c_str(), 1);
  for (uint64_t at : {uint64_t{100}, uint64_t{300000}}) {
    write_versions(1, /*keep_caches=*/true);
    if (g_rank == 0) damage_slot("node0", 1, 1, at);
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_TRUE(everywhere(restarts(3, CAIRN_LEVEL_L3, 1))) << "damaged at byte " << at;
    forget_versions();
  }
}

// cairn_restart_available names the version from the records alone (the regions keep their bytes), and
// cairn_restart reads it as it would alone: streamed from L1, each of the two ways a slot may be read on
// a machine (pread, or copied out of a mapping and hashed in the same pass); a damaged chunk, sent on
// (byte 100 of old rank 1's slot) or kept by its host (byte 300000), still sends the restart to L3.
TEST_F(ReshapeDirect, FromL1AfterRestartAvailable) {
  setenv("CAIRN_NODE", ("node" + std::to_string(g_rank / 2)).c_str(), 1);
  for (bool mapped : {false, true}) {
    decide_slot_read_for_tests(mapped ? SlotRead::own_mapping : SlotRead::pread);
    for (uint64_t at : {uint64_t{0}, uint64_t{100}, uint64_t{300000}}) {
      write_versions(1, /*keep_caches=*/true);
      if (g_rank == 0 && at) damage_slot("node0", 1, 1, at);
      MPI_Barrier(MPI_COMM_WORLD);
      bool ok = true;
      if (start(3, false, 0x55)) {
        int avail = 0, version = 0, got_v = 0, got_level = 0;
        EXPECT_TRUE(Runtime::instance()->restart_available(&avail, &version).is_ok());
        ok = avail == 1 && version == 1 && arrays_.a[0] == 0x55 && arrays_.c.back() == 0x55 && arrays_.step == 0x55;
        Status st = Runtime::instance()->restart();
        EXPECT_TRUE(st.is_ok()) << st.message();
        Runtime::instance()->restart_level(&got_v, &got_level);
        ok = ok && st.is_ok() && got_v == 1 && got_level == (at ? CAIRN_LEVEL_L3 : CAIRN_LEVEL_L1) && holds(3, 1);
        EXPECT_TRUE(Runtime::destroy().is_ok());
      }
      EXPECT_TRUE(everywhere(ok)) << (mapped ? "mapped" : "pread") << ", damaged at byte " << at;
      forget_versions();
    }
  }
  decide_slot_read_for_tests(std::nullopt);
}

// From L2: one simulated node per rank, xor sets of two (old ranks {0,1} and {2,3}); the new job runs on
// the first nodes, so on 3 ranks old rank 3's cache (node3) has no host and counts as lost. The hosts
// verify the survivors, each lost old rank is rebuilt by a rank that hosts no other member of its set,
// and everything moves to the new layout. A survivor whose slot is damaged counts as lost as well and is
// rebuilt; a set that lost both its members sends the restart to L3, with the right bytes all the same.
TEST_F(ReshapeDirect, FromL2LostRanksAreRebuiltForTheNewLayout) {
  setenv("CAIRN_REDUNDANCY", "xor", 1);
  setenv("CAIRN_SET_SIZE", "2", 1);
  struct Case {
    int ranks;
    bool lose_node1;  // old rank 1's cache removed
    int damaged;      // old rank whose slot gets a flipped byte (-1: none)
    int level;        // where the restart must come from
  };
  for (Case c : {Case{3, true, -1, CAIRN_LEVEL_L2},    // old ranks 1 and 3 rebuilt, one in each set
                 Case{3, false, 0, CAIRN_LEVEL_L2},    // old rank 0 fails its check: rebuilt, with 3
                 Case{3, true, 0, CAIRN_LEVEL_L3},     // old ranks 0 and 1 both gone: more than xor tolerates
                 Case{2, false, -1, CAIRN_LEVEL_L3}}) {  // nodes 2 and 3 out of the job: set {2,3} gone
    write_versions(1, /*keep_caches=*/true);
    if (g_rank == 0) {
      Config cfg;
      cfg.prefix = root_ + "/prefix";
      cfg.cache_dir = root_ + "/cache";
      cfg.job = "direct";
      if (c.lose_node1) {
        ASSERT_TRUE(fs::remove_tree(make_layout(cfg).node_cache("node1")).is_ok());
      }
      if (c.damaged >= 0) damage_slot("node" + std::to_string(c.damaged), c.damaged, 1, 200000);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_TRUE(everywhere(restarts(c.ranks, c.level, 1)))
        << "on " << c.ranks << " ranks, node1 " << (c.lose_node1 ? "lost" : "kept") << ", old rank " << c.damaged << " damaged";
    forget_versions();
  }
}

// From L2 where the lost old rank's data lies whole in a survivor's redundancy data: a partner ring of
// four restarted on three ranks (old rank 3's node is out of the job; old rank 0 keeps its copy). The
// sets cannot rebuild there (a set of four members on three ranks), but the copy is read as a slot is
// and streamed to the new owners, so the restart is at L2, with the right bytes. An xor set of four
// keeps no copy (its lost member must be decoded): the same restart goes to L3.
TEST_F(ReshapeDirect, FromL2ACopyInASetNeedsNoRebuild) {
  setenv("CAIRN_SET_SIZE", "4", 1);
  struct Case {
    const char* scheme;
    int level;
  };
  for (Case c : {Case{"partner", CAIRN_LEVEL_L2}, Case{"xor", CAIRN_LEVEL_L3}}) {
    setenv("CAIRN_REDUNDANCY", c.scheme, 1);
    write_versions(1, /*keep_caches=*/true);
    EXPECT_TRUE(everywhere(restarts(3, c.level, 1))) << c.scheme;
    forget_versions();
  }
}

// A damaged copy is never restored: old rank 3's copy in old rank 2's redundancy data (xor pair {2,3};
// the job runs on nodes 0-2, so node3 is out) has a flipped byte, so the copy fails its check as it
// streams, the set's rebuild (the same bytes, for a pair) fails as it lands, and the restart comes from
// L3, with the right bytes.
TEST_F(ReshapeDirect, FromL2ADamagedCopyGoesToL3) {
  setenv("CAIRN_REDUNDANCY", "xor", 1);
  setenv("CAIRN_SET_SIZE", "2", 1);
  write_versions(1, /*keep_caches=*/true);
  if (g_rank == 0) damage_slot("node2", 2, 1, 200000, /*red=*/true);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(everywhere(restarts(3, CAIRN_LEVEL_L3, 1)));
}

// The copy is read by another rank of its holder's node where the node has several: the new job runs
// ranks 0 and 1 on node0 and rank 2 on node2, so old rank 1 (xor pair {0,1}, node1 out of the job) is read
// from old rank 0's redundancy data by rank 1, while rank 0 reads old rank 0's slot; old rank 3 from old
// rank 2's, on node2.
TEST_F(ReshapeDirect, FromL2TheCopyIsReadBesideTheHoldersSlot) {
  setenv("CAIRN_REDUNDANCY", "xor", 1);
  setenv("CAIRN_SET_SIZE", "2", 1);
  write_versions(1, /*keep_caches=*/true);
  setenv("CAIRN_NODE", g_rank <= 1 ? "node0" : ("node" + std::to_string(g_rank)).c_str(), 1);
  EXPECT_TRUE(everywhere(restarts(3, CAIRN_LEVEL_L2, 1)));
  setenv("CAIRN_NODE", ("node" + std::to_string(g_rank)).c_str(), 1);
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  return cairn::test::run_mpi_tests(argc, argv, [](int rank, int size) { cairn::g_rank = rank, cairn::g_size = size; });
}
