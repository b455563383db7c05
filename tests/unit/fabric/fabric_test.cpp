// libfabric through cairn's Endpoint, over the tcp provider on 127.0.0.1: RMA read and write between two
// endpoints of this process, random keys, and a revoked registration refusing a later read; the RmaQueue
// (pieces, the provider's queue, failures told once, unposted transfers dropped); the pull engine
// (remote ranges read piece by piece into a bounded pool, pieces within their range, buffers lent and
// returned by the caller, a given-up stream's unposted reads handed back).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "fabric/buffer_pool.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/pull_stream.hpp"
#include "fabric/rma_queue.hpp"
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

// Drive `q` (and the target `b`) until `want` transfers ended; what ended.
std::vector<RmaQueue::Done> run_queue(RmaQueue& q, Endpoint& b, size_t want) {
  std::vector<RmaQueue::Done> done;
  double deadline = wire::monotonic_seconds() + 30;
  while (done.size() < want && wire::monotonic_seconds() < deadline) {
    EXPECT_TRUE(q.post().is_ok());
    Completion c[8];
    EXPECT_TRUE(b.poll(c, 8).is_ok());
    EXPECT_TRUE(q.poll(&done).is_ok());
  }
  return done;
}

TEST(RmaQueue, ReadsAndWritesInPiecesEachToldOnceWhole) {
  auto a = open_ep(), b = open_ep();
  ASSERT_TRUE(a && b);
  const size_t n = 3 << 20;
  std::vector<uint8_t> src(n), dst(n, 0), back(n / 2);
  for (size_t i = 0; i < n; ++i) src[i] = uint8_t(i * 131 + i / 4096);
  for (size_t i = 0; i < back.size(); ++i) back[i] = uint8_t(i * 7 + 3);
  auto smr = b->register_memory(src.data(), src.size(), kRemoteRead | kRemoteWrite);
  auto dmr = a->register_memory(dst.data(), dst.size(), kLocalRead | kLocalWrite);
  auto bmr = a->register_memory(back.data(), back.size(), kLocalWrite);
  auto peer = a->insert_peer(b->address());
  ASSERT_TRUE(smr.is_ok() && dmr.is_ok() && bmr.is_ok() && peer.is_ok());
  RmaQueue q(*a, /*max_in_flight=*/5);
  // Three reads of 1 MiB (the first in pieces of 64 KiB, the second of an odd size, the third whole)
  // and a transfer of nothing.
  const uint64_t pieces[] = {64 << 10, 100000, 0};
  for (uint64_t i = 0; i < 3; ++i) {
    RmaQueue::Transfer t;
    t.local = dst.data() + i * (1 << 20);
    t.len = 1 << 20;
    t.desc = (*dmr)->desc();
    t.peer = *peer;
    t.remote_addr = (*smr)->remote_base() + i * (1 << 20);
    t.key = (*smr)->key();
    t.max_op = pieces[i];
    t.tag = 10 + i;
    q.add(t);
  }
  RmaQueue::Transfer empty;
  empty.tag = 99;
  q.add(empty);
  auto done = run_queue(q, *b, 4);
  ASSERT_EQ(done.size(), 4u);
  std::vector<uint64_t> tags;
  for (const auto& d : done) {
    EXPECT_TRUE(d.status.is_ok()) << d.status.message();
    tags.push_back(d.tag);
  }
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(tags, (std::vector<uint64_t>{10, 11, 12, 99}));
  EXPECT_EQ(memcmp(src.data(), dst.data(), n), 0);
  EXPECT_TRUE(q.idle());
  EXPECT_LE(q.in_flight(), 0u);
  // A write back into the target, in pieces.
  RmaQueue::Transfer w;
  w.kind = RmaQueue::Kind::write;
  w.local = back.data();
  w.len = back.size();
  w.desc = (*bmr)->desc();
  w.peer = *peer;
  w.remote_addr = (*smr)->remote_base() + 4096;
  w.key = (*smr)->key();
  w.max_op = 256 << 10;
  w.tag = 7;
  q.add(w);
  done = run_queue(q, *b, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].status.is_ok());
  EXPECT_EQ(memcmp(src.data() + 4096, back.data(), back.size()), 0);
}

