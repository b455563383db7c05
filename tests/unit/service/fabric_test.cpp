// libfabric through cairn's Endpoint, over the tcp provider on 127.0.0.1: RMA read and write between two
// endpoints of this process, random keys, and a revoked registration refusing a later read.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fabric/endpoint.hpp"
#include "wire/socket.hpp"

namespace cairn::fabric {
namespace {

std::unique_ptr<Endpoint> open_ep() {
  EndpointOptions o;
  o.node = "127.0.0.1";
  auto e = Endpoint::open(o);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

// Drive both endpoints until `op` completes; its status.
Status complete(Endpoint& a, Endpoint& b, OpContext* op) {
  double deadline = wire::monotonic_seconds() + 20;
  while (wire::monotonic_seconds() < deadline) {
    Completion c[8];
    auto n = b.poll(c, 8);  // the target serves the request only while polled
    if (!n) return n.status();
    auto m = a.poll(c, 8);
    if (!m) return m.status();
    for (int i = 0; i < *m; ++i)
      if (c[i].op == op) return c[i].status;
  }
  return make_error(Code::ERR_IO, "no completion within 20 s");
}

// Post until the provider takes it (the first operation to a peer returns "again" while rxm connects),
// progressing both sides meanwhile.
template <class Post>
void post_until_taken(Endpoint& a, Endpoint& b, Post post) {
  for (int i = 0; i < 200000; ++i) {
    bool posted = false;
    ASSERT_TRUE(post(&posted).is_ok());
    if (posted) return;
    Completion c[8];
    ASSERT_TRUE(a.poll(c, 8).is_ok());
    ASSERT_TRUE(b.poll(c, 8).is_ok());
  }
  FAIL() << "the provider never took the operation";
}

TEST(Fabric, ReadAndWriteBetweenTwoEndpoints) {
  auto a = open_ep(), b = open_ep();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(a->address().empty());
  EXPECT_NE(a->address_text(a->address()).find("127.0.0.1"), std::string::npos);
  std::vector<uint8_t> src(1 << 20), dst(1 << 20, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
  auto smr = b->register_memory(src.data(), src.size(), kRemoteRead | kRemoteWrite);
  auto dmr = a->register_memory(dst.data(), dst.size(), kLocalRead | kLocalWrite);
  ASSERT_TRUE(smr.is_ok() && dmr.is_ok());
  auto peer = a->insert_peer(b->address());
  ASSERT_TRUE(peer.is_ok());
  OpContext op;
  post_until_taken(*a, *b, [&](bool* posted) {
    return a->read(dst.data(), dst.size(), (*dmr)->desc(), *peer, (*smr)->remote_base(), (*smr)->key(), &op, posted);
  });
  ASSERT_TRUE(complete(*a, *b, &op).is_ok());
  EXPECT_EQ(memcmp(src.data(), dst.data(), src.size()), 0);
  // And back: write 4 KiB into the middle of the target's region.
  for (size_t i = 0; i < 4096; ++i) dst[i] = uint8_t(255 - i);
  post_until_taken(*a, *b, [&](bool* posted) {
    return a->write(dst.data(), 4096, (*dmr)->desc(), *peer, (*smr)->remote_base() + 8192, (*smr)->key(), &op, posted);
  });
  ASSERT_TRUE(complete(*a, *b, &op).is_ok());
  EXPECT_EQ(memcmp(src.data() + 8192, dst.data(), 4096), 0);
}

TEST(Fabric, KeysAreFreshAndARevokedRegistrationRefusesReads) {
  auto a = open_ep(), b = open_ep();
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> src(65536, 7), dst(65536, 0);
  auto m1 = b->register_memory(src.data(), src.size(), kRemoteRead);
  auto m2 = b->register_memory(src.data(), src.size(), kRemoteRead);
  ASSERT_TRUE(m1.is_ok() && m2.is_ok());
  EXPECT_NE((*m1)->key(), (*m2)->key());
  uint64_t key = (*m1)->key(), base = (*m1)->remote_base();
  m1->reset();  // revoked
  auto dmr = a->register_memory(dst.data(), dst.size(), kLocalRead);
  auto peer = a->insert_peer(b->address());
  ASSERT_TRUE(peer.is_ok() && dmr.is_ok());
  OpContext op;
  post_until_taken(*a, *b, [&](bool* posted) {
    return a->read(dst.data(), dst.size(), (*dmr)->desc(), *peer, base, key, &op, posted);
  });
  Status st = complete(*a, *b, &op);
  EXPECT_FALSE(st.is_ok()) << "a read with a revoked key succeeded";
  EXPECT_EQ(dst[0], 0);
}

TEST(Fabric, AnUnknownProviderIsNotSupported) {
  EndpointOptions o;
  o.provider = "no-such-provider";
  o.node = "127.0.0.1";
  auto e = Endpoint::open(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), Code::ERR_NOT_SUPPORTED);
  EXPECT_NE(e.status().message().find("no-such-provider"), std::string::npos);
}

}  // namespace
}  // namespace cairn::fabric
