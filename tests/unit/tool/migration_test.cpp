// The process-migration transfer (tools/cairn/migrate/migration.cpp, migration_fabric.cpp, cache/node_move):
// a node's newest L1 version moves into a spare's cache through the bounded pool, verified chunk by
// chunk; damage is refused and leaves nothing behind. Every case runs both ways: between the two caches
// in this process, and over libfabric (tcp on 127.0.0.1) between real cairnd migrate-source and
// migrate-sink processes. A plan from the wire is checked before anything is written. And the control
// files round-trip.
#include "migrate/migration.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/wait.h>

#include <cstring>
#include <functional>
#include <filesystem>
#include <random>

#include "cache/cache_store.hpp"
#include "cache/node_move.hpp"
#include "base/fsutil.hpp"
#include "base/manifest.hpp"

namespace cairn::tool {
namespace {

namespace stdfs = std::filesystem;

class CacheFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cairn-migration-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    layout_.prefix = root_ + "/prefix";
    layout_.control = layout_.prefix + "/.cairn";
    layout_.cache_job = root_ + "/cache";
  }
  void TearDown() override { stdfs::remove_all(root_); }

  // Writes version v of `rank` on `node` the way the library does: slot data, redundancy data, the
  // set file, the protected marker, and the record last. Returns the stream.
  std::string write_version(const std::string& node, int rank, uint64_t v, int slot, size_t size) {
    CacheStore store;
    EXPECT_TRUE(store.open(rank_dir(layout_, node, static_cast<uint32_t>(rank)), 2).is_ok());
    std::string data(size, '\0');
    std::mt19937_64 rng(v * 1000 + static_cast<uint64_t>(rank));
    for (auto& c : data) c = static_cast<char>(rng());
    auto s = store.slot(slot, size);
    EXPECT_TRUE(s.is_ok());
    memcpy((*s)->data(), data.data(), size);
    auto r = store.red(slot, size / 2);
    EXPECT_TRUE(r.is_ok());
    memset((*r)->data(), 0x5a, size / 2);
    L1Record rec;
    rec.slot = static_cast<uint32_t>(slot);
    rec.manifest.version = v;
    rec.manifest.rank = static_cast<uint32_t>(rank);
    rec.manifest.nranks = 4;
    rec.manifest.node = node;
    rec.manifest.chunk_size = 64 * 1024;
    rec.manifest.total_size = size;
    rec.manifest.chunk_hashes = chunk_hashes(data.data(), size, rec.manifest.chunk_size);
    EXPECT_TRUE(store.write_set(v, "set of version " + std::to_string(v)).is_ok());
    EXPECT_TRUE(store.mark_protected(v).is_ok());
    EXPECT_TRUE(store.write_record(v, rec).is_ok());
    return data;
  }

  std::string read(const std::string& path) {
    auto b = fs::read_file(path);
    EXPECT_TRUE(b.is_ok()) << path;
    return b.is_ok() ? *b : "";
  }

  std::string root_;
  Layout layout_;
};

// The parameter: over the fabric, or between the caches.
class MigrationTest : public CacheFixture, public ::testing::WithParamInterface<bool> {
 protected:
  Result<TransferStats> move(const std::string& from, const std::string& to, const TransferOptions& opt = {}) {
    if (!GetParam()) return transfer_node_cache(layout_, from, to, opt);
    MigrationSettings settings;  // tcp;ofi_rxm on 127.0.0.1
    FabricTransfer how;
    how.cairnd = CAIRND_PATH;
    how.log_dir = root_ + "/logs";
    how.timeout_seconds = 60;
    return transfer_over_fabric(layout_, settings, how, from, to, opt);
  }

};

using MigrationPlanTest = CacheFixture;

