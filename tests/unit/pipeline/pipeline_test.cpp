// The version pipeline without MPI: a team that plays the other ranks, a protector that records what it
// was asked, the real L1 cache and the real embedded flusher on temporary directories. What is checked:
// the order of a version's states, what a failure on another rank at each stage does to the version on
// this one, slot reuse, the funneled mode (collective stages only inside drive()), and finalize's flush.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/fsutil.hpp"
#include "base/manifest.hpp"
#include "cache/cache_store.hpp"
#include "cache/snapshot.hpp"
#include "l3/l3_store.hpp"
#include "flush/embedded_flusher.hpp"
#include "pipeline/events.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/protector.hpp"
#include "pipeline/team.hpp"

namespace cairn::pipeline {
namespace {

using flush::EmbeddedFlusher;

std::string scratch(const std::string& tag) {
  std::string d = "/tmp/cairn-unit-pipeline-" + tag + "-" + std::to_string(getpid());
  fs::remove_tree(d).ignore();
  EXPECT_TRUE(fs::make_dirs(d).is_ok());
  return d;
}

// Rank 0 of `size` ranks. The other ranks' outcome of each agreement comes from `others` (by the
// agreement's number, counted from 0); by default they all succeed. Sums are this rank's value times size.
class PlayedTeam : public Team {
 public:
  explicit PlayedTeam(int size = 2) : size_(size) {}
  std::function<Status(int call)> others = [](int) { return Status::ok(); };
  int rank() const override { return 0; }
  int size() const override { return size_; }
  Status agree(const Status& mine) override {
    int call = calls_++;
    if (!mine.is_ok()) return mine.prefixed("rank 0");
    Status theirs = others(call);
    return theirs.is_ok() ? theirs : theirs.prefixed("rank 1");
  }
  using Team::sum_at_root;
  Status sum_at_root(const uint64_t* mine, uint64_t* sum, int n) override {
    for (int i = 0; i < n; ++i) sum[i] = mine[i] * static_cast<uint64_t>(size_);
    return Status::ok();
  }
  Status broadcast_flag(int*) override { return Status::ok(); }
  int calls() const { return calls_; }

 private:
  int size_;
  int calls_ = 0;
};

class RecordingProtector : public Protector {
 public:
  const char* scheme() const override { return "xor"; }
  Status protect(const Version& v, uint64_t* redundancy_bytes) override {
    protected_.push_back(v.number);
    *redundancy_bytes = v.manifest.total_size;
    last_total_ = v.manifest.total_size;
    return fail_next ? make_error(Code::ERR_IO, "set exchange failed here") : Status::ok();
  }
  // As if the exchange had sent a tenth of what a full one would have.
  Sent sent_bytes() const override { return {last_total_ / 10, last_total_}; }
  bool fail_next = false;
  uint64_t last_total_ = 0;
  std::vector<uint64_t> protected_;
};

class RecordingEvents : public EventSink {
 public:
  void sealed(const Version& v) override { add("sealed " + std::to_string(v.number)); }
  void local(const Version& v, uint64_t all_bytes, uint64_t all_copied) override {
    add("local " + std::to_string(v.number) + " bytes " + std::to_string(all_bytes));
    std::lock_guard<std::mutex> lock(mu_);
    copied[v.number] = all_copied;
  }
  void protected_l2(const Version& v, double, const L2Bytes& all, const char* scheme) override {
    add("protected " + std::to_string(v.number) + " " + scheme);
    std::lock_guard<std::mutex> lock(mu_);
    l2[v.number] = all;
  }
  void flush_began(uint64_t v, bool at_finalize) override {
    add("flush_began " + std::to_string(v) + (at_finalize ? " at finalize" : ""));
  }
  void flushed(const Version& v, const char* via) override { add("flushed " + std::to_string(v.number) + " via " + via); }
  void failed(uint64_t v, int level, const std::string& why) override {
    add("failed " + std::to_string(v) + " L" + std::to_string(level) + ": " + why);
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  void add(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(std::move(s));
  }
  std::mutex mu_;
  std::vector<std::string> seen_;

 public:
  std::map<uint64_t, uint64_t> copied;  // per version: the bytes copied into the slots, over every rank
  std::map<uint64_t, L2Bytes> l2;       // per version: what L2 held and sent, over every rank
};

// One rank's job: a region of bytes, its cache, a prefix, the pipeline.
struct Job {
  explicit Job(const std::string& tag, bool with_l2 = true, bool mpi_in_worker = true, int slots = 2,
               L1Incremental incremental = L1Incremental::off) {
    root = scratch(tag);
    layout.prefix = root + "/prefix";
    layout.control = layout.prefix + "/.cairn";
    layout.cache_job = root + "/cache";
    EXPECT_TRUE(fs::make_dirs(layout.control).is_ok());
    EXPECT_TRUE(cache.open(root + "/cache/n0/r0", slots).is_ok());
    PipelineConfig pc;
    pc.layout = layout;
    pc.mpi_in_worker = mpi_in_worker;
    pc.keep_flushed = 2;
    pc.l1_incremental = incremental;
    snapshot = make_copy_snapshotter();
    pipeline = std::make_unique<Pipeline>(pc, &cache, &team, with_l2 ? &protector : nullptr, nullptr, &events,
                                          snapshot.get());
    Pipeline* p = pipeline.get();
    flusher = std::make_unique<EmbeddedFlusher>(layout, [p] { return p->l3_options(); });
    pipeline->set_flusher(flusher.get());
    data.assign(10000, 0);
  }
  ~Job() {
    pipeline->stop();
    fs::remove_tree(root).ignore();
  }

