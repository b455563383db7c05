// The agents' chain of stages: the chain's grammar (a pure function), and the chain at work in the
// agent's chunk sink: verify + compress + write store exactly what the embedded flusher stores
// (l3::write_rank with compression: the same data file, where-record and manifest, byte for byte), a
// chunk failing its checksum leaves nothing behind, and a plugin (tests/plugins/second_copy.c, a real
// shared object) sees the verified stream.
#include <gtest/gtest.h>

#include <random>

#include "../fuzz.hpp"
#include "../stream_manifest.hpp"
#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"
#include "service/agent/chunk_sink.hpp"
#include "service/agent/stage_chain.hpp"

namespace cairn::service {
namespace {

TEST(ChainSpec, AcceptsTheDocumentedChains) {
  auto c = parse_chain("verify,compress,write,plugin:/opt/x.so:/copies:more");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->size(), 4u);
  EXPECT_EQ((*c)[1].kind, StageSpec::compress);
  EXPECT_EQ((*c)[3].path, "/opt/x.so");
  EXPECT_EQ((*c)[3].arg, "/copies:more");  // everything after the path's colon
  EXPECT_EQ(chain_text(*c), "verify,compress,write,plugin:/opt/x.so:/copies:more");
  EXPECT_TRUE(parse_chain(kDefaultChain).is_ok());
  EXPECT_TRUE(parse_chain("verify,write").is_ok());
  EXPECT_TRUE(parse_chain("verify,plugin:/a.so,write").is_ok());
  auto o = parse_chain_option("heat2d=verify,write");
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->first, "heat2d");
  EXPECT_EQ(chain_text(o->second), "verify,write");
}

TEST(ChainSpec, RefusesChainsThatWouldWriteUnverifiedOrNothing) {
  for (const char* bad : {"", "write", "write,verify", "verify", "verify,write,write", "verify,verify,write",
                          "verify,write,compress", "verify,compress,compress,write", "verify,write,gzip",
                          "verify,write,plugin:", "verify,write,plugin:relative.so", "verify,,write"}) {
    auto c = parse_chain(bad);
    EXPECT_FALSE(c.is_ok()) << "'" << bad << "' was accepted";
    if (!c.is_ok()) EXPECT_EQ(c.status().code(), Code::ERR_INVALID_ARG) << bad;
  }
  EXPECT_FALSE(parse_chain_option("verify,write").is_ok());
  EXPECT_FALSE(parse_chain_option("=verify,write").is_ok());
  EXPECT_FALSE(parse_chain_option("app=write").is_ok());
}

TEST(ChainSpec, APluginThatDoesNotLoadIsRefusedWithItsPath) {
  auto c = Chain::load({StageSpec{StageSpec::verify}, StageSpec{StageSpec::write},
                        StageSpec{StageSpec::plugin, "/nonexistent/libnothing.so", ""}});
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("/nonexistent/libnothing.so"), std::string::npos);
}

