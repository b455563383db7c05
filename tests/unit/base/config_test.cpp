#include "base/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace cairn {
namespace {

// A fake environment for load_config.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, value] : vars) out.push_back(name);
    return out;
  }
};

class ConfigTest : public ::testing::Test {
 protected:
  // Writes `text` to a fresh file and returns its path.
  std::string write_file(const std::string& text) {
    std::string path = ::testing::TempDir() + "cairn_config_test_" + std::to_string(getpid()) + "_" +
                       std::to_string(files_++) + ".toml";
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : paths_) unlink(p.c_str());
  }
  Result<LoadedConfig> load(const char* path) { return load_config(path, env.lookup(), env.names()); }
  Result<LoadedConfig> load_text(const std::string& toml) {
    std::string path = write_file(toml);
    return load(path.c_str());
  }
  // The error message of a load that must fail with ERR_CONFIG.
  std::string error_of(const Result<LoadedConfig>& r) {
    EXPECT_FALSE(r.is_ok());
    if (r.is_ok()) return "";
    EXPECT_EQ(r.status().code(), Code::ERR_CONFIG);
    return r.status().message();
  }
  Config env_only(const std::string& name, const std::string& value) {
    env.vars = {{name, value}};
    auto r = load(nullptr);
    env.vars.clear();
    EXPECT_TRUE(r.is_ok()) << name << "=" << value << ": " << r.status().message();
    return r.is_ok() ? r->config : Config{};
  }
  std::string env_error(const std::string& name, const std::string& value) {
    env.vars = {{name, value}};
    auto r = load(nullptr);
    env.vars.clear();
    return error_of(r);
  }

  FakeEnv env;

 private:
  int files_ = 0;
  std::vector<std::string> paths_;
};

using ConfigDefaults = ConfigTest;
using ConfigFile = ConfigTest;
using ConfigEnv = ConfigTest;
using ConfigValues = ConfigTest;
using ConfigRender = ConfigTest;

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string origin_of(const LoadedConfig& loaded, const std::string& knob) {
  for (size_t i = 0; i < knob_table().size(); ++i)
    if (knob_table()[i].name == knob) return loaded.origins.at(i);
  return "no such knob";
}

