// campaign_analysis.cpp against run records and histories written line by line: the re-done work of a
// failure is counted from the restored version's copy as the struck launch took it, also when the job
// went back to an older version earlier and so numbered later versions alike, and when the history lacks
// the restored version's line; a failure that sends the job back further than the struck launch's own
// restart (to an older version, or afresh) costs what the struck state held beyond the state returned to.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/history_line.hpp"
#include "campaign.hpp"

namespace cairn::bench {
namespace {

namespace stdfs = std::filesystem;
constexpr int64_t kS = 1000000000;  // ns per second

class CampaignAnalysis : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = stdfs::temp_directory_path() / ("campaign-analysis-" + std::to_string(getpid()));
    stdfs::create_directories(dir_ / ".cairn");
  }
  void TearDown() override { stdfs::remove_all(dir_); }
  void record(const std::string& line) { append(".cairn/run-record", line); }
  void history(const std::string& line) { append(".cairn/history", line); }
  void append(const std::string& name, const std::string& line) {
    std::ofstream(dir_ / name, std::ios::app) << line;
  }
  void attempt(int n, int64_t t) { record(history::LineWriter("attempt").i64("t", t).i64("attempt", n).finish()); }
  void failure(int n, int64_t t, const char* kind) {
    record(history::LineWriter("failure").i64("t", t).i64("attempt", n).str("kind", kind).real("at_s", double(t) / kS).finish());
  }
  void start(const std::string& launch, int64_t t) { history(history::LineWriter("start").str("launch", launch).i64("t", t).finish()); }
  void version(const std::string& launch, uint64_t v, int64_t start) {
    history(history::LineWriter("l1").str("launch", launch).i64("t", start + kS / 10).u64("version", v)
                .i64("start_ns", start).real("copy_s", 0.01).finish());
  }
  void restart(const std::string& launch, uint64_t v, const char* level, int64_t start, int64_t end) {
    history(history::LineWriter("restart").str("launch", launch).i64("t", end).u64("version", v).str("level", level)
                .i64("start_ns", start).i64("end_ns", end).finish());
  }
  void end(const std::string& launch, int64_t t) { history(history::LineWriter("end").str("launch", launch).i64("t", t).finish()); }
  std::string log() {
    std::string path = (dir_ / "app.log").string();
    std::ofstream(path) << "result 0123abcd\n";
    return path;
  }
  stdfs::path dir_;
};

TEST_F(CampaignAnalysis, ReDoneWorkCountsFromTheVersionTheStruckLaunchTook) {
  // Attempt 1 takes versions 1..3 and is struck at 10 s; attempt 2 goes back to version 3 from L1 and is
  // struck at 20 s; attempt 3 goes back to version 2 (L3), so its next versions are numbered 3, 4 again.
  attempt(1, 0);
  start("a", 1 * kS);
  version("a", 1, 2 * kS), version("a", 2, 4 * kS), version("a", 3, 8 * kS);
  failure(1, 10 * kS, "rank");
  attempt(2, 11 * kS);
  start("b", 12 * kS);
  restart("b", 3, "L1", 12 * kS, 13 * kS);
  version("b", 4, 15 * kS);
  failure(2, 20 * kS, "job");
  attempt(3, 21 * kS);
  start("c", 22 * kS);
  restart("c", 2, "L3", 22 * kS, 23 * kS);
  version("c", 3, 25 * kS), version("c", 4, 27 * kS);
  end("c", 30 * kS);
  auto r = analyse_run(dir_.string(), log(), 0);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->failures.size(), 2u);
  // Version 3 of launch a: its copy ended at 8.01 s, the strike came at 10 s (not from launch c's version 3).
  EXPECT_EQ(r->failures[0].version, 3u);
  EXPECT_EQ(r->failures[0].level, "L1");
  EXPECT_NEAR(r->failures[0].redone, 1.99, 1e-6);
  EXPECT_NEAR(r->failures[0].teardown, 1.0, 1e-6);
  EXPECT_NEAR(r->failures[0].startup, 1.0, 1e-6);
  EXPECT_NEAR(r->failures[0].restart, 1.0, 1e-6);
  // Launch b never took version 2 itself: its state at the strike held launch a's version 3 (7.01 s of
  // computation) and its own 7 s since its restart; version 2 holds 3.01 s of launch a's.
  EXPECT_EQ(r->failures[1].version, 2u);
  EXPECT_NEAR(r->failures[1].redone, 7.01 + 7.0 - 3.01, 1e-6);
  EXPECT_NEAR(r->wall, 30.0, 1e-6);
}

