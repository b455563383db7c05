// The service's wire protocol (docs/format.md, "The service's wire protocol"): the frame header, every
// message's round trip and refusals, the spec's byte layout checked by an independent writer, and a fuzz
// loop over every decoder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "wire/control_messages.hpp"
#include "wire/migrate_messages.hpp"
#include "wire/session_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::wire {
namespace {

AppKey key_of(uint8_t seed) {
  AppKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed + i * 7);
  return k;
}

MigrateOffer sample_offer() {
  MigrateOffer o;
  o.version = 12, o.node = "node1", o.fabric_address = std::string("\x02\x00\x1f\x90", 4);
  o.files = {{2, "slot-1.data", 1 << 20, 2 << 20, 1, 0x7f0000001000, 77}, {2, "slot-1.red", 4096, 4096, 0, 0x7f0000300000, 78},
             {3, "v12.files/out.dat", 0, 0, 0, 0, 0}};
  o.smalls = {{2, "v12.set", "set"}, {2, "v12.l1", std::string(40, 'r')}};
  return o;
}

RegisterRank sample_register() {
  RegisterRank r;
  r.app_name = "heat2d";
  r.job = "heat2d-1a2b3c4d";
  r.key = key_of(3);
  r.rank = 5;
  r.nranks = 8;
  r.bytes = 123456789;
  r.interval_s = 12.5;
  r.prefix = "/scratch/run/prefix";
  r.data_roots = {"/fsA", "/fsB"};
  r.mode = TransferMode::push;
  r.agents_wanted = 2;
  r.chunk_size = 128 << 10;
  r.pool_bytes = 8 << 20;
  r.turnstile_width = 1;
  r.provider = "tcp;ofi_rxm";
  r.host = "node7";
  r.pid = 4242;
  return r;
}

template <class M>
M round_trip(const M& m) {
  std::string framed = frame(m);
  EXPECT_GE(framed.size(), kHeaderSize);
  auto h = decode_header(reinterpret_cast<const uint8_t*>(framed.data()));
  EXPECT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(h->type, M::kType);
  EXPECT_EQ(h->length, framed.size() - kHeaderSize);
  auto back = decode<M>(framed.substr(kHeaderSize));
  EXPECT_TRUE(back.is_ok()) << back.status().message();
  return back.is_ok() ? *back : M{};
}

TEST(WireFrame, HeaderIsTheSpecsTwelveBytes) {
  std::string h = encode_header(Type::flush, 0x01020304);
  ASSERT_EQ(h.size(), 12u);
  const uint8_t want[12] = {'c', 'n', 's', 'v', 2, 0, 50, 0, 4, 3, 2, 1};
  EXPECT_EQ(memcmp(h.data(), want, 12), 0);
}

TEST(WireFrame, RefusesGarbageOtherVersionsUnknownTypesAndHugePayloads) {
  auto header = [](uint32_t magic, uint16_t version, uint16_t type, uint32_t len) {
    Writer w;
    w.u32(magic), w.u16(version), w.u16(type), w.u32(len);
    return w.take();
  };
  auto check = [](const std::string& h, const char* words) {
    auto r = decode_header(reinterpret_cast<const uint8_t*>(h.data()));
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Code::ERR_FORMAT);
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  check(std::string("GET / HTTP/1.0", 12), "not a cairn service message");
  check(header(kMagic, 1, 1, 0), "protocol version 1 is not supported");  // issue 11's, without chains
  check(header(kMagic, 3, 1, 0), "protocol version 3 is not supported");
  check(header(kMagic, 0, 1, 0), "protocol version 0");
  check(header(kMagic, kProtocol, 999, 0), "unknown message type 999");
  check(header(kMagic, kProtocol, 50, kMaxPayload + 1), "exceeds the limit");
  EXPECT_TRUE(decode_header(reinterpret_cast<const uint8_t*>(header(kMagic, kProtocol, 50, kMaxPayload).data())).is_ok());
}

