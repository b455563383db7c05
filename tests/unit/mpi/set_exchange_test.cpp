// The L2 exchange on real MPI ranks (ctest runs it on 4): encode_set must equal SetCode::encode_all on
// the gathered snapshots, and rebuild_set must give back, for every loss pattern, exactly what
// decode_all gives (the originals), or ERR_UNRECOVERABLE on every member.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "redundancy/set_code.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "mpi_test_main.hpp"

namespace cairn::redundancy {
namespace {

int rank_in(MPI_Comm comm) {
  int r = -1;
  MPI_Comm_rank(comm, &r);
  return r;
}
int size_of(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  return n;
}
// True on every member if `ok` holds on every member: a failure anywhere fails the test on rank 0,
// which is the one that prints.
bool everywhere(MPI_Comm comm, bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm);
  return v == 1;
}

// Member x's snapshot in a test case: reproducible, different per member and per case.
std::vector<uint8_t> snapshot(int member, size_t len, unsigned seed) {
  std::mt19937 rng(seed * 131 + member);
  std::vector<uint8_t> v(len);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Every member's bytes on every member (the local reference needs the whole set).
std::vector<std::vector<uint8_t>> gather(MPI_Comm comm, const std::vector<uint8_t>& mine,
                                         const std::vector<size_t>& lens) {
  int n = size_of(comm);
  std::vector<int> counts(n), displs(n);
  int total = 0;
  for (int x = 0; x < n; x++) counts[x] = static_cast<int>(lens[x]), displs[x] = total, total += counts[x];
  std::vector<uint8_t> all(total + 1);
  MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), counts.data(),
                 displs.data(), MPI_BYTE, comm);
  std::vector<std::vector<uint8_t>> out(n);
  for (int x = 0; x < n; x++) out[x].assign(all.begin() + displs[x], all.begin() + displs[x] + counts[x]);
  return out;
}

// This member's redundancy data from a full encode of every member's `data`, in one address space.
std::vector<uint8_t> full_encode(MPI_Comm comm, const SetCode& code, const std::vector<uint8_t>& data,
                                 const std::vector<size_t>& lens) {
  const size_t n = lens.size(), max_len = *std::max_element(lens.begin(), lens.end());
  auto all_data = gather(comm, data, lens);
  std::vector<std::vector<uint8_t>> expect(n, std::vector<uint8_t>(code.redundancy_len(max_len)));
  std::vector<const uint8_t*> dp(n);
  std::vector<uint8_t*> rp(n);
  for (size_t x = 0; x < n; x++) dp[x] = all_data[x].data(), rp[x] = expect[x].data();
  code.encode_all(dp, lens, max_len, rp);
  return expect[static_cast<size_t>(rank_in(comm))];
}

struct Case {
  Redundancy scheme;
  int m;
  std::vector<size_t> lens;
  size_t chunk;
};

std::string describe(const Case& c) {
  const char* names[] = {"single", "partner", "xor", "rs"};
  std::string s = std::string(names[static_cast<int>(c.scheme)]) + " m=" + std::to_string(c.m) +
                  " chunk=" + std::to_string(c.chunk) + " lens=";
  for (size_t l : c.lens) s += std::to_string(l) + ",";
  return s;
}