TEST_F(ConfigDefaults, EveryKnobHasItsDefault) {
  auto r = load(nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Config& c = r->config;
  EXPECT_EQ(c.prefix, "cairn-checkpoints");
  EXPECT_EQ(c.cache_dir, "/dev/shm");
  EXPECT_EQ(c.cache_versions, 2);
  EXPECT_EQ(c.redundancy, Redundancy::xor_set);
  EXPECT_EQ(c.set_size, 4);
  EXPECT_EQ(c.rs_parity, 2);
  EXPECT_EQ(c.flush_every, 10);
  EXPECT_EQ(c.keep_flushed, 2);
  EXPECT_TRUE(c.recycle_flushed);
  EXPECT_TRUE(c.flush_on_finalize);
  EXPECT_EQ(c.interval_seconds, 0.0);
  EXPECT_EQ(c.halt_seconds, 0.0);
  EXPECT_EQ(c.end_time, 0);
  EXPECT_FALSE(c.node.empty());
  EXPECT_EQ(c.node, hostname().empty() ? "localhost" : hostname());
  EXPECT_EQ(c.log_level, log::Level::warn);
  EXPECT_EQ(c.chunk_size, 1u << 20);
  EXPECT_EQ(c.exchange_chunk, 4u << 20);
  EXPECT_EQ(c.job, "");
  EXPECT_TRUE(r->warnings.empty());
  ASSERT_EQ(r->origins.size(), knob_table().size());
  for (const auto& o : r->origins) EXPECT_EQ(o.rfind("default", 0), 0u) << o;
}

// The struct's own initializers agree with the table (code that builds a Config{} by hand).
TEST_F(ConfigDefaults, StructInitializersMatchTable) {
  auto r = load(nullptr);
  ASSERT_TRUE(r.is_ok());
  Config d;
  const Config& c = r->config;
  EXPECT_EQ(d.cache_versions, c.cache_versions);
  EXPECT_EQ(d.redundancy, c.redundancy);
  EXPECT_EQ(d.set_size, c.set_size);
  EXPECT_EQ(d.rs_parity, c.rs_parity);
  EXPECT_EQ(d.flush_every, c.flush_every);
  EXPECT_EQ(d.keep_flushed, c.keep_flushed);
  EXPECT_EQ(d.flush_on_finalize, c.flush_on_finalize);
  EXPECT_EQ(d.interval_seconds, c.interval_seconds);
  EXPECT_EQ(d.halt_seconds, c.halt_seconds);
  EXPECT_EQ(d.end_time, c.end_time);
  EXPECT_EQ(d.log_level, c.log_level);
  EXPECT_EQ(d.chunk_size, c.chunk_size);
  EXPECT_EQ(d.exchange_chunk, c.exchange_chunk);
}

TEST(ConfigNames, RedundancyNames) {
  EXPECT_STREQ(redundancy_name(Redundancy::single), "single");
  EXPECT_STREQ(redundancy_name(Redundancy::partner), "partner");
  EXPECT_STREQ(redundancy_name(Redundancy::xor_set), "xor");
  EXPECT_STREQ(redundancy_name(Redundancy::rs), "rs");
}

TEST(ConfigNames, KnobTableEnvNames) {
  for (const KnobInfo& k : knob_table()) {
    std::string upper = k.name;
    for (char& c : upper) c = static_cast<char>(toupper(c));
    EXPECT_EQ(k.env, "CAIRN_" + upper);
    EXPECT_FALSE(k.description.empty()) << k.name;
  }
}

const char* kEveryKnobToml = R"(
prefix = "/scratch/me/ckpt"
cache_dir = "/tmp/cache"
cache_versions = 3
snapshot = "cow"
l1_incremental = "on"
cuda_driver = "/opt/cuda/lib64/libcuda.so.1"
device_copy = "return"
device_piece = "16M"
device_hash_threads = 3
redundancy = "rs"
set_size = 8
rs_parity = 3
l2_every = 2
flush_every = 0
keep_flushed = 5
recycle_flushed = false
full_every = 1
files_per_node = 2
turnstile_width = 1
data_prefixes = "/fs1:2,/fs2"
compress = "zstd:5"
flush_on_finalize = false
interval = "auto"
interval_seconds = 120.5
mtbf_seconds = 86400
l3_mtbf_seconds = "1w"
halt_seconds = 300
end_time = 1700000000
exit_signal = "USR2"
node = "n07"
log = "debug"
chunk_size = "256K"
exchange_chunk = 8388608
restart_threads = 3
job = "heat2d"
app_name = "heat2d-v2"
adopt = true
restart_version = 7
if_unrecoverable = "start_over"
lease_seconds = 30
service = "ckpt0-ib:7700"
service_mode = "push"
service_agents = 4
service_chunk = "256K"
service_buffer_pool = "16M"
service_provider = "verbs;ofi_rxm"
service_timeout = 12.5
service_restart = "agents"
migrate_transport = "fabric"
migrate_listen = "iface:ib0"
)";

void expect_every_knob_set(const Config& c) {
  EXPECT_EQ(c.prefix, "/scratch/me/ckpt");
  EXPECT_EQ(c.cache_dir, "/tmp/cache");
  EXPECT_EQ(c.cache_versions, 3);
  EXPECT_EQ(c.snapshot, SnapshotMode::cow);
  EXPECT_EQ(c.l1_incremental, L1Incremental::on);
  EXPECT_EQ(c.cuda_driver, "/opt/cuda/lib64/libcuda.so.1");
  EXPECT_EQ(c.device_copy, DeviceCopy::return_at_once);
  EXPECT_EQ(c.device_piece, 16ull << 20);
  EXPECT_EQ(c.device_hash_threads, 3);
  EXPECT_EQ(c.redundancy, Redundancy::rs);
  EXPECT_EQ(c.set_size, 8);
  EXPECT_EQ(c.rs_parity, 3);
  EXPECT_EQ(c.l2_every, 2);
  EXPECT_EQ(c.flush_every, 0);
  EXPECT_EQ(c.keep_flushed, 5);
  EXPECT_FALSE(c.recycle_flushed);
  EXPECT_EQ(c.full_every, 1);
  EXPECT_EQ(c.files_per_node, 2);
  EXPECT_EQ(c.turnstile_width, 1);
  EXPECT_EQ(c.data_prefixes, "/fs1:2,/fs2");
  EXPECT_EQ(c.compress, "zstd:5");
  EXPECT_FALSE(c.flush_on_finalize);
  EXPECT_EQ(c.interval, IntervalMode::automatic);
  EXPECT_EQ(c.interval_seconds, 120.5);
  EXPECT_EQ(c.mtbf_seconds, 86400.0);
  EXPECT_EQ(c.l3_mtbf_seconds, 7 * 86400.0);
  EXPECT_EQ(c.halt_seconds, 300.0);
  EXPECT_EQ(c.end_time, 1700000000);
  EXPECT_EQ(c.exit_signal, "USR2");
  EXPECT_EQ(c.node, "n07");
  EXPECT_EQ(c.log_level, log::Level::debug);
  EXPECT_EQ(c.chunk_size, 256u * 1024);
  EXPECT_EQ(c.exchange_chunk, 8u << 20);
  EXPECT_EQ(c.restart_threads, 3);
  EXPECT_EQ(c.job, "heat2d");
  EXPECT_EQ(c.app_name, "heat2d-v2");
  EXPECT_TRUE(c.adopt);
  EXPECT_EQ(c.restart_version, 7u);
  EXPECT_EQ(c.if_unrecoverable, IfUnrecoverable::start_over);
  EXPECT_EQ(c.lease_seconds, 30.0);
  EXPECT_EQ(c.service, "ckpt0-ib:7700");
  EXPECT_EQ(c.service_mode, ServiceMode::push);
  EXPECT_EQ(c.service_agents, 4);
  EXPECT_EQ(c.service_chunk, 256u * 1024);
  EXPECT_EQ(c.service_buffer_pool, 16u << 20);
  EXPECT_EQ(c.service_provider, "verbs;ofi_rxm");
  EXPECT_EQ(c.service_timeout, 12.5);
  EXPECT_EQ(c.service_restart, ServiceRestart::agents);
  EXPECT_EQ(c.migrate_transport, MigrateTransport::fabric);
  EXPECT_EQ(c.migrate_listen, "iface:ib0");
}

