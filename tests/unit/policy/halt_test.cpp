// The halt file (parsing, formatting, every condition's decision, the watcher), the times `cairn halt`
// accepts, the job's end time from Slurm, and the exit_signal knob.
#include "policy/halt.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "base/config.hpp"
#include "../fuzz.hpp"
#include "policy/exit_policy.hpp"

namespace cairn::policy {
namespace {

constexpr int64_t k2026_11_22_1800Z = 1795370400;  // 2026-11-22T18:00:00Z

// Runs the test body in UTC, so that local times are predictable.
class InUtc : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tz = getenv("TZ");
    had_tz_ = tz != nullptr;
    if (had_tz_) old_tz_ = tz;
    setenv("TZ", "UTC", 1);
    tzset();
  }
  void TearDown() override {
    if (had_tz_) setenv("TZ", old_tz_.c_str(), 1);
    else unsetenv("TZ");
    tzset();
  }
  bool had_tz_ = false;
  std::string old_tz_;
};

bool has_warning(const ParsedHalt& p, const std::string& part) {
  for (const auto& w : p.warnings)
    if (w.find(part) != std::string::npos) return true;
  return false;
}

// ---- parsing ------------------------------------------------------------------------------------

TEST(HaltParse, EmptyFileIsAPlainHalt) {
  for (const char* text : {"", "\n\n", "# only a comment\n", "   \n\t\n"}) {
    ParsedHalt p = parse_halt_file(text);
    EXPECT_TRUE(p.conditions.plain()) << text;
    EXPECT_TRUE(p.warnings.empty()) << text;
  }
}

TEST(HaltParse, EveryKey) {
  ParsedHalt p = parse_halt_file(
      "# cairn halt file\n"
      "checkpoints=2\n"
      "checkpoints_from = 17\n"
      "  before=1795456800  \r\n"
      "after=1795370400\n"
      "seconds=300\n"
      "immediate=1\n");
  EXPECT_TRUE(p.warnings.empty());
  const HaltConditions& c = p.conditions;
  EXPECT_EQ(c.checkpoints, 2);
  EXPECT_EQ(c.checkpoints_from, 17u);
  EXPECT_EQ(c.before, 1795456800);
  EXPECT_EQ(c.after, 1795370400);
  EXPECT_EQ(c.seconds, 300);
  EXPECT_TRUE(c.immediate);
  EXPECT_FALSE(c.plain());
  EXPECT_FALSE(parse_halt_file("immediate=0\n").conditions.immediate);
  EXPECT_EQ(parse_halt_file("Checkpoints=3").conditions.checkpoints, 3) << "keys ignore case; no final newline";
}

TEST(HaltParse, BadValuesAreSkippedWithAWarning) {
  for (const char* line : {"checkpoints=0", "checkpoints=-1", "checkpoints=two", "checkpoints=", "before=soon",
                           "after=-5", "seconds=1.5", "immediate=yes", "immediate=2", "checkpoints_from=x"}) {
    ParsedHalt p = parse_halt_file(std::string(line) + "\n");
    EXPECT_TRUE(p.conditions.plain()) << line;
    ASSERT_EQ(p.warnings.size(), 1u) << line;
    EXPECT_TRUE(has_warning(p, "line 1: ")) << p.warnings[0];
    EXPECT_TRUE(has_warning(p, "line ignored")) << p.warnings[0];
  }
  ParsedHalt mixed = parse_halt_file("checkpoints=x\nbefore=100\n");
  EXPECT_EQ(mixed.conditions.before, 100) << "the good lines still count";
  EXPECT_FALSE(mixed.conditions.checkpoints);
}

TEST(HaltParse, UnknownKeysAndTyposAreNamed) {
  ParsedHalt p = parse_halt_file("checkpoint=2\nflavour=vanilla\n");
  EXPECT_TRUE(p.conditions.plain());
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_EQ(p.warnings[0], "line 1: unknown key 'checkpoint' (did you mean 'checkpoints'?); line ignored");
  EXPECT_EQ(p.warnings[1], "line 2: unknown key 'flavour'; line ignored");
}