void run_case(MPI_Comm comm, const Case& c, unsigned seed) {
  SCOPED_TRACE(describe(c));
  int n = size_of(comm), me = rank_in(comm);
  auto made = SetCode::make(c.scheme, n, c.m);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  const SetCode& code = made.value();
  size_t max_len = *std::max_element(c.lens.begin(), c.lens.end());
  size_t red_len = code.redundancy_len(max_len);

  std::vector<uint8_t> data = snapshot(me, c.lens[me], seed), red(red_len, 0xCD);
  Status st = encode_set(comm, code, data.data(), data.size(), c.lens, red.data(), c.chunk);
  EXPECT_TRUE(st.is_ok()) << st.message();

  // The same set encoded in one address space.
  auto all_data = gather(comm, data, c.lens);
  std::vector<std::vector<uint8_t>> expect_red(n, std::vector<uint8_t>(red_len));
  std::vector<const uint8_t*> dp(n);
  std::vector<uint8_t*> rp(n);
  for (int x = 0; x < n; x++) dp[x] = all_data[x].data(), rp[x] = expect_red[x].data();
  code.encode_all(dp, c.lens, max_len, rp);
  EXPECT_TRUE(everywhere(comm, st.is_ok() && red == expect_red[me])) << "encode_set differs from encode_all";

  for (unsigned mask = 0; mask < (1u << n); mask++) {
    std::vector<bool> lost(n);
    for (int x = 0; x < n; x++) lost[x] = (mask >> x) & 1;
    bool recoverable = code.recoverable(lost);
    // Lost members start from garbage; survivors pass what they have.
    std::vector<uint8_t> my_data = data, my_red = red;
    if (lost[me]) std::fill(my_data.begin(), my_data.end(), 0x6B), std::fill(my_red.begin(), my_red.end(), 0xB6);
    std::vector<uint8_t> before_data = my_data, before_red = my_red;
    Status rs = rebuild_set(comm, code, lost, my_data.data(), c.lens, my_red.data(), c.chunk);
    bool ok;
    if (recoverable) {
      // decode_all on the gathered set is the reference; it must give back the originals.
      std::vector<std::vector<uint8_t>> dd = all_data, rr = expect_red;
      std::vector<uint8_t*> dm(n), rm(n);
      for (int x = 0; x < n; x++) {
        if (lost[x]) std::fill(dd[x].begin(), dd[x].end(), 0), std::fill(rr[x].begin(), rr[x].end(), 0);
        dm[x] = dd[x].data(), rm[x] = rr[x].data();
      }
      Status ds = code.decode_all(lost, dm, c.lens, max_len, rm);
      ok = rs.is_ok() && ds.is_ok() && my_data == dd[me] && my_red == rr[me] && my_data == data &&
           my_red == expect_red[me];
      if (!rs.is_ok()) ADD_FAILURE() << "rebuild_set: " << rs.message();
    } else {
      ok = rs.code() == Code::ERR_UNRECOVERABLE && my_data == before_data && my_red == before_red;
    }
    EXPECT_TRUE(everywhere(comm, ok)) << "loss mask " << mask << (recoverable ? " (recoverable)" : " (beyond tolerance)");

    // The restart's first exchange (core/restart_inplace.cpp): the lost members' data only, no buffer for
    // their redundancy data, survivors waiting gently. Without `place` it lands in my_data; with it, a lost
    // member's my_data is never written and every byte of its data is handed to place() exactly once,
    // already final.
    if (!recoverable || mask == 0) continue;
    for (bool placing : {false, true}) {
      std::vector<uint8_t> only = data;
      if (lost[me]) std::fill(only.begin(), only.end(), 0x5A);
      const std::vector<uint8_t> guard = only;
      std::vector<uint8_t> placed(only.size(), 0x5A);
      std::vector<uint8_t> survivor_red = red;
      std::vector<int> placed_times(only.size(), 0);
      bool in_bounds = true;
      Place place = [&](size_t off, const uint8_t* src, size_t len) {
        in_bounds = in_bounds && off + len <= placed.size();
        for (size_t i = off; i < off + len && i < placed.size(); ++i) ++placed_times[i], placed[i] = src[i - off];
      };
      Status part = rebuild_set(comm, code, lost, only.data(), c.lens, lost[me] ? nullptr : survivor_red.data(), c.chunk,
                                RebuildPart::data, /*gentle=*/!lost[me], placing ? place : Place{});
      bool part_ok = part.is_ok() && survivor_red == red;
      if (!lost[me] || !placing) part_ok = part_ok && only == data;
      if (lost[me] && placing)
        part_ok = part_ok && only == guard && placed == data && in_bounds &&
                  std::all_of(placed_times.begin(), placed_times.end(), [](int t) { return t == 1; });
      if (!part.is_ok()) ADD_FAILURE() << "rebuild_set (data only): " << part.message();
      EXPECT_TRUE(everywhere(comm, part_ok)) << "data only" << (placing ? ", placed" : "") << ", loss mask " << mask;
    }
  }
}

std::vector<std::vector<size_t>> world_lens() {
  return {{200003, 0, 77777, 262144}, {5, 64, 0, 130}, {0, 0, 0, 0}, {99999, 99999, 99999, 99999}};
}

void run_scheme_on_world(Redundancy scheme, int m) {
  ASSERT_EQ(size_of(MPI_COMM_WORLD), 4) << "run this test on 4 ranks";
  unsigned seed = 1;
  // 4 KiB: many pipeline steps; 1000: a chunk that is no multiple of 64; 1 MiB: one step.
  for (size_t chunk : {size_t{4096}, size_t{1000}, size_t{1} << 20})
    for (const auto& lens : world_lens()) run_case(MPI_COMM_WORLD, {scheme, m, lens, chunk}, seed++);
}

