// The job state file's codec (base/state_file.hpp; docs/format.md, "The job state file"): what the
// writer writes is what the readers read, the reader's tolerance of hand edits and damage, the keys the
// tools interpret, the writer (JobState) on a real file, and the decoder's fuzzer.
#include "base/state_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "base/fsutil.hpp"
#include "base/job_state.hpp"
#include "../fuzz.hpp"

namespace cairn::state_file {
namespace {

TEST(StateFile, EncodesOneLinePerKeyInOrder) {
  EXPECT_EQ(encode({{"phase", "compute"}, {"l1", "3"}}, "written by cairn"),
            "# written by cairn\nphase=compute\nl1=3\n");
  EXPECT_EQ(encode(Values{{"phase", "compute"}, {"l1", "3"}}), "l1=3\nphase=compute\n");  // key order
  EXPECT_EQ(encode(Values{}), "");
}

TEST(StateFile, WhatCannotBeOneLineIsMadeOneOrLeftOut) {
  // Line breaks become spaces, spaces around go (a reader trims them); keys that cannot be read back
  // (empty, with '=', a comment) are not written.
  EXPECT_EQ(encode({{"message", " rank 1:\nno space\r\n"}, {" k ", "v"}, {"", "x"}, {"a=b", "x"}, {"#c", "x"}},
                   "two\nlines"),
            "# two lines\nmessage=rank 1: no space\nk=v\n");
}

TEST(StateFile, DecodesWhatItEncodes) {
  Values v{{"version", "12"}, {"phase", "flush"}, {"exit_request", "halt file: checkpoints=5 (reached)"},
           {"empty", ""}, {"with=equals", "x"}};
  Values back = decode(encode(v));
  v.erase("with=equals");  // not a key the format can hold
  EXPECT_EQ(back, v);
}

TEST(StateFile, ReadsHandEditsAndSkipsWhatIsNotALine) {
  Values v = decode("# a comment\n\n  version = 7 \t\r\nphase=compute\nno equals sign\n=no key\n"
                    "  # indented comment\nphase=flush\nvalue=a=b\nlast=no newline");
  EXPECT_EQ(v, (Values{{"version", "7"}, {"phase", "flush"}, {"value", "a=b"}, {"last", "no newline"}}));
  EXPECT_TRUE(decode("").empty());
}

TEST(StateFile, InterpretsTheKeysTheLibraryWrites) {
  State s = decode_state(
      "l1=9\nl2=8\nl3=6\nnranks=4\nphase=compute\nredundancy=xor\nrestart_level=L2\nrestart_version=5\n"
      "updated_unix_ns=1795372310959008317\nversion=10\nexit_request=migrate\n");
  EXPECT_EQ(s.version, 10u);
  EXPECT_EQ(s.l1, 9u);
  EXPECT_EQ(s.l2, 8u);
  EXPECT_EQ(s.l3, 6u);
  EXPECT_EQ(s.nranks, 4);
  EXPECT_EQ(s.phase, "compute");
  EXPECT_EQ(s.redundancy, "xor");
  EXPECT_EQ(s.restart_level, "L2");
  EXPECT_EQ(s.restart_version, 5u);
  EXPECT_EQ(s.values.at("exit_request"), "migrate");  // unknown keys are kept
  EXPECT_EQ(s.values.at("updated_unix_ns"), "1795372310959008317");

  State bad = decode_state("version=12x\nl1=-1\nnranks=99999999999\nrestart_version=\n");
  EXPECT_EQ(bad.version, 0u);  // a malformed number keeps its default
  EXPECT_EQ(bad.l1, 0u);
  EXPECT_EQ(bad.nranks, 0);
  EXPECT_EQ(bad.restart_level, "none");
}

TEST(StateFile, TheWriterWritesWhatTheReaderReads) {
  std::string dir = "/tmp/cairn-state-file-test-" + std::to_string(getpid());
  fs::remove_tree(dir).ignore();
  Layout layout;
  layout.control = dir;
  ASSERT_TRUE(fs::make_dirs(dir).is_ok());
  auto none = read_state(layout.state_file());
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  {
    JobState other;  // not rank 0: writes nothing
    other.open(layout, false);
    other.set("phase", "compute");
    EXPECT_FALSE(fs::exists(layout.state_file()));
  }
  JobState w;
  w.open(layout, true);
  w.set({{"phase", "compute"}, {"nranks", "4"}, {"redundancy", "xor"}});
  w.set("l1", "3");
  w.set("exit_request", "halt:\nend time");
  auto s = read_state(layout.state_file());
  ASSERT_TRUE(s.is_ok());
  ASSERT_TRUE(s->has_value());
  const State& st = **s;
  EXPECT_EQ(st.phase, "compute");
  EXPECT_EQ(st.nranks, 4);
  EXPECT_EQ(st.l1, 3u);
  EXPECT_EQ(st.values.at("exit_request"), "halt: end time");
  EXPECT_GT(std::stoll(st.values.at("updated_unix_ns")), 0);
  fs::remove_tree(dir).ignore();
}

// Random and mutated files: the decoder never crashes, and what it reads encodes to a file that reads
// back the same.
TEST(StateFileFuzz, RandomAndMutatedFilesNeverCrash) {
  std::mt19937_64 rng(0x57a7e);
  const std::vector<std::string> corpus = {
      encode(Values{{"l1", "9"}, {"phase", "compute"}, {"restart_level", "L2"}, {"version", "10"}}),
      "# comment\n version = 7 \r\nexit_request=halt file: checkpoints=5\n"};
  const std::vector<std::string> tokens = {"=", "\n", "#", " ", "\t", "\r", "l1", "version", "18446744073709551616", "-1"};
  int with_values = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text = iter % 2 == 0 ? fuzz::random_bytes(rng, 200) : corpus[rng() % corpus.size()];
    if (iter % 2) fuzz::mutate(text, rng, tokens);
    Values v = decode(text);
    for (const auto& [key, value] : v) {
      ASSERT_FALSE(key.empty());
      ASSERT_EQ(key.find_first_of("=\n"), std::string::npos);
      ASSERT_EQ(value.find('\n'), std::string::npos);
    }
    ASSERT_EQ(decode(encode(v)), v) << "iteration " << iter;
    State s = decode_state(text);
    ASSERT_EQ(s.values, v);
    with_values += v.empty() ? 0 : 1;
  }
  EXPECT_GT(with_values, 5000);
}

}  // namespace
}  // namespace cairn::state_file
