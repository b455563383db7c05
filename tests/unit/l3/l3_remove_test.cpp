// Removing many L3 versions at once (l3::remove_versions, src/l3/l3_remove.cpp): on a prefix of 200
// versions in incremental chains, with a version kept in the middle and one being written that names an
// old version, it removes and refuses exactly what removing the versions one by one did (the reference
// below is that earlier code: two listings of the whole prefix and a scan of the newer versions for
// each version removed), and it reads a number of directory entries linear in the versions, where the
// one-by-one removal's is quadratic.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "../stream_manifest.hpp"
#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"
#include "two_rank_prefix.hpp"

namespace cairn::l3 {
namespace {

// ---- the reference: remove_version as it was, one version at a time -------------------------------

uint64_t first_naming_reference(const Layout& l, uint64_t v, bool committed) {
  for (uint64_t u : version_dirs(l)) {
    if (u <= v || fs::exists(commit_path(l, u)) != committed) continue;
    auto named = holders_named_by(l, u);
    if (named && named->count(v)) return u;
  }
  return 0;
}

Status remove_version_reference(const Layout& l, uint64_t v) {
  auto committed = read_commit(l, v);
  if (committed && first_naming_reference(l, v, true))
    return make_error(Code::ERR_INVALID_ARG, "named by a committed version");
  CAIRN_TRY(fs::remove_file(commit_path(l, v)));
  if (committed && first_naming_reference(l, v, false)) {
    CAIRN_TRY(fs::write_file_atomic(commit_path(l, v), encode_commit(*committed), true));
    return make_error(Code::ERR_INVALID_ARG, "named by a version being written");
  }
  return fs::remove_tree(l.l3_version_dir(v));
}

// ---- the prefix --------------------------------------------------------------------------------------

Layout layout_at(const std::string& root) {
  Config cfg;
  cfg.prefix = root + "/prefix";
  cfg.cache_dir = root + "/cache";
  return make_layout(cfg);
}

// What a prefix holds: every version directory and whether it is committed.
std::map<uint64_t, bool> contents(const Layout& l) {
  std::map<uint64_t, bool> out;
  for (uint64_t v : version_dirs(l)) out[v] = fs::exists(commit_path(l, v));
  return out;
}

constexpr uint64_t kVersions = 200;
constexpr uint64_t kKeptInTheMiddle = 150;  // not removed: what it names must stay
constexpr uint64_t kInFlight = 205;         // being written: its record names kNamedInFlight
constexpr uint64_t kNamedInFlight = 100;

class L3RemoveMany : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = "/tmp/cairn-l3remove-" + std::to_string(getpid());
    fs::remove_tree(root_).ignore();
    l_ = layout_at(root_ + "/a");
    ASSERT_TRUE(fs::make_dirs(l_.prefix).is_ok());
    // Versions 1..200 of one rank, four chunks each, one chunk changed per version, full_every 4:
    // chains of a full version and three incremental ones that name it and each other.
    std::string s = bytes_of(4 * 4096, 1);
    WriteOptions o;
    o.full_every = 4;
    for (uint64_t v = 1; v <= kVersions; ++v) {
      if (v > 1) s.replace((v % 4) * 4096, 4096, bytes_of(4096, v));
      Manifest m = stream_manifest(s, {.version = v});
      ASSERT_TRUE(write_rank(l_, m, reinterpret_cast<const uint8_t*>(s.data()), {}, &o).is_ok()) << v;
      ASSERT_TRUE(commit(l_, v, 1, "").is_ok());
    }
    // A version being written (no COMMIT yet) whose record names an old version.
    Manifest m = stream_manifest(s, {.version = kInFlight});
    RankWriter w;
    ASSERT_TRUE(w.open(l_, m, RankPlacement{}, nullptr).is_ok());
    ASSERT_TRUE(w.write(0, reinterpret_cast<const uint8_t*>(s.data()), 3 * 4096).is_ok());
    w.record_chunks(ChunkRecord{.version = kInFlight, .chunks = 4, .chunk_size = 4096, .depth = 1, .stored = 3 * 4096,
                                .runs = {{0, 3, kInFlight, 0}, {3, 1, kNamedInFlight, 0}}});
    auto finished = w.finish();
    ASSERT_TRUE(finished.is_ok()) << finished.status().message();
    ASSERT_EQ(*finished, RankWriter::Finished::written);
    // The same prefix twice: one for the reference, one for remove_versions.
    std::filesystem::copy(root_ + "/a", root_ + "/b", std::filesystem::copy_options::recursive);
  }
  void TearDown() override { fs::remove_tree(root_).ignore(); }