TEST_P(MigrationTest, MovesTheNewestCommonVersionVerified) {
  // Ranks 2 and 3 on node1; version 5 in slot 1 on both, version 6 only on rank 2 (not common).
  write_version("node1", 2, 4, 0, 300 * 1024);
  std::string d2 = write_version("node1", 2, 5, 1, 1000 * 1024 + 100);  // not a multiple of the chunk
  std::string d3 = write_version("node1", 3, 5, 1, 700 * 1024);
  write_version("node1", 2, 6, 0, 300 * 1024);
  TransferOptions opt;
  opt.buffers = 2;                 // a small pool: the reader must wait for the writer
  opt.buffer_size = 100 * 1024;    // rounded up to a multiple of the 64 KiB chunk
  uint64_t last = 0, total = 0;
  opt.progress = [&](uint64_t done, uint64_t all) { last = done, total = all; };
  auto t = move("node1", "node4", opt);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->version, 5u);
  EXPECT_EQ(t->ranks, 2);
  EXPECT_EQ(t->buffer_size, 128u * 1024);
  EXPECT_LE(t->peak_in_use, 2);
  EXPECT_EQ(t->verified, d2.size() + d3.size());
  EXPECT_EQ(last, total);
  EXPECT_EQ(t->bytes, total);

  CacheStore spare2, spare3;
  ASSERT_TRUE(spare2.open(rank_dir(layout_, "node4", 2), 2).is_ok());
  ASSERT_TRUE(spare3.open(rank_dir(layout_, "node4", 3), 2).is_ok());
  EXPECT_EQ(spare2.versions(), std::vector<uint64_t>{5});  // only the migrated version
  EXPECT_EQ(read(spare2.slot_path(1)).substr(0, d2.size()), d2);
  EXPECT_EQ(read(spare3.slot_path(1)).substr(0, d3.size()), d3);
  EXPECT_EQ(read(spare2.red_path(1)), read(rank_dir(layout_, "node1", 2) + "/slot-1.red"));
  EXPECT_EQ(read(spare3.set_path(5)), "set of version 5");
  EXPECT_TRUE(spare3.is_protected(5));
  auto rec = spare2.read_record(5);
  ASSERT_TRUE(rec.is_ok());
  EXPECT_EQ(rec->slot, 1u);
  EXPECT_TRUE(verify_stream(rec->manifest, d2.data(), d2.size()).is_ok());
  // The source is left as it was.
  EXPECT_EQ(read(rank_dir(layout_, "node1", 2) + "/slot-1.data").substr(0, d2.size()), d2);
}

TEST_P(MigrationTest, DamagedSourceIsRefusedAndLeavesNothing) {
  write_version("node1", 2, 5, 0, 512 * 1024);
  write_version("node1", 3, 5, 0, 512 * 1024);
  // Flip one byte in the middle of rank 3's slot: its chunk no longer matches the manifest.
  std::string slot = rank_dir(layout_, "node1", 3) + "/slot-0.data";
  std::string bytes = read(slot);
  bytes[300 * 1024] ^= 1;
  ASSERT_TRUE(fs::write_file_atomic(slot, bytes, false).is_ok());
  auto t = move("node1", "node4");
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), Code::ERR_CORRUPT);  // over the fabric: the writer's code, on its last line
  EXPECT_NE(t.status().message().find("chunk 4"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("does not match its manifest"), std::string::npos) << t.status().message();
  EXPECT_FALSE(fs::exists(layout_.node_cache("node4")));
}

