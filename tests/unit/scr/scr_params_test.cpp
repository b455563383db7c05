// SCR's parameters (bindings/scr/scr_params.hpp): SCR_Config strings, SCR config files, and the mapping
// of every source onto cairn's knobs in SCR's order of precedence, with the traps (SCR_FLUSH=0) and the
// warnings for what cairn does not do; every CAIRN_* variable the table produces is a real knob.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <random>
#include <string>

#include "base/config.hpp"
#include "base/units.hpp"
#include "scr_params.hpp"

namespace cairn::scr {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup env_of(const Env& env) {
  return [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

Sources sources(const Env& env, std::vector<Setting> file = {}, std::vector<Setting> app = {}) {
  Sources s;
  s.env = env_of(env);
  for (const auto& [k, v] : env)
    if (k.rfind("SCR_", 0) == 0) s.env_scr_names.push_back(k);
  s.user_file = std::move(file);
  s.app = std::move(app);
  return s;
}

Setting set(const std::string& text) {
  std::string error;
  auto r = parse_config_request(text, &error);
  EXPECT_TRUE(r) << text << ": " << error;
  return r ? r->setting : Setting{};
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

TEST(ScrConfigRequest, SetUnsetQueryAndDescriptors) {
  std::string e;
  auto r = parse_config_request("SCR_FLUSH=10", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, ConfigRequest::Op::set);
  EXPECT_EQ(r->setting.key, "SCR_FLUSH");
  EXPECT_EQ(r->setting.value, "10");
  r = parse_config_request("SCR_FLUSH=", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, ConfigRequest::Op::unset);
  r = parse_config_request("  SCR_FLUSH  ", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, ConfigRequest::Op::query);
  EXPECT_EQ(r->setting.key, "SCR_FLUSH");
  r = parse_config_request("CKPT=0 TYPE=XOR SET_SIZE=16", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, ConfigRequest::Op::set);
  EXPECT_EQ(r->setting.key, "CKPT");
  EXPECT_EQ(r->setting.value, "0");
  ASSERT_EQ(r->setting.children.size(), 2u);
  EXPECT_EQ(r->setting.children[1], (std::pair<std::string, std::string>{"SET_SIZE", "16"}));
  r = parse_config_request("CKPT=0 TYPE", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, ConfigRequest::Op::query);
  EXPECT_EQ(r->query_child, "TYPE");
  // '=' inside a value, quotes around one with spaces, spaces around '='.
  r = parse_config_request("SCR_PREFIX=/my/dir/with/=/sign", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->setting.value, "/my/dir/with/=/sign");
  r = parse_config_request("SCR_PREFIX=\"/a b/c\"", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->setting.value, "/a b/c");
  r = parse_config_request("SCR_FLUSH = 3", &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->setting.value, "3");
}

TEST(ScrConfigRequest, BadStringsAreErrorsWithAReason) {
  for (const char* bad : {"", "   ", "=3", "SCR FLUSH", "SCR-FLUSH=1", "CKPT=0 TYPE=", "A=\"open",
                          "SCR_FLUSH SCR_PREFIX", "SCR_FLUSH= SCR_X"}) {
    std::string e;
    auto r = parse_config_request(bad, &e);
    if (std::string(bad) == "SCR_FLUSH= SCR_X") {  // SCR skips spaces after '=': SCR_FLUSH is set to SCR_X
      ASSERT_TRUE(r);
      EXPECT_EQ(r->setting.value, "SCR_X");
      continue;
    }
    EXPECT_FALSE(r) << "'" << bad << "' was accepted";
    EXPECT_FALSE(e.empty()) << bad;
  }
}

TEST(ScrConfigFile, CommentsBlankLinesVariablesAndBadLines) {
  Env env = {{"SLURM_JOBID", "42"}, {"HOME", "/home/me"}};
  std::vector<std::string> errors;
  auto list = parse_config_file(
      "# set the halt seconds to one hour\n"
      "SCR_HALT_SECONDS=3600\n"
      "\n"
      "SCR_CACHE_BASE=/dev/shm/$SLURM_JOBID   # per job\n"
      "SCR_PREFIX=${HOME}/run/$UNSET_VAR/x\n"
      "CKPT=0 INTERVAL=1 TYPE=XOR\n"
      "not a setting\n"
      "SCR_COST=$\n",
      env_of(env), &errors);
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(list[0].value, "3600");
  EXPECT_EQ(list[1].value, "/dev/shm/42");
  EXPECT_EQ(list[2].value, "/home/me/run//x");
  EXPECT_EQ(list[3].key, "CKPT");
  EXPECT_EQ(list[3].children.size(), 2u);
  EXPECT_EQ(list[4].value, "$");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("7: ", 0), 0u) << errors[0];
}

TEST(ScrMapping, EveryMappedParameterBecomesItsKnob) {
  Env env = {{"SCR_PREFIX", "/p/run"},          {"SCR_CACHE_BASE", "/ssd"},       {"SCR_CACHE_SIZE", "3"},
             {"SCR_COPY_TYPE", "rs"},           {"SCR_SET_SIZE", "8"},            {"SCR_SET_FAILURES", "3"},
             {"SCR_FLUSH", "20"},               {"SCR_HALT_SECONDS", "600"},      {"SCR_CHECKPOINT_SECONDS", "90"},
             {"SCR_PREFIX_SIZE", "0"},          {"SCR_DEBUG", "1"},               {"SCR_MPI_BUF_SIZE", "1MB"},
             {"SCR_CHECKPOINT_INTERVAL", "5"}, {"SCR_CHECKPOINT_OVERHEAD", "2.5"}, {"SCR_HALT_EXIT", "1"},
             {"SCR_CURRENT", "timestep.10"}};
  Mapping m = map_parameters(sources(env));
  EXPECT_TRUE(m.warnings.empty()) << m.warnings[0];
  std::map<std::string, std::string> want = {
      {"CAIRN_PREFIX", "/p/run"},         {"CAIRN_CACHE_DIR", "/ssd"},        {"CAIRN_CACHE_VERSIONS", "3"},
      {"CAIRN_REDUNDANCY", "rs"},         {"CAIRN_SET_SIZE", "8"},            {"CAIRN_RS_PARITY", "3"},
      {"CAIRN_FLUSH_EVERY", "20"},        {"CAIRN_HALT_SECONDS", "600"},      {"CAIRN_INTERVAL_SECONDS", "90"},
      {"CAIRN_KEEP_FLUSHED", "1000"},     {"CAIRN_LOG", "info"},              {"CAIRN_EXCHANGE_CHUNK", "1M"}};
  EXPECT_EQ(m.cairn_env, want);
  EXPECT_EQ(m.origin["CAIRN_FLUSH_EVERY"], "SCR_FLUSH");
  EXPECT_EQ(m.library.checkpoint_interval, 5);
  EXPECT_DOUBLE_EQ(m.library.checkpoint_overhead, 2.5);
  EXPECT_TRUE(m.library.halt_exit);
  EXPECT_EQ(m.library.current, "timestep.10");
  EXPECT_EQ(m.library.prefix, "/p/run");
}

TEST(ScrMapping, TheTableNamesOnlyRealKnobs) {
  std::set<std::string> knobs;
  for (const auto& k : knob_table()) knobs.insert(k.env);
  Env env;
  for (const auto& p : parameter_table())
    if (p.name.rfind("SCR_", 0) == 0) env[p.name] = "1";
  env["SCR_COPY_TYPE"] = "XOR";
  env["SCR_PREFIX"] = "/x";
  env["SCR_CACHE_BASE"] = "/y";
  Mapping m = map_parameters(sources(env));
  EXPECT_GE(m.cairn_env.size(), 10u);
  for (const auto& [env_name, value] : m.cairn_env) EXPECT_TRUE(knobs.count(env_name)) << env_name;
}

// Every row that sets a knob names a real one, and holds a value to that knob's own bounds (the knob table,
// src/base/knob_table.cpp): what the knob would refuse at cairn_init, the mapping refuses under its SCR name.
TEST(ScrMapping, RowsAreHeldToTheKnobTable) {
  std::map<std::string, KnobInfo> knobs;
  for (const auto& k : knob_table()) knobs[k.name] = k;
  int bounded = 0;
  for (const auto& p : parameter_table()) {
    if (p.knob.empty()) continue;
    auto it = knobs.find(p.knob);
    ASSERT_NE(it, knobs.end()) << p.name << " names no knob " << p.knob;
    EXPECT_EQ(p.becomes, p.knob + " (" + it->second.env + ")") << p.name;
    if (p.hi == 0) continue;
    ++bounded;
    auto text = [&](long long v) {
      return it->second.type == "size" ? units::format_size(static_cast<uint64_t>(v)) : std::to_string(v);
    };
    EXPECT_EQ(text(p.lo) + ".." + text(p.hi), it->second.bounds) << p.name << " against " << p.knob;
  }
  EXPECT_GE(bounded, 6);
}

// set_size is 2..255: SCR_SET_SIZE=1 (and a CKPT descriptor's SET_SIZE=1) becomes CAIRN_SET_SIZE=1 from
// SCR_SET_SIZE, which the knob refuses at load (the tools and SCR_Init then name SCR_SET_SIZE); a malformed
// value is a warning and ignored; SCR's own meanings below a knob's least are kept (1KB -> 64K).
TEST(ScrMapping, TheKnobRefusesWhatIsOutsideItsBounds) {
  Mapping m = map_parameters(sources({{"SCR_SET_SIZE", "1"}}));
  EXPECT_EQ(m.cairn_env["CAIRN_SET_SIZE"], "1");
  EXPECT_EQ(m.origin["CAIRN_SET_SIZE"], "SCR_SET_SIZE");
  EXPECT_TRUE(m.warnings.empty());
  Env knobs(m.cairn_env.begin(), m.cairn_env.end());
  auto loaded = load_config("", env_of(knobs), {"CAIRN_SET_SIZE"});
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.status().message().find("CAIRN_SET_SIZE"), std::string::npos) << loaded.status().message();
  m = map_parameters(sources({}, {}, {set("CKPT=0 TYPE=XOR SET_SIZE=1")}));
  EXPECT_EQ(m.cairn_env["CAIRN_SET_SIZE"], "1");
  EXPECT_EQ(m.origin["CAIRN_SET_SIZE"], "CKPT=0 SET_SIZE");
  m = map_parameters(sources({{"SCR_SET_SIZE", "two"}}));
  EXPECT_FALSE(m.cairn_env.count("CAIRN_SET_SIZE"));
  EXPECT_TRUE(mentions(m.warnings, "SCR_SET_SIZE=two: not an integer (set_size: 2..255); ignored"));
  m = map_parameters(sources({{"SCR_MPI_BUF_SIZE", "1KB"}}));
  EXPECT_EQ(m.cairn_env["CAIRN_EXCHANGE_CHUNK"], "64K");
}

TEST(ScrMapping, FlushZeroKeepsTheFinalFlushAndSaysSo) {
  Mapping m = map_parameters(sources({{"SCR_FLUSH", "0"}}));
  EXPECT_EQ(m.cairn_env["CAIRN_FLUSH_EVERY"], "0");
  EXPECT_FALSE(m.cairn_env.count("CAIRN_FLUSH_ON_FINALIZE"));  // cairn's default: flush at finalize
  EXPECT_TRUE(mentions(m.notes, "still flushed at SCR_Finalize"));
}

TEST(ScrMapping, PrecedenceEnvironmentThenFileThenScrConfig) {
  std::vector<Setting> file = {set("SCR_FLUSH=7"), set("SCR_SET_SIZE=6")};
  std::vector<Setting> app = {set("SCR_FLUSH=5"), set("SCR_SET_SIZE=5"), set("SCR_CACHE_SIZE=4"),
                              set("SCR_CACHE_SIZE=2")};
  Mapping m = map_parameters(sources({{"SCR_FLUSH", "9"}}, file, app));
  EXPECT_EQ(m.cairn_env["CAIRN_FLUSH_EVERY"], "9");
  EXPECT_EQ(m.cairn_env["CAIRN_SET_SIZE"], "6");
  EXPECT_EQ(m.cairn_env["CAIRN_CACHE_VERSIONS"], "2");  // the later SCR_Config call wins
  auto s = sources({{"SCR_FLUSH", "9"}}, file, app);
  EXPECT_EQ(lookup(s, "SCR_FLUSH"), "9");
  EXPECT_EQ(lookup(s, "SCR_SET_SIZE"), "6");
  EXPECT_EQ(lookup(s, "SCR_NOT_SET"), std::nullopt);
}

TEST(ScrMapping, CairnVariablesOutrankScrsWithAWarningWhenTheyDiffer) {
  Mapping m = map_parameters(sources({{"SCR_FLUSH", "3"}, {"CAIRN_FLUSH_EVERY", "8"}, {"SCR_SET_SIZE", "4"},
                                      {"CAIRN_SET_SIZE", "4"}}));
  EXPECT_FALSE(m.cairn_env.count("CAIRN_FLUSH_EVERY"));
  EXPECT_FALSE(m.cairn_env.count("CAIRN_SET_SIZE"));
  EXPECT_TRUE(mentions(m.warnings, "CAIRN_FLUSH_EVERY=8"));
  EXPECT_FALSE(mentions(m.warnings, "CAIRN_SET_SIZE"));
}

TEST(ScrMapping, UnknownUnsupportedAndBadValuesWarn) {
  Mapping m = map_parameters(sources({{"SCR_FLUSHH", "3"},
                                      {"SCR_CACHE_BYPASS", "1"},
                                      {"SCR_GROUP", "POWER"},
                                      {"SCR_FLUSH", "often"},
                                      {"SCR_COPY_TYPE", "MIRROR"},
                                      {"SCR_FLUSH_ASYNC", "1"}}));
  EXPECT_TRUE(mentions(m.warnings, "unknown SCR parameter SCR_FLUSHH"));
  EXPECT_TRUE(mentions(m.warnings, "SCR_CACHE_BYPASS=1 is not supported"));
  EXPECT_TRUE(mentions(m.warnings, "SCR_GROUP=POWER"));
  EXPECT_TRUE(mentions(m.warnings, "SCR_FLUSH=often"));
  EXPECT_TRUE(mentions(m.warnings, "SCR_COPY_TYPE=MIRROR"));
  EXPECT_TRUE(mentions(m.notes, "SCR_FLUSH_ASYNC=1"));
  EXPECT_TRUE(m.cairn_env.empty());
  // SCR_CACHE_BYPASS=0 is what cairn does anyway: a note, no warning.
  m = map_parameters(sources({{"SCR_CACHE_BYPASS", "0"}}));
  EXPECT_TRUE(m.warnings.empty());
}

TEST(ScrMapping, CheckpointDescriptorWithIntervalOne) {
  std::vector<Setting> file = {set("CKPT=0 INTERVAL=1 TYPE=PARTNER STORE=/dev/shm/a"),
                               set("CKPT=1 INTERVAL=10 TYPE=XOR SET_SIZE=8")};
  Mapping m = map_parameters(sources({{"SCR_COPY_TYPE", "FILE"}}, file));
  EXPECT_EQ(m.cairn_env["CAIRN_REDUNDANCY"], "partner");
  EXPECT_EQ(m.cairn_env["CAIRN_CACHE_DIR"], "/dev/shm/a");
  EXPECT_FALSE(m.cairn_env.count("CAIRN_SET_SIZE"));
  EXPECT_TRUE(mentions(m.warnings, "using CKPT=0"));
  auto s = sources({}, file);
  EXPECT_EQ(lookup(s, "CKPT", "1", "TYPE"), "XOR");
  // SCR_COPY_TYPE other than FILE wins over descriptors.
  m = map_parameters(sources({{"SCR_COPY_TYPE", "SINGLE"}}, file));
  EXPECT_EQ(m.cairn_env["CAIRN_REDUNDANCY"], "single");
  EXPECT_TRUE(mentions(m.warnings, "CKPT descriptors are ignored"));
}

TEST(ScrMapping, DisabledAndEdgeValues) {
  Mapping m = map_parameters(sources({{"SCR_ENABLE", "0"}, {"SCR_CACHE_SIZE", "0"}, {"SCR_MPI_BUF_SIZE", "4096"},
                                      {"SCR_DEBUG", "3"}}));
  EXPECT_FALSE(m.library.enabled);
  EXPECT_EQ(m.cairn_env["CAIRN_CACHE_VERSIONS"], "1");
  EXPECT_EQ(m.cairn_env["CAIRN_EXCHANGE_CHUNK"], "64K");
  EXPECT_EQ(m.cairn_env["CAIRN_LOG"], "debug");
}

TEST(ScrParamsFuzz, RandomStringsNeverCrash) {
  std::mt19937_64 rng(0x5c7);
  const std::string alphabet = "SCR_FLUSH=0 \"#$\t{}CKPT=\n=aZ_9";
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s(rng() % 60, ' ');
    for (auto& c : s) c = rng() % 4 == 0 ? char(rng()) : alphabet[rng() % alphabet.size()];
    std::string e;
    auto r = parse_config_request(s, &e);
    if (!r) {
      EXPECT_FALSE(e.empty());
    }
    std::vector<std::string> errors;
    auto list = parse_config_file(s, env_of({{"A", "x"}}), &errors);
    Mapping m = map_parameters(sources({}, list));
    (void)m;
  }
}

}  // namespace
}  // namespace cairn::scr

namespace cairn::scr {
namespace {

// docs/scr.md's parameter table is this table, row for row.
std::string markdown_table() {
  std::string out = "| SCR parameter | becomes | meaning in cairn |\n|---|---|---|\n";
  for (const auto& p : parameter_table()) out += "| `" + p.name + "` | " + p.becomes + " | " + p.meaning + " |\n";
  return out;
}

TEST(ScrDocs, ParameterTableIsCurrent) {
  std::ifstream in(std::string(CAIRN_SOURCE_DIR) + "/docs/scr.md");
  std::string doc((std::istreambuf_iterator<char>(in)), {});
  const std::string begin = "<!-- scr-params:begin -->\n", end = "<!-- scr-params:end -->";
  auto b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  std::string table = doc.substr(b + begin.size(), e - b - begin.size());
  EXPECT_EQ(table, markdown_table()) << "regenerate docs/scr.md's table from bindings/scr/scr_params.cpp:\n"
                                     << markdown_table();
}

}  // namespace
}  // namespace cairn::scr
