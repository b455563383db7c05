// Reading the job history (tools/cairn/inspect/history_reader.hpp, history_summary.hpp; docs/format.md, "The
// job history"): a line's fields as the accessors give them, the reader's handling of torn, bad and
// newer lines and its fuzzer, the summary per launch and version the tools draw, and a history written
// by the library's Writer read back whole.
#include "inspect/history_summary.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "../fuzz.hpp"
#include "base/history.hpp"

namespace cairn::history {
namespace {

class HistoryReadBack : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cairn-history-reader-test-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

// ---- a line's fields -----------------------------------------------------------------------------

TEST(HistoryLineFields, AccessorsKeepEveryValueExactly) {
  std::string text = LineWriter("start")
                         .str("launch", "00ff")
                         .i64("t", 1795370400999999999)
                         .u64("bytes", 18446744073709551615ull)
                         .i64("neg", -42)
                         .real("copy_s", 1.5e-06)
                         .boolean("l2", false)
                         .str("error", "rank 2: \"x\"\n\\ \x02 caf\xc3\xa9")
                         .strings("groups", {"a", "b c", ""})
                         .finish();
  ASSERT_EQ(text.back(), '\n');
  auto l = parse_line(std::string_view(text).substr(0, text.size() - 1));
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->format(), 1u);
  EXPECT_EQ(l->event(), "start");
  EXPECT_EQ(l->str("launch"), "00ff");
  EXPECT_EQ(l->i64("t"), 1795370400999999999);  // beyond a double's 53 bits: kept exactly
  EXPECT_EQ(l->u64("bytes"), 18446744073709551615ull);
  EXPECT_EQ(l->i64("bytes", 7), 7);  // beyond int64: not an i64
  EXPECT_EQ(l->i64("neg"), -42);
  EXPECT_EQ(l->u64("neg", 9), 9u);  // a negative value is not a u64
  EXPECT_DOUBLE_EQ(l->num("copy_s"), 1.5e-06);
  EXPECT_FALSE(l->flag("l2", true));
  EXPECT_EQ(l->str("error"), "rank 2: \"x\"\n\\ \x02 caf\xc3\xa9");
  EXPECT_EQ(l->strings("groups"), (std::vector<std::string>{"a", "b c", ""}));
  EXPECT_FALSE(l->has("missing"));
  EXPECT_EQ(l->u64("missing", 3), 3u);
  EXPECT_EQ(l->str("t", "fallback"), "fallback");  // a number is not a string
}

TEST(HistoryLineFields, KindsFormat1DoesNotUseGiveTheFallback) {
  auto l = parse_line(
      "{\"v\":1,\"ev\":\"l3\",\"n\":{\"a\":[1,{\"b\":null}]},\"mixed\":[1,\"x\"],\"e\":2E3,\"z\":-0.5e-1,\"nul\":null}");
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_TRUE(l->has("n"));
  EXPECT_EQ(l->str("n", "-"), "-");              // nested object: kept, not interpreted
  EXPECT_TRUE(l->strings("mixed").empty());      // only arrays of strings are lists
  EXPECT_DOUBLE_EQ(l->num("e"), 2000);
  EXPECT_EQ(l->u64("e"), 2000u);                 // a real is truncated
  EXPECT_DOUBLE_EQ(l->num("z"), -0.05);
  EXPECT_EQ(l->u64("z", 5), 5u);
  EXPECT_EQ(l->u64("nul", 4), 4u);
  EXPECT_FALSE(parse_line("garbage").is_ok());
}

// ---- the reader ----------------------------------------------------------------------------------

std::string event_line(const char* ev, uint64_t version, const char* launch = "a") {
  return LineWriter(ev).str("launch", launch).i64("t", 1000 + static_cast<int64_t>(version)).u64("version", version).finish();
}

TEST(HistoryReader, SkipsATornLastLineWithAWarningAtTheEnd) {
  std::string text = event_line("l1", 1) + event_line("l1", 2) + "{\"v\":1,\"ev\":\"l1\",\"vers";
  Parsed end = parse_history(text, /*at_end=*/true);
  ASSERT_EQ(end.lines.size(), 2u);
  EXPECT_EQ(end.lines[1].u64("version"), 2u);
  ASSERT_EQ(end.warnings.size(), 1u);
  EXPECT_NE(end.warnings[0].find("line 3: torn last line (22 bytes without a newline"), std::string::npos)
      << end.warnings[0];
  EXPECT_EQ(end.consumed, text.size());
  EXPECT_EQ(end.line_count, 2u);

  // A reader following a running job leaves the bytes for its next read, without a warning.
  Parsed live = parse_history(text, /*at_end=*/false);
  EXPECT_EQ(live.lines.size(), 2u);
  EXPECT_TRUE(live.warnings.empty());
  EXPECT_EQ(live.consumed, text.size() - 22);
}

TEST(HistoryReader, SkipsBadAndNewerLinesWithWarnings) {
  std::string text = event_line("l1", 1) + "garbage\n\n" + "{\"v\":2,\"ev\":\"l1\",\"version\":9}\n" +
                     "{\"v\":3,\"ev\":\"new\"}\n" + event_line("l2", 1);
  Parsed p = parse_history(text, true, /*first_line=*/10);
  ASSERT_EQ(p.lines.size(), 2u);
  EXPECT_EQ(p.lines[0].event(), "l1");
  EXPECT_EQ(p.lines[1].event(), "l2");
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_EQ(p.warnings[0].rfind("line 11: not a history line: ", 0), 0u) << p.warnings[0];
  EXPECT_NE(p.warnings[0].find("at byte 0; skipped"), std::string::npos)
      << p.warnings[0];
  EXPECT_NE(p.warnings[1].find("2 line(s) of a newer format (v > 1, written by a newer cairn), skipped"),
            std::string::npos)
      << p.warnings[1];
  EXPECT_EQ(p.line_count, 6u);
}

TEST(HistoryReader, ManyBadLinesGiveAFewWarningsAndACount) {
  std::string text;
  for (int i = 0; i < 9; ++i) text += "nope\n";
  Parsed p = parse_history(text, true);
  ASSERT_EQ(p.warnings.size(), 6u);
  EXPECT_NE(p.warnings.back().find("4 more line(s)"), std::string::npos);
}

TEST_F(HistoryReadBack, ReadHistorySaysWhenThereIsNone) {
  auto h = read_history(file("history"));
  ASSERT_TRUE(h.is_ok());
  EXPECT_FALSE(h->exists);
  EXPECT_TRUE(h->parsed.lines.empty());
}

// Random and mutated histories: the reader never crashes, accounts for every byte it consumes, and
// keeps only lines it knows; some mutated histories still give lines.
TEST(HistoryReaderFuzz, RandomAndMutatedHistoriesNeverCrash) {
  std::mt19937_64 rng(0x415c);
  std::string seed = LineWriter("start").str("launch", "A").i64("t", 100).u64("ranks", 4).finish() +
                     event_line("l1", 1, "A") + event_line("l2", 1, "A") + "{\"v\":2,\"ev\":\"x\"}\n" +
                     LineWriter("l3").str("launch", "A").u64("version", 1).str("via", "embedded").finish();
  const std::vector<std::string> tokens = {"\n", "{", "}", "\"v\":", "\"v\":2", ",", "\"", "\r\n", " "};
  uint64_t kept = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string text = iter % 4 == 0 ? fuzz::random_bytes(rng, 300) : seed;
    if (iter % 4) fuzz::mutate(text, rng, tokens);
    for (bool at_end : {true, false}) {
      Parsed p = parse_history(text, at_end, 1);
      ASSERT_LE(p.consumed, text.size());
      ASSERT_EQ(p.line_count, static_cast<uint64_t>(std::count(text.begin(), text.begin() + p.consumed, '\n')));
      if (at_end) {
        ASSERT_EQ(p.consumed, text.size());
      }
      for (const Line& l : p.lines) ASSERT_LE(l.format(), static_cast<uint64_t>(kFormat));
      if (at_end) kept += p.lines.size();
      Summary s = summarize(p.lines);  // the summary takes whatever the reader kept
      ASSERT_LE(s.launches.size(), p.lines.size());
    }
  }
  EXPECT_GT(kept, 1000u);
}

