// The file API without a second copy, on real MPI ranks (ctest runs it on 4, each its own simulated
// node): a routed file is written where it is the version's L1 copy and stays there; the slot holds only
// the memory regions; a restart from L1 routes to the files in place after verifying them where they lie;
// a damaged file is caught; one rank's cache lost is rebuilt at L2, files included.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/fsutil.hpp"
#include "cache/cache_store.hpp"
#include "cairn/cairn.h"
#include "core/runtime.hpp"
#include "mpi_test_main.hpp"
#include "scratch_job.hpp"
#include "../damage.hpp"

namespace cairn {
namespace {

int g_rank = 0, g_size = 1;
using test::everywhere;

std::string file_contents(int v, size_t len) {
  std::mt19937_64 rng(static_cast<uint64_t>(g_rank) * 7919 + static_cast<uint64_t>(v));
  std::string s(len, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class FileApi : public ::testing::Test {
 protected:
  static constexpr size_t kFile = 300007;  // not a page multiple: the stream has a gap after it

  void SetUp() override {
    root_ = test::start_scratch_job("fileapi", "files", counter_++);
    setenv("CAIRN_REDUNDANCY", "xor", 1);
    setenv("CAIRN_FLUSH_EVERY", "2", 1);  // version 2 in L3, version 3 not
    counter_value_ = 0;
  }
  void TearDown() override {
    if (Runtime::instance()) Runtime::destroy().ignore();
    test::end_scratch_job(root_);
  }

  void start() {
    ASSERT_TRUE(Runtime::create(MPI_COMM_WORLD, nullptr).is_ok());
    ASSERT_TRUE(Runtime::instance()->protect("step", &counter_value_, 1, CAIRN_LONG).is_ok());
  }

  // Versions 1..n: a memory region (the step) and two routed files of different sizes.
  void write_versions(int n) {
    start();
    for (int v = 1; v <= n; ++v) {
      counter_value_ = v;
      Runtime& rt = *Runtime::instance();
      ASSERT_TRUE(rt.start_output(("step." + std::to_string(v)).c_str(), 0).is_ok());
      for (const char* name : {"big.dat", "small.dat"}) {
        char path[4096];
        ASSERT_TRUE(rt.route_file(name, path, sizeof path).is_ok());
        EXPECT_NE(std::string(path).find("/v" + std::to_string(v) + ".files/"), std::string::npos) << path;
        std::ofstream out(path, std::ios::binary);
        out << file_contents(v, name[0] == 'b' ? kFile : 17);
        last_paths_[name] = path;
      }
      ASSERT_TRUE(rt.complete_output(1).is_ok());
      // No second copy: the routed file is the version's L1 copy, where the application wrote it.
      for (const auto& [name, path] : last_paths_) EXPECT_TRUE(fs::exists(path)) << path;
      ASSERT_TRUE(rt.wait_all().is_ok());
    }
    ASSERT_TRUE(Runtime::destroy().is_ok());
    counter_value_ = 0;
  }

  std::string rank_dir(int rank) const {
    return root_ + "/cache/cairn-files/node" + std::to_string(rank) + "/r" + std::to_string(rank);
  }

  // Restart through the file API on every rank; the version and level it came from, and whether the
  // routed files read back as written.
  void expect_restart(int level, int v) {
    Runtime& rt = *Runtime::instance();
    int avail = 0;
    char label[256] = {0};
    ASSERT_TRUE(everywhere(rt.have_restart(&avail, label, sizeof label).is_ok() && avail == 1));
    Status st = rt.start_restart(label, sizeof label);
    ASSERT_TRUE(everywhere(st.is_ok())) << st.message();
    int got_v = 0, got_level = 0;
    rt.restart_level(&got_v, &got_level);
    EXPECT_EQ(got_v, v);
    EXPECT_EQ(got_level, level);
    EXPECT_EQ(counter_value_, v);
    EXPECT_EQ(std::string(label), "step." + std::to_string(v));
    bool same = true;
    for (const char* name : {"big.dat", "small.dat"}) {
      char path[4096];
      ASSERT_TRUE(rt.route_file(name, path, sizeof path).is_ok());
      std::ifstream in(path, std::ios::binary);
      std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      same = same && back == file_contents(v, name[0] == 'b' ? kFile : 17);
    }
    EXPECT_TRUE(everywhere(same));
    ASSERT_TRUE(everywhere(rt.complete_restart(1).is_ok()));
  }

  std::string root_;
  long counter_value_ = 0;
  std::map<std::string, std::string> last_paths_;
  static int counter_;
};
int FileApi::counter_ = 0;

TEST_F(FileApi, TheSlotHoldsOnlyMemoryAndARestartFromL1ReadsTheFilesInPlace) {
  write_versions(3);
  // The slot of version 3 holds the step, not the files' bytes.
  CacheStore cs;
  ASSERT_TRUE(cs.open(rank_dir(g_rank), 2).is_ok());
  auto rec = cs.read_record(3);
  ASSERT_TRUE(rec.is_ok()) << rec.status().message();
  struct stat sb;
  ASSERT_EQ(stat(cs.slot_path(static_cast<int>(rec->slot)).c_str(), &sb), 0);
  EXPECT_LT(static_cast<uint64_t>(sb.st_size), kFile) << "the files were copied into the slot";
  start();
  expect_restart(CAIRN_LEVEL_L1, 3);
  // In place: the restart routes to the version's own copy in the cache.
  char path[4096];
  ASSERT_TRUE(Runtime::instance()->route_file("big.dat", path, sizeof path).is_ok());
  EXPECT_EQ(std::string(path), cs.files_dir(3) + "/big.dat");
}

TEST_F(FileApi, ADamagedFileIsCaughtAndAnOlderVersionRestored) {
  write_versions(3);
  if (g_rank == 1) test::flip_byte(rank_dir(1) + "/v3.files/big.dat", 12345, 0x20);
  // Version 3 fails on rank 1 at L1 and is rebuilt from L2 (xor over the 4 ranks), files included.
  start();
  expect_restart(CAIRN_LEVEL_L2, 3);
}

TEST_F(FileApi, ALostCacheIsRebuiltAtL2FilesIncluded) {
  write_versions(3);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 2) {
    ASSERT_TRUE(fs::remove_tree(root_ + "/cache/cairn-files/node2").is_ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  start();
  expect_restart(CAIRN_LEVEL_L2, 3);
  // The lost rank has its version back in its cache: files where a later restart from L1 finds them.
  EXPECT_TRUE(everywhere(fs::exists(rank_dir(g_rank) + "/v3.files/big.dat")));
  ASSERT_TRUE(Runtime::destroy().is_ok());
  start();
  expect_restart(CAIRN_LEVEL_L1, 3);
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  return cairn::test::run_mpi_tests(argc, argv, [](int rank, int size) { cairn::g_rank = rank, cairn::g_size = size; });
}
