// The SCR library's pure helpers: lexical paths (bindings/common), where output files wait for their
// dataset to complete, the output index (a format: round trip, exact rejection, fuzz) and the removal
// of a deleted dataset's files with the directories they leave empty.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/lexical_path.hpp"
#include "scr_output.hpp"

namespace cairn {
namespace {

TEST(LexicalPath, AbsoluteAndNormalised) {
  EXPECT_EQ(paths::absolute("a/b", "/w"), "/w/a/b");
  EXPECT_EQ(paths::absolute("./a//b/../c/", "/w"), "/w/a/c");
  EXPECT_EQ(paths::absolute("/x/./y", "/w"), "/x/y");
  EXPECT_EQ(paths::absolute("../../../z", "/w/v"), "/z");
  EXPECT_EQ(paths::absolute("", "/w"), "/w");
  EXPECT_EQ(paths::absolute("..", "/"), "/");
  EXPECT_TRUE(paths::is_under("/p/run/x", "/p/run"));
  EXPECT_TRUE(paths::is_under("/p/run", "/p/run"));
  EXPECT_FALSE(paths::is_under("/p/runner", "/p/run"));
  EXPECT_TRUE(paths::is_under("/anything", "/"));
  EXPECT_EQ(paths::base_name("/a/b.c"), "b.c");
  EXPECT_EQ(paths::dir_name("/a/b.c"), "/a");
  EXPECT_EQ(paths::dir_name("/b"), "/");
}

TEST(ScrOutput, PartialNameStaysInTheDirectory) {
  EXPECT_EQ(scr::partial_path("/p/out/step_10/rank_3.txt", 3), "/p/out/step_10/.rank_3.txt.cairn-partial.3");
}

TEST(ScrOutput, IndexPathEscapesTheName) {
  EXPECT_EQ(scr::index_path("/p", "output.20"), "/p/.scr/cairn-outputs/output.20");
  EXPECT_EQ(scr::index_path("/p", "a/b c"), "/p/.scr/cairn-outputs/a%2Fb%20c");
  EXPECT_EQ(scr::index_path("/p", ".."), "/p/.scr/cairn-outputs/%2E.");
}

TEST(ScrOutputIndex, RoundTripAndExactRejection) {
  std::vector<std::string> files = {"/p/a.txt", "/p/dir with space/b", "/p/new\nline"};
  auto bytes = scr::encode_index(files);
  EXPECT_EQ(scr::decode_index(bytes), files);
  EXPECT_EQ(scr::decode_index(scr::encode_index({})), std::vector<std::string>{});
  for (size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(scr::decode_index(bytes.substr(0, cut))) << cut;
  EXPECT_FALSE(scr::decode_index("cairn-scr-output 2\n"));
  EXPECT_FALSE(scr::decode_index(bytes + "x"));
  EXPECT_FALSE(scr::decode_index("cairn-scr-output 1\n0:\nend\n"));
  EXPECT_FALSE(scr::decode_index("cairn-scr-output 1\n01:x\nend\n"));
  EXPECT_FALSE(scr::decode_index("cairn-scr-output 1\n99999999:x\nend\n"));
}

TEST(ScrOutputIndex, FuzzedInputsNeverCrash) {
  std::mt19937_64 rng(0x1d0);
  const std::string seed = scr::encode_index({"/p/a", "/p/b/c.txt", "/q"});
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b = seed;
    if (iter % 2) {
      b.resize(rng() % 80);
      for (auto& c : b) c = char(rng());
    } else {  // mutate a valid index
      for (int ops = 1 + int(rng() % 3); ops > 0 && !b.empty(); --ops) {
        size_t at = rng() % b.size();
        switch (rng() % 4) {
          case 0: b[at] = char(rng()); break;
          case 1: b.erase(at, 1 + rng() % 4); break;
          case 2: b.insert(at, 1, "0123456789:\n"[rng() % 12]); break;
          case 3: b.resize(at); break;
        }
      }
    }
    auto r = scr::decode_index(b);
    if (!r) continue;
    ++accepted;
    ASSERT_EQ(scr::encode_index(*r), b) << "iteration " << iter;
  }
  EXPECT_GT(accepted, 0);
}

TEST(ScrOutput, RemoveFilesClimbsEmptyDirectoriesUpToThePrefix) {
  char tmpl[] = "/tmp/cairn-scr-output-XXXXXX";
  std::string root = mkdtemp(tmpl);
  ASSERT_EQ(scr::make_dirs(root + "/out/step_1"), "");
  ASSERT_EQ(scr::make_dirs(root + "/out/step_2"), "");
  for (const char* f : {"/out/step_1/a", "/out/step_2/b", "/out/step_2/keep"}) std::ofstream(root + f) << "x";
  auto errors = scr::remove_files({root + "/out/step_1/a", root + "/out/step_2/b", root + "/missing"}, root);
  EXPECT_TRUE(errors.empty());
  struct stat st;
  EXPECT_NE(stat((root + "/out/step_1").c_str(), &st), 0);  // left empty: removed
  EXPECT_EQ(stat((root + "/out/step_2/keep").c_str(), &st), 0);
  EXPECT_EQ(stat(root.c_str(), &st), 0);  // the prefix stays
  EXPECT_EQ(scr::write_file_atomic(root + "/idx/x", "bytes"), "");
  EXPECT_EQ(scr::copy_file(root + "/idx/x", root + "/copy"), "");
  std::ifstream in(root + "/copy");
  std::string text;
  in >> text;
  EXPECT_EQ(text, "bytes");
  EXPECT_NE(scr::copy_file(root + "/nope", root + "/copy2"), "");
  std::system(("rm -rf " + root).c_str());
}

}  // namespace
}  // namespace cairn