// A version of the file API: the memory region in the slot, the routed file in v<N>.files/, each at its
// own offset of the stream. Both move, and the version is verified whole at the destination.
TEST_P(MigrationTest, FileApiVersionMovesWithItsFiles) {
  for (int rank : {2, 3}) {
    CacheStore store;
    ASSERT_TRUE(store.open(rank_dir(layout_, "node1", static_cast<uint32_t>(rank)), 2).is_ok());
    const uint64_t v = 7, mem = 5000, fsize = 100000 + 17 * static_cast<uint64_t>(rank);
    const uint64_t foff = file_region_offset(mem);
    std::string stream(foff + fsize, '\0');
    std::mt19937_64 rng(static_cast<uint64_t>(rank));
    for (uint64_t i = 0; i < mem; ++i) stream[i] = static_cast<char>(rng());
    for (uint64_t i = foff; i < stream.size(); ++i) stream[i] = static_cast<char>(rng());
    auto slot = store.slot(0, mem);
    ASSERT_TRUE(slot.is_ok());
    memcpy((*slot)->data(), stream.data(), mem);
    ASSERT_TRUE(fs::make_dirs(store.files_dir(v)).is_ok());
    ASSERT_TRUE(fs::write_file_atomic(store.files_dir(v) + "/out.dat", stream.substr(foff), false).is_ok());
    L1Record rec;
    rec.manifest.version = v;
    rec.manifest.rank = static_cast<uint32_t>(rank);
    rec.manifest.nranks = 4;
    rec.manifest.chunk_size = 4096;
    rec.manifest.total_size = stream.size();
    rec.manifest.regions.push_back({"grid", RegionKind::memory, 0, 1, mem, 0, mem, 0, {}});
    rec.manifest.regions.push_back({"out.dat", RegionKind::file, 0, 1, fsize, foff, fsize, 0, {}});
    rec.manifest.chunk_hashes = chunk_hashes(stream.data(), stream.size(), rec.manifest.chunk_size);
    ASSERT_TRUE(store.write_record(v, rec).is_ok());
  }
  auto t = move("node1", "node4");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->version, 7u);
  for (int rank : {2, 3}) {
    const std::string src = rank_dir(layout_, "node1", static_cast<uint32_t>(rank));
    const std::string dst = rank_dir(layout_, "node4", static_cast<uint32_t>(rank));
    EXPECT_EQ(read(dst + "/v7.files/out.dat"), read(src + "/v7.files/out.dat"));
    CacheStore spare;
    ASSERT_TRUE(spare.open(dst, 2).is_ok());
    auto rec = spare.read_record(7);
    ASSERT_TRUE(rec.is_ok());
    EXPECT_TRUE(map_verified_slot(dst, *rec).is_ok());  // the stream, slot and file, reads as written
  }
  // A damaged routed file is refused, and nothing is left on the spare.
  std::string f = rank_dir(layout_, "node1", 3) + "/v7.files/out.dat";
  std::string bytes = read(f);
  bytes[5000] ^= 1;
  ASSERT_TRUE(fs::write_file_atomic(f, bytes, false).is_ok());
  auto bad = move("node1", "node5");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("not migrated"), std::string::npos) << bad.status().message();
  CacheStore five;
  ASSERT_TRUE(five.open(rank_dir(layout_, "node5", 3), 2).is_ok());
  EXPECT_TRUE(five.versions().empty());
}

TEST_P(MigrationTest, NothingToMove) {
  auto none = move("node1", "node4");
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no cache"), std::string::npos) << none.status().message();
  // Two ranks without a version in common.
  write_version("node1", 2, 5, 0, 64 * 1024);
  write_version("node1", 3, 6, 0, 64 * 1024);
  auto disjoint = move("node1", "node4");
  ASSERT_FALSE(disjoint.is_ok());
  EXPECT_NE(disjoint.status().message().find("no version is complete"), std::string::npos);
  EXPECT_FALSE(fs::exists(layout_.node_cache("node4")));
  EXPECT_FALSE(move("node1", "node1").is_ok());
}

INSTANTIATE_TEST_SUITE_P(BothWays, MigrationTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "fabric" : "local"; });