TEST(SetExchange, Partner) { run_scheme_on_world(Redundancy::partner, 1); }
TEST(SetExchange, Xor) { run_scheme_on_world(Redundancy::xor_set, 1); }
TEST(SetExchange, RsOneParity) { run_scheme_on_world(Redundancy::rs, 1); }
TEST(SetExchange, RsTwoParity) { run_scheme_on_world(Redundancy::rs, 2); }
TEST(SetExchange, RsThreeParity) { run_scheme_on_world(Redundancy::rs, 3); }

// An encode told which chunks changed since the one its redundancy data holds moves only the steps that
// depend on them, and of those only the span that changed chunks cover, and gives byte for byte what a
// full encode of the new data gives.
void run_changed_case(Redundancy scheme, int m, const std::vector<size_t>& lens, size_t chunk, uint32_t cs,
                      unsigned seed, MPI_Comm comm = MPI_COMM_WORLD) {
  int n = size_of(comm), me = rank_in(comm);
  auto made = SetCode::make(scheme, n, m);
  ASSERT_TRUE(made.is_ok());
  const SetCode& code = made.value();
  const size_t max_len = *std::max_element(lens.begin(), lens.end());
  std::vector<uint8_t> data = snapshot(me, lens[me], seed), red(code.redundancy_len(max_len), 0xCD);
  ASSERT_TRUE(encode_set(comm, code, data.data(), data.size(), lens, red.data(), chunk).is_ok());
  // Member x changes its chunk x (if it has one) and, on member 1, its last chunk too.
  ChangedChunks changed;
  changed.chunk_size = cs;
  for (int x = 0; x < n; ++x) {
    const size_t nchunks = (lens[x] + cs - 1) / cs;
    std::vector<uint8_t> c(nchunks, 0);
    if (static_cast<size_t>(x) < nchunks) c[x] = 1;
    if (x == 1 && nchunks > 0) c[nchunks - 1] = 1;
    changed.chunks.push_back(c);
  }
  for (size_t i = 0; i < changed.chunks[me].size(); ++i)
    if (changed.chunks[me][i])
      for (size_t b = i * cs; b < std::min<size_t>((i + 1) * cs, data.size()); b += 7) data[b] ^= 0xA5;
  EncodeReport report;
  Status st = encode_set(comm, code, data.data(), data.size(), lens, red.data(), chunk, &changed, &report);
  EXPECT_TRUE(st.is_ok()) << st.message();
  const std::vector<uint8_t> expect = full_encode(comm, code, data, lens);
  EXPECT_TRUE(everywhere(comm, st.is_ok() && red == expect)) << "the encode of the changes differs from a full one";
  EXPECT_GT(report.steps, 0u);
  // Pieces no larger than a chunk: some steps hold no changed chunk. Larger ones may all hold one; then
  // only their spans save (the bytes, below).
  if (chunk <= cs) {
    EXPECT_TRUE(everywhere(comm, report.skipped > 0)) << "nothing was skipped: " << report.steps << " steps";
  }
  // The bytes: a full encode sends every byte of this member's data once per parity row (partner: once),
  // the changes-only one less, in total over the set.
  EncodeReport whole;
  std::vector<uint8_t> red_full(red.size());
  ASSERT_TRUE(encode_set(comm, code, data.data(), data.size(), lens, red_full.data(), chunk, nullptr, &whole).is_ok());
  const uint64_t rows = scheme == Redundancy::partner ? 1 : static_cast<uint64_t>(code.m());
  EXPECT_EQ(whole.sent, lens[me] * rows);
  EXPECT_EQ(whole.full, whole.sent);
  EXPECT_EQ(report.full, whole.full);
  EXPECT_LE(report.sent, report.full);
  uint64_t sums[2] = {report.sent, report.full}, all[2] = {0, 0};
  MPI_Allreduce(sums, all, 2, MPI_UINT64_T, MPI_SUM, comm);
  EXPECT_LT(all[0], all[1]) << "the set sent as much as a full encode";
  if (scheme == Redundancy::partner) {  // exactly the changed chunks' bytes, whatever the exchange's piece
    uint64_t changed_bytes = 0;
    for (size_t i = 0; i < changed.chunks[me].size(); ++i)
      if (changed.chunks[me][i]) changed_bytes += std::min<size_t>((i + 1) * cs, lens[me]) - i * cs;
    EXPECT_EQ(report.sent, changed_bytes);
  }
  // Nothing changed: no step moves, the redundancy data stays.
  for (auto& c : changed.chunks) std::fill(c.begin(), c.end(), 0);
  std::vector<uint8_t> before = red;
  ASSERT_TRUE(encode_set(comm, code, data.data(), data.size(), lens, red.data(), chunk, &changed, &report).is_ok());
  EXPECT_TRUE(everywhere(comm, red == before && report.skipped == report.steps && report.sent == 0));
  EXPECT_EQ(report.full, whole.full);
}