TEST_F(ConfigFile, EveryKnobAtTopLevel) {
  auto r = load_text(kEveryKnobToml);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  expect_every_knob_set(r->config);
  for (const auto& o : r->origins) EXPECT_NE(o.find(".toml:"), std::string::npos) << o;
}

TEST_F(ConfigFile, EveryKnobInCairnTable) {
  auto r = load_text(std::string("# a comment\n[cairn]\n") + kEveryKnobToml);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  expect_every_knob_set(r->config);
}

TEST_F(ConfigFile, MixedTopLevelAndCairnTable) {
  auto r = load_text("set_size = 6\n[cairn]\nredundancy = \"partner\"\n");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->config.set_size, 6);
  EXPECT_EQ(r->config.redundancy, Redundancy::partner);
}

TEST_F(ConfigFile, SameKnobTwiceRejected) {
  std::string msg = error_of(load_text("set_size = 6\n[cairn]\nset_size = 8\n"));
  EXPECT_NE(msg.find("set_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find(":1"), std::string::npos) << msg;
  EXPECT_NE(msg.find(":3"), std::string::npos) << msg;
}

TEST_F(ConfigFile, CairnMustBeATable) {
  std::string msg = error_of(load_text("cairn = 3\n"));
  EXPECT_NE(msg.find("[cairn]"), std::string::npos) << msg;
}

TEST_F(ConfigFile, EmptyPathMeansNoFile) {
  env.vars = {{"CAIRN_CONFIG", "/nonexistent/cairn.toml"}};
  auto r = load("");
  ASSERT_TRUE(r.is_ok()) << r.status().message();  // "" wins over CAIRN_CONFIG
  EXPECT_EQ(r->config.set_size, 4);
}

TEST_F(ConfigFile, CairnConfigNamesTheFileWhenPathIsNull) {
  std::string path = write_file("set_size = 7\n");
  env.vars = {{"CAIRN_CONFIG", path}};
  auto r = load(nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->config.set_size, 7);
  EXPECT_TRUE(r->warnings.empty());  // CAIRN_CONFIG is not an unknown variable
}

TEST_F(ConfigFile, MissingFileNamesThePath) {
  std::string msg = error_of(load("/nonexistent/dir/cairn.toml"));
  EXPECT_NE(msg.find("/nonexistent/dir/cairn.toml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;

  env.vars = {{"CAIRN_CONFIG", "/nonexistent/other.toml"}};
  msg = error_of(load(nullptr));
  EXPECT_NE(msg.find("/nonexistent/other.toml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CAIRN_CONFIG"), std::string::npos) << msg;
}

TEST_F(ConfigFile, DirectoryIsNotAFile) {
  std::string msg = error_of(load(::testing::TempDir().c_str()));
  EXPECT_NE(msg.find("directory"), std::string::npos) << msg;
}

TEST_F(ConfigFile, SyntaxErrorHasLineAndColumn) {
  std::string path = write_file("set_size = 4\nredundancy = \"xor\"\ncache_versions = = 3\n");
  std::string msg = error_of(load(path.c_str()));
  EXPECT_EQ(msg.rfind(path + ":3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("syntax"), std::string::npos) << msg;
}

TEST_F(ConfigFile, UnknownKeySuggestsNearMiss) {
  std::string path = write_file("set_size = 4\n\ncache_version = 3\n");
  std::string msg = error_of(load(path.c_str()));
  EXPECT_NE(msg.find("unknown key \"cache_version\""), std::string::npos) << msg;
  EXPECT_NE(msg.find(path + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean \"cache_versions\"?"), std::string::npos) << msg;

  msg = error_of(load_text("[cairn]\nredundnacy = \"rs\"\n"));  // a swap of two letters
  EXPECT_NE(msg.find("did you mean \"redundancy\"?"), std::string::npos) << msg;
}

TEST_F(ConfigFile, UnknownKeyFarFromAnyKnob) {
  std::string msg = error_of(load_text("compression = \"zstd\"\n"));
  EXPECT_NE(msg.find("unknown key \"compression\""), std::string::npos) << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

TEST_F(ConfigFile, UnknownTableRejected) {
  std::string msg = error_of(load_text("[cairns]\nset_size = 4\n"));
  EXPECT_NE(msg.find("did you mean \"cairn\"?"), std::string::npos) << msg;
}

TEST_F(ConfigFile, BadValueMessageNamesKnobSourceValueAndBounds) {
  std::string path = write_file("set_size = 4\ncache_versions = 100\n");
  std::string msg = error_of(load(path.c_str()));
  EXPECT_NE(msg.find("cache_versions"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path + ":2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1..64"), std::string::npos) << msg;
}

TEST_F(ConfigEnv, EnvironmentOverridesFile) {
  env.vars = {{"CAIRN_SET_SIZE", "12"}, {"CAIRN_LOG", "info"}, {"CAIRN_NODE", "sim3"}};
  auto r = load_text("set_size = 6\ncache_versions = 3\n");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->config.set_size, 12);
  EXPECT_EQ(r->config.cache_versions, 3);  // from the file
  EXPECT_EQ(r->config.log_level, log::Level::info);
  EXPECT_EQ(r->config.node, "sim3");
  EXPECT_EQ(origin_of(*r, "set_size"), "environment variable CAIRN_SET_SIZE");
  EXPECT_EQ(origin_of(*r, "cache_versions").substr(origin_of(*r, "cache_versions").size() - 7),
            ".toml:2");
  EXPECT_EQ(origin_of(*r, "redundancy"), "default");
  std::string list = render_knob_list(*r);
  EXPECT_NE(list.find("environment variable CAIRN_SET_SIZE"), std::string::npos) << list;
  EXPECT_NE(list.find(".toml:2"), std::string::npos) << list;
}

TEST_F(ConfigEnv, BadEnvironmentValueNamesTheVariable) {
  std::string msg = env_error("CAIRN_REDUNDANCY", "raid6");
  EXPECT_NE(msg.find("redundancy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("environment variable CAIRN_REDUNDANCY"), std::string::npos) << msg;
  EXPECT_NE(msg.find("raid6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("single|partner|xor|rs"), std::string::npos) << msg;
}

TEST_F(ConfigEnv, EmptyVariableCountsAsUnset) {
  Config c = env_only("CAIRN_PREFIX", "");
  EXPECT_EQ(c.prefix, "cairn-checkpoints");
  c = env_only("CAIRN_SET_SIZE", "");
  EXPECT_EQ(c.set_size, 4);
}

TEST_F(ConfigEnv, UnknownCairnVariableIsAWarning) {
  env.vars = {{"CAIRN_CACHE_VERSION", "3"},  // near miss
              {"CAIRN_FROBNICATE", "1"},     // far from everything
              {"CAIRN_INJECT", "kill:1"},    // launcher's, allowed
              {"CAIRN_MPIRUN", "mpirun"},
              {"CAIRN_LOG", "info"}};
  auto r = load(nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_EQ(r->warnings[0],
            "unknown environment variable CAIRN_CACHE_VERSION ignored (did you mean "
            "CAIRN_CACHE_VERSIONS?)");
  EXPECT_EQ(r->warnings[1], "unknown environment variable CAIRN_FROBNICATE ignored");
  EXPECT_EQ(r->config.cache_versions, 2);
}

// ---- every type's good and bad values, through the environment and the file ---------------------

TEST_F(ConfigValues, Integers) {
  EXPECT_EQ(env_only("CAIRN_CACHE_VERSIONS", "1").cache_versions, 1);
  EXPECT_EQ(env_only("CAIRN_CACHE_VERSIONS", "64").cache_versions, 64);
  EXPECT_EQ(env_only("CAIRN_CACHE_VERSIONS", " 5 ").cache_versions, 5);
  EXPECT_EQ(env_only("CAIRN_SET_SIZE", "255").set_size, 255);
  EXPECT_EQ(env_only("CAIRN_FLUSH_EVERY", "0").flush_every, 0);
  EXPECT_EQ(env_only("CAIRN_FLUSH_EVERY", "1000000").flush_every, 1000000);
  EXPECT_EQ(env_only("CAIRN_KEEP_FLUSHED", "1000").keep_flushed, 1000);
  EXPECT_EQ(env_only("CAIRN_END_TIME", "4102444800").end_time, 4102444800);
  for (const char* bad : {"0", "65", "-1", "3.0", "two", "3x", "99999999999999999999"})
    EXPECT_NE(env_error("CAIRN_CACHE_VERSIONS", bad).find("1..64"), std::string::npos) << bad;
  EXPECT_NE(env_error("CAIRN_SET_SIZE", "1").find("2..255"), std::string::npos);
  EXPECT_NE(env_error("CAIRN_SET_SIZE", "256").find("2..255"), std::string::npos);
  EXPECT_NE(env_error("CAIRN_FLUSH_EVERY", "1000001").find("0..1000000"), std::string::npos);
  EXPECT_NE(env_error("CAIRN_KEEP_FLUSHED", "0").find("1..1000"), std::string::npos);
  EXPECT_NE(env_error("CAIRN_END_TIME", "-5").find(">= 0"), std::string::npos);

  auto r = load_text("cache_versions = 3.0\n");
  EXPECT_NE(error_of(r).find("not an integer"), std::string::npos);
  r = load_text("cache_versions = \"3\"\n");
  EXPECT_NE(error_of(r).find("without quotes"), std::string::npos);
  r = load_text("set_size = true\n");
  EXPECT_NE(error_of(r).find("not an integer"), std::string::npos);
  r = load_text("end_time = -1\n");
  EXPECT_NE(error_of(r).find("out of range"), std::string::npos);
}

// The *_seconds knobs are durations (base/units.hpp): seconds, or with units.
TEST_F(ConfigValues, Durations) {
  EXPECT_EQ(env_only("CAIRN_INTERVAL_SECONDS", "90").interval_seconds, 90.0);
  EXPECT_EQ(env_only("CAIRN_INTERVAL_SECONDS", "0.25").interval_seconds, 0.25);
  EXPECT_EQ(env_only("CAIRN_HALT_SECONDS", "1e3").halt_seconds, 1000.0);
  EXPECT_EQ(env_only("CAIRN_INTERVAL_SECONDS", "1.5s").interval_seconds, 1.5);
  EXPECT_EQ(env_only("CAIRN_HALT_SECONDS", "5m").halt_seconds, 300.0);
  EXPECT_EQ(env_only("CAIRN_MTBF_SECONDS", "1d12h").mtbf_seconds, 129600.0);
  for (const char* bad : {"-1", "-0.5", "soon", "nan", "inf", "1,5", "5 parsecs"})
    EXPECT_NE(env_error("CAIRN_INTERVAL_SECONDS", bad).find(">= 0"), std::string::npos) << bad;

  auto r = load_text("interval_seconds = 60\nhalt_seconds = 2.5\n");  // integers are fine for floats
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->config.interval_seconds, 60.0);
  EXPECT_EQ(r->config.halt_seconds, 2.5);
  EXPECT_NE(error_of(load_text("halt_seconds = -2.0\n")).find("out of range"), std::string::npos);
  EXPECT_NE(error_of(load_text("halt_seconds = inf\n")).find("finite"), std::string::npos);
  auto quoted = load_text("halt_seconds = \"5m\"\nlease_seconds = \"90\"\n");  // a duration may be a string
  ASSERT_TRUE(quoted.is_ok()) << quoted.status().message();
  EXPECT_EQ(quoted->config.halt_seconds, 300.0);
  EXPECT_EQ(quoted->config.lease_seconds, 90.0);
  EXPECT_NE(error_of(load_text("halt_seconds = \"soon\"\n")).find("not a duration"), std::string::npos);
}

TEST_F(ConfigValues, Bools) {
  for (const char* yes : {"1", "true", "TRUE", "yes", "Yes", "on"})
    EXPECT_TRUE(env_only("CAIRN_FLUSH_ON_FINALIZE", yes).flush_on_finalize) << yes;
  for (const char* no : {"0", "false", "no", "off", "OFF"})
    EXPECT_FALSE(env_only("CAIRN_FLUSH_ON_FINALIZE", no).flush_on_finalize) << no;
  for (const char* bad : {"2", "y", "enabled", "truee"})
    EXPECT_NE(env_error("CAIRN_FLUSH_ON_FINALIZE", bad).find("not a boolean"), std::string::npos)
        << bad;

  auto r = load_text("flush_on_finalize = false\n");
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r->config.flush_on_finalize);
  EXPECT_NE(error_of(load_text("flush_on_finalize = \"yes\"\n")).find("true or false"),
            std::string::npos);
  EXPECT_NE(error_of(load_text("flush_on_finalize = 1\n")).find("not a boolean"), std::string::npos);
}

TEST_F(ConfigValues, Enums) {
  EXPECT_EQ(env_only("CAIRN_REDUNDANCY", "single").redundancy, Redundancy::single);
  EXPECT_EQ(env_only("CAIRN_REDUNDANCY", "partner").redundancy, Redundancy::partner);
  EXPECT_EQ(env_only("CAIRN_REDUNDANCY", "XOR").redundancy, Redundancy::xor_set);
  EXPECT_EQ(env_only("CAIRN_REDUNDANCY", "rs").redundancy, Redundancy::rs);
  EXPECT_EQ(env_only("CAIRN_LOG", "error").log_level, log::Level::error);
  EXPECT_EQ(env_only("CAIRN_LOG", "warn").log_level, log::Level::warn);
  EXPECT_EQ(env_only("CAIRN_LOG", "info").log_level, log::Level::info);
  EXPECT_EQ(env_only("CAIRN_LOG", "debug").log_level, log::Level::debug);
  EXPECT_NE(env_error("CAIRN_LOG", "verbose").find("error|warn|info|debug"), std::string::npos);
  EXPECT_NE(env_error("CAIRN_REDUNDANCY", "raid5").find("unknown value"), std::string::npos);

  EXPECT_NE(error_of(load_text("redundancy = xor\n")).find("syntax"), std::string::npos);
  EXPECT_NE(error_of(load_text("redundancy = 2\n")).find("in quotes"), std::string::npos);
  EXPECT_NE(error_of(load_text("log = \"trace\"\n")).find("error|warn|info|debug"),
            std::string::npos);
}

TEST_F(ConfigValues, Sizes) {
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "4K").chunk_size, 4096u);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "64KiB").chunk_size, 65536u);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "2m").chunk_size, 2u << 20);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "1MiB").chunk_size, 1u << 20);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "1G").chunk_size, 1u << 30);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "1GiB").chunk_size, 1u << 30);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "4160").chunk_size, 4160u);  // 65 x 64
  EXPECT_EQ(env_only("CAIRN_EXCHANGE_CHUNK", "64K").exchange_chunk, 65536u);
  EXPECT_EQ(env_only("CAIRN_EXCHANGE_CHUNK", "100000").exchange_chunk, 100000u);
  for (const char* bad : {"2K", "2G", "0", "4100"})
    EXPECT_NE(env_error("CAIRN_CHUNK_SIZE", bad).find("4K..1G, a multiple of 64"), std::string::npos)
        << bad;
  EXPECT_NE(env_error("CAIRN_CHUNK_SIZE", "4100").find("multiple of 64"), std::string::npos);
  // One size syntax (base/units.hpp): KB and fractions that make whole bytes are sizes too.
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "1.5M").chunk_size, 3u << 19);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "1MB").chunk_size, 1u << 20);
  EXPECT_EQ(env_only("CAIRN_CHUNK_SIZE", "1 M").chunk_size, 1u << 20);
  for (const char* bad : {"M", "-4K", "4T", "99999999999999999999G", "0.3K", "1X"})
    EXPECT_NE(env_error("CAIRN_CHUNK_SIZE", bad).find("chunk_size"), std::string::npos) << bad;
  EXPECT_NE(env_error("CAIRN_EXCHANGE_CHUNK", "32K").find("64K..1G"), std::string::npos);

  auto r = load_text("chunk_size = 65536\nexchange_chunk = \"16MiB\"\n");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->config.chunk_size, 65536u);
  EXPECT_EQ(r->config.exchange_chunk, 16u << 20);
  EXPECT_NE(error_of(load_text("chunk_size = 1.5\n")).find("not a size"), std::string::npos);
  EXPECT_NE(error_of(load_text("chunk_size = \"lots\"\n")).find("not a size"), std::string::npos);
  EXPECT_NE(error_of(load_text("chunk_size = 100\n")).find("out of range"), std::string::npos);
}