TEST(HaltParse, RepeatedKeyLastWins) {
  ParsedHalt p = parse_halt_file("seconds=10\nseconds=20\n");
  EXPECT_EQ(p.conditions.seconds, 20);
  EXPECT_TRUE(has_warning(p, "line 2: seconds is set again"));
}

TEST(HaltParse, CheckpointsFromAloneIsIgnored) {
  ParsedHalt p = parse_halt_file("checkpoints_from=4\n");
  EXPECT_TRUE(p.conditions.plain());
  EXPECT_FALSE(p.conditions.checkpoints_from);
  EXPECT_TRUE(has_warning(p, "checkpoints_from without checkpoints"));
}

TEST(HaltParse, GarbageIsAWarningNotACrash) {
  ParsedHalt words = parse_halt_file("please stop the job\n=\n==1\nbefore\n");
  EXPECT_TRUE(words.conditions.plain());
  EXPECT_EQ(words.warnings.size(), 4u);

  std::string binary = "checkpoints=2\n";
  for (int i = 0; i < 300; ++i) binary += static_cast<char>((i * 37) & 0xff);
  ParsedHalt b = parse_halt_file(binary);
  EXPECT_TRUE(b.conditions.plain()) << "binary content: no condition is trusted";
  EXPECT_TRUE(has_warning(b, "binary data"));

  ParsedHalt huge = parse_halt_file(std::string(100000, 'x'));
  EXPECT_TRUE(huge.conditions.plain());
  EXPECT_TRUE(has_warning(huge, "not a halt file of a few lines"));

  std::string long_line = "k" + std::string(5000, '\xff') + "=1";
  ParsedHalt l = parse_halt_file(long_line);
  ASSERT_EQ(l.warnings.size(), 1u);
  EXPECT_LT(l.warnings[0].size(), 200u) << "warnings quote a short, printable excerpt";
}

TEST(HaltParse, FormatRoundTrips) {
  HaltConditions c;
  EXPECT_EQ(parse_halt_file(format_halt_file(c)).conditions, c);
  EXPECT_TRUE(parse_halt_file(format_halt_file(c)).warnings.empty());
  c.checkpoints = 3;
  c.checkpoints_from = 41;
  c.before = 1795456800;
  c.after = 1795370400;
  c.seconds = 600;
  c.immediate = true;
  ParsedHalt p = parse_halt_file(format_halt_file(c));
  EXPECT_EQ(p.conditions, c);
  EXPECT_TRUE(p.warnings.empty());
  HaltConditions only_after;
  only_after.after = 5;
  EXPECT_EQ(parse_halt_file(format_halt_file(only_after)).conditions, only_after);
}

// Random and mutated halt files (docs/halt.md): the parser never crashes, and the conditions it takes
// written back by `cairn halt`'s formatter read back the same, without a warning.
TEST(HaltParseFuzz, RandomAndMutatedFilesNeverCrash) {
  std::mt19937_64 rng(0x4a17);
  HaltConditions all;
  all.checkpoints = 3;
  all.checkpoints_from = 41;
  all.before = 1795456800;
  all.after = 1795370400;
  all.seconds = 600;
  const std::vector<std::string> corpus = {format_halt_file(all), "# by hand\nseconds = 300\nimmediate=true\n", ""};
  const std::vector<std::string> tokens = {"=", "\n", "#", " ", "checkpoints", "checkpoints_from", "before", "after",
                                           "seconds", "immediate", "true", "-1", "9223372036854775808", "+1h",
                                           "2026-11-22T18:00:00Z", "\xff"};
  int with_conditions = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    std::string text = iter % 2 == 0 ? fuzz::random_bytes(rng, 200) : corpus[rng() % corpus.size()];
    if (iter % 2) fuzz::mutate(text, rng, tokens);
    ParsedHalt p = parse_halt_file(text);
    ParsedHalt again = parse_halt_file(format_halt_file(p.conditions));
    ASSERT_EQ(again.conditions, p.conditions) << "iteration " << iter;
    ASSERT_TRUE(again.warnings.empty()) << "iteration " << iter << ": " << again.warnings.front();
    with_conditions += p.conditions.plain() ? 0 : 1;
  }
  EXPECT_GT(with_conditions, 1000);
}

