// A scratch L3 prefix that two ranks write versions into, for the store's tests (incremental versions,
// the recycle pool): random bytes, a version written and committed, one read back both ways.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <string>

#include "../stream_manifest.hpp"
#include "base/fsutil.hpp"
#include "base/stream_reader.hpp"
#include "l3/l3_store.hpp"

namespace cairn::l3 {

inline std::string bytes_of(uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class TwoRankPrefix : public ::testing::Test {
 protected:
  explicit TwoRankPrefix(const char* tag) : tag_(tag) {}
  void SetUp() override {
    root_ = std::string("/tmp/cairn-") + tag_ + "-" + std::to_string(getpid());
    fs::remove_tree(root_).ignore();
    ASSERT_TRUE(fs::make_dirs(root_).is_ok());
    Config cfg;
    cfg.prefix = root_ + "/prefix";
    cfg.cache_dir = root_ + "/cache";
    l_ = make_layout(cfg);
  }
  void TearDown() override { fs::remove_tree(root_).ignore(); }

  // Version v of both ranks (rank r's stream is data[r]) written with full_every, then committed.
  void write(uint64_t v, const std::string data[2], int full_every) {
    WriteOptions o;
    o.full_every = full_every;
    for (uint32_t r = 0; r < 2; ++r) {
      Manifest m = stream_manifest(data[r], {.version = v, .rank = r, .nranks = 2});
      Status st = write_rank(l_, m, reinterpret_cast<const uint8_t*>(data[r].data()), {}, &o);
      ASSERT_TRUE(st.is_ok()) << st.message();
    }
    ASSERT_TRUE(commit(l_, v, 2, "v" + std::to_string(v)).is_ok());
  }
  // Rank r's stream of version v, read verified and read plainly: both must be `expect`.
  Status read_back(uint64_t v, uint32_t r, const std::string& expect) {
    CAIRN_ASSIGN_OR_RETURN(m, read_manifest(l_, v, r));
    std::string got(m.total_size, '\0');
    CAIRN_TRY(read_data_verified(l_, m, {StreamExtent{0, m.total_size, reinterpret_cast<uint8_t*>(got.data())}}));
    if (got != expect) return make_error(Code::ERR_INTERNAL, "version %llu rank %u: other bytes", (unsigned long long)v, r);
    std::string again(m.total_size, '\0');
    CAIRN_TRY(read_data(l_, m, reinterpret_cast<uint8_t*>(again.data())));
    if (again != expect) return make_error(Code::ERR_INTERNAL, "read_data: other bytes");
    return Status::ok();
  }

  const char* tag_;
  std::string root_;
  Layout l_;
};

}  // namespace cairn::l3