TEST_F(ConfigValues, Strings) {
  EXPECT_EQ(env_only("CAIRN_PREFIX", "/lus/scratch/ckpt").prefix, "/lus/scratch/ckpt");
  EXPECT_EQ(env_only("CAIRN_CACHE_DIR", "/tmp").cache_dir, "/tmp");
  EXPECT_EQ(env_only("CAIRN_NODE", "node-01.sim_2").node, "node-01.sim_2");
  EXPECT_EQ(env_only("CAIRN_JOB", "run42").job, "run42");
  for (const char* bad : {".", "..", "a/b", "n 1", "n$1"}) {
    EXPECT_NE(env_error("CAIRN_NODE", bad).find("CAIRN_NODE"), std::string::npos) << bad;
    EXPECT_NE(env_error("CAIRN_JOB", bad).find("CAIRN_JOB"), std::string::npos) << bad;
  }
  EXPECT_NE(error_of(load_text("prefix = \"\"\n")).find("empty"), std::string::npos);
  EXPECT_NE(error_of(load_text("cache_dir = \"\"\n")).find("non-empty"), std::string::npos);
  EXPECT_NE(error_of(load_text("prefix = 5\n")).find("in quotes"), std::string::npos);
  EXPECT_NE(error_of(load_text("node = \"../x\"\n")).find("node"), std::string::npos);

  auto r = load_text("node = \"\"\njob = \"\"\n");  // empty: derived
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->config.node.empty());
  EXPECT_EQ(r->config.job, "");
}