// ---- decisions ----------------------------------------------------------------------------------

HaltContext at(double now) {
  HaltContext ctx;
  ctx.now = now;
  return ctx;
}

TEST(HaltDecision, PlainHaltCheckpointsThenExits) {
  EXPECT_EQ(evaluate_halt({}, at(0)).action, HaltAction::checkpoint_then_exit);
}

TEST(HaltDecision, ImmediateExitsWithoutCheckpoint) {
  HaltConditions c;
  c.immediate = true;
  c.before = 1u << 30;  // far away: immediate still wins
  HaltVerdict v = evaluate_halt(c, at(10));
  EXPECT_EQ(v.action, HaltAction::exit_now);
  EXPECT_NE(v.reason.find("immediate"), std::string::npos);
}

TEST(HaltDecision, CheckpointsCountFromTheVersionWhenSet) {
  HaltConditions c;
  c.checkpoints = 2;
  c.checkpoints_from = 17;
  HaltContext ctx = at(0);
  for (uint64_t newest : {17u, 18u}) {
    ctx.newest_version = newest;
    EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none) << newest;
  }
  for (uint64_t newest : {19u, 25u}) {
    ctx.newest_version = newest;
    EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::exit_now) << newest;
  }
  c.checkpoints_from.reset();  // from 0
  ctx.newest_version = 1;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none);
  ctx.newest_version = 2;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::exit_now);
}

TEST(HaltDecision, BeforeLeavesHaltSecondsToSpare) {
  HaltConditions c;
  c.before = 1000;
  HaltContext ctx = at(899.9);
  ctx.halt_seconds = 100;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none);
  ctx.now = 900;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::checkpoint_then_exit);
  ctx.now = 5000;  // past it: still checkpoint first
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::checkpoint_then_exit);
  c.seconds = 50;  // the file's seconds replace halt_seconds
  ctx.now = 949;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none);
  ctx.now = 950;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::checkpoint_then_exit);
}

TEST(HaltDecision, AfterWaitsForACheckpointTakenAfterIt) {
  HaltConditions c;
  c.after = 1000;
  HaltContext ctx = at(2000);
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none) << "no checkpoint yet in this run";
  ctx.last_checkpoint_end = 999.5;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none) << "that checkpoint came before";
  ctx.last_checkpoint_end = 1000;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::exit_now);
}

TEST(HaltDecision, SecondsNeedsAnEndTime) {
  HaltConditions c;
  c.seconds = 300;
  HaltContext ctx = at(1e9);
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none) << "end time unknown";
  ctx.end_time = 2000;
  ctx.now = 1699;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::none);
  ctx.now = 1700;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::checkpoint_then_exit);
}

TEST(HaltDecision, ExitNowWinsOverCheckpointFirst) {
  HaltConditions c;
  c.before = 10;
  c.checkpoints = 1;
  c.checkpoints_from = 4;
  HaltContext ctx = at(100);
  ctx.newest_version = 4;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::checkpoint_then_exit);
  ctx.newest_version = 5;
  EXPECT_EQ(evaluate_halt(c, ctx).action, HaltAction::exit_now);
}

TEST(HaltDecision, ExitNowMeansNoCheckpoint) {
  Observation o;
  o.halt_exit_now = true;
  o.interval_due = true;
  Decision d = decide(o, /*checkpoint_since_request=*/false);
  EXPECT_FALSE(d.need_checkpoint);
  EXPECT_TRUE(d.should_exit);
  EXPECT_EQ(describe(o), "the halt file, the checkpoint interval");
}