class ChainAtWork : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::absolute("stage_chain_test." + std::to_string(getpid()));
    fs::remove_tree(dir_).ignore();
    ASSERT_TRUE(fs::make_dirs(dir_).is_ok());
    // Compressible and not: a ramp, then noise; 5.5 checksum chunks.
    std::mt19937_64 rng(7);
    data_.resize(5 * 65536 + 32768);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = i < data_.size() / 2 ? char(i / 64) : char(rng());
    StreamOf s;
    s.version = 3;
    s.rank = 1;
    s.nranks = 2;
    s.chunk_size = 65536;
    m_ = stream_manifest(data_, s);
  }
  void TearDown() override { fs::remove_tree(dir_).ignore(); }

  l3::WriteOptions compressed(const std::string& node_dir) {
    l3::WriteOptions o;
    o.zstd_level = 3;
    o.node_dir = node_dir;
    EXPECT_TRUE(fs::make_dirs(node_dir).is_ok());
    return o;
  }

  // Run data_ through a sink with `chain` in pieces of `piece` bytes (the service's RMA chunks); the
  // sink's outcome.
  Status through_sink(const std::string& chain, const Layout& layout, const l3::WriteOptions& opts,
                      uint32_t piece, int corrupt_at = -1) {
    auto specs = parse_chain(chain);
    if (!specs) return specs.status();
    auto loaded = Chain::load(*specs);
    if (!loaded) return loaded.status();
    ChunkSink sink;
    CAIRN_TRY(sink.start(std::move(*loaded)));
    StageVersion v;
    v.application = "test";
    v.layout = layout;
    v.manifest = m_;
    v.manifest_text = encode_manifest(m_);
    auto place = l3::place_rank(layout, m_, m_.total_size, &opts);
    if (!place) return place.status();
    v.place = *place;
    v.opts = opts;
    sink.begin(1, std::move(v));
    std::string bytes = data_;
    if (corrupt_at >= 0) bytes[static_cast<size_t>(corrupt_at)] ^= 1;
    uint32_t n = 0;
    for (uint64_t off = 0; off < bytes.size(); off += piece, ++n)
      sink.chunk(1, off, reinterpret_cast<const uint8_t*>(bytes.data()) + off,
                 static_cast<uint32_t>(std::min<uint64_t>(piece, bytes.size() - off)), n);
    sink.end(1);
    uint32_t freed = 0;
    for (;;) {
      for (const auto& e : sink.wait()) {
        if (e.kind == ChunkSink::Event::buffer_free) ++freed;
        if (e.kind == ChunkSink::Event::finished) {
          EXPECT_EQ(freed, n);
          return Status::ok();
        }
        if (e.kind == ChunkSink::Event::failed) return e.status;
      }
    }
  }

  std::string dir_, data_;
  Manifest m_;
};

TEST_F(ChainAtWork, CompressedFilesAreTheEmbeddedFlushersByteForByte) {
  Layout agent, embedded;
  agent.prefix = dir_ + "/agent";
  embedded.prefix = dir_ + "/embedded";
  for (uint32_t piece : {4096u, 65536u, 100000u}) {  // chunks split, aligned, and spanning checksum chunks
    fs::remove_tree(agent.prefix).ignore();
    fs::remove_tree(embedded.prefix).ignore();
    auto oa = compressed(dir_ + "/node-a"), oe = compressed(dir_ + "/node-e");
    ASSERT_TRUE(l3::write_rank(embedded, m_, reinterpret_cast<const uint8_t*>(data_.data()), {}, &oe).is_ok());
    Status st = through_sink("verify,compress,write", agent, oa, piece);
    ASSERT_TRUE(st.is_ok()) << st.message();
    auto wa = fs::read_file(l3::where_path(agent, 3, 1)), we = fs::read_file(l3::where_path(embedded, 3, 1));
    ASSERT_TRUE(wa.is_ok() && we.is_ok());
    auto da = l3::decode_where(*wa), de = l3::decode_where(*we);
    ASSERT_TRUE(da.is_ok() && de.is_ok());
    EXPECT_TRUE(da->zstd);
    EXPECT_LT(da->stored, m_.total_size);
    EXPECT_EQ(da->chunk_stored, de->chunk_stored) << "piece " << piece;
    EXPECT_EQ(da->stored, de->stored);
    EXPECT_EQ(fs::read_file(da->file).value(), fs::read_file(de->file).value()) << "piece " << piece;
    EXPECT_EQ(fs::read_file(l3::manifest_path(agent, 3, 1)).value(),
              fs::read_file(l3::manifest_path(embedded, 3, 1)).value());
    // And the library reads it back.
    std::string back(m_.total_size, '\0');
    ASSERT_TRUE(l3::read_data(agent, m_, reinterpret_cast<uint8_t*>(back.data())).is_ok());
    EXPECT_EQ(back, data_);
  }
}