TEST_F(ConfigValues, ServiceKnobs) {
  EXPECT_EQ(env_only("CAIRN_SERVICE", "127.0.0.1:7700").service, "127.0.0.1:7700");
  EXPECT_EQ(env_only("CAIRN_SERVICE", "[::1]:7700").service, "[::1]:7700");
  for (const char* bad : {"host", "host:", ":7700", "host:0", "host:65536", "host:77a"})
    EXPECT_NE(env_error("CAIRN_SERVICE", bad).find("HOST:PORT"), std::string::npos) << bad;
  EXPECT_NE(env_error("CAIRN_SERVICE_MODE", "pour").find("pull"), std::string::npos);
  EXPECT_NE(error_of(load_text("service_provider = \"\"\n")).find("empty"), std::string::npos);
  EXPECT_NE(error_of(load_text("service_timeout = 0.5\n")).find("service_timeout"), std::string::npos);
  std::string msg = error_of(load_text("service_chunk = \"4M\"\nservice_buffer_pool = \"1M\"\n"));
  EXPECT_NE(msg.find("service_buffer_pool"), std::string::npos) << msg;
  EXPECT_NE(msg.find("service_chunk"), std::string::npos) << msg;
}

TEST_F(ConfigValues, IncrementalVersionsNeedTheFilePerRankLayout) {
  EXPECT_EQ(load_text("full_every = 8\n")->config.full_every, 8);
  EXPECT_TRUE(load_text("full_every = 1\ncompress = \"zstd\"\n").is_ok());
  for (const char* other : {"files_per_node = 2", "compress = \"zstd\"", "data_prefixes = \"/fs1\""}) {
    std::string msg = error_of(load_text(std::string("full_every = 4\n") + other + "\n"));
    EXPECT_NE(msg.find("full_every = 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string(other).substr(0, std::string(other).find(' '))), std::string::npos) << msg;
  }
  env.vars = {{"CAIRN_FULL_EVERY", "3"}};
  std::string msg = error_of(load_text("files_per_node = 2\n"));
  EXPECT_NE(msg.find("environment variable CAIRN_FULL_EVERY"), std::string::npos) << msg;
}

TEST_F(ConfigValues, RsParityMustBeBelowSetSize) {
  std::string path = write_file("redundancy = \"rs\"\nset_size = 4\nrs_parity = 4\n");
  std::string msg = error_of(load(path.c_str()));
  EXPECT_NE(msg.find("rs_parity = 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set_size = 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1..3"), std::string::npos) << msg;

  // Across sources: the file's parity against the environment's set size.
  env.vars = {{"CAIRN_SET_SIZE", "3"}};
  msg = error_of(load_text("redundancy = \"rs\"\nrs_parity = 3\n"));
  EXPECT_NE(msg.find("environment variable CAIRN_SET_SIZE"), std::string::npos) << msg;
  env.vars = {{"CAIRN_SET_SIZE", "2"}, {"CAIRN_REDUNDANCY", "rs"}};
  msg = error_of(load(nullptr));  // default rs_parity = 2
  EXPECT_NE(msg.find("rs_parity = 2 (default)"), std::string::npos) << msg;

  env.vars = {{"CAIRN_SET_SIZE", "5"}};
  auto r = load_text("redundancy = \"rs\"\nrs_parity = 4\n");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  env.vars = {{"CAIRN_SET_SIZE", "2"}};  // xor ignores rs_parity
  r = load(nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
}

// ---- renderings ----------------------------------------------------------------------------------

TEST_F(ConfigRender, MarkdownHasEveryKnob) {
  std::string md = render_knob_markdown();
  for (const KnobInfo& k : knob_table()) {
    EXPECT_NE(md.find("| `" + k.name + "` | `" + k.env + "` |"), std::string::npos) << k.name;
    EXPECT_NE(md.find(k.description), std::string::npos) << k.name;
  }
  EXPECT_EQ(std::count(md.begin(), md.end(), '\n'), static_cast<long>(knob_table().size() + 2));
}

// The sample, uncommented, is a valid config that gives the defaults.
TEST_F(ConfigRender, SampleUncommentedGivesDefaults) {
  std::string sample = render_sample_toml();
  std::istringstream in(sample);
  std::string line, uncommented;
  int knobs = 0;
  while (std::getline(in, line)) {
    for (const KnobInfo& k : knob_table())
      if (line.rfind("# " + k.name + " = ", 0) == 0) {
        uncommented += line.substr(2) + "\n";
        ++knobs;
      }
  }
  EXPECT_EQ(knobs, static_cast<int>(knob_table().size()));
  auto r = load_text(uncommented);
  ASSERT_TRUE(r.is_ok()) << r.status().message() << "\n" << uncommented;
  auto d = load(nullptr);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(render_knob_list(r->config), render_knob_list(d->config));
}

// `cairn config --list` output is itself a config that reproduces the same values.
TEST_F(ConfigRender, ListReadsBackAsToml) {
  auto r = load_text(kEveryKnobToml);
  ASSERT_TRUE(r.is_ok());
  std::string list = render_knob_list(*r);
  auto again = load_text(list);
  ASSERT_TRUE(again.is_ok()) << again.status().message() << "\n" << list;
  expect_every_knob_set(again->config);
  // Names padded to the longest knob's (service_buffer_pool).
  EXPECT_NE(list.find("redundancy          = \"rs\""), std::string::npos) << list;
  EXPECT_NE(list.find("chunk_size          = \"256K\""), std::string::npos) << list;
}

std::string read_source_file(const std::string& relative) {
  std::ifstream in(std::string(CAIRN_SOURCE_DIR) + "/" + relative);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ConfigDocs, MarkdownTableInDocsIsCurrent) {
  std::string doc = read_source_file("docs/config.md");
  const std::string begin = "<!-- knobs:begin -->\n", end = "<!-- knobs:end -->";
  size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/config.md lacks the line " << begin;
  ASSERT_NE(e, std::string::npos) << "docs/config.md lacks the line " << end;
  ASSERT_LT(b, e);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), render_knob_markdown())
      << "docs/config.md is out of date with the knob table in src/base/knob_table.cpp; replace the "
         "lines between the markers with the output of `cairn config --markdown`.";
}

TEST(ConfigDocs, SampleConfigIsCurrent) {
  EXPECT_EQ(read_source_file("docs/cairn.toml.sample"), render_sample_toml())
      << "docs/cairn.toml.sample is out of date with the knob table in src/base/knob_table.cpp; "
         "regenerate it with `cairn config --sample > docs/cairn.toml.sample`.";
}

TEST(ConfigProcess, EnvironmentHelpers) {
  setenv("CAIRN_CONFIG_TEST_PROBE", "x", 1);
  EnvLookup env = process_env();
  ASSERT_NE(env("CAIRN_CONFIG_TEST_PROBE"), nullptr);
  EXPECT_STREQ(env("CAIRN_CONFIG_TEST_PROBE"), "x");
  EXPECT_EQ(env("CAIRN_CONFIG_TEST_UNSET_PROBE"), nullptr);
  auto names = process_env_cairn_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "CAIRN_CONFIG_TEST_PROBE"), names.end());
  for (const auto& n : names) EXPECT_EQ(n.rfind("CAIRN_", 0), 0u);
  unsetenv("CAIRN_CONFIG_TEST_PROBE");
}

}  // namespace
}  // namespace cairn