TEST(RmaQueue, AFailedTransferIsToldOnceAndUnpostedOnesAreDropped) {
  auto a = open_ep(), b = open_ep();
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> src(1 << 20, 5), dst(1 << 20, 0);
  auto m1 = b->register_memory(src.data(), src.size(), kRemoteRead);
  ASSERT_TRUE(m1.is_ok());
  uint64_t key = (*m1)->key(), base = (*m1)->remote_base();
  m1->reset();  // revoked: every read of it fails
  auto dmr = a->register_memory(dst.data(), dst.size(), kLocalWrite);
  auto peer = a->insert_peer(b->address());
  ASSERT_TRUE(dmr.is_ok() && peer.is_ok());
  RmaQueue q(*a, /*max_in_flight=*/2);
  RmaQueue::Transfer t;
  t.local = dst.data();
  t.len = 512 << 10;
  t.desc = (*dmr)->desc();
  t.peer = *peer;
  t.remote_addr = base;
  t.key = key;
  t.max_op = 64 << 10;  // 8 pieces, at most 2 in flight
  t.tag = 1;
  q.add(t);
  auto done = run_queue(q, *b, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_FALSE(done[0].status.is_ok()) << "a read with a revoked key succeeded";
  // Its other pieces are absorbed, never told again nor posted.
  EXPECT_EQ(q.settle(20), 0u);
  std::vector<RmaQueue::Done> more;
  for (int i = 0; i < 50; ++i) {
    EXPECT_TRUE(q.post().is_ok());
    EXPECT_TRUE(q.poll(&more).is_ok());
  }
  EXPECT_TRUE(more.empty());
  EXPECT_TRUE(q.idle());
  // Transfers never posted are dropped whole, with their tags.
  t.tag = 2;
  q.add(t);
  t.tag = 3;
  q.add(t);
  std::vector<uint64_t> dropped;
  q.drop_unposted(&dropped);
  EXPECT_EQ(dropped, (std::vector<uint64_t>{2, 3}));
  EXPECT_TRUE(q.idle());
  EXPECT_EQ(dst[0], 0);
  // By tag: only the transfers asked for; the others stay queued.
  for (uint64_t tag : {4, 5, 6}) {
    t.tag = tag;
    q.add(t);
  }
  dropped.clear();
  q.drop_unposted(&dropped, [](uint64_t tag) { return tag == 5; });
  EXPECT_EQ(dropped, (std::vector<uint64_t>{5}));
  EXPECT_FALSE(q.idle());
  dropped.clear();
  q.drop_unposted(&dropped);
  EXPECT_EQ(dropped, (std::vector<uint64_t>{4, 6}));
  EXPECT_TRUE(q.idle());
}

TEST(PullStream, ReadsEveryRangeIntoTheBoundedPoolPieceByPiece) {
  auto a = open_ep(), b = open_ep();
  ASSERT_TRUE(a && b);
  // Three ranges of odd sizes in two registrations of the target; the pool: 3 buffers of 64 KiB.
  std::vector<uint8_t> one(300000), two(1 << 20);
  for (size_t i = 0; i < one.size(); ++i) one[i] = uint8_t(i * 13 + 1);
  for (size_t i = 0; i < two.size(); ++i) two[i] = uint8_t(i * 29 + i / 65536);
  auto m1 = b->register_memory(one.data(), one.size(), kRemoteRead);
  auto m2 = b->register_memory(two.data(), two.size(), kRemoteRead);
  auto peer = a->insert_peer(b->address());
  auto pool = BufferPool::create(*a, 3 * (64 << 10), 64 << 10, kLocalRead | kLocalWrite);
  ASSERT_TRUE(m1.is_ok() && m2.is_ok() && peer.is_ok() && pool.is_ok());
  RmaQueue q(*a, /*max_in_flight=*/4);
  PullStream pull(q, **pool);
  const std::vector<PullStream::Range> ranges{{*peer, (*m1)->remote_base(), (*m1)->key(), one.size()},
                                              {*peer, (*m2)->remote_base() + 1000, (*m2)->key(), 500000},
                                              {*peer, (*m2)->remote_base() + 4096, (*m2)->key(), 1}};
  pull.start(ranges, 64 << 10, /*rma_len=*/20000);
  std::vector<std::vector<uint8_t>> got(3);
  for (size_t r = 0; r < 3; ++r) got[r].assign(ranges[r].len, 0);
  std::vector<uint32_t> lent;  // buffers the stream holds
  uint64_t pieces = 0, most_lent = 0;
  double deadline = wire::monotonic_seconds() + 30;
  while ((!pull.all_issued() || pull.reading() > 0) && wire::monotonic_seconds() < deadline) {
    ASSERT_TRUE(pull.issue([&](uint64_t len) -> std::optional<uint32_t> {
      EXPECT_LE(len, 64u << 10);
      uint32_t buf = 0;
      if (!(*pool)->take(&buf)) return std::nullopt;
      lent.push_back(buf);
      most_lent = std::max<uint64_t>(most_lent, lent.size());
      return buf;
    }).is_ok());
    Completion c[8];
    ASSERT_TRUE(b->poll(c, 8).is_ok());
    std::vector<RmaQueue::Done> others;
    auto n = pull.poll(
        [&](const PullStream::Piece& p, const Status& st) {
          ASSERT_TRUE(st.is_ok()) << st.message();
          ASSERT_LT(p.range, 3u);
          ASSERT_LE(p.offset + p.len, ranges[p.range].len) << "a piece crosses its range's end";
          memcpy(got[p.range].data() + p.offset, (*pool)->data(p.buffer), p.len);
          lent.erase(std::find(lent.begin(), lent.end(), p.buffer));
          (*pool)->give(p.buffer);
          ++pieces;
        },
        &others);
    ASSERT_TRUE(n.is_ok()) << n.status().message();
    EXPECT_TRUE(others.empty()) << "a completion of the stream's reads was not the stream's";
  }
  ASSERT_TRUE(pull.all_issued() && pull.reading() == 0) << "the stream did not finish within 30 s";
  EXPECT_EQ(pull.issued_bytes(), 300000u + 500000u + 1u);
  EXPECT_EQ(pieces, 5u + 8u + 1u);  // ceil(300000 / 64 Ki) + ceil(500000 / 64 Ki) + 1
  EXPECT_LE(most_lent, 3u);
  EXPECT_TRUE(lent.empty());
  EXPECT_EQ(got[0], one);
  EXPECT_EQ(0, memcmp(got[1].data(), two.data() + 1000, 500000));
  EXPECT_EQ(got[2][0], two[4096]);
  EXPECT_TRUE(q.idle());
  // Another transfer's completion on the same queue is not the stream's: poll() hands it back untouched.
  EXPECT_FALSE(pull.owns(RmaQueue::Done{1ull << 63, Status::ok()}));
  EXPECT_FALSE(pull.owns(RmaQueue::Done{0, Status::ok()}));
  RmaQueue::Transfer other;
  other.local = (*pool)->data(0);
  other.len = 4096;
  other.desc = (*pool)->desc();
  other.peer = *peer;
  other.remote_addr = (*m1)->remote_base();
  other.key = (*m1)->key();
  other.tag = 1ull << 63;
  q.add(other);
  std::vector<RmaQueue::Done> others;
  deadline = wire::monotonic_seconds() + 20;
  while (others.empty() && wire::monotonic_seconds() < deadline) {
    ASSERT_TRUE(q.post().is_ok());
    Completion c[8];
    ASSERT_TRUE(b->poll(c, 8).is_ok());
    ASSERT_TRUE(pull.poll([](const PullStream::Piece&, const Status&) { FAIL() << "a piece of no read"; }, &others).is_ok());
  }
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].tag, 1ull << 63);
  EXPECT_TRUE(others[0].status.is_ok());

  // Given up with reads not posted yet: their buffers come back at once, and nothing more is issued.
  RmaQueue q2(*a, /*max_in_flight=*/1);
  PullStream held(q2, **pool);
  held.start(ranges, 64 << 10);
  std::vector<uint32_t> lent2;
  ASSERT_TRUE(held.issue([&](uint64_t) -> std::optional<uint32_t> {
    uint32_t buf = 0;
    if (!(*pool)->take(&buf)) return std::nullopt;
    lent2.push_back(buf);
    return buf;
  }).is_ok());
  ASSERT_EQ(lent2.size(), 3u);
  std::vector<uint32_t> back = held.abandon();
  EXPECT_TRUE(held.all_issued());
  // At most one read was posted (the queue takes one at a time); the others come back at once.
  EXPECT_GE(back.size(), 2u);
  EXPECT_EQ(back.size() + held.reading(), 3u);
  deadline = wire::monotonic_seconds() + 20;
  while (held.reading() > 0 && wire::monotonic_seconds() < deadline) {
    ASSERT_TRUE(q2.post().is_ok());
    Completion c[8];
    ASSERT_TRUE(b->poll(c, 8).is_ok());
    std::vector<RmaQueue::Done> done;
    ASSERT_TRUE(q2.poll(&done).is_ok());
    for (const auto& d : done) {
      ASSERT_TRUE(held.owns(d));
      back.push_back(held.completed(d).buffer);
    }
  }
  std::sort(back.begin(), back.end());
  std::sort(lent2.begin(), lent2.end());
  EXPECT_EQ(back, lent2) << "every lent buffer came back, once";
  EXPECT_TRUE(q2.idle());
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
