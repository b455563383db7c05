// The job's events in the state file (pipeline/job_events.hpp; docs/format.md, "The job state file"): an
// unrecoverable restart's phase, which stops `cairn run` from relaunching, and its end when the
// application goes on regardless; what start_over leaves; and that only rank 0 writes.
#include "pipeline/job_events.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/fsutil.hpp"
#include "base/state_file.hpp"

namespace cairn::pipeline {
namespace {

class JobEventsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/cairn-job-events-test-" + std::to_string(getpid());
    fs::remove_tree(dir_).ignore();
    ASSERT_TRUE(fs::make_dirs(dir_).is_ok());
    layout_.control = dir_;
  }
  void TearDown() override { fs::remove_tree(dir_).ignore(); }
  state_file::State read() {
    auto s = state_file::read_state(layout_.state_file());
    EXPECT_TRUE(s.is_ok() && s->has_value());
    return s.is_ok() && s->has_value() ? **s : state_file::State{};
  }
  std::string dir_;
  Layout layout_;
};

TEST_F(JobEventsFile, UnrecoverableUntilTheApplicationSealsANewVersion) {
  JobState state;
  state.open(layout_, true);
  JobEvents events(&state, 0, "/prefix");
  events.computing(4, "xor", 9, "/cache");
  EXPECT_EQ(read().phase, "compute");
  events.unrecoverable("checkpoints exist but none can be rebuilt and verified; version 9: ...");
  state_file::State s = read();
  EXPECT_EQ(s.phase, "unrecoverable");
  EXPECT_EQ(s.values["unrecoverable"], "checkpoints exist but none can be rebuilt and verified; version 9: ...");
  // An application that starts over by itself and checkpoints: a relaunch would restart from that.
  Version v;
  v.number = 10;
  events.sealed(v);
  s = read();
  EXPECT_EQ(s.phase, "compute");
  EXPECT_EQ(s.version, 10u);
  v.number = 11;
  events.sealed(v);
  EXPECT_EQ(read().version, 11u);
  events.finalized("ok", 2, false);
  EXPECT_EQ(read().phase, "finalized");
}

TEST_F(JobEventsFile, StartedOverKeepsComputing) {
  JobState state;
  state.open(layout_, true);
  JobEvents events(&state, 0, "/prefix");
  events.computing(4, "xor", 9, "/cache");
  events.started_over("versions 1-9 passed over (/prefix/.cairn/index): checkpoints exist but ...");
  state_file::State s = read();
  EXPECT_EQ(s.phase, "compute");
  EXPECT_EQ(s.values["started_over"], "versions 1-9 passed over (/prefix/.cairn/index): checkpoints exist but ...");
}

TEST_F(JobEventsFile, OnlyRankZeroWrites) {
  JobState state;
  state.open(layout_, false);
  JobEvents events(&state, 1, "/prefix");
  events.unrecoverable("why");
  EXPECT_FALSE(fs::exists(layout_.state_file()));
}

}  // namespace
}  // namespace cairn::pipeline