// ---- the watcher --------------------------------------------------------------------------------

class HaltWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "cairn_halt_test_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/halt";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Atomically, as `cairn halt` does.
  void write(const std::string& text) {
    std::ofstream(path_ + ".tmp") << text;
    std::filesystem::rename(path_ + ".tmp", path_);
  }
  static double wall_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  HaltAction observe(double now, uint64_t newest = 0) {
    HaltContext ctx = at(now);
    ctx.newest_version = newest;
    messages_.clear();
    return watcher_.observe(path_, ctx, &messages_).action;
  }
  std::string dir_, path_;
  HaltWatcher watcher_;
  std::vector<std::string> messages_;
};

TEST_F(HaltWatcherTest, FollowsTheFile) {
  double now = wall_now();
  EXPECT_EQ(observe(now), HaltAction::none);
  EXPECT_TRUE(messages_.empty());
  write("before=100\n");
  EXPECT_EQ(observe(now), HaltAction::checkpoint_then_exit);
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_NE(messages_[0].find("before=100"), std::string::npos) << messages_[0];
  EXPECT_EQ(observe(now), HaltAction::checkpoint_then_exit);
  EXPECT_TRUE(messages_.empty()) << "said once";
  write("immediate=1\n");
  EXPECT_EQ(observe(now), HaltAction::exit_now);
  std::filesystem::remove(path_);
  EXPECT_EQ(observe(now), HaltAction::none);
}

TEST_F(HaltWatcherTest, AnEmptyFileCountsOnceSettled) {
  double now = wall_now();
  std::ofstream(path_).close();
  EXPECT_EQ(observe(now), HaltAction::none) << "just created: perhaps being written";
  EXPECT_EQ(observe(now + 0.6), HaltAction::checkpoint_then_exit);

  HaltWatcher fresh;  // a file that has been there a while counts at once
  std::filesystem::last_write_time(path_, std::filesystem::file_time_type::clock::now() - std::chrono::seconds(5));
  std::vector<std::string> m;
  EXPECT_EQ(fresh.observe(path_, at(wall_now()), &m).action, HaltAction::checkpoint_then_exit);
}

TEST_F(HaltWatcherTest, HandWrittenCheckpointsCountFromWhenRead) {
  double now = wall_now();
  write("checkpoints=2\n");
  EXPECT_EQ(observe(now, 30), HaltAction::none);
  EXPECT_EQ(observe(now, 31), HaltAction::none);
  EXPECT_EQ(observe(now, 32), HaltAction::exit_now);
}

TEST_F(HaltWatcherTest, GarbageWarnsOnceAndHalts) {
  double now = wall_now();
  write("stop, please\n");
  EXPECT_EQ(observe(now), HaltAction::checkpoint_then_exit);
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_NE(messages_[0].find("line 1: 'stop, please' is not key=value"), std::string::npos) << messages_[0];
  EXPECT_EQ(observe(now), HaltAction::checkpoint_then_exit);
  EXPECT_TRUE(messages_.empty()) << "the file is not read again until it changes";
}

// ---- times --------------------------------------------------------------------------------------

using HaltTime = InUtc;