TEST(SetExchange, OnlyTheChangedChunksAreEncodedAgain) {
  ASSERT_EQ(size_of(MPI_COMM_WORLD), 4);
  unsigned seed = 100;
  for (Redundancy scheme : {Redundancy::partner, Redundancy::xor_set, Redundancy::rs})
    for (const auto& lens : std::vector<std::vector<size_t>>{{65536, 65536, 65536, 65536}, {70000, 0, 40000, 65536}})
      // The exchange's piece against the changed chunks' size: equal, smaller, larger (a piece that holds
      // changed and unchanged chunks moves only the changed span), and larger with chunks that do not fall
      // on 64-byte bounds (the coded span is widened for the codec).
      for (auto [chunk, cs] : std::vector<std::pair<size_t, uint32_t>>{{4096, 4096}, {1000, 4096}, {16384, 4096}, {16384, 1000}}) {
        SCOPED_TRACE(std::to_string(static_cast<int>(scheme)) + " lens[0]=" + std::to_string(lens[0]) + " chunk=" +
                     std::to_string(chunk) + " cs=" + std::to_string(cs));
        run_changed_case(scheme, scheme == Redundancy::rs ? 2 : 1, lens, chunk, cs, seed++);
      }
}

// One chunk of one member changed, inside pieces four times its size: each parity row's holder gets the
// span of that chunk from each of the stripe's k members (64-byte bounds, and a chunk that straddles two
// pieces splits in two), not their whole pieces; the parity is byte for byte a full encode's.
TEST(SetExchange, ACodedStepMovesOnlyTheChangedSpan) {
  ASSERT_EQ(size_of(MPI_COMM_WORLD), 4);
  const int me = rank_in(MPI_COMM_WORLD);
  const size_t len = 65536, piece = 16384;
  const uint32_t cs = 4096;
  for (auto [scheme, m] : std::vector<std::pair<Redundancy, int>>{{Redundancy::xor_set, 1}, {Redundancy::rs, 2}}) {
    const SetCode code = SetCode::make(scheme, 4, m).value();
    const std::vector<size_t> lens(4, len);
    std::vector<uint8_t> data = snapshot(me, len, 7 + m), red(code.redundancy_len(len), 0);
    ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data.data(), len, lens, red.data(), piece).is_ok());
    ChangedChunks changed;
    changed.chunk_size = cs;
    changed.chunks.assign(4, std::vector<uint8_t>(len / cs, 0));
    changed.chunks[2][5] = 1;
    if (me == 2)
      for (size_t b = 5 * cs; b < 6 * cs; ++b) data[b] ^= 0x3C;
    EncodeReport report;
    ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data.data(), len, lens, red.data(), piece, &changed, &report).is_ok());
    const std::vector<uint8_t> expect = full_encode(MPI_COMM_WORLD, code, data, lens);
    EXPECT_TRUE(everywhere(MPI_COMM_WORLD, red == expect)) << "scheme " << static_cast<int>(scheme);
    uint64_t sent = report.sent, all = 0;
    MPI_Allreduce(&sent, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    const uint64_t k = static_cast<uint64_t>(code.k()), rows = static_cast<uint64_t>(m);
    // At least the changed chunk itself per parity row (the other sources' bytes of the span may lie in
    // the padding past a member's length, which is not sent).
    EXPECT_GE(all, rows * cs) << "scheme " << static_cast<int>(scheme);
    EXPECT_LE(all, rows * k * (cs + 4 * 64)) << "scheme " << static_cast<int>(scheme) << ": more than the span moved";
  }
}

