#include "cairn/cairn.h"
#include "base/layout.hpp"

#include <gtest/gtest.h>

#include "base/status.hpp"

namespace cairn {

TEST(Layout, VersionNamesRoundTrip) {
  uint64_t v = 0;
  EXPECT_EQ(Layout::l3_version_name(42), "v00000042");
  EXPECT_TRUE(Layout::parse_l3_version_name("v00000042", &v));
  EXPECT_EQ(v, 42u);
  EXPECT_TRUE(Layout::parse_l3_version_name("v123456789", &v));
  EXPECT_EQ(v, 123456789u);
  EXPECT_FALSE(Layout::parse_l3_version_name("v42", &v));
  EXPECT_FALSE(Layout::parse_l3_version_name("v0000004x", &v));
  EXPECT_FALSE(Layout::parse_l3_version_name("x00000042", &v));
}

TEST(Layout, PathsDeriveFromConfig) {
  Config c;
  c.prefix = "/tmp/some/ckpt";
  c.cache_dir = "/dev/shm";
  Layout l = make_layout(c);
  EXPECT_EQ(l.prefix, "/tmp/some/ckpt");
  EXPECT_EQ(l.control, "/tmp/some/ckpt/.cairn");
  EXPECT_EQ(l.cache_job.rfind("/dev/shm/cairn-ckpt-", 0), 0u);
  EXPECT_EQ(l.rank_cache("n1", 3), l.cache_job + "/n1/r3");
  Config d = c;
  d.prefix = "/tmp/other/ckpt";
  EXPECT_NE(make_layout(d).cache_job, l.cache_job) << "distinct prefixes must not share a cache";
  d.job = "myjob";
  EXPECT_EQ(make_layout(d).cache_job, "/dev/shm/cairn-myjob");
}

TEST(Status, CodesHaveNamesAndTexts) {
  EXPECT_STREQ(code_name(CAIRN_ERR_IO), "ERR_IO");
  EXPECT_STREQ(code_text(0), "success");
  EXPECT_EQ(code_name(-12345), nullptr);
  Status s = make_error(Code::ERR_CONFIG, "knob %s", "x");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.prefixed("init").message(), "init: knob x");
}

}  // namespace cairn
