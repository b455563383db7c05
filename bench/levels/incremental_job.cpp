// The "incremental" phase of the levels (incremental_job.hpp). The figures are the library's own: the
// history's l1 copied_bytes, l2 sent_bytes and full_sent_bytes, l3 l3_bytes_written, each summed over
// every rank by the job (docs/format.md, "The job history"); the bench only rewrites the state and reads
// them back.
#include "levels/incremental_job.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/xxh.hpp"

namespace cairn::bench {
namespace {

constexpr uint64_t kBlock = 2ull << 20;  // the application writes its state in blocks of this
constexpr int kEveryTenth = 10;

// A version's bytes at each level over every rank, from the history (-1: the line did not say).
struct VersionBytes {
  double l1_copied = -1, l2_sent = -1, l2_full = -1, l3_written = -1;
  bool whole() const { return l1_copied >= 0 && l2_sent >= 0 && l2_full > 0 && l3_written >= 0; }
  double moved() const { return l1_copied + l2_sent + l3_written; }
};

std::map<uint64_t, VersionBytes> history_bytes(const Session& s) {
  std::map<uint64_t, VersionBytes> out;
  for (const HistoryLine& h : history_version_lines(s, 1)) {
    VersionBytes& b = out[h.version];
    const std::string ev = h.line.value("ev", "");
    if (ev == "l1") {
      b.l1_copied = history_number(h.line, "copied_bytes");
    } else if (ev == "l2") {
      b.l2_sent = history_number(h.line, "sent_bytes");
      b.l2_full = history_number(h.line, "full_sent_bytes");
    } else if (ev == "l3") {
      b.l3_written = history_number(h.line, "l3_bytes_written");
    }
  }
  return out;
}

// Every tenth block of the state rewritten: a word of each of its pages changed, so that every chunk of
// it differs from the version before.
void rewrite_tenth(uint8_t* state, uint64_t size) {
  for (uint64_t b = 0; b * kBlock < size; b += kEveryTenth)
    for (uint64_t off = b * kBlock; off < std::min(size, (b + 1) * kBlock); off += 4096)
      ++*reinterpret_cast<uint64_t*>(state + off);
}

// Sets name=value for the lifetime of the object, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) had_ = true, old_ = old;
    if (setenv(name, value, 1) != 0) die("setenv %s: %s", name, strerror(errno));
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// The newest version restarted from each level, `reps` times: from L1 (every cache intact), from L2 (the
// last rank's node lost: partner rebuilds it from rank 0's copy) and from L3 (every cache lost, the
// prefix's files out of the page cache). The slowest rank's cairn_restart_available + cairn_restart per
// level, in ms; the state must come back as `hash`.
using LevelTimes = std::map<std::string, std::vector<double>>;
void timed_restarts(Session& s, const char* scheme, uint8_t* state, uint64_t size, int reps, uint64_t hash,
                    const std::function<void()>& protect, LevelTimes* out) {
  static const char* kName[] = {"", "l1", "l2", "l3"};
  for (int level : {CAIRN_LEVEL_L1, CAIRN_LEVEL_L2, CAIRN_LEVEL_L3}) {
    std::vector<double>& t = (*out)[kName[level]];
    for (int i = 0; i < 1 + reps; ++i) {  // the first one untimed: a session's first restarts ran slower
      auto r = s.timed_restart(scheme, 1, level, [&] {
        std::error_code ec;
        if (level == CAIRN_LEVEL_L2) stdfs::remove_all(s.cache_job() + "/node" + std::to_string(g_nranks - 1), ec);
        if (level == CAIRN_LEVEL_L3) stdfs::remove_all(s.cache_job(), ec), evict(s.prefix());
        if (ec) die("cannot remove the lost cache: %s", ec.message().c_str());
      }, [&] { memset(state, 0, size); }, protect);
      if (XXH3_64bits(state, size) != hash) die("the restart from L%d restored different bytes", level);
      if (i > 0) t.push_back(r.seconds * 1e3);
    }
  }
}

// One session: version 1, one more per slot to warm up (each the first into its slot is copied whole),
// then `reps` measured ones, each after a tenth rewritten. Incremental: l1_incremental = on and
// full_every far away, so that every measured version is incremental at every level; else every version
// full at every level. With `restarts`, the newest version is then restarted from each level.
struct Run {
  std::map<uint64_t, VersionBytes> bytes;  // rank 0
};
Run run_session(Session& s, const char* scheme, bool incremental, LevelTimes* restarts, uint8_t* state, uint64_t size,
                int cache_versions, int reps, const std::function<void()>& protect) {
  s.clean_levels();
  ScopedEnv l1("CAIRN_L1_INCREMENTAL", incremental ? "on" : "off"), l3("CAIRN_FULL_EVERY", incremental ? "1000" : "0");
  s.open(scheme, 1, protect);
  for (int i = 0; i < 1 + cache_versions + reps; ++i) {
    if (i > 0) rewrite_tenth(state, size);
    CHECK_CAIRN(cairn_checkpoint());
    CHECK_CAIRN(cairn_wait());
  }
  s.close();
  Run r;
  if (g_rank == 0) r.bytes = history_bytes(s);
  if (restarts) timed_restarts(s, scheme, state, size, reps, XXH3_64bits(state, size), protect, restarts);
  return r;
}

json measure_scheme(Session& s, const char* scheme, uint8_t* state, uint64_t size, int cache_versions, int reps,
                    const std::function<void()>& protect, bool restarts) {
  // The restarts: sessions of full and of incremental versions in the order full, incremental,
  // incremental, full, so that a drift over the run (a session's restarts ran faster the later it came,
  // by up to a third at 256 MiB here) weighs on both kinds alike; the medians over both sessions of each.
  LevelTimes inc_ms, full_ms;
  if (restarts) run_session(s, scheme, false, &full_ms, state, size, cache_versions, reps, protect);
  const Run inc = run_session(s, scheme, true, restarts ? &inc_ms : nullptr, state, size, cache_versions, reps, protect);
  if (restarts) {
    run_session(s, scheme, true, &inc_ms, state, size, cache_versions, reps, protect);
    run_session(s, scheme, false, &full_ms, state, size, cache_versions, reps, protect);
  }
  json j;
  if (restarts && g_rank == 0) {
    json r = {{"incremental_ms", json::object()}, {"full_ms", json::object()}};
    for (const char* level : {"l1", "l2", "l3"}) {
      const double a = median(inc_ms[level]), b = median(full_ms[level]);
      r["incremental_ms"][level] = round3(a);
      r["full_ms"][level] = round3(b);
      r[std::string(level) + "_speed_ratio"] = a > 0 ? round3(b / a) : json(nullptr);  // incremental's speed / full's
    }
    j["restart"] = r;
  }
  if (g_rank != 0) return j;
  const auto& bytes = inc.bytes;
  auto full = bytes.find(1);
  if (full == bytes.end() || !full->second.whole()) {
    j["skipped"] = "the job history has no bytes of version 1 at every level";
    return j;
  }
  std::vector<double> l1, l2, l3, moved;
  for (const auto& [v, b] : bytes) {
    if (v <= static_cast<uint64_t>(1 + cache_versions)) continue;
    if (!b.whole()) {
      j["skipped"] = "the job history has no bytes of version " + std::to_string(v) + " at every level";
      return j;
    }
    l1.push_back(b.l1_copied), l2.push_back(b.l2_sent), l3.push_back(b.l3_written), moved.push_back(b.moved());
  }
  if (moved.empty()) {
    j["skipped"] = "no incremental version in the job history";
    return j;
  }
  const VersionBytes& f = full->second;
  auto ratio = [](double a, double b) { return b > 0 ? round3(a / b) : json(nullptr); };
  j["versions"] = moved.size();
  j["full"] = {{"l1_copied_bytes", f.l1_copied}, {"l2_sent_bytes", f.l2_sent}, {"l3_written_bytes", f.l3_written}};
  j["incremental"] = {{"l1_copied_bytes", median(l1)}, {"l2_sent_bytes", median(l2)}, {"l3_written_bytes", median(l3)}};
  j["l1_ratio"] = ratio(median(l1), f.l1_copied);
  j["l2_ratio"] = ratio(median(l2), f.l2_sent);
  j["l3_ratio"] = ratio(median(l3), f.l3_written);
  j["ratio"] = ratio(median(moved), f.moved());
  return j;
}

}  // namespace

json measure_incremental_job(Session& s, uint8_t* state, uint64_t size, int cache_versions, int reps,
                             const std::function<void()>& protect) {
  json j;
  uint64_t changed = 0;
  for (uint64_t b = 0; b * kBlock < size; b += kEveryTenth) changed += std::min(size, (b + 1) * kBlock) - b * kBlock;
  j["changed_fraction"] = round3(static_cast<double>(changed) / static_cast<double>(size));
  for (const char* scheme : {"partner", "xor", "rs"})  // the restarts once, with partner
    j[scheme] = measure_scheme(s, scheme, state, size, cache_versions, reps, protect, strcmp(scheme, "partner") == 0);
  return j;
}

}  // namespace cairn::bench
