// The job history's line codec and writer (docs/format.md, "The job history"): lines as the format says
// (format and event first, integers exact, strings valid UTF-8), the decoder's refusals and its fuzzer,
// and the Writer rank 0 appends with, on a real file. The tools' reader and summary are tested in
// tests/unit/tool/history_reader_test.cpp.
#include "base/history.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/history_line.hpp"
#include "../fuzz.hpp"

namespace cairn::history {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file's lines, each decoded (every one must be a history line).
std::vector<nlohmann::json> decoded_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_all(path));
  for (std::string text; std::getline(in, text);) {
    auto line = decode_line(text);
    EXPECT_TRUE(line.is_ok()) << text << ": " << line.status().message();
    if (line) out.push_back(std::move(line).value());
  }
  return out;
}

class HistoryFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cairn-history-test-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

// ---- the encoder ---------------------------------------------------------------------------------

TEST(HistoryLine, EncodesFieldsInOrderWithFormatAndEventFirst) {
  std::string line = LineWriter("l1")
                         .u64("version", 7)
                         .i64("start_ns", 1795370400123456789)
                         .i64("neg", -5)
                         .real("copy_s", 0.25)
                         .boolean("ok", true)
                         .str("level", "L1")
                         .strings("groups", {"node0", "node1"})
                         .finish();
  EXPECT_EQ(line,
            "{\"v\":1,\"ev\":\"l1\",\"version\":7,\"start_ns\":1795370400123456789,\"neg\":-5,\"copy_s\":0.25,"
            "\"ok\":true,\"level\":\"L1\",\"groups\":[\"node0\",\"node1\"]}\n");
}

TEST(HistoryLine, EscapesStringsAsJsonRequires) {
  EXPECT_EQ(LineWriter("x").str("s", std::string("a\"b\\c\nd\te\x01 f", 12)).finish(),
            "{\"v\":1,\"ev\":\"x\",\"s\":\"a\\\"b\\\\c\\nd\\te\\u0001 f\"}\n");
  EXPECT_EQ(LineWriter("x").str("s", "caf\xc3\xa9").finish(),  // valid UTF-8 is kept as is
            "{\"v\":1,\"ev\":\"x\",\"s\":\"caf\xc3\xa9\"}\n");
}

TEST(HistoryLine, BytesThatAreNotUtf8BecomeTheCharacterOfTheSameValue) {
  EXPECT_EQ(to_utf8("bad \xff\xc3 end"), "bad \xc3\xbf\xc3\x83 end");
  EXPECT_EQ(to_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(to_utf8("\xed\xa0\x80"), "\xc3\xad\xc2\xa0\xc2\x80");  // an encoded surrogate is not UTF-8
  std::string line = LineWriter("x").str("error", "rank 1: \xff").finish();
  auto j = decode_line(std::string_view(line).substr(0, line.size() - 1));
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["error"], "rank 1: \xc3\xbf");
}

TEST(HistoryLine, NonFiniteRealsAreNull) {
  std::string line = LineWriter("x").real("a", std::numeric_limits<double>::infinity()).finish();
  EXPECT_EQ(line, "{\"v\":1,\"ev\":\"x\",\"a\":null}\n");
}

// ---- the decoder ---------------------------------------------------------------------------------