TEST(WireMessages, EveryMessageRoundTrips) {
  RegisterRank r = round_trip(sample_register());
  EXPECT_EQ(r.app_name, "heat2d");
  EXPECT_TRUE(same_key(r.key, key_of(3)));
  EXPECT_EQ(r.data_roots, (std::vector<std::string>{"/fsA", "/fsB"}));
  EXPECT_EQ(r.mode, TransferMode::push);
  EXPECT_EQ(r.interval_s, 12.5);
  EXPECT_EQ(r.provider, "tcp;ofi_rxm");
  EXPECT_EQ(r.pid, 4242u);

  Assigned a = round_trip(Assigned{7, 1, 9, "127.0.0.1:4000", "ckpt-a"});
  EXPECT_EQ(a.agent_address, "127.0.0.1:4000");
  EXPECT_EQ(round_trip(Reassign{7, key_of(1), 3, 9}).lost_agent, 9u);
  EXPECT_EQ(round_trip(Unregister{7, key_of(1), 3}).rank, 3u);
  EXPECT_EQ(round_trip(RankUsage{7, key_of(1), 3, 1 << 30, 60.5}).interval_s, 60.5);
  EXPECT_FALSE(decode<RankUsage>(encode(RankUsage{7, key_of(1), 3, 1, -1})).is_ok());
  EXPECT_EQ(round_trip(ManagerHello{"ckpt-a", "10.0.0.1", 4, 99, "secret"}).token, "secret");
  EXPECT_EQ(round_trip(ManagerWelcome{12}).manager_id, 12u);
  StartAgent sa;
  sa.agent_id = 3, sa.app_id = 7, sa.key = key_of(9), sa.app_name = "x", sa.nranks = 4, sa.prefix = "/p";
  sa.data_roots = {"/q"}, sa.chunk_size = 4096, sa.pool_bytes = 8192, sa.provider = "verbs;ofi_rxm";
  sa.turnstile_width = 2, sa.chain = "verify,compress,write,plugin:/x.so:/c";
  StartAgent sa2 = round_trip(sa);
  EXPECT_TRUE(same_key(sa2.key, key_of(9)));
  EXPECT_EQ(sa2.chain, sa.chain);
  EXPECT_EQ(sa2.provider, "verbs;ofi_rxm");
  EXPECT_EQ(round_trip(StopAgent{3}).agent_id, 3u);
  EXPECT_EQ(round_trip(AgentUp{3, 77, "127.0.0.1:5000"}).address, "127.0.0.1:5000");
  EXPECT_EQ(round_trip(AgentExit{3, -9, "killed by signal 9"}).status, -9);
  AgentStats st;
  st.agent_id = 3, st.sessions = 2, st.bytes_drained = 1 << 30, st.busy_s = 1.5, st.active_rank = 1;
  st.active_version = 4, st.active_done = 10, st.active_total = 20;
  EXPECT_EQ(round_trip(st).active_done, 10u);
  EXPECT_EQ(round_trip(StatusReply{"{\"a\":1}"}).json, "{\"a\":1}");
  round_trip(StatusRequest{});
  EXPECT_EQ(round_trip(SessionHello{7, key_of(2), 1, std::string("\x02\x00\x1f\x90", 4)}).fabric_address.size(), 4u);
  SessionWelcome w;
  w.agent_id = 3, w.fabric_address = "addr", w.mode = TransferMode::push, w.chunk_size = 4096;
  w.pool_addr = 0x7f0000000000, w.pool_key = 0xdeadbeef, w.pool_bytes = 8192;
  EXPECT_EQ(round_trip(w).pool_key, 0xdeadbeefu);
  Flush f;
  f.version = 12, f.manifest = std::string(100, 'm'), f.slot_addr = 0x1000, f.slot_key = 42, f.placed = 2;
  f.file = "/p/v00000012/node0-0.data", f.offset = 1 << 20;
  EXPECT_EQ(round_trip(f).offset, 1u << 20);
  f.placed = 1, f.offset = 0, f.zstd_level = 19;
  EXPECT_EQ(round_trip(f).zstd_level, 19);
  EXPECT_EQ(round_trip(Progress{12, 5000}).bytes_done, 5000u);
  EXPECT_EQ(round_trip(Credit{12, {0x1000, 0x2000}}).buffers.size(), 2u);
  Restore rs{12, {{"grid", 1 << 20, 0x7f0000001000, 99}, {"step", 8, 0x7f0000200000, 100}}};
  Restore rs2 = round_trip(rs);
  ASSERT_EQ(rs2.regions.size(), 2u);
  EXPECT_EQ(rs2.regions[1].name, "step");
  EXPECT_EQ(rs2.regions[0].addr, 0x7f0000001000u);
  EXPECT_EQ(rs2.regions[1].key, 100u);
  EXPECT_FALSE(decode<Restore>(encode(Restore{12, {}})).is_ok());  // no regions
  EXPECT_EQ(round_trip(Restored{12, 4096, -7, "chunk 3 checksum mismatch"}).message, "chunk 3 checksum mismatch");
  {  // a region count over the limit is refused, not allocated
    Writer w;
    w.u64(12), w.u32(kMaxRestoreRegions + 1);
    EXPECT_FALSE(decode<Restore>(w.take()).is_ok());
  }
  EXPECT_EQ(round_trip(Pushed{12, 4096, 4096, 0x2000}).buffer, 0x2000u);
  EXPECT_EQ(round_trip(Done{12, -5, "no space"}).message, "no space");
  EXPECT_EQ(round_trip(Cancel{12}).version, 12u);
  round_trip(ListVersions{7, key_of(4)});
  EXPECT_EQ(round_trip(VersionList{{12, 8}}).versions, (std::vector<uint64_t>{12, 8}));
  EXPECT_EQ(round_trip(ErrorMsg{-4, "wrong key"}).code, -4);
  // Migration over the fabric.
  MigrateHello mh = round_trip(MigrateHello{key_of(5), "node4", "addr"});
  EXPECT_TRUE(same_key(mh.key, key_of(5)));
  EXPECT_EQ(mh.spare, "node4");
  MigrateOffer mo = round_trip(sample_offer());
  ASSERT_EQ(mo.files.size(), 3u);
  EXPECT_EQ(mo.files[0].name, "slot-1.data");
  EXPECT_EQ(mo.files[0].addr, 0x7f0000001000u);
  EXPECT_EQ(mo.files[0].key, 77u);
  EXPECT_EQ(mo.files[0].checked, 1);
  EXPECT_EQ(mo.files[1].size, 4096u);
  ASSERT_EQ(mo.smalls.size(), 2u);
  EXPECT_EQ(mo.smalls[1].bytes, std::string(40, 'r'));
  EXPECT_EQ(mo.fabric_address.size(), 4u);
  EXPECT_EQ(round_trip(MigrateDone{-9, 0, 0, "chunk 3 of slot-1.data"}).message, "chunk 3 of slot-1.data");
  EXPECT_EQ(round_trip(MigrateDone{0, 1 << 20, 1 << 19, ""}).checked, 1u << 19);
}