// ---- the summary ---------------------------------------------------------------------------------

std::vector<Line> parse_all(const std::string& text) {
  Parsed p = parse_history(text, true);
  EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
  return p.lines;
}

TEST(HistorySummary, LaunchesRestartsVersionsAndFailures) {
  std::string text =
      LineWriter("start").str("launch", "A").i64("t", 100).u64("ranks", 4).u64("nodes", 2).strings("groups", {"n0", "n1"}).finish() +
      LineWriter("l1").str("launch", "A").i64("t", 210).u64("version", 1).i64("start_ns", 200).i64("end_ns", 210)
          .real("copy_s", 2e-9).u64("bytes", 400).u64("rank_bytes", 100).finish() +
      LineWriter("l2").str("launch", "A").i64("t", 260).u64("version", 1).i64("start_ns", 210).i64("end_ns", 260)
          .u64("bytes", 400).u64("redundancy_bytes", 400).finish() +
      LineWriter("l1").str("launch", "A").i64("t", 310).u64("version", 2).i64("start_ns", 300).i64("end_ns", 310)
          .real("copy_s", 8e-9).u64("bytes", 400).finish() +
      LineWriter("fail").str("launch", "A").i64("t", 320).u64("version", 2).str("level", "L3").str("error", "disk full").finish() +
      // launch A was killed (no end); B restarts from version 1 at L2
      LineWriter("start").str("launch", "B").i64("t", 1000).u64("ranks", 4).finish() +
      LineWriter("restart").str("launch", "B").i64("t", 1100).u64("version", 1).str("level", "L2")
          .i64("start_ns", 1050).i64("end_ns", 1100).u64("bytes", 400).finish() +
      LineWriter("l1").str("launch", "B").i64("t", 1210).u64("version", 3).i64("start_ns", 1200).i64("end_ns", 1210)
          .real("copy_s", 4e-9).u64("bytes", 800).finish() +
      LineWriter("l3").str("launch", "B").i64("t", 1300).u64("version", 3).i64("start_ns", 1220).i64("end_ns", 1300)
          .u64("bytes", 800).boolean("at_finalize", true).finish() +
      LineWriter("discard").str("launch", "B").i64("t", 1310).u64("version", 4).str("error", "valid=0").finish() +
      LineWriter("someday").str("launch", "B").i64("t", 1320).finish() +  // an event of a newer writer
      LineWriter("end").str("launch", "B").i64("t", 1400).str("status", "ok").u64("versions", 2).finish();
  Summary s = summarize(parse_all(text));
  ASSERT_EQ(s.launches.size(), 2u);
  const Launch& a = s.launches[0];
  EXPECT_EQ(a.id, "A");
  EXPECT_TRUE(a.started);
  EXPECT_FALSE(a.finalized);
  EXPECT_EQ(a.ranks, 4u);
  EXPECT_EQ(a.nodes, 2u);
  EXPECT_EQ(a.groups, (std::vector<std::string>{"n0", "n1"}));
  EXPECT_EQ(a.start_ns, 100);
  EXPECT_EQ(a.last_ns, 320);
  EXPECT_EQ(a.versions, (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(a.restarts.empty());
  const Launch& b = s.launches[1];
  EXPECT_TRUE(b.finalized);
  EXPECT_EQ(b.end_status, "ok");
  ASSERT_EQ(b.restarts.size(), 1u);
  EXPECT_EQ(b.restarts[0].version, 1u);
  EXPECT_EQ(b.restarts[0].level, 2);
  EXPECT_EQ(b.restarts[0].bytes, 400u);
  EXPECT_EQ(b.last_ns, 1400);

  ASSERT_EQ(s.versions.size(), 4u);  // 1, 2, 3 and the discarded 4
  const VersionRecord& v1 = s.versions.at(1);
  EXPECT_TRUE(v1.level[0].reached && v1.level[1].reached && !v1.level[2].reached);
  EXPECT_EQ(v1.launch, 0u);
  EXPECT_DOUBLE_EQ(v1.level[0].seconds, 2e-9);  // L1: the blocking copy
  EXPECT_DOUBLE_EQ(v1.level[0].bandwidth(), 400 / 2e-9);
  EXPECT_DOUBLE_EQ(v1.level[1].seconds, 50e-9);  // L2: end - start
  EXPECT_EQ(v1.level[1].redundancy_bytes, 400u);
  EXPECT_EQ(s.versions.at(3).launch, 1u);
  EXPECT_TRUE(s.versions.at(3).level[2].at_finalize);
  EXPECT_DOUBLE_EQ(s.versions.at(3).level[2].seconds, 80e-9);
  EXPECT_TRUE(s.versions.at(4).discarded);
  ASSERT_EQ(s.failures.size(), 2u);
  EXPECT_EQ(s.failures[0].level, 3);
  EXPECT_EQ(s.failures[0].error, "disk full");
  EXPECT_EQ(s.failures[1].level, 0);  // discarded
  EXPECT_EQ(s.first_ns, 100);
  EXPECT_EQ(s.last_ns, 1400);

  // L1: 400 B in 2 ns, 400 B in 8 ns, 800 B in 4 ns: last 200 B/ns, mean 1600 B / 14 ns.
  LevelStats l1 = level_stats(s, 1);
  EXPECT_EQ(l1.samples, 3u);
  EXPECT_EQ(l1.last_version, 3u);
  EXPECT_DOUBLE_EQ(l1.last, 800 / 4e-9);
  EXPECT_DOUBLE_EQ(l1.mean, 1600 / 14e-9);
  LevelStats l3 = level_stats(s, 3);
  EXPECT_EQ(l3.samples, 1u);
  EXPECT_EQ(l3.last_end_ns, 1300);
  EXPECT_EQ(level_stats(s, 2).last_version, 1u);
}

TEST(HistorySummary, LinesBeforeAnyStartMakeALaunchToo) {
  // The start line torn away: its launch still gathers its versions.
  std::string text = LineWriter("l1").str("launch", "X").i64("t", 50).u64("version", 5).i64("start_ns", 40).finish();
  Summary s = summarize(parse_all(text));
  ASSERT_EQ(s.launches.size(), 1u);
  EXPECT_FALSE(s.launches[0].started);
  EXPECT_EQ(s.launches[0].start_ns, 40);
  EXPECT_EQ(s.launches[0].versions, (std::vector<uint64_t>{5}));
}


// ---- the library's writer, read back ---------------------------------------------------------------

TEST_F(HistoryReadBack, WhatTheWriterWroteReadsBackAsOneCampaign) {
  const std::string path = file("history");
  {
    Writer w;
    w.open(path, /*writer=*/true);
    StartInfo info;
    info.ranks = 4;
    info.groups = {"node0", "node0", "node1", "node1"};
    w.start(info);
    int64_t t0 = now_ns();
    w.l1(1, t0, 0.001, 0.002, 4000, 1000);
    w.l2(1, t0, 4000, "xor");
    w.l3_began(2, false);
    w.l1(2, t0, 0.001, 0.002, 8000, 2000, 900);
    w.l2(2, t0, 8000, "xor", 1500, 6000);
    w.l3(2, 0.5, 2000, "embedded", 3000, 700);
    w.failed(3, 2, "rank 1: no space");
    w.discarded(4, "valid=0");
    w.end("ok", 4, false);
  }
  {
    Writer w2;
    w2.open(path, true);
    w2.restart_probe();
    w2.restart(2, 3, now_ns());
    w2.restart_rejected(2, 3);
  }
  auto h = read_history(path);
  ASSERT_TRUE(h.is_ok());
  ASSERT_TRUE(h->exists);
  EXPECT_TRUE(h->parsed.warnings.empty());
  ASSERT_EQ(h->parsed.lines.size(), 11u);
  Summary s = summarize(h->parsed.lines);
  ASSERT_EQ(s.launches.size(), 2u);
  EXPECT_TRUE(s.launches[0].finalized);
  EXPECT_EQ(s.launches[0].nodes, 2u);
  EXPECT_EQ(s.launches[0].groups, (std::vector<std::string>{"node0", "node1"}));
  EXPECT_FALSE(s.launches[1].finalized);
  const LevelRecord& l3 = s.versions.at(2).level[2];
  ASSERT_TRUE(l3.reached);
  EXPECT_EQ(l3.bytes, 8000u);
  EXPECT_EQ(l3.rank_bytes, 2000u);
  EXPECT_EQ(l3.l3_bytes_written, 3000u);  // the bytes the incremental write put into files, beside the stream's
  EXPECT_EQ(s.versions.at(1).level[0].l3_bytes_written, 0u);
  EXPECT_EQ(l3.via, "embedded");
  EXPECT_GE(l3.end_ns, l3.start_ns);
  EXPECT_FALSE(l3.at_finalize);
  EXPECT_EQ(s.versions.at(1).level[1].redundancy_bytes, 4000u);
  // An incremental version's bytes at L1 and L2; an older line without them: unknown, not 0.
  EXPECT_EQ(s.versions.at(2).level[0].copied_bytes, 900u);
  EXPECT_EQ(s.versions.at(2).level[1].sent_bytes, 1500u);
  EXPECT_EQ(s.versions.at(2).level[1].full_sent_bytes, 6000u);
  EXPECT_EQ(s.versions.at(1).level[0].copied_bytes, LevelRecord::kUnknown);
  EXPECT_EQ(s.versions.at(1).level[1].full_sent_bytes, LevelRecord::kUnknown);
  ASSERT_EQ(s.failures.size(), 2u);
  EXPECT_EQ(s.failures[0].level, 2);
  EXPECT_EQ(s.failures[1].version, 4u);
  ASSERT_EQ(s.launches[1].restarts.size(), 1u);
  const Restart& r = s.launches[1].restarts[0];
  EXPECT_EQ(r.version, 2u);
  EXPECT_EQ(r.level, 3);
  EXPECT_EQ(r.bytes, 8000u);
  EXPECT_TRUE(r.rejected);
  EXPECT_LE(r.start_ns, r.end_ns);
}

TEST_F(HistoryReadBack, ATornLineLeftByADeadLaunchIsSkippedWithAWarning) {
  const std::string path = file("history");
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"v\":1,\"ev\":\"start\",\"launch\":\"old\",\"t\":5}\n{\"v\":1,\"ev\":\"l1\",\"launch\":\"old\",\"ver";
  }
  {
    Writer w;
    w.open(path, true);
    w.start(StartInfo{});
  }
  auto h = read_history(path);
  ASSERT_TRUE(h.is_ok());
  ASSERT_EQ(h->parsed.lines.size(), 2u);
  EXPECT_EQ(h->parsed.lines[0].str("launch"), "old");
  EXPECT_EQ(h->parsed.lines[1].event(), "start");
  EXPECT_NE(h->parsed.lines[1].str("launch"), "old");
  ASSERT_EQ(h->parsed.warnings.size(), 1u);
  EXPECT_NE(h->parsed.warnings[0].find("line 2: not a history line"), std::string::npos) << h->parsed.warnings[0];
}

}  // namespace
}  // namespace cairn::history
