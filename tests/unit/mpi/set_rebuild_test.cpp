// restore::share_set, the buffers and the write-back on real MPI ranks (ctest runs it on 4): every rank
// protects a stream into its own cache as a checkpoint does (slot, redundancy data, record, set record,
// marker); then ranks lose their cache and the set rebuilds them, into a claimed slot or into staging
// memory written back, and the lost ranks' caches must hold the version exactly as before.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_store.hpp"
#include "mpi_test_main.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_record.hpp"
#include "restore/mpi/set_rebuild.hpp"
#include "../stream_manifest.hpp"

namespace cairn::restore {
namespace {

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
bool everywhere(bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v == 1;
}

constexpr uint64_t kVersion = 7;
constexpr int kSlot = 1;

std::string stream_of(int rank, unsigned seed) {
  std::mt19937 rng(seed * 977 + rank);
  std::string s(10000 + 3000 * rank, '\0');  // members of different lengths
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// This rank's cache directory, fresh, under a directory rank 0 made for the test.
std::string cache_dir(const std::string& test) {
  char base[256] = {0};
  if (rank_of(MPI_COMM_WORLD) == 0) {
    std::string tmpl = "/tmp/cairn_set_rebuild_" + test + "_XXXXXX";
    if (mkdtemp(tmpl.data())) snprintf(base, sizeof base, "%s", tmpl.c_str());
  }
  MPI_Bcast(base, sizeof base, MPI_CHAR, 0, MPI_COMM_WORLD);
  return std::string(base) + "/rank" + std::to_string(rank_of(MPI_COMM_WORLD));
}

// Version kVersion protected in `cache` as the L2 protector leaves it, with code `code` over every rank.
void protect(CacheStore& cache, const redundancy::SetCode& code, const std::string& data, std::string* red_out) {
  const int me = rank_of(MPI_COMM_WORLD), n = code.n();
  Manifest m = stream_manifest(data, {kVersion, static_cast<uint32_t>(me), static_cast<uint32_t>(n), 4096, "n0", ""});
  std::vector<unsigned long long> lens(static_cast<size_t>(n));
  unsigned long long len = data.size();
  MPI_Allgather(&len, 1, MPI_UNSIGNED_LONG_LONG, lens.data(), 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
  std::vector<size_t> slens(lens.begin(), lens.end());
  size_t max_len = 0;
  for (size_t l : slens) max_len = std::max(max_len, l);
  std::string red(std::max<size_t>(code.redundancy_len(max_len), 1), '\0');
  ASSERT_TRUE(redundancy::encode_set(MPI_COMM_WORLD, code, reinterpret_cast<const uint8_t*>(data.data()), data.size(),
                                     slens, reinterpret_cast<uint8_t*>(red.data()), 4096).is_ok());
  // The set record: every member's manifest.
  std::string mine = encode_manifest(m);
  int mlen = static_cast<int>(mine.size());
  std::vector<int> mlens(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  MPI_Allgather(&mlen, 1, MPI_INT, mlens.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int i = 0; i < n; ++i) displs[static_cast<size_t>(i)] = total, total += mlens[static_cast<size_t>(i)];
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), mlen, MPI_CHAR, all.data(), mlens.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD);
  redundancy::SetRecord rec;
  rec.scheme = code.scheme();
  rec.n = static_cast<uint32_t>(n);
  rec.m = static_cast<uint32_t>(code.m());
  for (int i = 0; i < n; ++i) {
    rec.ranks.push_back(static_cast<uint32_t>(i));
    rec.manifests.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]), static_cast<size_t>(mlens[static_cast<size_t>(i)])));
  }
  auto slot = cache.slot(kSlot, data.size());
  ASSERT_TRUE(slot.is_ok());
  memcpy((*slot)->data(), data.data(), data.size());
  auto r = cache.red(kSlot, red.size());
  ASSERT_TRUE(r.is_ok());
  memcpy((*r)->data(), red.data(), red.size());
  ASSERT_TRUE(cache.write_record(kVersion, L1Record{kSlot, m}).is_ok());
  ASSERT_TRUE(cache.write_set(kVersion, redundancy::encode_set_record(rec)).is_ok());
  ASSERT_TRUE(cache.mark_protected(kVersion).is_ok());
  *red_out = red;
}

