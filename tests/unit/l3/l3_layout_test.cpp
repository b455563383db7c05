// Every L3 layout (a file per rank or N-to-M files per node, one or several weighted prefixes, a
// turnstile, zstd or not) reads back bit-exact; damage is detected; pruning removes every file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"
#include "../damage.hpp"
#include "../stream_manifest.hpp"

namespace cairn {
namespace {

struct Case {
  int files_per_node;
  int zstd;
  bool prefixes;
  int turnstile;
};

std::string scratch(const char* tag) {
  std::string d = "/tmp/cairn-l3layout-" + std::string(tag) + "-" + std::to_string(getpid());
  fs::remove_tree(d).ignore();
  EXPECT_TRUE(fs::make_dirs(d).is_ok());
  return d;
}

// Compressible but not trivial data; sizes differ per rank (0 and odd sizes included).
std::string stream_of(uint32_t rank, uint64_t version) {
  static const uint64_t sizes[] = {0, 1, 4099, 70000, 1 << 17, 33333};
  std::mt19937_64 rng(rank * 1000 + version);
  std::string s(sizes[rank % 6], '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i / 7) % 13 == 0 ? rng() : i % 251);
  return s;
}

Manifest manifest_of(uint64_t v, uint32_t rank, uint32_t nranks, const std::string& data) {
  return stream_manifest(data, {.version = v, .rank = rank, .nranks = nranks, .node = "n" + std::to_string(rank / 2), .label = ""});
}

void write_version(const Layout& l, const std::string& root, const Case& c, uint64_t v, uint32_t nranks) {
  std::vector<std::thread> ranks;  // concurrent writers: shared files, reservations, turnstiles
  std::vector<Status> results(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    ranks.emplace_back([&, r] {
      l3::WriteOptions o;
      o.files_per_node = c.files_per_node;
      o.zstd_level = c.zstd;
      o.turnstile_width = c.turnstile;
      o.node = "n" + std::to_string(r / 2);
      o.local_index = static_cast<int>(r % 2);
      o.node_dir = root + "/cache/" + o.node;
      o.clean_below = v;
      if (c.prefixes) o.data_prefixes = {{root + "/fs1", 2}, {root + "/fs2", 1}};
      std::string data = stream_of(r, v);
      results[r] = l3::write_rank(l, manifest_of(v, r, nranks, data), reinterpret_cast<const uint8_t*>(data.data()),
                                  {}, &o);
    });
  }
  for (auto& t : ranks) t.join();
  for (auto& st : results) ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_TRUE(l3::commit(l, v, nranks, "v").is_ok());
}

class L3Layout : public ::testing::TestWithParam<Case> {};

TEST_P(L3Layout, ReadsBackBitExactAndDetectsDamage) {
  const Case c = GetParam();
  std::string root = scratch("rt");
  Config cfg;
  cfg.prefix = root + "/prefix";
  cfg.cache_dir = root + "/cache";
  Layout l = make_layout(cfg);
  const uint32_t nranks = 6;
  for (uint64_t v = 1; v <= 2; ++v) write_version(l, root, c, v, nranks);
  for (uint64_t v = 1; v <= 2; ++v)
    for (uint32_t r = 0; r < nranks; ++r) {
      auto m = l3::read_manifest(l, v, r);
      ASSERT_TRUE(m.is_ok()) << m.status().message();
      std::string got(m->total_size, '\0');
      ASSERT_TRUE(l3::read_data(l, *m, reinterpret_cast<uint8_t*>(got.data())).is_ok());
      EXPECT_EQ(got, stream_of(r, v)) << "version " << v << " rank " << r;
      EXPECT_TRUE(verify_stream(*m, got.data(), got.size()).is_ok());
    }
  // Damage rank 3's bytes of version 2 wherever they lie: caught, as a decode error or a checksum.
  auto m3 = l3::read_manifest(l, 2, 3);
  ASSERT_TRUE(m3.is_ok());
  test::damage_l3_data(l, 2, 3);
  std::string got(m3->total_size, '\0');
  Status read = l3::read_data(l, *m3, reinterpret_cast<uint8_t*>(got.data()));
  EXPECT_TRUE(!read.is_ok() || !verify_stream(*m3, got.data(), got.size()).is_ok()) << "damage went unnoticed";
  // Pruning to one version removes version 1's files on every prefix.
  ASSERT_TRUE(l3::prune(l, 1).is_ok());
  EXPECT_FALSE(fs::exists(l.l3_version_dir(1)));
  if (c.prefixes) {
    EXPECT_FALSE(fs::exists(root + "/fs1/" + Layout::l3_version_name(1) + "/node-n0.0.data") &&
                 fs::exists(root + "/fs2/" + Layout::l3_version_name(1) + "/node-n0.0.data"));
    for (const char* fsn : {"/fs1/", "/fs2/"}) {
      auto left = fs::list_dir(root + fsn + Layout::l3_version_name(1));
      EXPECT_TRUE(!left || left->empty()) << fsn << " still holds version 1";
    }
  }
  fs::remove_tree(root).ignore();
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, L3Layout,
                         ::testing::Values(Case{0, 0, false, 0}, Case{0, 3, false, 0}, Case{1, 0, false, 1},
                                           Case{1, 3, false, 1}, Case{2, 0, true, 1}, Case{2, 5, true, 2},
                                           Case{0, 0, true, 0}, Case{1, 1, true, 0}));

TEST(L3Layout, OptionParsing) {
  auto p = l3::parse_prefixes("/a:2,/b,/c:0.5");
  ASSERT_TRUE(p.is_ok());
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].path, "/a");
  EXPECT_EQ((*p)[0].weight, 2);
  EXPECT_EQ((*p)[1].weight, 1);
  EXPECT_FALSE(l3::parse_prefixes("relative/path").is_ok());
  EXPECT_FALSE(l3::parse_prefixes("/a:-1").is_ok());
  EXPECT_EQ(*l3::parse_compress("none"), 0);
  EXPECT_EQ(*l3::parse_compress("zstd"), 3);
  EXPECT_EQ(*l3::parse_compress("zstd:9"), 9);
  EXPECT_FALSE(l3::parse_compress("zstd:99").is_ok());
  EXPECT_FALSE(l3::parse_compress("gzip").is_ok());
}

}  // namespace
}  // namespace cairn