// A delta update: my_red holds the redundancy data of an older version H, another buffer that of B (H with
// chunks A changed), and this version is B with chunks C changed. The redundancy data brought up from B's
// with the changes C (xor, rs: deltas; partner: the bytes) equals a full encode, byte for byte, whether
// my_red held H's (told what changed since: A and C) or nothing; B's bytes and redundancy data are only
// read; and each member sends its own change once per parity row, not the k sources' union, nor (partner)
// A's chunks. A superset of C (chunks listed that did not change) costs bytes only.
void run_delta_case(Redundancy scheme, int m, const std::vector<size_t>& lens, size_t chunk, uint32_t cs, bool held,
                    bool superset, unsigned seed) {
  const int n = size_of(MPI_COMM_WORLD), me = rank_in(MPI_COMM_WORLD);
  const SetCode code = SetCode::make(scheme, n, m).value();
  const size_t max_len = *std::max_element(lens.begin(), lens.end());
  auto chunks_of = [&](int x) { return (lens[x] + cs - 1) / cs; };
  // Member x's chunk `i` of set A is x, of set C x + 1 (where it has them).
  auto pick = [&](size_t offset) {
    ChangedChunks c;
    c.chunk_size = cs;
    for (int x = 0; x < n; ++x) {
      std::vector<uint8_t> bits(chunks_of(x), 0);
      if (x + offset < bits.size()) bits[x + offset] = 1;
      c.chunks.push_back(bits);
    }
    return c;
  };
  auto change = [&](std::vector<uint8_t>& d, const ChangedChunks& c, uint8_t mask) {
    for (size_t i = 0; i < c.chunks[me].size(); ++i)
      if (c.chunks[me][i])
        for (size_t b = i * cs; b < std::min<size_t>((i + 1) * cs, d.size()); b += 3) d[b] ^= mask;
  };
  const ChangedChunks a = pick(0), c = pick(1);
  std::vector<uint8_t> data_h = snapshot(me, lens[me], seed), red(code.redundancy_len(max_len), 0xCD);
  if (held) {
    ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data_h.data(), data_h.size(), lens, red.data(), chunk).is_ok());
  }
  std::vector<uint8_t> data_b = data_h, red_b(red.size());
  change(data_b, a, 0x5A);
  ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data_b.data(), data_b.size(), lens, red_b.data(), chunk).is_ok());
  std::vector<uint8_t> data = data_b;
  change(data, c, 0xC3);
  const std::vector<uint8_t> keep_b = data_b, keep_red_b = red_b;

  ChangedChunks since_h = a;
  for (int x = 0; x < n; ++x)
    for (size_t i = 0; i < since_h.chunks[x].size(); ++i) since_h.chunks[x][i] |= c.chunks[x][i];
  DeltaBase base;
  base.data = data_b.data();
  base.red = red_b.data();
  base.since = c;
  if (superset)  // every member's first chunk listed too: unchanged since B unless it is in C
    for (auto& bits : base.since.chunks)
      if (!bits.empty()) bits[0] = 1;
  EncodeReport report;
  Status st = encode_set(MPI_COMM_WORLD, code, data.data(), data.size(), lens, red.data(), chunk,
                         held ? &since_h : nullptr, &report, &base);
  EXPECT_TRUE(st.is_ok()) << st.message();
  const std::vector<uint8_t> expect = full_encode(MPI_COMM_WORLD, code, data, lens);
  EXPECT_TRUE(everywhere(MPI_COMM_WORLD, st.is_ok() && red == expect)) << "the delta update differs from a full encode";
  EXPECT_TRUE(everywhere(MPI_COMM_WORLD, data_b == keep_b && red_b == keep_red_b)) << "the base was written";
  // What a member sends: each byte of its span since B once per parity row. Chunks on 64-byte bounds
  // with one changed chunk per member: exactly that chunk's bytes (a superset adds the span between).
  uint64_t mine = 0;
  for (size_t i = 0; i < base.since.chunks[me].size(); ++i)
    if (base.since.chunks[me][i]) mine += std::min<size_t>((i + 1) * cs, lens[me]) - i * cs;
  const uint64_t rows = static_cast<uint64_t>(code.m());
  if ((cs % 64 == 0 || scheme == Redundancy::partner) && !superset) {
    EXPECT_EQ(report.sent, rows * mine);
  }
  // Off 64-byte bounds, each span widened by at most 64 bytes at either end.
  if (cs % 64 != 0 && !superset) {
    EXPECT_LE(report.sent, rows * (mine + 2 * 64 * (max_len / chunk + 2)));
  }
  EXPECT_TRUE(everywhere(MPI_COMM_WORLD, report.sent < report.full || lens[me] == 0));
  if (!superset) {  // a superset's spans reach from the first chunk: there the plain encode may send less
    EXPECT_TRUE(report.delta) << "one changed chunk per member: the delta pays";
  }
}