TEST(HistoryLine, DecodesEveryValueExactly) {
  std::string text = LineWriter("start")
                         .i64("t", 1795370400999999999)
                         .u64("bytes", 18446744073709551615ull)
                         .i64("neg", -42)
                         .real("copy_s", 1.5e-06)
                         .finish();
  auto j = decode_line(std::string_view(text).substr(0, text.size() - 1));
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["t"].get<int64_t>(), 1795370400999999999);  // beyond a double's 53 bits: kept exactly
  EXPECT_EQ((*j)["bytes"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ((*j)["neg"].get<int64_t>(), -42);
  EXPECT_EQ((*j)["copy_s"].get<double>(), 1.5e-06);
}

TEST(HistoryLine, RejectsWhatIsNotOneObjectWithAFormat) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"", "unexpected end of input"},
      {"[1]", "not a JSON object"},
      {"{\"v\":1,\"ev\":\"l1\"", "expected '}' at byte 16"},
      {"{\"v\":1} x", "at byte 8"},
      {"{\"v\":1,\"ev\":\"l1", "missing closing quote"},
      {"{\"v\":1,\"e\":\"\\q\"}", "forbidden character after backslash"},
      {"{\"v\":1,\"e\":01}", "expected '}'"},
      {"{\"v\":1,\"e\":tru}", "invalid literal"},
      {"{\"v\":1,\"e\":\"\\ud800\"}", "surrogate"},
      {"{\"v\":1,\"e\":\"\xff\"}", "ill-formed UTF-8"},
      {"{\"v\":1,\"e\":1e999}", "number overflow"},
      {"{\"ev\":\"l1\"}", "no format field \"v\""},
      {"{\"v\":\"1\"}", "no format field \"v\""},
      {"{\"v\":0}", "no format field \"v\""},
      {"{\"v\":-1}", "no format field \"v\""},
      {"{\"v\":1.0}", "no format field \"v\""},
  };
  for (const auto& c : cases) {
    auto l = decode_line(c.text);
    ASSERT_FALSE(l.is_ok()) << c.text;
    EXPECT_EQ(l.status().code(), Code::ERR_FORMAT) << c.text;
    EXPECT_EQ(l.status().message().rfind("not a history line: ", 0), 0u) << l.status().message();
    EXPECT_NE(l.status().message().find(c.message), std::string::npos) << c.text << ": " << l.status().message();
  }
}

TEST(HistoryLine, AcceptsWhatOtherJsonWritersWrite) {
  // Spaces, \u escapes (a surrogate pair too), nested values a newer writer may add, exponents, and a
  // format number larger than any this code knows (the reader skips such lines, the decoder does not).
  auto j = decode_line(
      " { \"v\" : 1 , \"ev\":\"l3\", \"s\":\"\\u00e9\\ud83d\\ude00\\/\", \"n\":{\"a\":[1,{\"b\":null}]},"
      " \"mixed\":[1,\"x\"], \"e\":2E3, \"z\":-0.5e-1, \"nul\":null } ");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["s"], "\xc3\xa9\xf0\x9f\x98\x80/");
  EXPECT_TRUE(decode_line("{\"v\":18446744073709551615}").is_ok());
}

// Random bytes and mutated lines: the decoder never crashes or throws, refuses with ERR_FORMAT only, and
// what it accepts re-encodes to the same object; some mutations still decode.
TEST(HistoryLineFuzz, RandomAndMutatedLinesNeverCrash) {
  std::mt19937_64 rng(0x4157);
  const std::vector<std::string> corpus = {
      LineWriter("start").str("launch", "77b3d489fff3f393").i64("t", 1795372310959008317).u64("ranks", 4)
          .strings("groups", {"node0", "node1"}).str("redundancy", "xor").boolean("l2", true).finish(),
      LineWriter("l1").u64("version", 1).i64("start_ns", 1795372310961082624).real("copy_s", 0.000129461288)
          .u64("bytes", 131104).finish(),
      LineWriter("fail").u64("version", 3).str("level", "L2").str("error", "rank 1: no space \xff").finish(),
      "{\"v\":2,\"ev\":\"new\",\"n\":{\"a\":[1,2,{\"b\":[]}]},\"e\":-1.5e-300}\n"};
  const std::vector<std::string> tokens = {"{", "}", "[", "]", "\"", ":", ",", "\\u", "\\ud83d", "\"v\":",
                                           "18446744073709551616", "-9223372036854775809", "1e400", "null",
                                           "true", "\n", "\xc3", "0"};
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text;
    if (iter % 2 == 0) {
      text = fuzz::random_bytes(rng, 200);
    } else {
      text = corpus[rng() % corpus.size()];
      text.pop_back();  // the newline
      fuzz::mutate(text, rng, tokens);
    }
    auto j = decode_line(text);
    if (!j.is_ok()) {
      ASSERT_EQ(j.status().code(), Code::ERR_FORMAT) << "iteration " << iter;
      continue;
    }
    ++accepted;
    ASSERT_TRUE(j->is_object());
    auto again = decode_line(j->dump());
    ASSERT_TRUE(again.is_ok()) << "iteration " << iter << ": " << again.status().message();
    ASSERT_EQ(*again, *j) << "iteration " << iter;
  }
  EXPECT_GT(accepted, 100) << "too few mutations reached a successful decode; the fuzz loop is too blunt";
}