TEST(WireMessages, MigrationMessagesRefuseNonsense) {
  MigrateOffer o = sample_offer();
  o.files[0].checked = 2;
  EXPECT_FALSE(decode<MigrateOffer>(encode(o)).is_ok());
  o = sample_offer(), o.files[1].length = 8192;  // more to stream than the file holds
  EXPECT_FALSE(decode<MigrateOffer>(encode(o)).is_ok());
  o = sample_offer(), o.files.clear();
  EXPECT_FALSE(decode<MigrateOffer>(encode(o)).is_ok());
  o = sample_offer(), o.version = 0;
  EXPECT_FALSE(decode<MigrateOffer>(encode(o)).is_ok());
  EXPECT_FALSE(decode<MigrateHello>(encode(MigrateHello{key_of(1), "node4", ""})).is_ok());
  EXPECT_FALSE(decode<MigrateDone>(encode(MigrateDone{2, 0, 0, ""})).is_ok());
  {  // a file count over the limit is refused, not allocated
    Writer w;
    w.u64(12), w.bytes("n"), w.bytes("a"), w.u32(kMaxMigrateFiles + 1);
    EXPECT_FALSE(decode<MigrateOffer>(w.take()).is_ok());
  }
  std::string payload = encode(sample_offer());
  for (size_t n = 0; n < payload.size(); ++n) EXPECT_FALSE(decode<MigrateOffer>(payload.substr(0, n)).is_ok()) << n;
}