// A plan that arrives over the wire is checked before the writer creates anything: names of the cache's
// own grammar only, the records last, each rank with its record and slot, lengths within sizes.
TEST_F(MigrationPlanTest, RefusesPlansThatCouldWriteElsewhereOrLie) {
  write_version("node1", 2, 5, 1, 200 * 1024);
  write_version("node1", 3, 5, 1, 200 * 1024);
  auto plan = plan_node_move(layout_, "node1");
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  std::vector<std::pair<uint32_t, L1Record>> recs;
  ASSERT_TRUE(check_move_plan(*plan, &recs).is_ok());
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].first, 2u);
  EXPECT_EQ(plan->smalls.back().name, "v5.l1");
  auto refused = [&](const std::function<void(MovePlan&)>& change, const std::string& why) {
    MovePlan p = *plan;
    change(p);
    Status st = check_move_plan(p, nullptr);
    EXPECT_FALSE(st.is_ok()) << why;
    EXPECT_EQ(st.code(), Code::ERR_FORMAT) << why;
    // ... and nothing is created at the destination.
    EXPECT_FALSE(MoveWriter::open(layout_, "node9", p).is_ok()) << why;
    EXPECT_FALSE(fs::exists(layout_.node_cache("node9"))) << why;
  };
  refused([](MovePlan& p) { p.files[0].name = "../../../etc/passwd"; }, "a path step");
  refused([](MovePlan& p) { p.files[1].name = "slot-1.red/../x"; }, "a path step after a slot name");
  refused([](MovePlan& p) { p.files[0].name = "v5.files/../slot-0.data"; }, "a routed file of a memory version");
  refused([](MovePlan& p) { p.files[0].name = "slot-0.data"; }, "a slot the record does not name");
  refused([](MovePlan& p) { p.files[0].checked = false; }, "a memory-API slot left unchecked");
  refused([](MovePlan& p) { p.files[1].checked = true; }, "redundancy data cannot be checked");
  refused([](MovePlan& p) { p.files[0].length = p.files[0].size + 1; }, "more bytes than the file holds");
  refused([](MovePlan& p) { p.files[0].length -= 1; }, "a checked slot shorter than the manifest");
  refused([](MovePlan& p) { p.files.push_back(p.files[0]); }, "a file named twice");
  refused([](MovePlan& p) { p.files[0].rank = 7; }, "a file of a rank without a record");
  refused([](MovePlan& p) { std::swap(p.smalls.front(), p.smalls.back()); }, "a record before the other small files");
  refused([](MovePlan& p) { p.smalls.back().bytes[5] ^= 1; }, "a damaged record");
  refused([](MovePlan& p) { p.version = 6; }, "records of another version");
  refused([](MovePlan& p) { p.smalls.push_back({2, "v5.l1.tmp", "x"}); }, "a small file not of the version");
  refused([](MovePlan& p) { p.smalls.erase(p.smalls.end() - 1); }, "a rank without its record");
  refused([](MovePlan& p) { std::erase_if(p.files, [](const MoveFile& f) { return f.rank == 3 && f.checked; }); },
          "a rank without its slot");
  // The writer also refuses pieces that are not whole chunks of a checked slot.
  auto w = MoveWriter::open(layout_, "node9", *plan);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  std::string zeros(64 * 1024, '\0');
  EXPECT_FALSE((*w)->put(0, 100, reinterpret_cast<const uint8_t*>(zeros.data()), 4096).is_ok());
  EXPECT_EQ((*w)->put(0, 0, reinterpret_cast<const uint8_t*>(zeros.data()), zeros.size()).code(), Code::ERR_CORRUPT);
  EXPECT_FALSE((*w)->commit().is_ok());  // not every byte arrived
  w->reset();
  EXPECT_FALSE(fs::exists(layout_.node_cache("node9")));  // given up on: nothing left
}

// The reader on the node serves only a writer that presents the migration's key.
TEST_F(MigrationPlanTest, FabricReaderServesOnlyTheKey) {
  std::string data = write_version("node1", 2, 5, 1, 200 * 1024);
  const std::string key(32, 'a'), wrong(32, 'b');
  const std::string src_cmd = "echo " + key + " | " CAIRND_PATH " migrate-source --cache-job " + layout_.cache_job +
                              " --node node1 --timeout 60 --log " + root_ + "/source.log";
  FILE* src = popen(src_cmd.c_str(), "r");
  ASSERT_NE(src, nullptr);
  char line[256] = "";
  ASSERT_NE(fgets(line, sizeof line, src), nullptr);
  std::string listening = line;
  ASSERT_EQ(listening.rfind("listening ", 0), 0u) << listening;
  const std::string address = listening.substr(10, listening.size() - 11);
  auto sink = [&](const std::string& k) {
    std::string out = root_ + "/sink.out";
    std::string cmd = "echo " + k + " | " CAIRND_PATH " migrate-sink --cache-job " + layout_.cache_job +
                      " --node node4 --from node1 --source " + address + " --log " + root_ + "/sink.log > " + out;
    int rc = system(cmd.c_str());
    return std::make_pair(WEXITSTATUS(rc), read(out));
  };
  auto [rc, out] = sink(wrong);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("\"status\":\"failed\""), std::string::npos) << out;
  EXPECT_NE(out.find("wrong key"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(layout_.node_cache("node4")));
  auto [rc2, out2] = sink(key);
  EXPECT_EQ(rc2, 0) << out2 << read(root_ + "/sink.log");
  EXPECT_NE(out2.find("\"status\":\"done\""), std::string::npos) << out2;
  EXPECT_EQ(pclose(src), 0) << read(root_ + "/source.log");
  CacheStore spare;
  ASSERT_TRUE(spare.open(rank_dir(layout_, "node4", 2), 2).is_ok());
  EXPECT_EQ(spare.versions(), std::vector<uint64_t>{5});
  EXPECT_EQ(read(spare.slot_path(1)).substr(0, data.size()), data);
  EXPECT_NE(read(root_ + "/source.log").find("refused"), std::string::npos);
}