// ---- the writer ----------------------------------------------------------------------------------

TEST_F(HistoryFiles, WriterAppendsOneLinePerEventAndOthersWriteNothing) {
  const std::string path = file("history");
  {
    Writer other;  // not rank 0
    other.open(path, /*writer=*/false);
    EXPECT_FALSE(other.active());
    other.start(StartInfo{});
    other.l1(1, 1, 0.1, 0.1, 10, 5);
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  std::string first_launch;
  int64_t t0 = now_ns();
  {
    Writer w;
    w.open(path, /*writer=*/true);
    ASSERT_TRUE(w.active());
    first_launch = w.launch();
    EXPECT_EQ(first_launch.size(), 16u);
    StartInfo info;
    info.ranks = 4;
    info.groups = {"node0", "node0", "node1", "node1"};
    info.redundancy = "xor";
    info.l2 = true;
    info.flush_every = 2;
    w.start(info);
    w.l1(1, t0, 0.001, 0.002, 4000, 1000);
    w.l2(1, t0, 4000, "xor");
    w.l3_began(2, false);
    w.l1(2, t0, 0.001, 0.002, 8000, 2000, 800);  // incremental: 800 bytes copied, the rest left in the slots
    w.l2(2, t0, 8000, "xor", 1200, 6000);        // and only the changes sent
    w.l3(2, 0.5, 2000, "embedded", 3000, 700);  // incremental: fewer bytes written than the stream's
    w.l3(1, 0.25, 1000, "service");
    w.failed(3, 2, "rank 1: no space");
    w.discarded(4, "version 4 ('x') discarded: this rank passed valid=0");
    w.end("ok", 4, false);
  }
  {
    Writer w2;  // the next launch: restarts from version 2 and looks up its bytes in the file
    w2.open(path, true);
    EXPECT_NE(w2.launch(), first_launch);
    w2.restart_probe();
    w2.restart(2, 3, now_ns());
    w2.restart_rejected(2, 3);
  }
  auto lines = decoded_lines(path);
  ASSERT_EQ(lines.size(), 12u);
  const char* events[] = {"start", "l1", "l2", "l1", "l2", "l3", "l3", "fail", "discard", "end", "restart", "restart_rejected"};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["v"], 1) << i;
    EXPECT_EQ(lines[i]["ev"], events[i]) << i;
    EXPECT_EQ(lines[i]["launch"], i < 10 ? first_launch : lines[10]["launch"].get<std::string>()) << i;
    EXPECT_GE(lines[i]["t"].get<int64_t>(), t0) << i;
  }
  const auto& start = lines[0];
  EXPECT_EQ(start["nodes"], 2);
  EXPECT_EQ(start["groups"], nlohmann::json({"node0", "node1"}));
  EXPECT_EQ(start["redundancy"], "xor");
  EXPECT_EQ(start["flush_every"], 2);
  EXPECT_EQ(start["pid"], getpid());
  EXPECT_EQ(lines[1]["start_ns"], t0);  // exact nanoseconds
  EXPECT_EQ(lines[1]["copy_s"], 0.001);
  EXPECT_EQ(lines[2]["bytes"], 4000);  // from the l1 line of the same version
  EXPECT_EQ(lines[2]["scheme"], "xor");
  EXPECT_FALSE(lines[1].contains("copied_bytes"));  // not said: left out
  EXPECT_FALSE(lines[2].contains("sent_bytes"));
  EXPECT_FALSE(lines[2].contains("full_sent_bytes"));
  EXPECT_EQ(lines[3]["copied_bytes"], 800);
  EXPECT_EQ(lines[4]["sent_bytes"], 1200);
  EXPECT_EQ(lines[4]["full_sent_bytes"], 6000);
  const auto& l3 = lines[5];
  EXPECT_EQ(l3["version"], 2);
  EXPECT_EQ(l3["bytes"], 8000);
  EXPECT_EQ(l3["rank_bytes"], 2000);
  EXPECT_EQ(l3["write_s"], 0.5);
  EXPECT_EQ(l3["at_finalize"], false);
  EXPECT_EQ(l3["via"], "embedded");
  EXPECT_GE(l3["end_ns"].get<int64_t>(), l3["start_ns"].get<int64_t>());
  EXPECT_EQ(l3["l3_bytes_written"], 3000);
  EXPECT_EQ(l3["rank_l3_bytes_written"], 700);
  EXPECT_EQ(lines[6]["via"], "service");
  EXPECT_FALSE(lines[6].contains("l3_bytes_written"));  // the flusher did not say: left out
  EXPECT_FALSE(lines[6].contains("rank_l3_bytes_written"));
  EXPECT_EQ(lines[7]["level"], "L2");
  EXPECT_EQ(lines[7]["error"], "rank 1: no space");
  EXPECT_EQ(lines[8]["version"], 4);
  EXPECT_EQ(lines[9]["status"], "ok");
  const auto& restart = lines[10];
  EXPECT_EQ(restart["version"], 2);
  EXPECT_EQ(restart["level"], "L3");
  EXPECT_EQ(restart["bytes"], 8000);  // written by the first launch, found in the file
  EXPECT_LE(restart["start_ns"].get<int64_t>(), restart["end_ns"].get<int64_t>());
}