// The spec's field order, written by hand: register_rank as docs/format.md lists it.
TEST(WireMessages, RegisterRankMatchesTheSpecLayout) {
  RegisterRank r = sample_register();
  Writer w;
  auto str = [&](const std::string& s) { w.u32(uint32_t(s.size())); for (char c : s) w.u8(uint8_t(c)); };
  str(r.app_name), str(r.job);
  for (uint8_t b : r.key) w.u8(b);
  w.u32(r.rank), w.u32(r.nranks), w.u64(r.bytes);
  uint64_t bits;
  memcpy(&bits, &r.interval_s, 8);
  w.u64(bits);
  str(r.prefix);
  w.u32(2), str("/fsA"), str("/fsB");
  w.u8(1), w.u32(r.agents_wanted), w.u32(r.chunk_size), w.u64(r.pool_bytes), w.u32(r.turnstile_width);
  str(r.provider), str(r.host), w.u32(r.pid);
  EXPECT_EQ(encode(r), w.str());
}

TEST(WireMessages, RefusesTruncationLeftoversAndNonsense) {
  std::string payload = encode(sample_register());
  for (size_t n = 0; n < payload.size(); ++n) {
    auto r = decode<RegisterRank>(payload.substr(0, n));
    ASSERT_FALSE(r.is_ok()) << "a register_rank cut at " << n << " bytes was accepted";
    EXPECT_EQ(r.status().code(), Code::ERR_FORMAT);
  }
  EXPECT_FALSE(decode<RegisterRank>(payload + "x").is_ok());
  auto bad = [](RegisterRank r) { return decode<RegisterRank>(encode(r)); };
  RegisterRank r = sample_register();
  r.rank = 8;
  EXPECT_NE(bad(r).status().message().find("rank 8 of 8"), std::string::npos);
  r = sample_register(), r.prefix = "relative/path";
  EXPECT_FALSE(bad(r).is_ok());
  r = sample_register(), r.mode = TransferMode(7);
  EXPECT_FALSE(bad(r).is_ok());
  r = sample_register(), r.chunk_size = 100;
  EXPECT_FALSE(bad(r).is_ok());
  r = sample_register(), r.interval_s = -1;
  EXPECT_FALSE(bad(r).is_ok());
  // A string longer than its limit is refused before it is copied.
  Writer w;
  w.u32(kMaxName + 1);
  EXPECT_FALSE(decode<Assigned>(w.str()).is_ok());
  Flush f;
  f.version = 3, f.manifest = "m", f.placed = 0, f.file = "/somewhere";
  EXPECT_FALSE(decode<Flush>(encode(f)).is_ok());  // a file without placement
  f.placed = 1, f.file = "relative";
  EXPECT_FALSE(decode<Flush>(encode(f)).is_ok());
  f.file = "/p/f", f.zstd_level = 20;
  EXPECT_FALSE(decode<Flush>(encode(f)).is_ok());  // zstd levels end at 19
  f.placed = 2, f.zstd_level = 3;
  EXPECT_FALSE(decode<Flush>(encode(f)).is_ok());  // compressed only into a file of the rank's own
  StartAgent nochain;
  nochain.agent_id = 3, nochain.app_id = 7, nochain.nranks = 4, nochain.prefix = "/p", nochain.chunk_size = 4096;
  nochain.pool_bytes = 8192, nochain.provider = "tcp";
  EXPECT_FALSE(decode<StartAgent>(encode(nochain)).is_ok());
  EXPECT_FALSE(decode<Done>(encode(Done{1, 3, ""})).is_ok());  // codes are negative
  EXPECT_FALSE(decode<Credit>(encode(Credit{1, {}})).is_ok());
  // A count that promises more than the payload holds.
  Writer c;
  c.u64(1), c.u32(1000000);
  EXPECT_FALSE(decode<Credit>(c.str()).is_ok());
}

TEST(WireKey, KeysAreRandomAndComparedWhole) {
  auto a = random_key(), b = random_key();
  ASSERT_TRUE(a.is_ok());
  ASSERT_TRUE(b.is_ok());
  EXPECT_FALSE(same_key(*a, *b));
  AppKey c = *a;
  EXPECT_TRUE(same_key(*a, c));
  c[15] ^= 1;
  EXPECT_FALSE(same_key(*a, c));
  EXPECT_TRUE(same_secret("token", "token"));
  EXPECT_FALSE(same_secret("token", "token2"));
  EXPECT_FALSE(same_secret("", "x"));
  // The text form a migration's key travels in (stdin of its two ends).
  auto back = parse_key_hex(key_hex(*a));
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(same_key(*back, *a));
  EXPECT_EQ(key_hex(key_of(0)).size(), 32u);
  EXPECT_FALSE(parse_key_hex("").is_ok());
  EXPECT_FALSE(parse_key_hex(key_hex(*a) + "0").is_ok());
  EXPECT_FALSE(parse_key_hex(std::string(31, '0') + "g").is_ok());
  EXPECT_FALSE(parse_key_hex(std::string(31, '0') + "A").is_ok());
}

