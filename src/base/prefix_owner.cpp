#include "base/prefix_owner.hpp"

#include <fcntl.h>
#include <signal.h>

#include <chrono>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "base/fsutil.hpp"
#include "base/log.hpp"

namespace cairn {
namespace {

// key=value lines; keys unique. ERR_FORMAT names the first bad line.
Result<std::map<std::string, std::string>> parse_lines(const std::string& text, const char* what) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0)
      return make_error(Code::ERR_FORMAT, "%s: line %d is not key=value", what, n);
    kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

Status need(const std::map<std::string, std::string>& kv, const char* key, const char* what) {
  return kv.count(key) ? Status::ok() : make_error(Code::ERR_FORMAT, "%s: no '%s'", what, key);
}

bool to_i64(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// Values are single lines: a newline in a name would start another key.
std::string clean(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out;
}

std::string describe(const PrefixHolder& h) {
  std::string s = "job '" + h.job + "' (" + h.app + ") on " + h.host + ", pid " + std::to_string(h.pid);
  if (!h.run.empty()) s += ", launched by cairn run " + h.run;
  return s;
}
}  // namespace

std::string encode_holder(const PrefixHolder& h) {
  char lease[64];
  snprintf(lease, sizeof lease, "%.3f", h.lease_seconds);
  return "cairn-owner=1\njob=" + clean(h.job) + "\napp=" + clean(h.app) + "\nhost=" + clean(h.host) +
         "\npid=" + std::to_string(h.pid) + "\nlaunch=" + clean(h.launch) + "\nrun=" + clean(h.run) + "\nrenewed_unix_ns=" +
         std::to_string(h.renewed_unix_ns) + "\nlease_seconds=" + lease + "\n";
}

Result<PrefixHolder> decode_holder(const std::string& text) {
  const char* what = "prefix owner record";
  CAIRN_ASSIGN_OR_RETURN(kv, parse_lines(text, what));
  if (kv["cairn-owner"] != "1") return make_error(Code::ERR_FORMAT, "%s: not a format-1 owner record", what);
  for (const char* k : {"job", "app", "host", "pid", "launch", "run", "renewed_unix_ns", "lease_seconds"})
    CAIRN_TRY(need(kv, k, what));
  PrefixHolder h;
  h.job = kv["job"];
  h.app = kv["app"];
  h.host = kv["host"];
  h.run = kv["run"];
  h.launch = kv["launch"];
  if (!to_i64(kv["pid"], &h.pid) || !to_i64(kv["renewed_unix_ns"], &h.renewed_unix_ns))
    return make_error(Code::ERR_FORMAT, "%s: pid or renewed_unix_ns is not a number", what);
  char* end = nullptr;
  const std::string& lease = kv["lease_seconds"];
  h.lease_seconds = strtod(lease.c_str(), &end);
  if (lease.empty() || *end != '\0' || !(h.lease_seconds > 0) || h.lease_seconds > 1e9)
    return make_error(Code::ERR_FORMAT, "%s: lease_seconds '%s' is not a positive number", what, lease.c_str());
  return h;
}

std::string encode_identity(const PrefixIdentity& id) {
  return "cairn-identity=1\njob=" + clean(id.job) + "\napp=" + clean(id.app) + "\n";
}

Result<PrefixIdentity> decode_identity(const std::string& text) {
  const char* what = "prefix identity record";
  CAIRN_ASSIGN_OR_RETURN(kv, parse_lines(text, what));
  if (kv["cairn-identity"] != "1") return make_error(Code::ERR_FORMAT, "%s: not a format-1 identity record", what);
  CAIRN_TRY(need(kv, "job", what));
  CAIRN_TRY(need(kv, "app", what));
  return PrefixIdentity{kv["job"], kv["app"]};
}

ClaimDecision decide_claim(const std::optional<PrefixHolder>& current, const PrefixHolder& me, int64_t now_unix_ns,
                           bool holder_alive, const std::string& prefix) {
  if (!current) return {Claim::free, ""};
  const PrefixHolder& h = *current;
  if (h.launch == me.launch || (h.host == me.host && h.pid == me.pid)) return {Claim::ours, ""};
  // A relaunch by the same cairn run takes over from its earlier attempt: expected, so nothing to say.
  if (!h.run.empty() && h.run == me.run) return {Claim::ours, ""};
  const double idle = static_cast<double>(now_unix_ns - h.renewed_unix_ns) / 1e9;
  const bool expired = idle > h.lease_seconds;
  char since[96];
  snprintf(since, sizeof since, "its lease was last renewed %.0f s ago (lease %.0f s)", idle, h.lease_seconds);
  if (h.host == me.host && !holder_alive)
    return {Claim::stale, "taking over " + prefix + " from " + describe(h) + ": that process is gone"};
  if (expired)
    return {Claim::stale, "taking over " + prefix + " from " + describe(h) + ": " + since +
                              (h.host == me.host ? " (the pid runs, but is not that job any more)" : "")};
  return {Claim::held, prefix + " is in use by " + describe(h) + "; " + since +
                           ". Two jobs must not share a prefix: give this one its own (prefix, CAIRN_PREFIX), or wait "
                           "until that job ends; if it is gone, it is taken over once its lease runs out"};
}

IdentityDecision decide_identity(const std::optional<PrefixIdentity>& recorded, const PrefixIdentity& me,
                                 bool has_versions, bool adopt, const std::string& prefix,
                                 const std::string& orphan_cache) {
  if (!recorded && !orphan_cache.empty()) {
    if (adopt)
      return {IdentityCheck::adopt, "restarting from the cache " + orphan_cache + " although " + prefix +
                                        " has no record of its checkpoints (adopt)"};
    return {IdentityCheck::refuse,
            "the cache " + orphan_cache + " holds checkpoints, but " + prefix +
                " has no record of them (the prefix was removed or emptied since they were written): restarting "
                "from them could hand this job an earlier run's data. To start afresh, remove them: cairn clean "
                "--cache " + prefix + " (on every node that ran the job); to restart from them, set adopt = true "
                "(CAIRN_ADOPT=1)"};
  }
  if (!recorded) return {IdentityCheck::first, ""};
  if (*recorded == me) return {IdentityCheck::same, ""};
  const std::string theirs = "job '" + recorded->job + "' (" + recorded->app + ")";
  const std::string mine = "job '" + me.job + "' (" + me.app + ")";
  if (!has_versions) return {IdentityCheck::first, ""};
  if (adopt)
    return {IdentityCheck::adopt, "adopting the checkpoints of " + theirs + " in " + prefix + " as " + mine + " (adopt)"};
  return {IdentityCheck::refuse,
          prefix + " holds the checkpoints of " + theirs + ", not of this " + mine +
              ": restarting from them, or pruning them, would mix two jobs. Use another prefix (prefix, "
              "CAIRN_PREFIX), remove the old checkpoints (cairn clean), or, for a new build or a renamed job "
              "of the same code, set adopt = true (CAIRN_ADOPT=1)"};
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // A zombie (ended, not reaped yet: a rank whose mpirun is gone waits for init, which in a container
  // may never reap it) answers kill(0) but is no job any more. "pid (comm) STATE ...", comm may hold ')'.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

namespace {
int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

Status PrefixLease::acquire(const std::string& owner_path, const std::string& identity_path, const PrefixHolder& me,
                            const PrefixIdentity& id, bool has_versions, bool adopt, const std::string& prefix,
                            const std::string& orphan_cache, std::vector<std::string>* notes) {
  stop();
  // The identity first: a job of another identity is refused whether or not the other job runs.
  std::optional<PrefixIdentity> recorded;
  if (fs::exists(identity_path)) {
    auto text = fs::read_file(identity_path);
    auto dec = text ? decode_identity(*text) : Result<PrefixIdentity>(text.status());
    if (dec) recorded = *dec;
    else notes->push_back("ignoring an unreadable " + identity_path + " (" + dec.status().message() + "); it is rewritten");
  }
  IdentityDecision idd = decide_identity(recorded, id, has_versions, adopt, prefix, orphan_cache);
  if (idd.check == IdentityCheck::refuse) return Status(Code::ERR_PREFIX_IN_USE, idd.why);
  // Then the hold: created exclusively when there is none, so that of two jobs starting together one wins.
  PrefixHolder mine = me;
  mine.renewed_unix_ns = unix_ns();
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<PrefixHolder> current;
    if (fs::exists(owner_path)) {
      auto text = fs::read_file(owner_path);
      auto dec = text ? decode_holder(*text) : Result<PrefixHolder>(text.status());
      if (dec) current = *dec;
      else notes->push_back("taking over " + prefix + ": its owner record is unreadable (" + dec.status().message() + ")");
    }
    const bool alive = current && current->host == me.host && process_alive(current->pid);
    ClaimDecision d = decide_claim(current, mine, mine.renewed_unix_ns, alive, prefix);
    if (d.claim == Claim::held) return Status(Code::ERR_PREFIX_IN_USE, d.why);
    if (!d.why.empty()) notes->push_back(d.why);
    if (d.claim == Claim::free && !fs::exists(owner_path)) {
      auto fd = fs::open_file(owner_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (!fd) {
        if (fs::exists(owner_path)) continue;  // another job was quicker: decide again
        return fd.status();
      }
      std::string text = encode_holder(mine);
      CAIRN_TRY(fs::pwrite_all(fd->get(), text.data(), text.size(), 0, owner_path));
    } else {
      CAIRN_TRY(fs::write_file_atomic(owner_path, encode_holder(mine), false));
    }
    if (idd.check == IdentityCheck::adopt) notes->push_back(idd.why);
    if (idd.check != IdentityCheck::same) CAIRN_TRY(fs::write_file_atomic(identity_path, encode_identity(id), false));
    path_ = owner_path;
    me_ = mine;
    stop_ = false;
    thread_ = std::thread([this] { renew_loop(); });
    return Status::ok();
  }
  return make_error(Code::ERR_PREFIX_IN_USE, "%s: could not take its owner record (other jobs keep claiming it)",
                    prefix.c_str());
}

void PrefixLease::renew_loop() {
  const auto every = std::chrono::duration<double>(me_.lease_seconds / 3);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, every, [&] { return stop_; })) return;
    // Still ours? A job that stopped renewing for a whole lease (hung, suspended) may have been taken
    // over; it must not take the prefix back.
    auto text = fs::read_file(path_);
    auto cur = text ? decode_holder(*text) : Result<PrefixHolder>(text.status());
    if (cur && cur->launch != me_.launch) {
      LOG_ERROR("this job lost its hold on its prefix to job '%s' on %s (pid %lld) after not renewing it for a "
                "lease: two jobs now write the same prefix; stop one of them",
                cur->job.c_str(), cur->host.c_str(), static_cast<long long>(cur->pid));
      return;
    }
    me_.renewed_unix_ns = unix_ns();
    Status st = fs::write_file_atomic(path_, encode_holder(me_), false);
    if (!st.is_ok()) LOG_WARN("renewing the hold on the prefix: %s", st.message().c_str());
  }
}

void PrefixLease::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

namespace {
// Remove the owner record at `path` if it decodes and `mine` accepts its holder; whether it was removed.
template <class Mine>
bool remove_holder_if(const std::string& path, Mine mine) {
  auto text = fs::read_file(path);
  auto cur = text ? decode_holder(*text) : Result<PrefixHolder>(text.status());
  return cur && mine(*cur) && fs::remove_file(path).is_ok();
}
}  // namespace

bool release_for_run(const std::string& owner_path, const std::string& run_id) {
  return !run_id.empty() && remove_holder_if(owner_path, [&](const PrefixHolder& h) { return h.run == run_id; });
}

void PrefixLease::release() {
  stop();
  if (path_.empty()) return;
  remove_holder_if(path_, [&](const PrefixHolder& h) { return h.launch == me_.launch; });
  path_.clear();
}

}  // namespace cairn