  std::string root_;
  Layout l_;
};

TEST_F(L3RemoveMany, RemovesWhatOneByOneDidWithLinearScans) {
  ASSERT_TRUE(holders_named_by(l_, kNamedInFlight).is_ok());
  ASSERT_FALSE(holders_named_by(l_, kNamedInFlight)->empty()) << "the version named in flight is incremental";
  ASSERT_FALSE(holders_named_by(l_, kKeptInTheMiddle)->empty()) << "the version kept is incremental";
  std::set<uint64_t> doomed;
  for (uint64_t v = 1; v <= 190; ++v)
    if (v != kKeptInTheMiddle) doomed.insert(v);

  const Layout ref = layout_at(root_ + "/b");
  std::map<uint64_t, Code> ref_outcome;
  fs::DirScans before = fs::dir_scans();
  for (auto it = doomed.rbegin(); it != doomed.rend(); ++it) ref_outcome[*it] = remove_version_reference(ref, *it).code();
  const fs::DirScans ref_scans = {fs::dir_scans().calls - before.calls, fs::dir_scans().names - before.names};

  before = fs::dir_scans();
  std::map<uint64_t, Status> outcome = remove_versions(l_, doomed);
  const fs::DirScans scans = {fs::dir_scans().calls - before.calls, fs::dir_scans().names - before.names};

  ASSERT_EQ(outcome.size(), doomed.size());
  std::set<uint64_t> refused;
  for (const auto& [v, st] : outcome) {
    EXPECT_EQ(st.code(), ref_outcome.at(v)) << v << ": " << st.message();
    if (!st.is_ok()) {
      EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
      refused.insert(v);
    }
  }
  EXPECT_EQ(contents(l_), contents(ref));
  // What the kept ones name stayed, committed: what 150 names, and what the version in flight names
  // with the versions that one names.
  auto by_kept = holders_named_by(l_, kKeptInTheMiddle), by_named = holders_named_by(l_, kNamedInFlight);
  ASSERT_TRUE(by_kept.is_ok() && by_named.is_ok());
  for (uint64_t h : *by_kept) EXPECT_TRUE(refused.count(h)) << h;
  EXPECT_TRUE(refused.count(kNamedInFlight));
  for (uint64_t h : *by_named) EXPECT_TRUE(refused.count(h)) << h;
  EXPECT_NE(outcome.at(kNamedInFlight).message().find("being written"), std::string::npos)
      << outcome.at(kNamedInFlight).message();
  for (uint64_t v : refused) EXPECT_TRUE(read_commit(l_, v).is_ok()) << v;
  EXPECT_GE(doomed.size() - refused.size(), 170u) << "most versions went";
  for (uint64_t v = 191; v <= kVersions; ++v) EXPECT_TRUE(read_commit(l_, v).is_ok()) << v;
  EXPECT_FALSE(read_commit(l_, kInFlight).is_ok());
  EXPECT_TRUE(fs::exists(l_.l3_version_dir(kInFlight)));
  // Directory scans: each version directory listed at most twice (its records, then its where-records
  // as it goes) and the prefix twice, so names read linear in the versions; the reference lists the
  // whole prefix twice per version it removes.
  EXPECT_LE(scans.calls, 2 * (kVersions + 1) + 4) << "reference: " << ref_scans.calls;
  EXPECT_LE(scans.names, 16 * kVersions) << "reference: " << ref_scans.names;
  EXPECT_GE(ref_scans.names, kVersions * kVersions / 2) << "the reference is the quadratic one";
}

// The single-version form keeps its rules: refused while a committed version names it, removed once
// that one is gone.
TEST_F(L3RemoveMany, OneVersionIsRefusedWhileNamedThenRemoved) {
  auto named = holders_named_by(l_, 199);
  ASSERT_TRUE(named.is_ok());
  ASSERT_FALSE(named->empty());
  const uint64_t base = *named->begin();
  Status st = remove_version(l_, base);
  EXPECT_EQ(st.code(), Code::ERR_INVALID_ARG) << st.message();
  EXPECT_NE(st.message().find("remove that one first"), std::string::npos) << st.message();
  EXPECT_TRUE(read_commit(l_, base).is_ok());
  std::set<uint64_t> chain;
  for (uint64_t v = base; v <= kVersions; ++v) chain.insert(v);
  for (const auto& [v, s] : remove_versions(l_, chain)) EXPECT_TRUE(s.is_ok()) << v << ": " << s.message();
  for (uint64_t v : chain) EXPECT_FALSE(fs::exists(l_.l3_version_dir(v))) << v;
}

}  // namespace
}  // namespace cairn::l3
