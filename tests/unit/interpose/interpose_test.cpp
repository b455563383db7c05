// The interposer's parts without MPI: the pattern matcher, the version index (a format: round trip,
// exact rejection, fuzz) and the virtual view of the files (bindings/interpose/vfs.hpp) driven directly,
// as the wrappers drive it: generations, copy on write, steps, unlink, rename in and out of the pattern,
// dup, ghosts, holding a step for a version and restoring one.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include "pattern.hpp"
#include "version_index.hpp"
#include "vfs.hpp"

namespace cairn::interpose {
namespace {

std::optional<Match> match(const char* pattern, const char* path, const char* cwd = "/run") {
  std::string e;
  auto p = Pattern::parse(pattern, cwd, &e);
  EXPECT_TRUE(p) << pattern << ": " << e;
  return p ? p->match(path) : std::nullopt;
}

TEST(InterposePattern, StepRankStarAndPercent) {
  auto m = match("ckpt/step%d.rank%r.bin", "/run/ckpt/step120.rank3.bin");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 120u);
  EXPECT_EQ(m->slot, "/run/ckpt/step%d.rank3.bin");
  EXPECT_FALSE(match("ckpt/step%d.rank%r.bin", "/run/ckpt/step.rank3.bin"));
  EXPECT_FALSE(match("ckpt/step%d.rank%r.bin", "/run/ckpt/stepX.rank3.bin"));
  EXPECT_FALSE(match("ckpt/step%d.rank%r.bin", "/run/ckpt/step1.rank3.bin.tmp"));
  EXPECT_FALSE(match("ckpt/step%d.rank%r.bin", "/elsewhere/ckpt/step1.rank3.bin"));
  EXPECT_EQ(match("ckpt/step%d.rank%r.bin", "/run/ckpt/step0007.rank0.bin")->step, 7u);
  EXPECT_EQ(match("ckpt/*/s%d", "/run/ckpt/a.b/s5")->step, 5u);
  EXPECT_FALSE(match("ckpt/*/s%d", "/run/ckpt/a/b/s5"));  // * stops at '/'
  EXPECT_EQ(match("c_%d_%%.dat", "/run/c_9_%.dat")->step, 9u);
  EXPECT_EQ(match("/abs/%d1", "/abs/21")->step, 2u);  // digits shared with a literal: backtracking
  EXPECT_EQ(match("./x/../ck%d", "/run/ck3")->step, 3u);  // the pattern is normalised
  EXPECT_EQ(match("a%d,b%d", "/run/b4")->step, 4u);       // alternatives
  EXPECT_FALSE(match("ck%d", "/run/ck1234567890123456789"));  // not a step: too many digits
}

TEST(InterposePattern, BadPatternsAreRefusedWithAReason) {
  for (const char* bad : {"", "ckpt/file", "a%d%d", "a%d.%r%r", "a%x%d", "a%d,", ",a%d", "a%"}) {
    std::string e;
    EXPECT_FALSE(Pattern::parse(bad, "/run", &e)) << bad;
    EXPECT_FALSE(e.empty()) << bad;
  }
}

TEST(InterposeIndex, RoundTripAndExactRejection) {
  std::vector<IndexEntry> entries = {{"f0", 40, 0644, 0, "/run/ckpt/step40.rank0.bin"},
                                     {"-", 30, 0600, 123456, "/run/ckpt/step30 with space"},
                                     {"f1", 40, 0755, 0, "/x"}};
  std::string bytes = encode_index(entries);
  EXPECT_EQ(decode_index(bytes), entries);
  EXPECT_EQ(decode_index(encode_index({})), std::vector<IndexEntry>{});
  for (size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(decode_index(bytes.substr(0, cut))) << cut;
  for (const char* bad : {"cairn-interpose 2\nend\n", "cairn-interpose 1\nF0 1 644 0 2:/a\nend\n",
                          "cairn-interpose 1\nf0 01 644 0 2:/a\nend\n", "cairn-interpose 1\nf0 1 648 0 2:/a\nend\n",
                          "cairn-interpose 1\nf0 1 644 0 2:aa\nend\n", "cairn-interpose 1\nf0 1 644 0 0:\nend\n",
                          "cairn-interpose 1\nf0 1 17777 0 2:/a\nend\n", "cairn-interpose 1\nend\nx"})
    EXPECT_FALSE(decode_index(bad)) << bad;
}

TEST(InterposeIndex, FuzzedInputsNeverCrash) {
  std::mt19937_64 rng(0x1e7);
  const std::string seed = encode_index({{"f0", 5, 0644, 0, "/a/b"}, {"-", 4, 0600, 77, "/a/c"}});
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b = seed;
    if (iter % 2) {
      b.resize(rng() % 90);
      for (auto& c : b) c = char(rng());
    } else {
      for (int ops = 1 + int(rng() % 3); ops > 0 && !b.empty(); --ops) {
        size_t at = rng() % b.size();
        switch (rng() % 4) {
          case 0: b[at] = char(rng()); break;
          case 1: b.erase(at, 1 + rng() % 4); break;
          case 2: b.insert(at, 1, "0123456789 :-/\nf"[rng() % 16]); break;
          case 3: b.resize(at); break;
        }
      }
    }
    auto r = decode_index(b);
    if (!r) continue;
    ++accepted;
    ASSERT_EQ(encode_index(*r), b) << "iteration " << iter;
  }
  EXPECT_GT(accepted, 0);
}

// The view on a scratch directory, with the application's files under <root>/run/ckpt.
class InterposeVfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cairn-vfs-XXXXXX";
    root_ = mkdtemp(tmpl);
    ASSERT_EQ(mkdir((root_ + "/scratch").c_str(), 0700), 0);
    ASSERT_EQ(mkdir((root_ + "/take").c_str(), 0700), 0);
    ASSERT_EQ(mkdir((root_ + "/run").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root_ + "/run/ckpt").c_str(), 0755), 0);
    std::string e;
    auto p = Pattern::parse("ckpt/s%d.r%r", root_ + "/run", &e);
    ASSERT_TRUE(p) << e;
    v_.start(root_ + "/scratch", *p, true, [this] { ++changes_; });
  }
  void TearDown() override {
    v_.stop();
    std::system(("rm -rf " + root_).c_str());
  }
  std::string path(const char* name) { return root_ + "/run/ckpt/" + name; }
  int write_file(const char* name, const std::string& data, int flags = O_WRONLY | O_CREAT | O_TRUNC) {
    auto fd = v_.open(path(name).c_str(), flags, 0640);
    if (!fd || *fd < 0) return -1;
    int ok = ::write(*fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    v_.before_close(*fd);
    ::close(*fd);
    return ok ? 0 : -1;
  }
  std::string read_file(const char* name) {
    auto b = v_.resolve(path(name).c_str());
    if (!b) return "<none>";
    std::ifstream in(*b, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string root_;
  Vfs v_;
  int changes_ = 0;
};

TEST_F(InterposeVfs, WritesCommitAtTheLastCloseAndStepsCount) {
  auto fd = v_.open(path("s10.r0").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
  ASSERT_TRUE(fd && *fd >= 0);
  EXPECT_EQ(v_.steps()[10].writers, 1);
  EXPECT_EQ(v_.steps()[10].committed, 0);
  ASSERT_EQ(::write(*fd, "abc", 3), 3);
  EXPECT_EQ(read_file("s10.r0"), "abc");  // reading back while it is written
  EXPECT_TRUE(v_.before_close(*fd));
  ::close(*fd);
  auto s = v_.steps()[10];
  EXPECT_EQ(s.writers, 0);
  EXPECT_EQ(s.committed, 1);
  EXPECT_EQ(s.changes, 1u);
  EXPECT_GT(changes_, 0);
  struct stat st;
  ASSERT_EQ(::stat(v_.resolve(path("s10.r0").c_str())->c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 3);
  EXPECT_EQ(st.st_mode & 0777, (0640u & ~static_cast<unsigned>(umask(umask(0)))) | 0600u);
  // Nothing reached the application's directory; a non-matching name is not ours.
  EXPECT_NE(::access(path("s10.r0").c_str(), F_OK), 0);
  EXPECT_FALSE(v_.open(path("other").c_str(), O_WRONLY | O_CREAT, 0644));
  EXPECT_FALSE(v_.resolve(path("s11.r0").c_str()));
  EXPECT_EQ(v_.names_in(root_ + "/run/ckpt"), std::vector<std::string>{"s10.r0"});
}

TEST_F(InterposeVfs, AppendingAndRewritingNeverTouchCommittedContent) {
  ASSERT_EQ(write_file("s1.r0", "head"), 0);
  std::string committed = *v_.resolve(path("s1.r0").c_str());
  ASSERT_EQ(write_file("s1.r0", "+tail", O_WRONLY | O_APPEND), 0);
  EXPECT_EQ(read_file("s1.r0"), "head+tail");
  // The append went to a new generation (a copy); the first one was replaced, never written to.
  EXPECT_NE(*v_.resolve(path("s1.r0").c_str()), committed);
  EXPECT_NE(::access(committed.c_str(), F_OK), 0);
  auto fd = v_.open(path("s1.r0").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(fd);
  EXPECT_EQ(*fd, -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(v_.steps()[1].committed, 1);
  EXPECT_EQ(v_.steps()[1].changes, 2u);
}

TEST_F(InterposeVfs, MissingDirectoryIsENOENTAsOnAFileSystem) {
  auto fd = v_.open((root_ + "/run/ckpt/nodir/../../nope/s1.r0").c_str(), O_WRONLY | O_CREAT, 0644);
  EXPECT_FALSE(fd);  // outside the pattern after normalisation
  std::string e;
  auto p = Pattern::parse("missing/s%d", root_ + "/run", &e);
  Vfs w;
  w.start(root_ + "/take", *p, false, {});
  fd = w.open((root_ + "/run/missing/s1").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_TRUE(fd);
  EXPECT_EQ(*fd, -1);
  EXPECT_EQ(errno, ENOENT);
  w.stop();
}

TEST_F(InterposeVfs, UnlinkRenameAndDup) {
  ASSERT_EQ(write_file("s2.r0", "two"), 0);
  EXPECT_EQ(*v_.rename(path("s2.r0").c_str(), path("s3.r0").c_str()), 0);
  EXPECT_EQ(read_file("s3.r0"), "two");
  EXPECT_EQ(v_.steps()[2].committed, 0);
  EXPECT_EQ(v_.steps()[3].committed, 1);
  // Out of the pattern: the content becomes a real file; into it: a real file's content comes in.
  std::string real = root_ + "/run/ckpt/plain";
  EXPECT_EQ(*v_.rename(path("s3.r0").c_str(), real.c_str()), 0);
  EXPECT_FALSE(v_.resolve(path("s3.r0").c_str()));
  EXPECT_EQ(*v_.rename(real.c_str(), path("s4.r0").c_str()), 0);
  EXPECT_EQ(read_file("s4.r0"), "two");
  EXPECT_NE(::access(real.c_str(), F_OK), 0);
  // A dup keeps the file open for writing until both are closed.
  auto fd = v_.open(path("s4.r0").c_str(), O_WRONLY | O_TRUNC, 0);
  ASSERT_TRUE(fd && *fd >= 0);
  int other = ::dup(*fd);
  v_.dup(*fd, other);
  v_.before_close(*fd);
  ::close(*fd);
  EXPECT_EQ(v_.steps()[4].writers, 1);
  ASSERT_EQ(::write(other, "x", 1), 1);
  v_.before_close(other);
  ::close(other);
  EXPECT_EQ(v_.steps()[4].writers, 0);
  EXPECT_EQ(read_file("s4.r0"), "x");
  EXPECT_EQ(*v_.unlink(path("s4.r0").c_str()), 0);
  EXPECT_FALSE(v_.resolve(path("s4.r0").c_str()));
  EXPECT_EQ(v_.steps()[4].committed, 0);
  EXPECT_FALSE(v_.unlink(path("s4.r0").c_str()));  // not ours any more: the file system answers
}

// A code that writes s<d>.r0.tmp, closes it, appends to it, and renames it to s<d>.r0.bin: all its files are
// closed twice before the step is finished. The second step is shaped after the first, so it counts as
// written only after its rename; the first one (nothing to compare with) only once it settled.
TEST_F(InterposeVfs, AStepIsWrittenWhenShapedLikeTheOneBeforeOrSettled) {
  v_.stop();
  std::string e;
  auto p = Pattern::parse("ckpt/s%d.r%r.*", root_ + "/run", &e);
  ASSERT_TRUE(p) << e;
  v_.start(root_ + "/scratch", *p, false, [] {});
  using ms = std::chrono::milliseconds;
  const ms settle(100), fresh(0), quiet(150);
  auto write_step = [&](int d, bool rename) {
    std::string tmp = "s" + std::to_string(d) + ".r0.tmp", bin = "s" + std::to_string(d) + ".r0.bin";
    ASSERT_EQ(write_file(tmp.c_str(), "head"), 0);
    ASSERT_EQ(write_file(tmp.c_str(), "+cells", O_WRONLY | O_APPEND), 0);
    if (rename) {
      ASSERT_EQ(*v_.rename(path(tmp.c_str()).c_str(), path(bin.c_str()).c_str()), 0);
    }
  };
  write_step(10, true);
  StepState first = v_.steps()[10];
  EXPECT_EQ(first.shape, 0u);
  EXPECT_EQ(first.changes, 4u);  // two commits, the rename out of .tmp and into .bin
  EXPECT_FALSE(step_written(first, 1, fresh, settle, false));
  EXPECT_TRUE(step_written(first, 1, quiet, settle, false));
  EXPECT_TRUE(step_written(first, 1, fresh, settle, true));  // finishing: nothing more will change

  // The header alone is closed and committed: not written, however it looks.
  ASSERT_EQ(write_file("s20.r0.tmp", "head"), 0);
  StepState header = v_.steps()[20];
  EXPECT_EQ(header.shape, 4u);
  EXPECT_EQ(header.committed, 1);
  EXPECT_EQ(header.writers, 0);
  EXPECT_FALSE(step_written(header, 1, fresh, settle, false));
  // Appended but not yet renamed: still not.
  ASSERT_EQ(write_file("s20.r0.tmp", "+cells", O_WRONLY | O_APPEND), 0);
  EXPECT_FALSE(step_written(v_.steps()[20], 1, fresh, settle, false));
  ASSERT_EQ(*v_.rename(path("s20.r0.tmp").c_str(), path("s20.r0.bin").c_str()), 0);
  EXPECT_TRUE(step_written(v_.steps()[20], 1, fresh, settle, false));
  // Dropping the step before the previous one changes that step, not the shape of the next.
  EXPECT_EQ(*v_.unlink(path("s10.r0.bin").c_str()), 0);
  auto fd = v_.open(path("s30.r0.tmp").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd && *fd >= 0);
  EXPECT_EQ(v_.steps()[30].shape, 4u);
  EXPECT_FALSE(step_written(v_.steps()[30], 1, quiet, settle, true));  // open for writing: never
  ASSERT_EQ(::write(*fd, "head", 4), 4);
  v_.before_close(*fd);
  ::close(*fd);
  ASSERT_EQ(write_file("s30.r0.tmp", "+cells", O_WRONLY | O_APPEND), 0);
  ASSERT_EQ(*v_.rename(path("s30.r0.tmp").c_str(), path("s30.r0.bin").c_str()), 0);
  EXPECT_TRUE(step_written(v_.steps()[30], 1, fresh, settle, false));
  // A step written differently (no rename) waits for the settle time only.
  write_step(40, false);
  EXPECT_FALSE(step_written(v_.steps()[40], 1, fresh, settle, false));
  EXPECT_TRUE(step_written(v_.steps()[40], 1, quiet, settle, false));
  // Too few files committed: never, even finishing.
  EXPECT_FALSE(step_written(v_.steps()[40], 2, quiet, settle, true));
}

// The first step is passed over for the second (both ready at once, or the first not settled yet): the
// first step's files are still the code's, which keeps two steps, to read or to remove.
TEST_F(InterposeVfs, AStepPassedOverIsNotPruned) {
  ASSERT_EQ(write_file("s10.r0", "ten"), 0);
  ASSERT_EQ(write_file("s20.r0", "twenty"), 0);
  v_.after_take(20, 2);
  EXPECT_EQ(read_file("s10.r0"), "ten");
  ASSERT_EQ(write_file("s30.r0", "thirty"), 0);
  EXPECT_EQ(*v_.unlink(path("s10.r0").c_str()), 0);
  v_.after_take(30, 2);
  EXPECT_EQ(read_file("s20.r0"), "twenty");
  ASSERT_EQ(write_file("s40.r0", "forty"), 0);
  v_.after_take(40, 2);  // the code has not removed step 20 yet: keep 30 and 40
  EXPECT_FALSE(v_.resolve(path("s20.r0").c_str()));
  EXPECT_EQ(read_file("s30.r0"), "thirty");
  // The code removing step 20 just after the drop succeeds, once; then the path is not ours.
  auto rc = v_.unlink(path("s20.r0").c_str());
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 0);
  EXPECT_FALSE(v_.unlink(path("s20.r0").c_str()));
  // A dropped path written again is an ordinary file of ours.
  ASSERT_EQ(write_file("s30.r0", "again"), 0);
  ASSERT_EQ(write_file("s50.r0", "fifty"), 0);
  v_.after_take(50, 2);  // keep 40 and 50: step 30 dropped
  ASSERT_EQ(write_file("s30.r0", "rewritten"), 0);
  EXPECT_EQ(read_file("s30.r0"), "rewritten");
  EXPECT_EQ(*v_.unlink(path("s30.r0").c_str()), 0);
  EXPECT_FALSE(v_.unlink(path("s30.r0").c_str()));
}

// A version taken late: the code wrote step 30 and removed step 10 before step 20 was held. The version of
// step 20 still lists step 10's file (a ghost), as the code had it when it had written step 20, so that a
// restart from it leaves the code's later removal of step 10 to succeed.
TEST_F(InterposeVfs, ALateHoldListsTheFilesTheCodeRemovedSince) {
  ASSERT_EQ(write_file("s10.r0", "ten"), 0);
  v_.after_take(10, 2);
  ASSERT_EQ(write_file("s20.r0", "twenty"), 0);
  ASSERT_EQ(write_file("s30.r0", "thirty"), 0);
  EXPECT_EQ(*v_.unlink(path("s10.r0").c_str()), 0);
  auto held = v_.hold_step(20, root_ + "/take");
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].path, path("s20.r0"));
  EXPECT_FALSE(held[0].link.empty());
  EXPECT_EQ(held[1].path, path("s10.r0"));
  EXPECT_TRUE(held[1].link.empty());
  EXPECT_EQ(held[1].size, 3u);
  v_.after_take(20, 2);
  // Step 30's version lists step 10 too (removed after step 30 was written: the rank cannot tell a removal
  // of step 30's own routine from one of the next step's) and step 20, removed once step 40 was written.
  ASSERT_EQ(write_file("s40.r0", "forty"), 0);
  EXPECT_EQ(*v_.unlink(path("s20.r0").c_str()), 0);
  held = v_.hold_step(30, root_ + "/take");
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0].path, path("s30.r0"));
  std::set<std::string> ghosts{held[1].path, held[2].path};
  EXPECT_EQ(ghosts, (std::set<std::string>{path("s10.r0"), path("s20.r0")}));
  v_.after_take(30, 2);
  // A code that removes its old step before it writes the new one: step 40's removal of step 20 above came
  // after step 40 was written; here step 50's removal of step 30 comes before step 50 is begun, and step
  // 40's version, held after that, lists step 30.
  EXPECT_EQ(*v_.unlink(path("s30.r0").c_str()), 0);
  ASSERT_EQ(write_file("s50.r0", "fifty"), 0);
  held = v_.hold_step(40, root_ + "/take");
  std::set<std::string> paths;
  for (const auto& h : held) paths.insert(h.path);
  EXPECT_TRUE(paths.count(path("s30.r0"))) << "step 30, removed after step 40 was written, is not listed";
  // Taken: the next hold lists only what is there (step 40 is the newest older step with content).
  v_.after_take(40, 2);
  ASSERT_EQ(write_file("s60.r0", "sixty"), 0);
  held = v_.hold_step(60, root_ + "/take");
  paths.clear();
  for (const auto& h : held) paths.insert(h.path);
  EXPECT_EQ(paths, (std::set<std::string>{path("s60.r0"), path("s50.r0"), path("s40.r0")}));
  // The version of step 20 restored in a new view: the code's removal of step 10 at step 30 succeeds.
  Vfs again;
  std::string e;
  auto p = Pattern::parse("ckpt/s%d.r%r", root_ + "/run", &e);
  ASSERT_TRUE(p) << e;
  ASSERT_EQ(mkdir((root_ + "/scratch2").c_str(), 0700), 0);
  again.start(root_ + "/scratch2", *p, false, [] {});
  std::ofstream(root_ + "/take/src20") << "twenty";
  ASSERT_EQ(again.restore(path("s20.r0"), 20, 0644, root_ + "/take/src20"), 0);
  ASSERT_EQ(again.restore(path("s10.r0"), 10, 0644, "", 3), 0);
  auto rc = again.unlink(path("s10.r0").c_str());
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 0);
  again.stop();
}

TEST_F(InterposeVfs, HoldRestoreGhostsAndPruning) {
  ASSERT_EQ(write_file("s10.r0", "ten"), 0);
  v_.after_take(10, 2);
  ASSERT_EQ(write_file("s20.r0", "twenty"), 0);
  auto held = v_.hold_step(20, root_ + "/take");
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].path, path("s20.r0"));
  EXPECT_FALSE(held[0].link.empty());
  EXPECT_TRUE(held[1].link.empty());  // step 10's file: listed as a ghost with its size
  EXPECT_EQ(held[1].size, 3u);
  // The held link keeps the content even when the application rewrites the file.
  ASSERT_EQ(write_file("s20.r0", "changed"), 0);
  std::ifstream in(held[0].link);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "twenty");
  v_.after_take(20, 2);
  ASSERT_EQ(write_file("s30.r0", "thirty"), 0);
  v_.after_take(30, 2);  // keep 20 and 30: step 10 goes
  EXPECT_FALSE(v_.resolve(path("s10.r0").c_str()));
  EXPECT_EQ(read_file("s20.r0"), "changed");
  // A restored ghost exists with its size but cannot be read.
  ASSERT_EQ(v_.restore(path("s5.r0"), 5, 0600, "", 4096), 0);
  struct stat st;
  ASSERT_EQ(::stat(v_.resolve(path("s5.r0").c_str())->c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4096);
  auto fd = v_.open(path("s5.r0").c_str(), O_RDONLY, 0);
  ASSERT_TRUE(fd);
  EXPECT_EQ(*fd, -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(write_file("s5.r0", "new"), 0);  // rewriting it whole is fine
  EXPECT_EQ(read_file("s5.r0"), "new");
  // A restored file with content.
  std::ofstream(root_ + "/take/src") << "restored";
  ASSERT_EQ(v_.restore(path("s40.r0"), 40, 0644, root_ + "/take/src"), 0);
  EXPECT_EQ(read_file("s40.r0"), "restored");
}

}  // namespace
}  // namespace cairn::interpose
