// cairn_delete_versions and cairn_local_dir through the public C API on real MPI ranks (ctest runs it
// on 4, each its own simulated node): deleting a labelled version, making an older one the newest by
// deleting what came after it (in L1 and L3), an unknown label that deletes nothing, misuse, version
// numbers that keep growing, and the caller's directory beside the cache.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cairn/cairn.h"
#include "base/config.hpp"
#include "base/layout.hpp"
#include "l3/l3_store.hpp"
#include "mpi_test_main.hpp"
#include "scratch_job.hpp"

namespace cairn {
namespace {

using test::everywhere;

class DeleteVersions : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::start_scratch_job("deleteversions", "delete", counter_++);
    setenv("CAIRN_CACHE_VERSIONS", "4", 1);
    setenv("CAIRN_KEEP_FLUSHED", "10", 1);
    ASSERT_EQ(cairn_init(MPI_COMM_WORLD, nullptr), CAIRN_SUCCESS) << cairn_last_error();
    ASSERT_EQ(cairn_protect("x", &x_, 1, CAIRN_LONG), CAIRN_SUCCESS);
  }
  void TearDown() override {
    cairn_finalize();
    unsetenv("CAIRN_CACHE_VERSIONS");
    unsetenv("CAIRN_KEEP_FLUSHED");
    test::end_scratch_job(root_);
  }
  void take(const char* label, long value) {
    x_ = value;
    ASSERT_EQ(cairn_start_output(label, 0), CAIRN_SUCCESS) << cairn_last_error();
    ASSERT_EQ(cairn_complete_output(1), CAIRN_SUCCESS) << cairn_last_error();
    ASSERT_EQ(cairn_wait(), CAIRN_SUCCESS) << cairn_last_error();
  }
  std::string newest() {
    int avail = 0;
    char label[256] = "";
    EXPECT_EQ(cairn_have_restart(&avail, label, sizeof label), CAIRN_SUCCESS) << cairn_last_error();
    return avail ? label : "";
  }
  std::vector<std::string> l3_labels() {
    auto loaded = load_config(nullptr, process_env(), process_env_cairn_names());
    EXPECT_TRUE(loaded.is_ok());
    std::vector<std::string> out;
    for (const auto& c : l3::list_committed(make_layout(loaded->config))) out.push_back(c.label);
    return out;
  }

  static inline int counter_ = 0;
  std::string root_;
  long x_ = 0;
};

TEST_F(DeleteVersions, LabelledVersionGoesFromEveryLevel) {
  take("a", 1);
  take("b", 2);
  ASSERT_EQ(cairn_delete_versions("b", CAIRN_DELETE_LABELLED), CAIRN_SUCCESS) << cairn_last_error();
  EXPECT_TRUE(everywhere(newest() == "a"));
  EXPECT_EQ(l3_labels(), std::vector<std::string>{"a"});
  // The restart gives a's data, and a new version is numbered after b's.
  char label[256];
  ASSERT_EQ(cairn_start_restart(label, sizeof label), CAIRN_SUCCESS) << cairn_last_error();
  EXPECT_TRUE(everywhere(x_ == 1 && strcmp(label, "a") == 0));
  ASSERT_EQ(cairn_complete_restart(1), CAIRN_SUCCESS);
  take("c", 3);
  int avail = 0, version = 0;
  ASSERT_EQ(cairn_restart_available(&avail, &version), CAIRN_SUCCESS);
  EXPECT_TRUE(everywhere(avail == 1 && version == 3));
}

TEST_F(DeleteVersions, NewerVersionsGoAndTheLabelledOneIsNewest) {
  take("a", 1);
  take("b", 2);
  take("c", 3);
  take("d", 4);
  ASSERT_EQ(cairn_delete_versions("b", CAIRN_DELETE_NEWER), CAIRN_SUCCESS) << cairn_last_error();
  EXPECT_TRUE(everywhere(newest() == "b"));
  EXPECT_EQ(l3_labels(), (std::vector<std::string>{"b", "a"}));
  ASSERT_EQ(cairn_delete_versions("a", CAIRN_DELETE_LABELLED | CAIRN_DELETE_NEWER), CAIRN_SUCCESS);
  EXPECT_TRUE(everywhere(newest().empty()));
  EXPECT_TRUE(l3_labels().empty());
}

TEST_F(DeleteVersions, UnknownLabelDeletesNothing) {
  take("a", 1);
  EXPECT_EQ(cairn_delete_versions("zzz", CAIRN_DELETE_LABELLED | CAIRN_DELETE_NEWER), CAIRN_ERR_NO_CHECKPOINT);
  EXPECT_NE(strstr(cairn_last_error(), "zzz"), nullptr) << cairn_last_error();
  EXPECT_TRUE(everywhere(newest() == "a"));
}

TEST_F(DeleteVersions, MisuseIsAnError) {
  EXPECT_EQ(cairn_delete_versions(nullptr, CAIRN_DELETE_LABELLED), CAIRN_ERR_INVALID_ARG);
  EXPECT_EQ(cairn_delete_versions("a", 0), CAIRN_ERR_INVALID_ARG);
  EXPECT_EQ(cairn_delete_versions("a", 8), CAIRN_ERR_INVALID_ARG);
  ASSERT_EQ(cairn_start_output("open", 0), CAIRN_SUCCESS);
  EXPECT_EQ(cairn_delete_versions("open", CAIRN_DELETE_LABELLED), CAIRN_ERR_SEQUENCE);
  EXPECT_NE(strstr(cairn_last_error(), "cairn_complete_output"), nullptr) << cairn_last_error();
  ASSERT_EQ(cairn_complete_output(1), CAIRN_SUCCESS);
}

TEST_F(DeleteVersions, LocalDirIsBesideTheCache) {
  char dir[4096];
  ASSERT_EQ(cairn_local_dir(dir, sizeof dir), CAIRN_SUCCESS) << cairn_last_error();
  struct stat st;
  EXPECT_EQ(stat(dir, &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(std::string(dir).rfind(root_ + "/cache/", 0), 0u) << dir;
  char small[8];
  EXPECT_EQ(cairn_local_dir(small, sizeof small), CAIRN_ERR_TRUNCATED);
  EXPECT_EQ(cairn_local_dir(nullptr, 10), CAIRN_ERR_INVALID_ARG);
  // Taking versions leaves what the caller put there alone.
  std::string mine = std::string(dir) + "/mine";
  FILE* f = fopen(mine.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("kept", f);
  fclose(f);
  take("a", 1);
  take("b", 2);
  EXPECT_EQ(stat(mine.c_str(), &st), 0);
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) { return cairn::test::run_mpi_tests(argc, argv); }