TEST(SetExchange, ADeltaUpdateSendsEachMembersOwnChange) {
  ASSERT_EQ(size_of(MPI_COMM_WORLD), 4);
  unsigned seed = 300;
  for (auto [scheme, m] : std::vector<std::pair<Redundancy, int>>{
           {Redundancy::partner, 1}, {Redundancy::xor_set, 1}, {Redundancy::rs, 2}, {Redundancy::rs, 1}})
    for (const auto& lens : std::vector<std::vector<size_t>>{{65536, 65536, 65536, 65536}, {70000, 0, 40000, 65536}})
      for (auto [chunk, cs] : std::vector<std::pair<size_t, uint32_t>>{{4096, 4096}, {1000, 4096}, {16384, 4096}, {16384, 1000}})
        for (bool held : {true, false})
          for (bool superset : {false, true}) {
            SCOPED_TRACE(std::to_string(static_cast<int>(scheme)) + " m=" + std::to_string(m) + " lens[0]=" +
                         std::to_string(lens[0]) + " chunk=" + std::to_string(chunk) + " cs=" + std::to_string(cs) +
                         " held=" + std::to_string(held) + " superset=" + std::to_string(superset));
            run_delta_case(scheme, m, lens, chunk, cs, held, superset, seed++);
          }
}

// Partner's delta update from a base B when every chunk changed since B: the whole copy arrives, so none
// of B's copy is read (here it cannot be: it lies behind PROT_NONE), and the result is the full encode's.
TEST(SetExchange, APartnerDeltaOfAWhollyRewrittenStateReadsNoneOfBsCopy) {
  const int n = size_of(MPI_COMM_WORLD), me = rank_in(MPI_COMM_WORLD);
  const SetCode code = SetCode::make(Redundancy::partner, n, 1).value();
  const size_t len = 3 * 65536 + 4096;  // a last piece shorter than the others
  const std::vector<size_t> lens(static_cast<size_t>(n), len);
  std::vector<uint8_t> data = snapshot(me, len, 77), red(code.redundancy_len(len), 0xCD);
  const size_t red_len = code.redundancy_len(len);
  void* sealed = mmap(nullptr, red_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(sealed, MAP_FAILED);
  for (bool held : {false, true}) {
    ChangedChunks all;
    all.chunk_size = 4096;
    all.chunks.assign(static_cast<size_t>(n), std::vector<uint8_t>((len + 4095) / 4096, 1));
    DeltaBase base;
    base.red = static_cast<const uint8_t*>(sealed);
    base.since = all;
    EncodeReport report;
    Status st = encode_set(MPI_COMM_WORLD, code, data.data(), len, lens, red.data(), 65536, held ? &all : nullptr,
                           &report, &base);
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_TRUE(everywhere(MPI_COMM_WORLD, st.is_ok() && red == full_encode(MPI_COMM_WORLD, code, data, lens)))
        << "held=" << held;
    EXPECT_EQ(report.sent, len);
  }
  munmap(sealed, red_len);
}

// forecast_encode counts, over the whole set, exactly the bytes the plain encode and the delta update send,
// and encode_set takes the delta only where it sends at most kDeltaShare of the plain encode's: where each
// member changed other chunks since B than since the slot's version H (one of two here), yes; where the
// whole state changed since B and since H, no, and B is not read (it lies behind PROT_NONE). Either way the
// result is the full encode's.
TEST(SetExchange, TheDeltaIsTakenWhereItSendsLittle) {
  const int n = size_of(MPI_COMM_WORLD), me = rank_in(MPI_COMM_WORLD);
  ASSERT_EQ(n, 4);
  const uint32_t cs = 4096;
  const std::vector<size_t> lens{65536, 65536, 60000, 65536};  // chunk 3x + 5 within every member's
  auto sum = [](uint64_t v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return v;
  };
  unsigned seed = 900;
  for (auto [scheme, m] : std::vector<std::pair<Redundancy, int>>{{Redundancy::xor_set, 1}, {Redundancy::rs, 2}})
    for (bool whole : {false, true}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(scheme)) + " m=" + std::to_string(m) + " whole=" + std::to_string(whole));
      const SetCode code = SetCode::make(scheme, n, m).value();
      // Since H: member x's chunks 3x and 3x + 5 (whole: all); since B: 3x + 5 only (whole: all).
      ChangedChunks since_h, since_b;
      since_h.chunk_size = since_b.chunk_size = cs;
      for (int x = 0; x < n; ++x) {
        const size_t count = (lens[x] + cs - 1) / cs;
        std::vector<uint8_t> h(count, whole ? 1 : 0), b(count, whole ? 1 : 0);
        ASSERT_LT(static_cast<size_t>(3 * x + 5), count);
        if (!whole) h[3 * x] = h[3 * x + 5] = b[3 * x + 5] = 1;
        since_h.chunks.push_back(h), since_b.chunks.push_back(b);
      }
      auto change = [&](std::vector<uint8_t>& d, const std::vector<uint8_t>& bits, uint8_t mask) {
        for (size_t i = 0; i < bits.size(); ++i)
          if (bits[i])
            for (size_t at = i * cs; at < std::min<size_t>((i + 1) * cs, d.size()); at += 7) d[at] ^= mask;
      };
      std::vector<uint8_t> data_h = snapshot(me, lens[me], seed++), red_h(code.redundancy_len(65536));
      ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data_h.data(), lens[me], lens, red_h.data(), cs).is_ok());
      std::vector<uint8_t> data_b = data_h, red_b(red_h.size());
      change(data_b, since_h.chunks[me], 0x11);  // H to B: since H but not since B too
      ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data_b.data(), lens[me], lens, red_b.data(), cs).is_ok());
      std::vector<uint8_t> data = data_b;
      change(data, since_b.chunks[me], 0x22);
      const std::vector<uint8_t> expect = full_encode(MPI_COMM_WORLD, code, data, lens);

      const EncodeForecast f = forecast_encode(code, lens, cs, &since_h, since_b);
      EXPECT_EQ(delta_update_pays(code, f), !whole) << "plain " << f.plain << ", delta " << f.delta;
      std::vector<uint8_t> red = red_h;
      EncodeReport plain;
      ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data.data(), lens[me], lens, red.data(), cs, &since_h, &plain).is_ok());
      EXPECT_TRUE(everywhere(MPI_COMM_WORLD, red == expect));
      EXPECT_EQ(sum(plain.sent), f.plain);
      EXPECT_FALSE(plain.delta);
      red = red_h;
      DeltaBase base;
      base.data = data_b.data(), base.red = red_b.data(), base.since = since_b;
      void* sealed = MAP_FAILED;
      if (whole) {  // declined: B's bytes and parity are never read
        sealed = mmap(nullptr, data_b.size() + red_b.size(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(sealed, MAP_FAILED);
        base.data = static_cast<const uint8_t*>(sealed), base.red = base.data + data_b.size();
      }
      EncodeReport report;
      ASSERT_TRUE(encode_set(MPI_COMM_WORLD, code, data.data(), lens[me], lens, red.data(), cs, &since_h, &report, &base)
                      .is_ok());
      if (sealed != MAP_FAILED) munmap(sealed, data_b.size() + red_b.size());
      EXPECT_TRUE(everywhere(MPI_COMM_WORLD, red == expect));
      EXPECT_EQ(report.delta, !whole);
      EXPECT_EQ(sum(report.sent), whole ? f.plain : f.delta);
      if (whole) {
        EXPECT_EQ(f.delta, f.plain);
      }
    }
  // Partner always takes it; one source per stripe never (the base is ignored there).
  EXPECT_TRUE(delta_update_pays(SetCode::make(Redundancy::partner, 4, 1).value(), EncodeForecast{}));
  const SetCode pair = SetCode::make(Redundancy::xor_set, 2, 1).value();
  ChangedChunks one;
  one.chunk_size = cs;
  one.chunks.assign(2, std::vector<uint8_t>(4, 1));
  const EncodeForecast f = forecast_encode(pair, {16384, 16384}, cs, nullptr, one);
  EXPECT_EQ(f.plain, 0u);
  EXPECT_FALSE(delta_update_pays(pair, f));
}

