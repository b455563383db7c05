// One job per prefix (base/prefix_owner): the owner and identity records, the claim and identity rules,
// the lease on real files, and a fuzz loop over both decoders.
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>

#include "base/fsutil.hpp"
#include "base/prefix_owner.hpp"

namespace cairn {
namespace {

PrefixHolder holder(const std::string& host, int64_t pid, const std::string& launch, const std::string& run = "") {
  PrefixHolder h;
  h.job = "heat";
  h.app = "heat2d";
  h.host = host;
  h.pid = pid;
  h.launch = launch;
  h.run = run;
  h.renewed_unix_ns = 1000 * 1000000000LL;
  h.lease_seconds = 60;
  return h;
}

constexpr int64_t kNow = 1010 * 1000000000LL;  // 10 s after the holder's renewal

TEST(PrefixOwner, RecordsRoundTrip) {
  PrefixHolder h = holder("n1", 42, "abc", "run-7");
  auto back = decode_holder(encode_holder(h));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->job, "heat");
  EXPECT_EQ(back->host, "n1");
  EXPECT_EQ(back->pid, 42);
  EXPECT_EQ(back->launch, "abc");
  EXPECT_EQ(back->run, "run-7");
  EXPECT_EQ(back->renewed_unix_ns, h.renewed_unix_ns);
  EXPECT_DOUBLE_EQ(back->lease_seconds, 60);
  auto id = decode_identity(encode_identity({"heat", "heat2d"}));
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(*id, (PrefixIdentity{"heat", "heat2d"}));
  // A newline in a name cannot forge another key.
  PrefixHolder evil = holder("n1", 1, "x");
  evil.job = "a\npid=99";
  auto e = decode_holder(encode_holder(evil));
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ(e->pid, 1);
}

TEST(PrefixOwner, MalformedRecordsAreRefused) {
  EXPECT_EQ(decode_holder("").status().code(), Code::ERR_FORMAT);
  EXPECT_EQ(decode_holder("cairn-owner=2\n").status().code(), Code::ERR_FORMAT);
  std::string ok = encode_holder(holder("n", 1, "l"));
  std::string bad_pid = ok;
  bad_pid.replace(bad_pid.find("pid=1"), 5, "pid=x");
  EXPECT_EQ(decode_holder(bad_pid).status().code(), Code::ERR_FORMAT);
  EXPECT_EQ(decode_holder("garbage line\n").status().code(), Code::ERR_FORMAT);
  EXPECT_EQ(decode_identity("cairn-identity=1\njob=x\n").status().code(), Code::ERR_FORMAT);
}

TEST(PrefixOwner, ClaimRules) {
  PrefixHolder me = holder("n1", 100, "mine", "run-1");
  EXPECT_EQ(decide_claim(std::nullopt, me, kNow, false, "/p").claim, Claim::free);
  EXPECT_EQ(decide_claim(holder("n9", 5, "mine"), me, kNow, false, "/p").claim, Claim::ours) << "the same launch";
  auto relaunch = decide_claim(holder("n2", 5, "old", "run-1"), me, kNow, true, "/p");
  EXPECT_EQ(relaunch.claim, Claim::ours) << "a relaunch by the same cairn run";
  EXPECT_EQ(relaunch.why, "") << "a relaunch is expected: nothing to warn about";
  // Another live job on this host: refused, and the message says who and what to do.
  auto held = decide_claim(holder("n1", 5, "other"), me, kNow, true, "/p");
  EXPECT_EQ(held.claim, Claim::held);
  EXPECT_NE(held.why.find("heat2d"), std::string::npos) << held.why;
  EXPECT_NE(held.why.find("pid 5"), std::string::npos) << held.why;
  EXPECT_NE(held.why.find("CAIRN_PREFIX"), std::string::npos) << held.why;
  // Its process gone on this host: taken over at once.
  auto dead = decide_claim(holder("n1", 5, "other"), me, kNow, false, "/p");
  EXPECT_EQ(dead.claim, Claim::stale);
  EXPECT_NE(dead.why.find("gone"), std::string::npos) << dead.why;
  // On another host (no pid to check): held while the lease runs, taken once it ran out.
  EXPECT_EQ(decide_claim(holder("n2", 5, "other"), me, kNow, false, "/p").claim, Claim::held);
  EXPECT_EQ(decide_claim(holder("n2", 5, "other"), me, kNow + 61 * 1000000000LL, false, "/p").claim, Claim::stale);
}

TEST(PrefixOwner, IdentityRules) {
  PrefixIdentity me{"heat", "heat2d"};
  EXPECT_EQ(decide_identity(std::nullopt, me, true, false, "/p").check, IdentityCheck::first);
  EXPECT_EQ(decide_identity(me, me, true, false, "/p").check, IdentityCheck::same);
  PrefixIdentity other{"heat", "synthetic"};
  auto refused = decide_identity(other, me, true, false, "/p");
  EXPECT_EQ(refused.check, IdentityCheck::refuse);
  EXPECT_NE(refused.why.find("synthetic"), std::string::npos) << refused.why;
  EXPECT_NE(refused.why.find("CAIRN_ADOPT"), std::string::npos) << refused.why;
  EXPECT_EQ(decide_identity(other, me, true, true, "/p").check, IdentityCheck::adopt);
  EXPECT_EQ(decide_identity(other, me, false, false, "/p").check, IdentityCheck::first) << "nothing to protect";
}

// A cache with versions under a prefix without an identity: an earlier job's, whose prefix was removed.
TEST(PrefixOwner, OrphanCacheIsRefusedUnlessAdopted) {
  PrefixIdentity me{"heat", "heat2d"};
  auto refused = decide_identity(std::nullopt, me, false, false, "/p", "/dev/shm/cairn-p-1234");
  EXPECT_EQ(refused.check, IdentityCheck::refuse);
  EXPECT_NE(refused.why.find("cairn clean --cache /p"), std::string::npos) << refused.why;
  EXPECT_NE(refused.why.find("/dev/shm/cairn-p-1234"), std::string::npos) << refused.why;
  EXPECT_NE(refused.why.find("CAIRN_ADOPT"), std::string::npos) << refused.why;
  EXPECT_EQ(decide_identity(std::nullopt, me, false, true, "/p", "/dev/shm/c").check, IdentityCheck::adopt);
  EXPECT_EQ(decide_identity(me, me, true, false, "/p", "/dev/shm/c").check, IdentityCheck::same)
      << "the prefix records this job: its cache is its own";
  EXPECT_EQ(decide_identity(std::nullopt, me, false, false, "/p", "").check, IdentityCheck::first);
}

TEST(PrefixOwner, LeaseOnRealFiles) {
  std::string dir = "/tmp/cairn-unit-lease-" + std::to_string(getpid());
  fs::remove_tree(dir).ignore();
  ASSERT_TRUE(fs::make_dirs(dir).is_ok());
  const std::string owner = dir + "/owner", identity = dir + "/identity";
  std::vector<std::string> notes;
  PrefixHolder a = holder("thishost", getpid(), "launch-a");
  PrefixLease la;
  ASSERT_TRUE(la.acquire(owner, identity, a, {"heat", "heat2d"}, false, false, dir, "", &notes).is_ok());
  // A second job while the first holds it (its pid runs here): refused.
  PrefixHolder b = holder("thishost", getpid() + 1, "launch-b");
  b.pid = getppid();  // a live process that is not the holder
  b.launch = "launch-b";
  PrefixLease lb;
  Status refused = lb.acquire(owner, identity, b, {"heat", "heat2d"}, true, false, dir, "", &notes);
  EXPECT_EQ(refused.code(), Code::ERR_PREFIX_IN_USE) << refused.message();
  // Released at the end: the next job takes it.
  la.release();
  EXPECT_FALSE(fs::exists(owner));
  ASSERT_TRUE(lb.acquire(owner, identity, b, {"heat", "heat2d"}, true, false, dir, "", &notes).is_ok());
  // A job of another identity on a prefix with versions: refused even with no holder.
  lb.release();
  PrefixLease lc;
  Status other = lc.acquire(owner, identity, holder("thishost", getpid(), "launch-c"), {"heat", "other"}, true, false,
                            dir, "", &notes);
  EXPECT_EQ(other.code(), Code::ERR_PREFIX_IN_USE) << other.message();
  fs::remove_tree(dir).ignore();
}

TEST(PrefixOwner, TheRunGivesBackWhatItsJobLeftHeld) {
  std::string dir = "/tmp/cairn-unit-release-" + std::to_string(getpid());
  fs::remove_tree(dir).ignore();
  ASSERT_TRUE(fs::make_dirs(dir).is_ok());
  const std::string owner = dir + "/owner";
  EXPECT_FALSE(release_for_run(owner, "vm:1:2")) << "no record";
  // Rank 0 of a job of run vm:1:2 on another host, killed with its lease still running.
  ASSERT_TRUE(fs::write_file_atomic(owner, encode_holder(holder("n1", 4242, "launch-a", "vm:1:2")), false).is_ok());
  EXPECT_FALSE(release_for_run(owner, "")) << "a caller without a run id";
  EXPECT_FALSE(release_for_run(owner, "vm:9:9")) << "another run's record";
  EXPECT_TRUE(fs::exists(owner));
  EXPECT_TRUE(release_for_run(owner, "vm:1:2"));
  EXPECT_FALSE(fs::exists(owner));
  // A record that does not decode is nobody's to remove.
  ASSERT_TRUE(fs::write_file_atomic(owner, "garbage\n", false).is_ok());
  EXPECT_FALSE(release_for_run(owner, "vm:1:2"));
  EXPECT_TRUE(fs::exists(owner));
  fs::remove_tree(dir).ignore();
}

TEST(PrefixOwnerFuzz, RandomAndMutatedRecordsNeverCrash) {
  std::mt19937_64 rng(20261124);
  const std::string corpus[] = {encode_holder(holder("n1", 42, "abc", "r")), encode_identity({"j", "a"})};
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = corpus[i % 2];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[at] = static_cast<char>(rng()); break;
        case 1: s.erase(at, 1 + rng() % 8); break;
        default: s.insert(at, 1, static_cast<char>(rng())); break;
      }
    }
    if (i % 50 == 0) s = std::string(rng() % 64, static_cast<char>(rng()));
    accepted += decode_holder(s).is_ok() ? 1 : 0;
    accepted += decode_identity(s).is_ok() ? 1 : 0;
  }
  EXPECT_GT(accepted, 0) << "no mutation decoded; the fuzz loop is too blunt";
}

}  // namespace
}  // namespace cairn