// What a lost rank's cache must hold after the rebuild: the version's record, set record, marker, and
// its slot and redundancy data byte for byte.
void expect_restored(CacheStore& cache, int slot, const std::string& data, const std::string& red,
                     const std::string& set_record) {
  auto rec = cache.read_record(kVersion);
  ASSERT_TRUE(rec.is_ok()) << rec.status().message();
  EXPECT_EQ(static_cast<int>(rec->slot), slot);
  EXPECT_EQ(rec->manifest.total_size, data.size());
  EXPECT_TRUE(cache.is_protected(kVersion));
  auto set = cache.read_set(kVersion);
  ASSERT_TRUE(set.is_ok());
  EXPECT_EQ(*set, set_record);
  auto d = cache.slot(slot, 0);
  auto r = cache.red(slot, 0);
  ASSERT_TRUE(d.is_ok() && r.is_ok());
  EXPECT_EQ(0, memcmp((*d)->data(), data.data(), data.size()));
  EXPECT_EQ(0, memcmp((*r)->data(), red.data(), red.size()));
}

// Ranks `lost` lose their cache, and the set rebuilds them into a claimed slot or staging memory.
void rebuild_case(Redundancy scheme, int m, const std::vector<bool>& lost, bool into_slot, const std::string& test) {
  const int me = rank_of(MPI_COMM_WORLD);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  auto code = redundancy::SetCode::make(scheme, n, m);
  ASSERT_TRUE(code.is_ok());
  CacheStore cache;
  ASSERT_TRUE(cache.open(cache_dir(test), 2).is_ok());
  const std::string data = stream_of(me, static_cast<unsigned>(scheme) + (into_slot ? 100 : 0));
  std::string red;
  protect(cache, *code, data, &red);
  const std::string set_record = *cache.read_set(kVersion);
  const bool i_lost = lost[static_cast<size_t>(me)];
  if (i_lost) {  // the cache is gone (the slot keeps stale bytes: the rebuild must overwrite them)
    ASSERT_TRUE(cache.drop(kVersion).is_ok());
    auto d = cache.slot(kSlot, 0);
    ASSERT_TRUE(d.is_ok());
    memset((*d)->data(), 0x5a, data.size());
  }

  std::vector<int> members(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
  SetRebuildJob job{MPI_COMM_WORLD, me, lost_members(members, [&](int r) { return !lost[static_cast<size_t>(r)]; }),
                    kVersion, 4096, redundancy::SetExpectation{scheme, code->m(), members}};
  ASSERT_EQ(job.lost, lost);
  auto set = share_set(job, [&] { return cache.read_set(kVersion); });
  ASSERT_TRUE(everywhere(set.is_ok())) << set.status().message();
  EXPECT_EQ(set->plan.mine.total_size, data.size());

  SetBuffers buf;
  Status ready = Status::ok();
  if (!i_lost)  // mapped populated in one half of the cases, faulted in as read in the other: the same bytes
    ready = survivor_buffers(cache.slot_path(kSlot), cache.red_path(kSlot), data.size(), set->plan.redundancy_len,
                             into_slot ? Populate::yes : Populate::no, &buf);
  else if (into_slot)
    ready = set->claim_slot(cache, kSlot, &buf.data, &buf.red);
  else
    ready = staging_buffers(data.size(), set->plan.redundancy_len, &buf);
  Status st = set->exchange(ready, buf.data, buf.red, "rebuilt");
  ASSERT_TRUE(everywhere(st.is_ok())) << st.message();
  if (i_lost) {
    ASSERT_TRUE((into_slot ? set->record_rebuilt(cache, kSlot) : set->write_back(cache, kSlot, buf.data, buf.red)).is_ok());
    expect_restored(cache, kSlot, data, red, set_record);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SetRebuild, XorRebuildsIntoAClaimedSlot) { rebuild_case(Redundancy::xor_set, 1, {false, true, false, false}, true, "xor_slot"); }
TEST(SetRebuild, RsRebuildsTwoIntoStagingAndWritesBack) {
  rebuild_case(Redundancy::rs, 2, {true, false, false, true}, false, "rs_staging");
}

TEST(SetRebuild, AMissingSetRecordFailsEveryMember) {
  const int me = rank_of(MPI_COMM_WORLD);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> members(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
  SetRebuildJob job{MPI_COMM_WORLD, me, lost_members(members, [](int r) { return r != 0; }), kVersion, 4096, std::nullopt};
  EXPECT_EQ(job.first_survivor(), 1);  // rank 0 is lost
  auto set = share_set(job, [] { return Result<std::string>(Status(Code::ERR_IO, "no set record here")); });
  ASSERT_FALSE(set.is_ok());
  if (me == 1) EXPECT_EQ(set.status().code(), Code::ERR_IO);  // the reader's own error
  else EXPECT_NE(set.status().code(), Code::ERR_MPI);
}

}  // namespace
}  // namespace cairn::restore

int main(int argc, char** argv) { return cairn::test::run_mpi_tests(argc, argv); }