// xor and rs where a stripe has one source (sets of two) move each member's change alone already: a base
// is ignored there (its bytes are never read), and the result is the plain changes-only encode's.
TEST(SetExchange, ADeltaBaseIsIgnoredWhereEachChangeMovesAlone) {
  MPI_Comm pair;
  const int world_rank = rank_in(MPI_COMM_WORLD);
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank / 2, world_rank, &pair), MPI_SUCCESS);
  const size_t len = 32768;
  for (auto [scheme, comm, n] : std::vector<std::tuple<Redundancy, MPI_Comm, int>>{
           {Redundancy::xor_set, pair, 2}, {Redundancy::rs, pair, 2}}) {
    const int r = rank_in(comm);
    const SetCode code = SetCode::make(scheme, n, 1).value();
    const std::vector<size_t> lens(static_cast<size_t>(n), len);
    std::vector<uint8_t> data = snapshot(r, len, 41), red(code.redundancy_len(len), 0);
    ASSERT_TRUE(encode_set(comm, code, data.data(), len, lens, red.data(), 4096).is_ok());
    ChangedChunks changed;
    changed.chunk_size = 4096;
    changed.chunks.assign(static_cast<size_t>(n), std::vector<uint8_t>(len / 4096, 0));
    changed.chunks[0][3] = 1;
    if (r == 0) data[3 * 4096 + 5] ^= 1;
    DeltaBase base;  // no bytes: never read
    base.since = changed;
    EncodeReport report;
    ASSERT_TRUE(encode_set(comm, code, data.data(), len, lens, red.data(), 4096, &changed, &report, &base).is_ok());
    const std::vector<uint8_t> expect = full_encode(comm, code, data, lens);
    EXPECT_TRUE(everywhere(comm, red == expect)) << "scheme " << static_cast<int>(scheme);
  }
  MPI_Comm_free(&pair);
}