TEST_F(ChainAtWork, ACorruptChunkLeavesNoManifestAndNoDataFile) {
  Layout l;
  l.prefix = dir_ + "/p";
  Status st = through_sink("verify,compress,write", l, compressed(dir_ + "/node"), 4096, 200000);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT) << st.message();
  EXPECT_FALSE(fs::exists(l3::manifest_path(l, 3, 1)));
  auto names = fs::list_dir(l.l3_version_dir(3));
  if (names) for (const auto& n : *names)
    EXPECT_EQ(n.find("rank-1.data"), std::string::npos) << n;
}

TEST_F(ChainAtWork, CompressionAskedOfAChainWithoutCompressIsRefused) {
  Layout l;
  l.prefix = dir_ + "/p";
  Status st = through_sink("verify,write", l, compressed(dir_ + "/node"), 65536);
  EXPECT_EQ(st.code(), Code::ERR_NOT_SUPPORTED) << st.message();
  EXPECT_FALSE(fs::exists(l3::manifest_path(l, 3, 1)));
}

TEST_F(ChainAtWork, ThePluginWritesASecondCopyOfTheVerifiedStream) {
  Layout l;
  l.prefix = dir_ + "/p";
  const std::string copies = dir_ + "/copies";
  Status st = through_sink(std::string("verify,compress,write,plugin:") + SECOND_COPY_PLUGIN + ":" + copies, l,
                           compressed(dir_ + "/node"), 30000);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(fs::read_file(copies + "/" + Layout::l3_version_name(3) + "/rank-1.data").value(), data_);
  EXPECT_EQ(fs::read_file(copies + "/" + Layout::l3_version_name(3) + "/rank-1.manifest").value(), encode_manifest(m_));
  EXPECT_TRUE(fs::exists(l3::manifest_path(l, 3, 1)));
  // A corrupt chunk: the plugin is aborted too, and its copy never appears.
  fs::remove_tree(copies).ignore();
  fs::remove_tree(l.prefix).ignore();
  st = through_sink(std::string("verify,write,plugin:") + SECOND_COPY_PLUGIN + ":" + copies, l, l3::WriteOptions{},
                    30000, 100);
  EXPECT_EQ(st.code(), Code::ERR_CORRUPT);
  EXPECT_FALSE(fs::exists(copies + "/" + Layout::l3_version_name(3) + "/rank-1.data"));
  // A plugin that fails (its argument is not absolute) fails the version with its message.
  st = through_sink(std::string("verify,write,plugin:") + SECOND_COPY_PLUGIN + ":relative", l, l3::WriteOptions{},
                    30000);
  EXPECT_EQ(st.code(), Code::ERR_IO);
  EXPECT_NE(st.message().find("absolute directory"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace cairn::service

namespace cairn::service {
namespace {

// The chain travels in start_agent and is parsed by the agent: random and mutated chains never crash,
// every refusal is ERR_INVALID_ARG, what parses re-encodes to the same chain, and some mutations parse.
TEST(ChainSpecFuzz, RandomAndMutatedChainsNeverCrash) {
  std::mt19937_64 rng(14);
  const std::vector<std::string> tokens = {"verify", "compress", "write", "plugin:", "/x.so", ":", ",", "=", ""};
  const std::vector<std::string> corpus = {"verify,compress,write", "verify,write,plugin:/a/b.so:/c",
                                          "verify,plugin:/p.so,compress,write"};
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = i % 4 == 0 ? fuzz::random_bytes(rng, 64) : corpus[rng() % corpus.size()];
    if (i % 4) fuzz::mutate(text, rng, tokens);
    auto c = parse_chain(text);
    if (!c) {
      EXPECT_EQ(c.status().code(), Code::ERR_INVALID_ARG) << text;
      continue;
    }
    ++accepted;
    auto again = parse_chain(chain_text(*c));
    ASSERT_TRUE(again.is_ok()) << chain_text(*c);
    EXPECT_EQ(*again, *c) << text;
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace cairn::service
