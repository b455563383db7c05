// base/units.hpp: the one size syntax and the one duration syntax of the knobs, the tools, cairnd and the
// bench. Every accepted form, every refusal with its reason, the round trip through the formatters,
// and a fuzz over random and mutated texts (no crash; what parses formats back to the same value).
#include "base/units.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/config.hpp"
#include "../fuzz.hpp"
#include "policy/halt.hpp"
#include "policy/interval.hpp"

namespace cairn {
namespace {

uint64_t size_of(const char* text) {
  auto r = units::parse_size(text);
  EXPECT_TRUE(r.is_ok()) << text << ": " << r.status().message();
  return r ? *r : 0;
}

double seconds_of(const char* text) {
  auto r = units::parse_duration(text);
  EXPECT_TRUE(r.is_ok()) << text << ": " << r.status().message();
  return r ? *r : -1;
}

TEST(Units, SizesInEveryAcceptedForm) {
  EXPECT_EQ(size_of("0"), 0u);
  EXPECT_EQ(size_of("4096"), 4096u);
  EXPECT_EQ(size_of("4096B"), 4096u);
  for (const char* k : {"64K", "64k", "64KB", "64kb", "64KiB", "64kib", " 64 K ", "64\tKiB"}) EXPECT_EQ(size_of(k), 65536u) << k;
  EXPECT_EQ(size_of("1M"), 1u << 20);
  EXPECT_EQ(size_of("1MiB"), 1u << 20);
  EXPECT_EQ(size_of("2G"), uint64_t{2} << 30);
  EXPECT_EQ(size_of("2gb"), uint64_t{2} << 30);
  EXPECT_EQ(size_of("3T"), uint64_t{3} << 40);
  EXPECT_EQ(size_of("1.5K"), 1536u);
  EXPECT_EQ(size_of("0.5M"), 512u * 1024);
  EXPECT_EQ(size_of("1.25G"), uint64_t{5} << 28);
  EXPECT_EQ(size_of("16777215T"), UINT64_MAX - (uint64_t{1} << 40) + 1) << "the largest whole T";
}

TEST(Units, SizesRefusedWithTheReason) {
  for (const char* bad : {"", " ", "K", "-1", "+1", "1X", "1 K B", "1KK", "0x10", "1e3", "1.", ".5K", "1,5K", "1 2",
                          "1K2", "NaN", "inf"}) {
    auto r = units::parse_size(bad);
    ASSERT_FALSE(r.is_ok()) << "'" << bad << "' parsed as " << *r;
    EXPECT_EQ(r.status().code(), Code::ERR_INVALID_ARG);
    EXPECT_NE(r.status().message().find("not a size"), std::string::npos) << r.status().message();
  }
  auto frac = units::parse_size("0.3K");
  ASSERT_FALSE(frac.is_ok());
  EXPECT_NE(frac.status().message().find("whole number of bytes"), std::string::npos);
  EXPECT_FALSE(units::parse_size("16777216T").is_ok()) << "2^64 does not fit";
  EXPECT_FALSE(units::parse_size("99999999999999999999999999").is_ok());
  auto over = units::parse_size("2G", uint64_t{1} << 30);
  ASSERT_FALSE(over.is_ok());
  EXPECT_NE(over.status().message().find("at most 1G"), std::string::npos) << over.status().message();
}

TEST(Units, DurationsInEveryAcceptedForm) {
  EXPECT_EQ(seconds_of("0"), 0);
  EXPECT_EQ(seconds_of("90"), 90);
  EXPECT_EQ(seconds_of("0.5"), 0.5);
  EXPECT_EQ(seconds_of("90s"), 90);
  EXPECT_EQ(seconds_of("90 sec"), 90);
  EXPECT_EQ(seconds_of("250ms"), 0.25);
  EXPECT_EQ(seconds_of("10m"), 600);
  EXPECT_EQ(seconds_of("10min"), 600);
  EXPECT_EQ(seconds_of("5M"), 300) << "units are case-insensitive: M is minutes, as m";
  EXPECT_EQ(seconds_of("1.5h"), 5400);
  EXPECT_EQ(seconds_of("1h30m"), 5400);
  EXPECT_EQ(seconds_of("1h 30m 15s"), 5415);
  EXPECT_EQ(seconds_of("2d"), 172800);
  EXPECT_EQ(seconds_of("1w"), 604800);
  EXPECT_EQ(seconds_of("1e3"), 1000) << "an exponent, as the knobs' plain numbers always took";
  EXPECT_EQ(seconds_of("2.5e-1m"), 15);
}

TEST(Units, DurationsRefusedWithTheReason) {
  for (const char* bad : {"", "s", "-5", "+5", "5x", "5 mins", "1h30", "1 2", "1.s", "5e", "0x10", "h1", "inf", "nan", "1e+"}) {
    auto r = units::parse_duration(bad);
    ASSERT_FALSE(r.is_ok()) << "'" << bad << "' parsed as " << *r;
    EXPECT_EQ(r.status().code(), Code::ERR_INVALID_ARG);
    EXPECT_NE(r.status().message().find("not a duration"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(units::parse_duration("999999999999999999999w").is_ok());
  EXPECT_EQ(*units::parse_whole_seconds("5m"), 300);
  EXPECT_FALSE(units::parse_whole_seconds("1.5s").is_ok());
}

TEST(Units, FormattersReadBack) {
  EXPECT_EQ(units::format_size(0), "0");
  EXPECT_EQ(units::format_size(1536), "1536");
  EXPECT_EQ(units::format_size(65536), "64K");
  EXPECT_EQ(units::format_size(uint64_t{3} << 30), "3G");
  EXPECT_EQ(units::format_size(uint64_t{1} << 40), "1T");
  EXPECT_EQ(units::format_duration(0), "0s");
  EXPECT_EQ(units::format_duration(90), "1m30s");
  EXPECT_EQ(units::format_duration(5400), "1h30m");
  EXPECT_EQ(units::format_duration(0.25), "250ms");
  for (double s : {0.0, 1.0, 59.0, 61.0, 3600.0, 86461.0, 0.001, 0.125, 1.5, 1e-4})
    EXPECT_EQ(*units::parse_duration(units::format_duration(s)), s) << units::format_duration(s);
}

// The knobs, the tools' options and the policies read the same syntax: a duration knob takes "5m" from
// the environment (CAIRN_HALT_SECONDS=5m was refused), the halt and interval parsers are this one.
TEST(Units, KnobsAndPoliciesShareTheSyntax) {
  auto env = [](const char* name) -> const char* {
    if (std::string(name) == "CAIRN_HALT_SECONDS") return "5m";
    if (std::string(name) == "CAIRN_INTERVAL_SECONDS") return "1h30m";
    if (std::string(name) == "CAIRN_CHUNK_SIZE") return "1.5M";
    return nullptr;
  };
  auto loaded = load_config("", env, {"CAIRN_HALT_SECONDS", "CAIRN_INTERVAL_SECONDS", "CAIRN_CHUNK_SIZE"});
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(loaded->config.halt_seconds, 300);
  EXPECT_EQ(loaded->config.interval_seconds, 5400);
  EXPECT_EQ(loaded->config.chunk_size, uint64_t{3} << 19);
  auto bad = load_config("", [](const char* n) -> const char* { return std::string(n) == "CAIRN_HALT_SECONDS" ? "5 parsecs" : nullptr; },
                         {"CAIRN_HALT_SECONDS"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("not a duration"), std::string::npos) << bad.status().message();
  EXPECT_EQ(*policy::parse_duration(std::string_view("1h30m")), 5400);
  EXPECT_EQ(*policy::parse_duration(std::string("1h30m")), 5400.0);
}

TEST(UnitsFuzz, RandomAndMutatedTextsNeverCrashAndRoundTrip) {
  std::mt19937_64 rng(20261127);
  const std::vector<std::string> tokens = {"K", "KiB", "m", "ms", "h", "1h", ".", "0", "9", " ", "18446744073709551615",
                                           "T", "w", "sec", "1.5", "min"};
  const std::string seeds[] = {"64K", "1.5G", "1h30m", "250ms", "4096", "2w 3d"};
  int sizes = 0, durations = 0;
  for (int i = 0; i < 40000; ++i) {
    std::string s = i % 4 == 0 ? fuzz::random_bytes(rng, 16) : seeds[i % 6];
    if (i % 4) fuzz::mutate(s, rng, tokens);
    if (auto b = units::parse_size(s)) {
      ++sizes;
      EXPECT_EQ(*units::parse_size(units::format_size(*b)), *b) << s;
    } else {
      EXPECT_EQ(b.status().code(), Code::ERR_INVALID_ARG);
    }
    if (auto d = units::parse_duration(s)) {
      ++durations;
      EXPECT_TRUE(std::isfinite(*d) && *d >= 0) << s;
      auto back = units::parse_duration(units::format_duration(*d));
      ASSERT_TRUE(back.is_ok()) << s << " -> " << units::format_duration(*d);
      EXPECT_NEAR(*back, *d, 1e-9 * std::max(1.0, *d)) << s;
    } else {
      EXPECT_EQ(d.status().code(), Code::ERR_INVALID_ARG);
    }
  }
  EXPECT_GT(sizes, 1000);
  EXPECT_GT(durations, 1000);
}

}  // namespace
}  // namespace cairn