TEST(MigrationTransport, ChoiceAndReason) {
  MigrationSettings s;
  auto c = choose_transport("auto", s);
  ASSERT_TRUE(c.is_ok());
  EXPECT_FALSE(c->fabric);
  EXPECT_NE(c->reason.find("no checkpoint service"), std::string::npos);
  s.service = true;
  EXPECT_TRUE(choose_transport("auto", s)->fabric);
  EXPECT_FALSE(choose_transport("local", s)->fabric);  // the request's own choice wins
  EXPECT_EQ(choose_transport("local", s)->reason, "--transport local");
  s.transport = MigrateTransport::local;
  EXPECT_FALSE(choose_transport("auto", s)->fabric);
  EXPECT_EQ(choose_transport("auto", s)->reason, "migrate_transport = local");
  s.service = false, s.transport = MigrateTransport::fabric;
  EXPECT_TRUE(choose_transport("", s)->fabric);
  EXPECT_FALSE(choose_transport("rdma", s).is_ok());
}

TEST(MigrationFiles, RoundTrip) {
  MigrateRequest req;
  req.id = "12-34";
  req.node = "node2";
  req.buffers = 3;
  req.buffer_size = 1 << 20;
  req.transport = "fabric";
  req.requested_unix_ns = 1795456800123456789;
  auto back = parse_migrate_request(format_migrate_request(req));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->id, req.id);
  EXPECT_EQ(back->node, req.node);
  EXPECT_EQ(back->buffers, 3);
  EXPECT_EQ(back->buffer_size, 1u << 20);
  EXPECT_EQ(back->requested_unix_ns, req.requested_unix_ns);
  EXPECT_EQ(back->transport, "fabric");
  EXPECT_EQ(parse_migrate_request("id=1\nnode=n\n")->transport, "auto");  // a request of an older cairn
  EXPECT_FALSE(parse_migrate_request("id=1\nnode=n\ntransport=carrier-pigeon\n").is_ok());
  EXPECT_FALSE(parse_migrate_request("id=1\n").is_ok());
  EXPECT_FALSE(parse_migrate_request("id=1\nnode=n\nbuffers=1\n").is_ok());
  EXPECT_FALSE(parse_migrate_request("id=1\nnode=n\nbuffer_size=12x\n").is_ok());

  MigrateResult res;
  res.id = "12-34";
  res.status = "done";
  res.node = "node2";
  res.spare = "node4";
  res.version = 7;
  res.bytes = 123;
  res.transfer_seconds = 0.25;
  res.total_seconds = 1.5;
  res.restart_level = "L1";
  res.transport = "fabric";
  res.message = "two\nlines";
  MigrateResult r = parse_migrate_result(format_migrate_result(res));
  EXPECT_EQ(r.id, res.id);
  EXPECT_TRUE(r.final());
  EXPECT_EQ(r.spare, "node4");
  EXPECT_EQ(r.version, 7u);
  EXPECT_DOUBLE_EQ(r.transfer_seconds, 0.25);
  EXPECT_EQ(r.message, "two lines");
  EXPECT_EQ(r.transport, "fabric");

  LauncherInfo info{4242, {"node0", "node4", "node2"}, {"node5"}};
  LauncherInfo i2 = parse_launcher_info(format_launcher_info(info));
  EXPECT_EQ(i2.pid, 4242);
  EXPECT_EQ(i2.nodes, info.nodes);
  EXPECT_EQ(i2.spares, info.spares);
  EXPECT_TRUE(parse_launcher_info(format_launcher_info({1, {"a"}, {}})).spares.empty());
}

}  // namespace
}  // namespace cairn::tool