TEST(SetExchange, TwoMemberSets) {
  MPI_Comm pair;
  int world_rank = rank_in(MPI_COMM_WORLD);
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank / 2, world_rank, &pair), MPI_SUCCESS);
  // The two sets run at the same time with different data; each must be right on its own.
  std::vector<size_t> lens = world_rank / 2 == 0 ? std::vector<size_t>{100001, 4097}
                                                 : std::vector<size_t>{0, 70000};
  unsigned seed = 100 + world_rank / 2;
  for (size_t chunk : {size_t{4096}, size_t{1} << 20}) {
    run_case(pair, {Redundancy::partner, 1, lens, chunk}, seed);
    run_case(pair, {Redundancy::xor_set, 1, lens, chunk}, seed);
    run_case(pair, {Redundancy::rs, 1, lens, chunk}, seed);
  }
  // xor and rs with one parity over two members copy their one source: it lands in place, changes only too,
  // also a span inside a piece (pieces of 16 KiB, chunks of 1000 bytes).
  for (Redundancy scheme : {Redundancy::xor_set, Redundancy::rs})
    for (auto [chunk, cs] : std::vector<std::pair<size_t, uint32_t>>{{1000, 4096}, {16384, 1000}})
      run_changed_case(scheme, 1, {65536 + 4096 * static_cast<size_t>(world_rank / 2), 40000}, chunk, cs, seed, pair);
  MPI_Comm_free(&pair);
}

TEST(SetExchange, BadArgumentsAreErrorsOnEveryMember) {
  int me = rank_in(MPI_COMM_WORLD);
  auto code = SetCode::make(Redundancy::rs, 4, 2).value();
  std::vector<size_t> lens{1000, 2000, 3000, 4000};
  std::vector<uint8_t> data(lens[me], 1), red(code.redundancy_len(4000));
  // Rank 2 claims a length that disagrees with lens.
  Status st = encode_set(MPI_COMM_WORLD, code, data.data(), me == 2 ? 17 : data.size(), lens, red.data(), 4096);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
  // Rank 1 uses another chunk size.
  st = encode_set(MPI_COMM_WORLD, code, data.data(), data.size(), lens, red.data(), me == 1 ? 8192 : 4096);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
  EXPECT_NE(st.message().find("chunk"), std::string::npos) << st.message();
  // Rank 3 sees other lengths.
  std::vector<size_t> other = lens;
  if (me == 3) other[0] = 999;
  st = rebuild_set(MPI_COMM_WORLD, code, {true, false, false, false}, data.data(), other, red.data(), 4096);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
  // A set code for another set size.
  auto code3 = SetCode::make(Redundancy::xor_set, 3, 1).value();
  st = encode_set(MPI_COMM_WORLD, code3, data.data(), data.size(), lens, red.data(), 4096);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
  // Still usable afterwards.
  st = encode_set(MPI_COMM_WORLD, code, data.data(), data.size(), lens, red.data(), 4096);
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(SetExchange, NothingToDoNeedsNoCommunication) {
  // Called on one rank only: it would hang if it communicated.
  auto code = SetCode::make(Redundancy::xor_set, 4, 1).value();
  std::vector<size_t> lens{10, 10, 10, 10};
  std::vector<uint8_t> data(10), red(code.redundancy_len(10));
  if (rank_in(MPI_COMM_WORLD) == 0) {
    Status st = rebuild_set(MPI_COMM_WORLD, code, {true, true, false, false}, data.data(), lens, red.data(), 64);
    EXPECT_EQ(st.code(), Code::ERR_UNRECOVERABLE);
    EXPECT_NE(st.message().find("{0,1}"), std::string::npos) << st.message();
    st = rebuild_set(MPI_COMM_WORLD, code, {false, false, false, false}, data.data(), lens, red.data(), 64);
    EXPECT_TRUE(st.is_ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace cairn::redundancy

int main(int argc, char** argv) { return cairn::test::run_mpi_tests(argc, argv); }
