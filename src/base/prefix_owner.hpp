// One job per prefix. Two small files in <prefix>/.cairn say whose a prefix is:
//
//   owner     the job holding the prefix now: its job name, application, host and rank 0's pid, the
//             `cairn run` that launched it, and a lease that rank 0 renews while the job runs. A second
//             job is refused while the holder lives; a holder that is gone -- its process dead on this
//             host, or its lease run out where no process can be checked (a lost node) -- is taken over
//             with a warning, so that a relaunch after a failure never needs a hand clean-up.
//   identity  the job and application that the prefix's checkpoints belong to, recorded at the first
//             launch: a job of another identity is refused (it would restart from, and prune, another
//             job's versions) unless it asks to adopt them.
//
// Both are `key=value` lines (docs/format.md, "Prefix ownership"). The decisions are pure functions.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.hpp"

namespace cairn {

struct PrefixHolder {
  std::string job;
  std::string app;
  std::string host;
  int64_t pid = 0;            // rank 0's process
  std::string launch;         // this launch of the job (every rank of it knows it)
  std::string run;            // the `cairn run` that launched the job (CAIRN_RUN_ID); empty when none
  int64_t renewed_unix_ns = 0;
  double lease_seconds = 60;
};

std::string encode_holder(const PrefixHolder& h);
// ERR_FORMAT for text that is not a holder record (a missing or malformed field).
Result<PrefixHolder> decode_holder(const std::string& text);

struct PrefixIdentity {
  std::string job;
  std::string app;
  bool operator==(const PrefixIdentity&) const = default;
};
std::string encode_identity(const PrefixIdentity& id);
Result<PrefixIdentity> decode_identity(const std::string& text);

enum class Claim {
  free,      // nobody holds it
  ours,      // held by this job already (this launch, or a relaunch by the same `cairn run`)
  stale,     // held by a job that is gone: take it over, with a warning (`why`)
  held,      // held by a live job: refuse (`why` names it and says what to do)
};
struct ClaimDecision {
  Claim claim = Claim::free;
  std::string why;
};

// Whether `me` may take a prefix that `current` holds. holder_alive: whether the holder's pid runs on
// this host (only asked when current->host == me.host).
ClaimDecision decide_claim(const std::optional<PrefixHolder>& current, const PrefixHolder& me, int64_t now_unix_ns,
                           bool holder_alive, const std::string& prefix);

enum class IdentityCheck { first, same, adopt, refuse };
struct IdentityDecision {
  IdentityCheck check = IdentityCheck::first;
  std::string why;
};
// recorded: the prefix's identity (none: first launch); has_versions: the prefix or the job's cache holds
// checkpoints (a prefix of another identity without any is simply taken). orphan_cache: the job's L1
// cache directory when it holds versions, empty otherwise. A cache with versions under a prefix that
// records no identity belongs to an earlier job whose prefix was removed or emptied (the cache's name
// comes from the prefix path, so it outlives the prefix on its node): it is refused, with how to remove
// it (`cairn clean --cache`) or to restart from it (adopt), never restarted from without a word.
IdentityDecision decide_identity(const std::optional<PrefixIdentity>& recorded, const PrefixIdentity& me,
                                 bool has_versions, bool adopt, const std::string& prefix,
                                 const std::string& orphan_cache = "");

// Whether process `pid` runs on this host.
bool process_alive(int64_t pid);

// For `cairn run` once its job has ended for good (every attempt over, none of its ranks running): the
// owner record its job's rank 0 left when it was killed (a lost node without a relaunch, the last failed
// attempt) is removed, so that the next job on the prefix does not wait for the lease to run out. Only a
// record naming this run (`run_id`, CAIRN_RUN_ID) is removed; true when one was.
bool release_for_run(const std::string& owner_path, const std::string& run_id);

// Rank 0's hold on its job's prefix: claimed at cairn_init, renewed on a thread of its own every third of
// the lease, released at cairn_finalize.
class PrefixLease {
 public:
  PrefixLease() = default;
  PrefixLease(const PrefixLease&) = delete;
  PrefixLease& operator=(const PrefixLease&) = delete;
  ~PrefixLease() { stop(); }

  // Claim the prefix (owner_path) for `me` and check its identity (identity_path); ERR_PREFIX_IN_USE with
  // what decide_claim / decide_identity say when refused. `notes` receives what a user should read (a
  // stale holder taken over, checkpoints adopted). Starts the renewal.
  // orphan_cache as for decide_identity.
  Status acquire(const std::string& owner_path, const std::string& identity_path, const PrefixHolder& me,
                 const PrefixIdentity& id, bool has_versions, bool adopt, const std::string& prefix,
                 const std::string& orphan_cache, std::vector<std::string>* notes);
  bool held() const { return !path_.empty(); }
  // Stop renewing and remove the owner record if it is still this job's (the job ends).
  void release();
  // Stop renewing, leave the record (a process that leaves a job that goes on).
  void stop();

 private:
  void renew_loop();
  std::string path_;
  PrefixHolder me_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace cairn