TEST_F(HistoryFiles, WriterEndsATornLineBeforeItsOwn) {
  const std::string path = file("history");
  const std::string before = "{\"v\":1,\"ev\":\"start\",\"launch\":\"old\",\"t\":5}\n{\"v\":1,\"ev\":\"l1\",\"launch\":\"old\",\"ver";
  {
    std::ofstream out(path, std::ios::binary);
    out << before;
  }
  {
    Writer w;
    w.open(path, true);
    w.start(StartInfo{});
  }
  std::string text = read_all(path);
  ASSERT_EQ(text.compare(0, before.size(), before), 0);
  ASSERT_EQ(text[before.size()], '\n');  // the torn line ended, then the new launch's own line
  auto line = decode_line(std::string_view(text).substr(before.size() + 1, text.size() - before.size() - 2));
  ASSERT_TRUE(line.is_ok()) << line.status().message();
  EXPECT_EQ((*line)["ev"], "start");
}

TEST_F(HistoryFiles, WriterWithoutAWritableFileWarnsAndDoesNothing) {
  Writer w;
  w.open(file("no/such/dir/history"), true);
  EXPECT_FALSE(w.active());
  w.l1(1, 1, 0.1, 0.1, 10, 5);  // no crash, nothing written
}

TEST(HistoryLevels, NamesAndNumbers) {
  EXPECT_STREQ(level_name(1), "L1");
  EXPECT_STREQ(level_name(3), "L3");
  EXPECT_STREQ(level_name(0), "none");
  EXPECT_EQ(level_number("L2"), 2);
  EXPECT_EQ(level_number("l2"), 0);
  Layout layout;
  layout.control = "/p/.cairn";
  EXPECT_EQ(path(layout), "/p/.cairn/history");
}

}  // namespace
}  // namespace cairn::history