  Status take(uint64_t v, bool flush, const Status& failed = Status::ok()) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(v * 31 + i);
    return take_as_is(v, flush, failed);
  }
  // `data` as it is now.
  Status take_as_is(uint64_t v, bool flush, const Status& failed = Status::ok()) {
    Manifest m;
    m.version = v;
    m.label = "ckpt." + std::to_string(v);
    m.nranks = 2;
    m.chunk_size = 1024;
    m.total_size = data.size();
    RegionEntry e;
    e.name = "x";
    e.count = e.size = data.size();
    m.regions.push_back(e);
    double blocking = 0;
    return pipeline->take(m, flush, {{"x", data.data(), data.size(), 0}}, {}, failed, &blocking);
  }

  std::string root;
  Layout layout;
  CacheStore cache;
  PlayedTeam team;
  RecordingProtector protector;
  RecordingEvents events;
  std::unique_ptr<Snapshotter> snapshot;
  std::unique_ptr<Pipeline> pipeline;
  std::unique_ptr<EmbeddedFlusher> flusher;
  std::vector<uint8_t> data;
};

TEST(Pipeline, AVersionGoesThroughEveryLevelInOrder) {
  Job job("order");
  ASSERT_TRUE(job.take(1, /*flush=*/true).is_ok());
  // The application's memory may change at once: the version holds what it was at take().
  std::vector<uint8_t> taken = job.data;
  memset(job.data.data(), 0xee, job.data.size());
  ASSERT_TRUE(job.pipeline->wait_all().is_ok());
  EXPECT_EQ(job.events.seen(), (std::vector<std::string>{"sealed 1", "local 1 bytes 20000", "protected 1 xor",
                                                          "flush_began 1", "flushed 1 via embedded"}));
  auto rec = job.cache.read_record(1);
  ASSERT_TRUE(rec.is_ok());
  auto slot = job.cache.slot(static_cast<int>(rec->slot), 0);
  ASSERT_TRUE(slot.is_ok());
  EXPECT_TRUE(verify_stream(rec->manifest, (*slot)->data(), rec->manifest.total_size).is_ok());
  EXPECT_EQ(0, memcmp((*slot)->data(), taken.data(), taken.size()));
  EXPECT_TRUE(job.cache.is_protected(1));
  EXPECT_TRUE(l3::read_commit(job.layout, 1).is_ok());
  std::vector<uint8_t> back(taken.size());
  auto m = l3::read_manifest(job.layout, 1, 0);
  ASSERT_TRUE(m.is_ok());
  ASSERT_TRUE(l3::read_data(job.layout, *m, back.data()).is_ok());
  EXPECT_EQ(back, taken);
  Marks marks = job.pipeline->marks();
  EXPECT_EQ(marks.local, 1u);
  EXPECT_EQ(marks.protected_l2, 1u);
  EXPECT_EQ(marks.flushed, 1u);
}

TEST(Pipeline, AFailureOnAnotherRankDiscardsTheVersionEverywhere) {
  Job job("discard");
  // Agreement 0 is agree_local.
  job.team.others = [](int call) { return call == 0 ? make_error(Code::ERR_NO_SPACE, "cache full") : Status::ok(); };
  ASSERT_TRUE(job.take(1, true).is_ok());  // this rank's part went fine
  Status st = job.pipeline->wait_all();
  EXPECT_EQ(st.code(), Code::ERR_NO_SPACE);
  EXPECT_NE(st.message().find("version 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  auto seen = job.events.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].rfind("failed 1 L1: ", 0), 0u) << seen[1];
  // Nothing of it counts anywhere: no L1 record, no L2, no L3.
  EXPECT_FALSE(job.cache.read_record(1).is_ok());
  EXPECT_TRUE(job.protector.protected_.empty());
  EXPECT_FALSE(l3::read_commit(job.layout, 1).is_ok());
  EXPECT_EQ(job.pipeline->marks().local, 0u);
  EXPECT_TRUE(job.pipeline->wait_all().is_ok()) << "a failure is reported once";
}

TEST(Pipeline, ALocalFailureIsVotedLikeAnyOther) {
  Job job("local-failure");
  Status st = job.take(1, true, make_error(Code::ERR_IO, "routed file unreadable"));
  EXPECT_EQ(st.code(), Code::ERR_IO);
  Status all = job.pipeline->wait_all();
  EXPECT_EQ(all.code(), Code::ERR_IO);
  EXPECT_FALSE(job.cache.read_record(1).is_ok());
  EXPECT_EQ(job.team.calls(), 1) << "only agree_local runs for a discarded version";
}

TEST(Pipeline, AnL2FailureLeavesTheVersionLocalButUnprotected) {
  Job job("l2-failure");
  job.protector.fail_next = true;
  ASSERT_TRUE(job.take(1, false).is_ok());
  Status st = job.pipeline->wait_all();
  EXPECT_EQ(st.code(), Code::ERR_IO);
  EXPECT_TRUE(job.cache.read_record(1).is_ok());
  EXPECT_FALSE(job.cache.is_protected(1));
  Marks m = job.pipeline->marks();
  EXPECT_EQ(m.local, 1u);
  EXPECT_EQ(m.protected_l2, 0u);
  EXPECT_EQ(job.events.seen().back().rfind("failed 1 L2: ", 0), 0u);
}

TEST(Pipeline, AFlushFailureOnAnotherRankLeavesNoCommit) {
  Job job("l3-failure");
  // Agreements: 0 agree_local, 1 protect, 2 protected marker, 3 agree_flushed.
  job.team.others = [](int call) { return call == 3 ? make_error(Code::ERR_NO_SPACE, "prefix full") : Status::ok(); };
  ASSERT_TRUE(job.take(1, true).is_ok());
  Status st = job.pipeline->wait_all();
  EXPECT_EQ(st.code(), Code::ERR_NO_SPACE);
  EXPECT_FALSE(l3::read_commit(job.layout, 1).is_ok());
  EXPECT_TRUE(job.cache.is_protected(1)) << "L1 and L2 stand";
  EXPECT_EQ(job.pipeline->marks().flushed, 0u);
  EXPECT_EQ(job.events.seen().back().rfind("failed 1 L3: ", 0), 0u);
}

// l1_incremental: a version copies only the chunks changed since its slot's previous version; every
// version's slot and record still hold exactly its bytes, whatever the mode.
TEST(Pipeline, IncrementalCopiesLeaveEveryVersionWholeInItsSlot) {
  for (L1Incremental mode : {L1Incremental::on, L1Incremental::automatic, L1Incremental::off}) {
    Job job("incr-" + std::to_string(static_cast<int>(mode)), true, true, 2, mode);
    for (size_t i = 0; i < job.data.size(); ++i) job.data[i] = static_cast<uint8_t>(i * 3);
    std::vector<uint64_t> unchanged;
    for (uint64_t v = 1; v <= 5; ++v) {
      job.data[(v * 1500) % job.data.size()] ^= static_cast<uint8_t>(v);  // one chunk of ten changes
      ASSERT_TRUE(job.take_as_is(v, false).is_ok());
      ASSERT_TRUE(job.pipeline->wait_all().is_ok());
      unchanged.push_back(job.snapshot->report().unchanged_bytes);
      auto rec = job.cache.read_record(v);
      ASSERT_TRUE(rec.is_ok()) << v;
      auto slot = job.cache.slot(static_cast<int>(rec->slot), job.data.size());
      ASSERT_TRUE(slot.is_ok());
      EXPECT_EQ(memcmp((*slot)->data(), job.data.data(), job.data.size()), 0) << "version " << v;
      EXPECT_EQ(rec->manifest.chunk_hashes, chunk_hashes(job.data.data(), job.data.size(), 1024)) << v;
    }
    // Versions 1 and 2 find their slots empty. From 3 on each finds the version before the one before it,
    // two chunks changed since: on copies the other eight not; off always copies; auto measures a plain
    // copy's costs only on states of 1 MiB or more, so this small one is always copied.
    const uint64_t eight = 7 * 1024 + 784;  // eight chunks, the last of them 784 bytes
    for (size_t i = 0; i < unchanged.size(); ++i)
      EXPECT_EQ(unchanged[i], mode == L1Incremental::on && i >= 2 ? eight : 0u) << "version " << i + 1;
    // The events carry the bytes copied and those L2 sent, summed over the team (two ranks played alike).
    for (uint64_t v = 1; v <= 5; ++v) {
      EXPECT_EQ(job.events.copied.at(v), 2 * (job.data.size() - unchanged[v - 1])) << "version " << v;
      const EventSink::L2Bytes& l2 = job.events.l2.at(v);
      EXPECT_EQ(l2.redundancy, 2 * job.data.size());
      EXPECT_EQ(l2.sent, 2 * (job.data.size() / 10));
      EXPECT_EQ(l2.full, 2 * job.data.size());
    }
  }
}

// auto's rule: incremental when the share unchanged times the copy's cost beats the hashing's.
TEST(Pipeline, AutoTakesTheIncrementalCopyWhenItBlocksLess) {
  EXPECT_FALSE(incremental_pays(-1, 1.0, 0.3));   // nothing seen unchanged yet
  EXPECT_FALSE(incremental_pays(900, 0.0, 0.3));  // no plain copy measured yet
  EXPECT_FALSE(incremental_pays(900, 1.0, 0.0));
  EXPECT_TRUE(incremental_pays(900, 1.0, 0.3));   // 90 % unchanged, hashing at 3x the copy's speed
  EXPECT_TRUE(incremental_pays(400, 1.0, 0.3));
  EXPECT_FALSE(incremental_pays(250, 1.0, 0.3));
  EXPECT_FALSE(incremental_pays(900, 1.0, 0.95));  // hashing as slow as copying: only an all-unchanged state pays
  EXPECT_TRUE(incremental_pays(1000, 1.0, 0.95));
}

// An incremental copy trusts only what this process sealed into the slot, and only while the slot's record
// still names that version: a slot whose record changed under it (a rebuild, a drop), or a new process over
// the same cache (a relaunch), is copied whole.
TEST(Pipeline, AnIncrementalCopyTrustsOnlyWhatThisProcessSealed) {
  Job job("incr-trust", true, true, 2, L1Incremental::on);
  for (size_t i = 0; i < job.data.size(); ++i) job.data[i] = static_cast<uint8_t>(i);
  auto take = [&](uint64_t v) {
    EXPECT_TRUE(job.take_as_is(v, false).is_ok());
    EXPECT_TRUE(job.pipeline->wait_all().is_ok());
    return job.snapshot->report().unchanged_bytes;
  };
  EXPECT_EQ(take(1), 0u);
  EXPECT_EQ(take(2), 0u);
  EXPECT_EQ(take(3), job.data.size());  // nothing changed: all of version 1's slot kept
  ASSERT_TRUE(job.cache.drop(2).is_ok());
  EXPECT_EQ(take(4), 0u);  // version 2's slot no longer names version 2
  EXPECT_EQ(take(5), job.data.size());
  // Another pipeline over the same cache (as after a relaunch) knows nothing of what the slots hold.
  job.pipeline->stop();
  PipelineConfig pc;
  pc.layout = job.layout;
  pc.l1_incremental = L1Incremental::on;
  job.pipeline = std::make_unique<Pipeline>(pc, &job.cache, &job.team, &job.protector, job.flusher.get(), &job.events,
                                            job.snapshot.get());
  EXPECT_EQ(take(6), 0u);
  EXPECT_EQ(take(7), 0u);
  EXPECT_EQ(take(8), job.data.size());
}

TEST(Pipeline, SlotsAreReusedOldestFirstAndTheNewestGoodVersionSurvives) {
  Job job("slots");
  for (uint64_t v = 1; v <= 3; ++v) {
    ASSERT_TRUE(job.take(v, false).is_ok());
    ASSERT_TRUE(job.pipeline->wait_all().is_ok());
  }
  EXPECT_FALSE(job.cache.read_record(1).is_ok()) << "version 3 took version 1's slot";
  auto r2 = job.cache.read_record(2), r3 = job.cache.read_record(3);
  ASSERT_TRUE(r2.is_ok() && r3.is_ok());
  EXPECT_NE(r2->slot, r3->slot);
  EXPECT_EQ(job.cache.versions(), (std::vector<uint64_t>{2, 3}));
}

// Rank 0 prunes L3 on a thread of its own: versions flushed back to back leave keep_flushed (2) committed
// versions once the pipeline stops (a prune asked for runs to its end first), the newest among them.
TEST(Pipeline, OldL3VersionsArePrunedBesideThePipeline) {
  Job job("prune");
  for (uint64_t v = 1; v <= 5; ++v) {
    ASSERT_TRUE(job.take(v, /*flush=*/true).is_ok());
    ASSERT_TRUE(job.pipeline->wait_all().is_ok());
  }
  job.pipeline->stop();
  std::vector<uint64_t> committed;
  for (const auto& c : l3::list_committed(job.layout)) committed.push_back(c.version);
  EXPECT_EQ(committed, (std::vector<uint64_t>{5, 4}));
  EXPECT_EQ(l3::max_version_present(job.layout), 5u);
  for (uint64_t v = 1; v <= 3; ++v) EXPECT_FALSE(l3::read_commit(job.layout, v).is_ok()) << "version " << v;
  EXPECT_FALSE(fs::exists(l3::recycle_dir(job.layout))) << "the recycle pool is emptied when the pipeline stops";
}

ino_t inode_of(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// recycle_flushed (on by default): the pruned version's data file goes to the pool and the next flush of
// the rank overwrites it; off, every version's file is new and no pool appears.
TEST(Pipeline, ThePrunedVersionsDataFileIsTheNextFlushsFile) {
  for (bool recycle : {true, false}) {
    Job job(recycle ? "recycle" : "no-recycle");
    if (!recycle) {
      job.pipeline->stop();
      PipelineConfig pc;
      pc.layout = job.layout;
      pc.keep_flushed = 2;
      pc.recycle_flushed = false;
      job.pipeline = std::make_unique<Pipeline>(pc, &job.cache, &job.team, &job.protector, nullptr, &job.events,
                                                job.snapshot.get());
      Pipeline* p = job.pipeline.get();
      job.flusher = std::make_unique<EmbeddedFlusher>(job.layout, [p] { return p->l3_options(); });
      job.pipeline->set_flusher(job.flusher.get());
    }
    std::map<uint64_t, ino_t> inode;
    std::vector<fs::Fd> held;  // each file stays open, so that no inode number is reused for a new file
    for (uint64_t v = 1; v <= 5; ++v) {
      ASSERT_TRUE(job.take(v, /*flush=*/true).is_ok());
      ASSERT_TRUE(job.pipeline->wait_all().is_ok());
      inode[v] = inode_of(l3::data_path(job.layout, v, 0));
      ASSERT_NE(inode[v], 0u);
      auto fd = fs::open_file(l3::data_path(job.layout, v, 0), O_RDONLY);
      ASSERT_TRUE(fd.is_ok());
      held.push_back(std::move(*fd));
      // Until the pruner is through (it runs beside the pipeline): the prefix back at two versions.
      for (int i = 0; i < 15000 && l3::version_dirs(job.layout).size() > 2; ++i) usleep(2000);
      ASSERT_EQ(l3::version_dirs(job.layout).size(), std::min<size_t>(v, 2)) << v;
    }
    // Version 3's commit pruned version 1, whose file version 4 then took; version 5 took version 2's.
    if (recycle) {
      EXPECT_EQ(inode[4], inode[1]);
      EXPECT_EQ(inode[5], inode[2]);
      EXPECT_EQ(inode_of(l3::recycle_path(job.layout, 0)), inode[3]);
    } else {
      EXPECT_FALSE(fs::exists(l3::recycle_dir(job.layout)));
      EXPECT_EQ(std::set<ino_t>({inode[1], inode[2], inode[3], inode[4], inode[5]}).size(), 5u);
    }
    for (uint64_t v = 4; v <= 5; ++v) {
      auto m = l3::read_manifest(job.layout, v, 0);
      ASSERT_TRUE(m.is_ok()) << m.status().message();
      std::vector<uint8_t> got(m->total_size);
      ASSERT_TRUE(l3::read_data(job.layout, *m, got.data()).is_ok());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<uint8_t>(v * 31 + i)) << v << " " << i;
    }
    job.pipeline->stop();
    EXPECT_FALSE(fs::exists(l3::recycle_dir(job.layout)));
  }
}

TEST(Pipeline, FunneledModeRunsTheCollectiveStagesOnlyInsideDrive) {
  Job job("funneled", /*with_l2=*/true, /*mpi_in_worker=*/false);
  ASSERT_TRUE(job.take(1, true).is_ok());
  // The worker seals and writes L3 (no collectives); nothing is agreed until the application drives.
  for (int i = 0; i < 200 && job.events.seen().size() < 2; ++i) usleep(10000);
  EXPECT_EQ(job.team.calls(), 0);
  auto seen = job.events.seen();
  ASSERT_GE(seen.size(), 1u);
  EXPECT_EQ(seen[0], "sealed 1");
  job.pipeline->drive();
  EXPECT_EQ(job.team.calls(), 4);
  EXPECT_EQ(job.events.seen().back(), "flushed 1 via embedded");
  EXPECT_TRUE(l3::read_commit(job.layout, 1).is_ok());
}

// L2's exchange runs beside the seal, before agree_local (pipeline/version.hpp): a protector that records
// both halves, and what the exchange saw.
class ExchangingProtector : public RecordingProtector {
 public:
  Status exchange(const Version& v, const Status& landed) override {
    exchanged_.push_back(v.number);
    landed_ok_.push_back(landed.is_ok() && v.landed.load());
    return Status::ok();
  }
  std::vector<uint64_t> exchanged_;
  std::vector<bool> landed_ok_;
};

TEST(Pipeline, AVersionDiscardedAfterItsExchangeLeavesTheLastProtectedOne) {
  Job job("exchanged-discard");
  ExchangingProtector protector;
  job.pipeline->stop();
  PipelineConfig pc;
  pc.layout = job.layout;
  pc.keep_flushed = 2;
  job.pipeline = std::make_unique<Pipeline>(pc, &job.cache, &job.team, &protector, job.flusher.get(), &job.events,
                                            job.snapshot.get());
  ASSERT_TRUE(job.take(1, false).is_ok());
  ASSERT_TRUE(job.pipeline->wait_all().is_ok());
  ASSERT_TRUE(job.cache.is_protected(1));
  // Version 2: every rank exchanged, then another rank's L1 failed (agreements of version 1: 0 agree_local,
  // 1 protect, 2 marker; version 2's agree_local is 3).
  job.team.others = [](int call) { return call == 3 ? make_error(Code::ERR_NO_SPACE, "cache full") : Status::ok(); };
  ASSERT_TRUE(job.take(2, false).is_ok());
  EXPECT_EQ(job.pipeline->wait_all().code(), Code::ERR_NO_SPACE);
  EXPECT_EQ(protector.exchanged_, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(protector.landed_ok_, (std::vector<bool>{true, true}));
  EXPECT_EQ(protector.protected_, (std::vector<uint64_t>{1})) << "a discarded version gets no set record";
  EXPECT_FALSE(job.cache.is_protected(2));
  EXPECT_FALSE(job.cache.read_record(2).is_ok());
  EXPECT_TRUE(job.cache.is_protected(1)) << "the last protected version still counts";
  EXPECT_TRUE(job.cache.read_record(1).is_ok());
  EXPECT_EQ(job.pipeline->marks().protected_l2, 1u);
  // Version 3 must not take version 1's slot (the newest protected), whatever version 2 left in its own.
  job.team.others = [](int) { return Status::ok(); };
  ASSERT_TRUE(job.take(3, false).is_ok());
  ASSERT_TRUE(job.pipeline->wait_all().is_ok());
  EXPECT_TRUE(job.cache.is_protected(1));
  EXPECT_TRUE(job.cache.is_protected(3));
  EXPECT_NE(job.cache.read_record(1)->slot, job.cache.read_record(3)->slot);
}

TEST(Pipeline, TheExchangeHearsOfASnapshotThatDidNotLand) {
  Job job("exchanged-local-failure");
  ExchangingProtector protector;
  job.pipeline->stop();
  PipelineConfig pc;
  pc.layout = job.layout;
  pc.mpi_in_worker = false;  // the team's stages in drive(), on this thread
  job.pipeline = std::make_unique<Pipeline>(pc, &job.cache, &job.team, &protector, job.flusher.get(), &job.events,
                                            job.snapshot.get());
  EXPECT_EQ(job.take(1, false, make_error(Code::ERR_IO, "routed file unreadable")).code(), Code::ERR_IO);
  EXPECT_EQ(job.pipeline->wait_all().code(), Code::ERR_IO);
  EXPECT_EQ(protector.exchanged_, (std::vector<uint64_t>{1}));
  EXPECT_EQ(protector.landed_ok_, (std::vector<bool>{false})) << "its set skips the exchange";
  EXPECT_TRUE(protector.protected_.empty());
  EXPECT_FALSE(job.cache.is_protected(1));
}

TEST(Pipeline, FinalizeFlushesTheNewestLocalVersion) {
  Job job("finalize", /*with_l2=*/false);
  ASSERT_TRUE(job.take(1, false).is_ok());
  ASSERT_TRUE(job.pipeline->wait_all().is_ok());
  EXPECT_FALSE(l3::read_commit(job.layout, 1).is_ok());
  ASSERT_TRUE(job.pipeline->flush_now(1).is_ok());
  EXPECT_TRUE(l3::read_commit(job.layout, 1).is_ok());
  EXPECT_EQ(job.pipeline->marks().flushed, 1u);
  auto seen = job.events.seen();
  EXPECT_EQ(seen[seen.size() - 2], "flush_began 1 at finalize");
}

// ---- the embedded flusher's lifecycle (pipeline/flusher.hpp) ------------------------------------------

struct FlusherFixture {
  FlusherFixture() {
    root = scratch("flusher");
    layout.prefix = root + "/prefix";
    layout.control = layout.prefix + "/.cairn";
    EXPECT_TRUE(fs::make_dirs(layout.control).is_ok());
    bytes.assign(4096, 7);
    m.version = 5;
    m.nranks = 1;
    m.chunk_size = 1024;
    m.total_size = bytes.size();
    m.chunk_hashes = chunk_hashes(bytes.data(), bytes.size(), m.chunk_size);
  }
  ~FlusherFixture() { fs::remove_tree(root).ignore(); }
  FlushRequest request() {
    FlushRequest r;
    r.version = 5;
    r.manifest = &m;
    r.data = bytes.data();
    return r;
  }
  std::string root;
  Layout layout;
  Manifest m;
  std::vector<uint8_t> bytes;
};

TEST(EmbeddedFlusher, PostTestWaitAndTicketsFinishOnce) {
  FlusherFixture f;
  EmbeddedFlusher fl(f.layout, [] { return l3::WriteOptions{}; });
  EXPECT_STREQ(fl.name(), "embedded");
  auto t = fl.post(f.request());
  ASSERT_TRUE(t.is_ok());
  bool done = false;
  for (int i = 0; i < 1000 && !done; ++i) {
    ASSERT_TRUE(fl.test(*t, &done).is_ok());
    if (!done) usleep(1000);
  }
  ASSERT_TRUE(done);
  EXPECT_TRUE(l3::read_manifest(f.layout, 5, 0).is_ok()) << "the manifest is written last";
  EXPECT_EQ(fl.wait(*t).code(), Code::ERR_INVALID_ARG) << "a finished ticket is gone";
  EXPECT_EQ(fl.cancel(12345).code(), Code::ERR_INVALID_ARG);
  auto t2 = fl.post(f.request());
  ASSERT_TRUE(t2.is_ok());
  EXPECT_NE(*t2, *t);
  EXPECT_TRUE(fl.wait(*t2).is_ok());
}

TEST(EmbeddedFlusher, CancelStopsWhatHasNotStartedAndWaitsForWhatHas) {
  FlusherFixture f;
  // The first request blocks inside its write until released, so the second stays queued.
  std::mutex gate;
  gate.lock();
  std::atomic<bool> writing{false};
  EmbeddedFlusher fl(f.layout, [] { return l3::WriteOptions{}; });
  FlushRequest first = f.request();
  first.after_data = [&gate, &writing] {
    writing = true;
    gate.lock();
    gate.unlock();
  };
  auto t1 = fl.post(first);
  auto t2 = fl.post(f.request());
  ASSERT_TRUE(t1.is_ok() && t2.is_ok());
  for (int i = 0; i < 2000 && !writing; ++i) usleep(1000);
  ASSERT_TRUE(writing);
  EXPECT_EQ(fl.cancel(*t2).code(), Code::ERR_CANCELLED) << "queued: cancelled";
  gate.unlock();
  EXPECT_TRUE(fl.cancel(*t1).is_ok()) << "already writing: finishes, with its outcome";
}

TEST(EmbeddedFlusher, ABadRequestGetsNoTicket) {
  FlusherFixture f;
  EmbeddedFlusher fl(f.layout, [] { return l3::WriteOptions{}; });
  FlushRequest r = f.request();
  r.manifest = nullptr;
  EXPECT_EQ(fl.post(r).status().code(), Code::ERR_INVALID_ARG);
}

}  // namespace
}  // namespace cairn::pipeline