TEST(WireAddress, HostPortParsing) {
  EXPECT_EQ(parse_host_port("127.0.0.1:7000")->port, 7000);
  EXPECT_EQ(parse_host_port("[::1]:0")->host, "::1");
  EXPECT_EQ(parse_host_port("node-3:65535")->str(), "node-3:65535");
  for (const char* bad : {"", "host", ":7", "host:", "host:65536", "host:-1", "host:7x"})
    EXPECT_FALSE(parse_host_port(bad).is_ok()) << bad;
}

// A connection delivers frames split anywhere, and refuses a bad header.
TEST(WireConnection, FramesSplitAnywhereAndBadHeaders) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Connection in(p[0], dup(p[1]), "test");
  std::string bytes = frame(Progress{1, 2}) + frame(Done{1, 0, "ok"});
  for (char c : bytes) ASSERT_EQ(write(p[1], &c, 1), 1);
  ASSERT_TRUE(in.receive().is_ok());
  Frame f;
  bool have = false;
  ASSERT_TRUE(in.next(&f, &have).is_ok());
  ASSERT_TRUE(have);
  EXPECT_EQ(expect<Progress>(f)->bytes_done, 2u);
  ASSERT_TRUE(in.next(&f, &have).is_ok());
  ASSERT_TRUE(have);
  EXPECT_EQ(f.type, Type::done);
  ASSERT_TRUE(in.next(&f, &have).is_ok());
  EXPECT_FALSE(have);
  ASSERT_EQ(write(p[1], "garbage-garbage", 15), 15);
  ASSERT_TRUE(in.receive().is_ok());
  EXPECT_EQ(in.next(&f, &have).code(), Code::ERR_FORMAT);
  close(p[1]);
  // An error frame comes back as its Status.
  Frame e{Type::error, encode(ErrorMsg{-4, "refused"})};
  auto r = expect<Assigned>(e);
  EXPECT_EQ(r.status().code(), Code::ERR_CONFIG);
  EXPECT_EQ(r.status().message(), "refused");
}

// ---- fuzz -----------------------------------------------------------------------------------------

template <class M>
void fuzz_one(std::mt19937_64& rng, const std::vector<std::string>& corpus, int* accepted) {
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b;
    if (iter % 3 == 0) {
      b.resize(rng() % 200);
      for (auto& c : b) c = char(rng());
    } else {
      b = corpus[rng() % corpus.size()];
      for (int ops = 1 + int(rng() % 4); ops > 0; --ops) {
        switch (rng() % 4) {
          case 0:
            if (!b.empty()) b[rng() % b.size()] ^= char(1 << (rng() % 8));
            break;
          case 1:
            if (!b.empty()) b.resize(rng() % b.size());
            break;
          case 2:
            b.insert(b.begin() + static_cast<long>(b.empty() ? 0 : rng() % b.size()), char(rng()));
            break;
          case 3:  // a length or count field set to an interesting value
            if (b.size() >= 4) {
              const uint32_t vals[] = {0, 1, 0x7fffffff, 0xffffffff, uint32_t(b.size())};
              uint32_t v = vals[rng() % 5];
              memcpy(&b[rng() % (b.size() - 3)], &v, 4);
            }
            break;
        }
      }
    }
    auto m = decode<M>(b);  // must not crash (the tests also run under ASan in CI builds)
    if (m.is_ok()) {
      ++*accepted;
      EXPECT_EQ(decode<M>(encode(*m)).is_ok(), true);  // whatever is accepted re-encodes to something accepted
    } else {
      EXPECT_EQ(m.status().code(), Code::ERR_FORMAT);
    }
  }
}