TEST_F(CampaignAnalysis, AVersionTheHistoryLacksCountsFromTheOneBeforeIt) {
  // Struck after version 3 was whole in every cache but before rank 0 wrote its line.
  attempt(1, 0);
  start("a", 1 * kS);
  version("a", 1, 2 * kS), version("a", 2, 4 * kS);
  failure(1, 9 * kS, "rank");
  attempt(2, 10 * kS);
  start("b", 11 * kS);
  restart("b", 3, "L1", 11 * kS, 12 * kS);
  end("b", 20 * kS);
  auto r = analyse_run(dir_.string(), log(), 0);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->failures.size(), 1u);
  EXPECT_NEAR(r->failures[0].redone, 9.0 - 4.01, 1e-6);  // from version 2, not from the start at 1 s
}

TEST_F(CampaignAnalysis, StartingAfreshLosesEverythingTheStateHeld) {
  // Attempt 2 restores version 2 (3.01 s of computation) and is struck at 15 s by a failure that leaves
  // nothing (before any version reached L3): the job starts afresh and has to do again what the state
  // of attempt 2 held, its restored version's part included.
  attempt(1, 0);
  start("a", 1 * kS);
  version("a", 1, 2 * kS), version("a", 2, 4 * kS);
  failure(1, 6 * kS, "rank");
  attempt(2, 7 * kS);
  start("b", 8 * kS);
  restart("b", 2, "L1", 8 * kS, 9 * kS);
  failure(2, 15 * kS, "job");
  attempt(3, 16 * kS);
  start("c", 17 * kS);
  end("c", 30 * kS);
  auto r = analyse_run(dir_.string(), log(), 0);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->failures.size(), 2u);
  EXPECT_NEAR(r->failures[0].redone, 6.0 - 4.01, 1e-6);
  EXPECT_EQ(r->failures[1].version, 0u);
  EXPECT_EQ(r->failures[1].level, "none");
  EXPECT_NEAR(r->failures[1].redone, 3.01 + 6.0, 1e-6);
}

TEST_F(CampaignAnalysis, ALaunchStruckBeforeItsRestartReturnedIsNotAFreshStart) {
  // Attempt 2 is up at 8 s and still rebuilding version 2 when a second failure strikes it at 9 s; attempt
  // 3 restores version 1 (from L3). The first failure sent the job back to version 1, not to nothing, and
  // the second undid no computation of its own: its time was the first one's restart.
  attempt(1, 0);
  start("a", 1 * kS);
  version("a", 1, 2 * kS), version("a", 2, 4 * kS);
  failure(1, 6 * kS, "node");
  attempt(2, 7 * kS);
  start("b", 8 * kS);
  failure(2, 9 * kS, "node");
  attempt(3, 10 * kS);
  start("c", 11 * kS);
  restart("c", 1, "L3", 11 * kS, 12 * kS);
  end("c", 30 * kS);
  auto r = analyse_run(dir_.string(), log(), 0);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->failures.size(), 2u);
  EXPECT_EQ(r->failures[0].version, 1u);
  EXPECT_NEAR(r->failures[0].redone, 6.0 - 2.01, 1e-6);
  EXPECT_NEAR(r->failures[0].restart, 1.0, 1e-6) << "from attempt 2's start to the strike";
  EXPECT_TRUE(r->failures[0].cut_short);
  EXPECT_EQ(r->failures[0].level, "");
  EXPECT_EQ(r->failures[1].version, 1u);
  EXPECT_NEAR(r->failures[1].redone, 0.0, 1e-6);
  EXPECT_EQ(r->failures[1].level, "L3");
}