TEST_F(HaltTime, TimeSpecs) {
  EXPECT_EQ(*parse_time_spec("1795456800", 0), 1795456800);
  EXPECT_EQ(*parse_time_spec(" +2h ", 1000), 1000 + 7200);
  EXPECT_EQ(*parse_time_spec("+30m", 1000), 1000 + 1800);
  EXPECT_EQ(*parse_time_spec("+1h30m", 0), 5400);
  EXPECT_EQ(*parse_time_spec("+90s", 0), 90);
  EXPECT_EQ(*parse_time_spec("+1d", 0), 86400);
  EXPECT_EQ(*parse_time_spec("+45", 0), 45);
  EXPECT_EQ(*parse_time_spec("2026-11-22T18:00Z", 0), k2026_11_22_1800Z);
  EXPECT_EQ(*parse_time_spec("2026-11-22T18:00:00+01:00", 0), k2026_11_22_1800Z - 3600);
  EXPECT_EQ(*parse_time_spec("2026-11-22T18:00:00-0230", 0), k2026_11_22_1800Z + 9000);
  EXPECT_EQ(*parse_time_spec("2026-11-22T18:00", 0), k2026_11_22_1800Z) << "local time (UTC here)";
  EXPECT_EQ(*parse_time_spec("2026-11-22 18:00:30", 0), k2026_11_22_1800Z + 30);
  EXPECT_EQ(*parse_time_spec("2026-11-22", 0), k2026_11_22_1800Z - 18 * 3600);
  for (const char* bad : {"", "tomorrow", "+", "+5x", "+1h30", "-5", "2026-02-30T00:00Z", "2026-13-01",
                          "2026-11-22T24:00", "2026-11-22T18:00:00+25:00", "2026-11-22T18", "2026/11/22"}) {
    auto r = parse_time_spec(bad, 0);
    EXPECT_FALSE(r.is_ok()) << bad;
    if (!r.is_ok()) {
      EXPECT_EQ(r.status().code(), Code::ERR_INVALID_ARG);
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

TEST(HaltDuration, Durations) {
  EXPECT_EQ(*parse_duration("300"), 300);
  EXPECT_EQ(*parse_duration("90s"), 90);
  EXPECT_EQ(*parse_duration("5m"), 300);
  EXPECT_EQ(*parse_duration("2H"), 7200);
  EXPECT_EQ(*parse_duration("1d"), 86400);
  EXPECT_EQ(*parse_duration("1h30m"), 5400);
  EXPECT_EQ(*parse_duration("5 m"), 300);  // the one duration syntax (base/units.hpp) allows the space
  EXPECT_FALSE(parse_duration("1.5s").is_ok()) << "whole seconds only";
  for (const char* bad : {"", "x", "-5", "1h30", "m", "99999999999999999999", "9999999999999d"})
    EXPECT_FALSE(parse_duration(bad).is_ok()) << bad;
}

TEST_F(HaltTime, FormatTimeIsIsoWithZone) {
  EXPECT_EQ(format_time(k2026_11_22_1800Z), "2026-11-22T18:00:00+00:00");
  EXPECT_EQ(*parse_time_spec(format_time(k2026_11_22_1800Z + 7), 0), k2026_11_22_1800Z + 7);
}

// ---- Slurm --------------------------------------------------------------------------------------

using SlurmParse = InUtc;

TEST_F(SlurmParse, SlurmTimes) {
  EXPECT_EQ(parse_slurm_time("2026-11-22T18:00:00"), k2026_11_22_1800Z);
  for (const char* none : {"N/A", "Unknown", "NONE", "", "  ", "2026-11-22", "garbage"})
    EXPECT_FALSE(parse_slurm_time(none)) << none;
}

TEST_F(SlurmParse, SqueueOutput) {
  EXPECT_EQ(parse_squeue_end_time("2026-11-22T18:00:00\n"), k2026_11_22_1800Z);
  EXPECT_EQ(parse_squeue_end_time("\n   2026-11-22T18:00:00   \n"), k2026_11_22_1800Z);
  EXPECT_FALSE(parse_squeue_end_time("N/A\n"));
  EXPECT_FALSE(parse_squeue_end_time(""));
  EXPECT_FALSE(parse_squeue_end_time("slurm_load_jobs error: Invalid job id specified\n"));
}

TEST_F(SlurmParse, ScontrolOutput) {
  const char* out =
      "JobId=4242 JobName=heat2d\n"
      "   UserId=me(1000) GroupId=me(1000) MCS_label=N/A\n"
      "   JobState=RUNNING Reason=None Dependency=(null)\n"
      "   RunTime=00:10:00 TimeLimit=02:00:00 TimeMin=N/A\n"
      "   SubmitTime=2026-11-22T15:59:00 EligibleTime=2026-11-22T15:59:00\n"
      "   StartTime=2026-11-22T16:00:00 EndTime=2026-11-22T18:00:00 Deadline=N/A\n";
  EXPECT_EQ(parse_scontrol_end_time(out), k2026_11_22_1800Z);
  EXPECT_FALSE(parse_scontrol_end_time("   StartTime=2026-11-22T16:00:00 EndTime=Unknown Deadline=N/A\n"));
  EXPECT_FALSE(parse_scontrol_end_time("SuspendEndTime=2026-11-22T18:00:00\n")) << "only the EndTime field";
  EXPECT_FALSE(parse_scontrol_end_time("slurm_load_jobs error: Invalid job id specified"));
}

struct FakeSlurm {
  std::map<std::string, std::string> env;
  std::map<std::string, std::optional<std::string>> outputs;  // by argv[0]
  std::vector<std::vector<std::string>> calls;
  SlurmEndTime query() {
    auto lookup = [this](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
    auto run = [this](const std::vector<std::string>& argv) -> std::optional<std::string> {
      calls.push_back(argv);
      auto it = outputs.find(argv[0]);
      return it == outputs.end() ? std::nullopt : it->second;
    };
    return slurm_end_time(lookup, run);
  }
};

TEST_F(SlurmParse, OutsideAJobNothingIsAsked) {
  FakeSlurm s;
  SlurmEndTime r = s.query();
  EXPECT_EQ(r.end_time, 0);
  EXPECT_TRUE(r.problem.empty());
  EXPECT_TRUE(s.calls.empty());
}

TEST_F(SlurmParse, EndTimeVariableFirst) {
  FakeSlurm s;
  s.env = {{"SLURM_JOB_ID", "4242"}, {"SLURM_JOB_END_TIME", "1795370400"}};
  SlurmEndTime r = s.query();
  EXPECT_EQ(r.end_time, k2026_11_22_1800Z);
  EXPECT_EQ(r.source, "SLURM_JOB_END_TIME");
  EXPECT_TRUE(s.calls.empty());
}

TEST_F(SlurmParse, ThenSqueueThenScontrol) {
  FakeSlurm s;
  s.env = {{"SLURM_JOB_ID", "4242"}, {"SLURM_JOB_END_TIME", "garbage"}};
  s.outputs["squeue"] = "2026-11-22T18:00:00\n";
  SlurmEndTime r = s.query();
  EXPECT_EQ(r.end_time, k2026_11_22_1800Z);
  EXPECT_EQ(r.source, "squeue");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0], (std::vector<std::string>{"squeue", "-h", "-j", "4242", "-o", "%e"}));

  FakeSlurm t;
  t.env = {{"SLURM_JOB_ID", "4242"}};
  t.outputs["squeue"] = "N/A\n";
  t.outputs["scontrol"] = "   StartTime=2026-11-22T16:00:00 EndTime=2026-11-22T18:00:00 Deadline=N/A\n";
  r = t.query();
  EXPECT_EQ(r.end_time, k2026_11_22_1800Z);
  EXPECT_EQ(r.source, "scontrol");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[1], (std::vector<std::string>{"scontrol", "show", "job", "4242"}));

  FakeSlurm u;  // no commands at all
  u.env = {{"SLURM_JOB_ID", "4242"}};
  r = u.query();
  EXPECT_EQ(r.end_time, 0);
  EXPECT_NE(r.problem.find("squeue -h -j 4242 -o %e"), std::string::npos) << r.problem;
}

TEST(RunCommand, CapturesOutputAndGivesUp) {
  EXPECT_EQ(run_command({"sh", "-c", "echo hello; echo noise >&2"}, 10), "hello\n");
  EXPECT_FALSE(run_command({"false"}, 10));
  EXPECT_FALSE(run_command({"cairn-no-such-command-here"}, 10));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(run_command({"sleep", "5"}, 0.2));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

// ---- the exit signal ----------------------------------------------------------------------------

TEST(ExitSignal, Names) {
  EXPECT_EQ(parse_exit_signal("USR1"), SIGUSR1);
  EXPECT_EQ(parse_exit_signal("SIGUSR2"), SIGUSR2);
  EXPECT_EQ(parse_exit_signal("usr2"), SIGUSR2);
  EXPECT_EQ(parse_exit_signal("term"), SIGTERM);
  EXPECT_EQ(parse_exit_signal(" INT "), SIGINT);
  EXPECT_EQ(parse_exit_signal("SigHup"), SIGHUP);
  EXPECT_EQ(parse_exit_signal(std::to_string(SIGUSR1)), SIGUSR1);
  EXPECT_EQ(parse_exit_signal(std::to_string(SIGRTMIN + 2)), SIGRTMIN + 2);
  for (const char* no : {"KILL", "9", "STOP", "SEGV", "SIGBUS", "FPE", "ILL", "ABRT", "CHLD", "PIPE", "CONT", "",
                         "USR3", "0", "-10", "999", "USR1x"})
    EXPECT_EQ(parse_exit_signal(no), 0) << no;
  EXPECT_EQ(signal_name(SIGUSR2), "SIGUSR2");
}

TEST(ExitSignal, TheChosenSignalAndSigtermAreCaught) {
  ASSERT_TRUE(install_signal_handlers(SIGUSR2));
  EXPECT_EQ(caught_signal(), 0);
  raise(SIGUSR2);
  EXPECT_EQ(caught_signal(), SIGUSR2);
  raise(SIGTERM);
  EXPECT_EQ(caught_signal(), SIGTERM);
  restore_signal_handlers();
  ASSERT_TRUE(install_signal_handlers(SIGUSR2));
  EXPECT_EQ(caught_signal(), 0) << "a new start forgets the old signal";
  restore_signal_handlers();

  struct sigaction cur;
  sigaction(SIGUSR2, nullptr, &cur);
  EXPECT_EQ(cur.sa_handler, SIG_DFL) << "restored";
}

TEST(ExitSignal, AnApplicationHandlerIsLeftAlone) {
  struct sigaction mine = {}, old = {};
  mine.sa_handler = SIG_IGN;
  sigaction(SIGUSR2, &mine, &old);
  EXPECT_FALSE(install_signal_handlers(SIGUSR2));
  struct sigaction cur;
  sigaction(SIGUSR2, nullptr, &cur);
  EXPECT_EQ(cur.sa_handler, SIG_IGN);
  restore_signal_handlers();
  sigaction(SIGUSR2, &old, nullptr);
}

TEST(ExitSignal, Knob) {
  std::map<std::string, std::string> vars;
  auto load = [&] {
    return load_config("", [&](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    }, {});
  };
  auto def = load();
  ASSERT_TRUE(def.is_ok()) << def.status().message();
  EXPECT_EQ(def->config.exit_signal, "USR1");
  vars["CAIRN_EXIT_SIGNAL"] = "SIGUSR2";
  auto usr2 = load();
  ASSERT_TRUE(usr2.is_ok()) << usr2.status().message();
  EXPECT_EQ(parse_exit_signal(usr2->config.exit_signal), SIGUSR2);
  vars["CAIRN_EXIT_SIGNAL"] = "KILL";
  auto kill = load();
  ASSERT_FALSE(kill.is_ok());
  EXPECT_EQ(kill.status().code(), Code::ERR_CONFIG);
  EXPECT_NE(kill.status().message().find("exit_signal = \"KILL\" (environment variable CAIRN_EXIT_SIGNAL): not a signal"),
            std::string::npos) << kill.status().message();
  EXPECT_NE(kill.status().message().find("USR1, USR2"), std::string::npos) << kill.status().message();
}

}  // namespace
}  // namespace cairn::policy