TEST(WireFuzz, EveryDecoderSurvivesRandomAndMutatedInput) {
  std::mt19937_64 rng(0x5e41ce);
  int accepted = 0;
  fuzz_one<RegisterRank>(rng, {encode(sample_register())}, &accepted);
  fuzz_one<Assigned>(rng, {encode(Assigned{7, 1, 9, "127.0.0.1:4000", "m"})}, &accepted);
  fuzz_one<Reassign>(rng, {encode(Reassign{7, key_of(1), 3, 9})}, &accepted);
  fuzz_one<Unregister>(rng, {encode(Unregister{7, key_of(1), 3})}, &accepted);
  fuzz_one<RankUsage>(rng, {encode(RankUsage{7, key_of(1), 3, 100, 1.5})}, &accepted);
  fuzz_one<ManagerHello>(rng, {encode(ManagerHello{"a", "h", 4, 1, ""})}, &accepted);
  fuzz_one<ManagerWelcome>(rng, {encode(ManagerWelcome{1})}, &accepted);
  StartAgent sa;
  sa.agent_id = 3, sa.app_id = 7, sa.nranks = 4, sa.prefix = "/p", sa.chunk_size = 4096, sa.pool_bytes = 8192;
  sa.provider = "tcp", sa.chain = "verify,write";
  fuzz_one<StartAgent>(rng, {encode(sa)}, &accepted);
  fuzz_one<StopAgent>(rng, {encode(StopAgent{3})}, &accepted);
  fuzz_one<AgentUp>(rng, {encode(AgentUp{3, 4, "h:1"})}, &accepted);
  fuzz_one<AgentExit>(rng, {encode(AgentExit{3, 0, "x"})}, &accepted);
  fuzz_one<AgentStats>(rng, {encode(AgentStats{})}, &accepted);
  fuzz_one<StatusRequest>(rng, {encode(StatusRequest{})}, &accepted);
  fuzz_one<StatusReply>(rng, {encode(StatusReply{"{}"})}, &accepted);
  fuzz_one<SessionHello>(rng, {encode(SessionHello{7, key_of(1), 0, "addr"})}, &accepted);
  SessionWelcome w;
  w.fabric_address = "a", w.chunk_size = 4096;
  fuzz_one<SessionWelcome>(rng, {encode(w)}, &accepted);
  Flush f;
  f.version = 1, f.manifest = "m", f.placed = 1, f.file = "/p/f", f.zstd_level = 3;
  fuzz_one<Flush>(rng, {encode(f)}, &accepted);
  fuzz_one<Progress>(rng, {encode(Progress{1, 2})}, &accepted);
  fuzz_one<Credit>(rng, {encode(Credit{1, {4096}})}, &accepted);
  fuzz_one<Pushed>(rng, {encode(Pushed{1, 0, 10, 4096})}, &accepted);
  fuzz_one<Done>(rng, {encode(Done{1, -5, "x"})}, &accepted);
  fuzz_one<Cancel>(rng, {encode(Cancel{1})}, &accepted);
  fuzz_one<ListVersions>(rng, {encode(ListVersions{1, key_of(0)})}, &accepted);
  fuzz_one<VersionList>(rng, {encode(VersionList{{1, 2}})}, &accepted);
  fuzz_one<Restore>(rng, {encode(Restore{3, {{"a", 8, 0x1000, 7}, {"b", 0, 0, 0}}})}, &accepted);
  fuzz_one<Restored>(rng, {encode(Restored{3, 8, 0, ""})}, &accepted);
  fuzz_one<ErrorMsg>(rng, {encode(ErrorMsg{-1, "x"})}, &accepted);
  fuzz_one<MigrateHello>(rng, {encode(MigrateHello{key_of(2), "node4", "addr"})}, &accepted);
  fuzz_one<MigrateOffer>(rng, {encode(sample_offer())}, &accepted);
  fuzz_one<MigrateDone>(rng, {encode(MigrateDone{-9, 1, 2, "x"})}, &accepted);
  EXPECT_GT(accepted, 0);  // the mutations do reach the accepting paths
  // Headers: random bytes never crash, and everything accepted has the magic and the version.
  for (int i = 0; i < 20000; ++i) {
    uint8_t h[kHeaderSize];
    for (auto& c : h) c = uint8_t(rng());
    if (i % 2) memcpy(h, "cnsv\x01\x00", 6);
    auto r = decode_header(h);
    if (r.is_ok()) {
      EXPECT_EQ(memcmp(h, "cnsv\x01\x00", 6), 0);
    }
  }
}

}  // namespace
}  // namespace cairn::wire