TEST_F(CampaignAnalysis, AStepIsTheComputationBetweenCheckpointsOverItsIterations) {
  attempt(1, 0);
  start("a", 1 * kS);
  end("a", 30 * kS);
  const std::string path = (dir_ / "steps.log").string();
  std::ofstream(path) << "synthetic: 4 ranks x 16777216 bytes, 100 iterations, checkpoint when cairn_need_checkpoint says\n"
                         "synthetic: checkpoint at iteration 10 blocked 0.010000 after -1.000000\n"
                         "synthetic: checkpoint at iteration 20 blocked 0.010000 after 0.220000\n"
                         "synthetic: checkpoint at iteration 30 blocked 0.010000 after 0.240000\n"
                         "synthetic: 4 ranks x 16777216 bytes, 100 iterations, checkpoint when cairn_need_checkpoint says\n"
                         "restart: version 2 from level L2\n"
                         "synthetic: resuming at iteration 20\n"
                         "synthetic: checkpoint at iteration 25 blocked 0.050000 after -1.000000\n"
                         "synthetic: checkpoint at iteration 35 blocked 0.010000 after 0.230000\n"
                         "synthetic: steps 0.030000 s/iteration (rank 0: the loop less cairn_checkpoint)\n"
                         "result 0123abcd\n";
  auto r = analyse_run(dir_.string(), path, 0);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->checkpoints, 5u);
  EXPECT_NEAR(r->step, (0.22 + 0.24 + 0.23) / 30, 1e-9) << "the gaps within a launch, over their iterations";
  EXPECT_NEAR(r->mean_interval, (0.22 + 0.24 + 0.23) / 3, 1e-9);
  // Without checkpoints (the failure-free run): the loop's own figure.
  std::ofstream(path) << "synthetic: steps 0.020500 s/iteration (rank 0: the loop less cairn_checkpoint)\nresult 0123abcd\n";
  r = analyse_run(dir_.string(), path, 0);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_NEAR(r->step, 0.0205, 1e-9);
}

TEST(CampaignReport, TheModelPerLevelTakesTheStepsAsSlowAsMeasured) {
  json report;
  report["campaign"] = {{"mtbf_s", 8.0}};
  report["failure_free"] = {{"wall_s", 100.0}, {"step_s", 0.020}};
  json p = {{"name", "auto"}, {"wall_s", 125.0}, {"step_s", 0.024}, {"checkpoint_time_s", 2.0},
            {"checkpoint_cost_s", 0.01}, {"mean_interval_s", 0.2}, {"flush_every", 10}, {"failures", json::array()}};
  report["policies"] = json::array({p});
  complete_report(report);
  const json& m = report["policies"][0]["model"]["multilevel"];
  EXPECT_NEAR(m["steps_slower"].get<double>(), 0.2, 1e-9);
  EXPECT_NEAR(m["fraction"].get<double>(), 1 / (1 + 0.01 / 0.2) * (0.020 / 0.024), 1e-9);
  // Of the 23 s outside checkpoints (125 - 100 - 2), the slowed steps took 123 · (1 - 0.020/0.024) = 20.5.
  EXPECT_NEAR(m["slowed_steps_points"].get<double>(), 123 * (1 - 0.020 / 0.024) / 125 * 100, 1e-9);
  EXPECT_NEAR(m["outside_model_points"].get<double>(), (23 - 123 * (1 - 0.020 / 0.024)) / 125 * 100, 1e-9);
}

}  // namespace
}  // namespace cairn::bench
