// cairn-bench --snapshot, on every rank: what a checkpoint costs the application with snapshot = copy,
// cow and auto, for the same state and two writers (the whole state rewritten each pass, or the same
// tenth of it), beside memcpy measured in the same run and the writer's slowdown from the same bytes
// copied and hashed by another thread (docs/performance.md, "Copy-on-write snapshots"). --rounds runs
// several sessions of each mode in turns. Rank 0 prints the report.
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "bench.hpp"
#include "levels/copy_bound.hpp"
#include "xxhash.h"
#include "session.hpp"

namespace cairn::bench {
namespace {

// The number right after `key` in `line` (the library's per-version summary line).
bool number_after(const std::string& line, const std::string& key, double* out) {
  auto at = line.find(key);
  if (at == std::string::npos) return false;
  const char* s = line.c_str() + at + key.size();
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s) return false;
  *out = v;
  return true;
}

// The application's loop: one pass that reads and rewrites every word of the state. The writers and
// timed_window are never inlined: every window, with a checkpoint or without, runs the same machine
// code. Inlined, each caller had a copy of the loop of its own, and how fast a copy ran depended on where
// the build put it: the difference between the two kinds of window moved the tenth writer's loss from
// a third of a memcpy to a whole one between two builds of the same library (docs/performance.md, "The
// tenth writer's figure moved with the build, and why").
__attribute__((noinline)) void write_pass(uint8_t* state, uint64_t size) {
  auto* w = reinterpret_cast<uint64_t*>(state);
  for (uint64_t i = 0; i < size / 8; ++i) w[i] = w[i] * 3 + 1;
  clobber(state);
}

// The second writer: a solver that works on part of its state: the same tenth of the state's blocks
// (kBlock each: the cow snapshotter's fault block and a huge page) every pass, a random tenth chosen
// once per size, visited in address order.
constexpr uint64_t kBlock = 2 << 20;

std::vector<uint64_t> pick_tenth(uint64_t size) {
  const uint64_t blocks = std::max<uint64_t>(1, size / kBlock), pick = std::max<uint64_t>(1, blocks / 10);
  std::vector<uint64_t> order(blocks);
  for (uint64_t i = 0; i < blocks; ++i) order[i] = i;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (uint64_t j = 0; j < pick; ++j) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    std::swap(order[j], order[j + (z ^ (z >> 27)) % (blocks - j)]);
  }
  order.resize(pick);
  std::sort(order.begin(), order.end());
  return order;
}

__attribute__((noinline)) void write_tenth(uint8_t* state, uint64_t size, const std::vector<uint64_t>& blocks) {
  for (uint64_t b : blocks) write_pass(state + b * kBlock, std::min(kBlock, size - b * kBlock));
}

enum class Writer { all, tenth };
constexpr int kWarmVersions = 3;  // per session, before the timed ones (session())
const char* writer_key(Writer w) { return w == Writer::all ? "all" : "10pct"; }

// Bytes of transparent huge pages in the mappings overlapping [p, p + size) (/proc/self/smaps).
uint64_t huge_bytes(const uint8_t* p, uint64_t size) {
  std::ifstream in("/proc/self/smaps");
  auto a = reinterpret_cast<uintptr_t>(p);
  bool overlaps = false;
  uint64_t total = 0;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0, kb = 0;
    char sep = 0;
    if (sscanf(line.c_str(), "%lx-%lx%c", &lo, &hi, &sep) == 3 && sep == ' ')
      overlaps = lo < a + size && a < hi;
    else if (overlaps && sscanf(line.c_str(), "AnonHugePages: %lu kB", &kb) == 1)
      total += static_cast<uint64_t>(kb) << 10;
  }
  return total;
}

// Until the snapshotter's background gathering of the state into huge pages is over (no change for
// 0.3 s, at most 30 s): the timed snapshots then see the steady state of a long run.
double settle_huge_pages(const uint8_t* p, uint64_t size) {
  uint64_t last = huge_bytes(p, size);
  for (int still = 0, i = 0; still < 6 && i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    uint64_t now_bytes = huge_bytes(p, size);
    still = now_bytes == last ? still + 1 : 0;
    last = now_bytes;
  }
  return 100.0 * static_cast<double>(std::min(last, size)) / static_cast<double>(size);
}

// What the sessions of one snapshot mode and writer measured: each repetition's figure (slowest rank;
// complete and the handler's figures from rank 0's log), pooled over the rounds.
struct ModeSamples {
  int passes = 0;  // the window's passes (fixed by the first session of the writer)
  std::vector<double> huge_pct, huge_end_pct;  // one per session
  std::vector<double> pass, blocking, during, after;
  std::vector<double> window, lost, first_lost, waited, window_blocking;
  std::vector<double> complete, own, pct, waits, wait_ms, unprot, unprot_ms, ahead, late;
  int cow_versions = 0, copy_versions = 0;
};

// The machine's part of a background version's cost: the writer's window while another thread of the
// process copies (process_vm_readv, as the copier does) the bytes a tracked cow version of this writer
// copies into a slot-like mapping and hashes them (as the seal does), against the window alone; no cairn
// session. Pooled over the rounds.
struct ContentionSamples {
  uint64_t bytes = 0;  // what the helper copies and hashes
  std::vector<double> lost, helper;  // per repetition: the window's extra time, the helper's own time
};

// The medians of those, per mode and writer.
struct ModeTimes {
  double loop_ms = 0;          // the loop alone, in this session, before the timed checkpoints
  double huge_pct = 0;         // share of the state in huge pages when the timed checkpoints start
  double huge_end_pct = 0;     // and when they are over (with write tracking the two differ: below)
  double blocking_ms = 0;      // cairn_checkpoint
  double snapshot_ms = 0;      // of which the snapshot's own blocking part (rank 0's "L1 copy")
  double complete_ms = 0;      // from the checkpoint's start until its snapshot is in the slot (rank 0)
  double during_ms = 0;        // the loop's pass right after cairn_checkpoint returned
  double after_ms = 0;         // a pass once the version is through (after cairn_wait)
  double protected_pct = 0;    // cow: share of the state write-protected (rank 0)
  double writes_waited = 0;    // cow: writes that waited for their page, per snapshot (rank 0)
  double fault_wait_ms = 0;    // cow: the fault handler's time on them
  double unprotect_faults = 0;  // cow, tracking: first writes to memory already in the slot, per version
  double unprotect_wait_ms = 0;  // and the handler's time on them (each is one un-protection)
  double unprotected_ahead = 0;  // cow, tracking: blocks the copier un-protected as it copied them, per version
  double late_faults = 0;      // cow: writes the copier served for a late fault handler thread, per version
  // The window: `passes` passes of the writer right after cairn_checkpoint, then cairn_wait, against
  // the same passes without a checkpoint (alternating, same blocks); app_lost_ms the median difference.
  int passes = 0;
  double pass_ms = 0;          // one pass of the writer alone
  double window_ms = 0;        // the passes without a checkpoint
  double app_lost_ms = 0;
  double app_lost_q1_ms = 0, app_lost_q3_ms = 0;  // the quartiles of the repetitions' differences
  std::vector<double> app_lost_reps;  // every repetition's difference, in the order measured
  double first_pass_lost_ms = 0;  // of app_lost_ms, the window's first pass (the same difference, median)
  double window_wait_ms = 0;   // cairn_wait at the end of the window (the version not through yet)
  std::string took;            // auto: the snapshotter of the timed versions (copy, cow, or both)
};

ModeTimes summarize(const ModeSamples& s, Writer writer) {
  ModeTimes m;
  m.huge_pct = median(s.huge_pct);
  m.huge_end_pct = median(s.huge_end_pct);
  m.pass_ms = median(s.pass);
  m.loop_ms = m.pass_ms;
  m.passes = s.passes;
  m.window_ms = median(s.window);
  m.app_lost_ms = median(s.lost);
  m.app_lost_q1_ms = quantile(s.lost, 0.25);
  m.app_lost_q3_ms = quantile(s.lost, 0.75);
  m.app_lost_reps = s.lost;
  m.first_pass_lost_ms = median(s.first_lost);
  m.window_wait_ms = median(s.waited);
  m.blocking_ms = median(writer == Writer::all ? s.blocking : s.window_blocking);
  m.during_ms = writer == Writer::all ? median(s.during) : 0;
  m.after_ms = writer == Writer::all ? median(s.after) : 0;
  m.took = s.cow_versions && s.copy_versions ? "cow, copy" : s.cow_versions ? "cow" : "copy";
  m.complete_ms = s.complete.empty() ? m.blocking_ms : median(s.complete);
  m.snapshot_ms = median(s.own);
  m.protected_pct = median(s.pct);
  m.writes_waited = median(s.waits);
  m.fault_wait_ms = median(s.wait_ms);
  m.unprotect_faults = median(s.unprot);
  m.unprotect_wait_ms = median(s.unprot_ms);
  m.unprotected_ahead = median(s.ahead);
  m.late_faults = median(s.late);
  return m;
}

class SnapshotBench {
 public:
  SnapshotBench(const Options& o, const JobInfo& job) : o_(o), job_(job), session_(o) {}

  void run() {
    load_start_ = loadavg_1m();
    json sizes = json::array();
    for (uint64_t size : o_.sizes) sizes.push_back(measure(size));
    if (g_rank != 0) return;
    json out;
    out["mode"] = "snapshot";
    out["sizes"] = sizes;
    out["run"] = run_info();
    if (o_.json)
      printf("%s\n", out.dump(2).c_str());
    else
      print_snapshot_table(out);
    fflush(stdout);
  }

 private:
  json measure(uint64_t size) {
    uint8_t* state = alloc_faulted(size);
    fill_random(state, size, 2000 + static_cast<uint64_t>(g_rank));
    double memcpy_ms = memcpy_into_shm(state, size);
    // Sessions per mode and writer (auto decides from what it sees of one writer only), --rounds of
    // them, the modes' order reversed every other round so that a drift of the machine during the run
    // falls on each mode alike; the repetitions of a mode's sessions pooled. The tenth writer has a
    // fourth: cow with l1_incremental = off, every version full, what its incremental versions are
    // measured against (issue 24), over the same window.
    const char* mode_names[] = {"copy", "cow", "auto", "cow"};
    ModeSamples samples[2][4];
    ContentionSamples contention[2];
    for (Writer writer : {Writer::all, Writer::tenth})
      for (int r = 0; r < o_.rounds; ++r) {
        const int kinds = writer == Writer::tenth ? 4 : 3;
        for (int k = 0; k < kinds; ++k) {
          const int m = r % 2 ? kinds - 1 - k : k;
          ModeSamples& into = samples[writer == Writer::tenth][m];
          if (m == 3 && !into.passes) into.passes = samples[1][1].passes;  // cow's window (0: set by this one)
          session(mode_names[m], writer, state, size, memcpy_ms, into, m == 3);
        }
        other_core(writer, state, size, samples[writer == Writer::tenth][1].passes, contention[writer == Writer::tenth]);
      }
    const ModeTimes copy = summarize(samples[0][0], Writer::all), cow = summarize(samples[0][1], Writer::all),
                    auto_all = summarize(samples[0][2], Writer::all),
                    copy10 = summarize(samples[1][0], Writer::tenth), cow10 = summarize(samples[1][1], Writer::tenth),
                    auto10 = summarize(samples[1][2], Writer::tenth),
                    full10 = summarize(samples[1][3], Writer::tenth);
    const double two_copy_ms = two_thread_copy_ms(state, size);
    std::vector<std::pair<uint64_t, uint64_t>> written;  // the tenth's blocks, exactly: what its writer rewrites
    for (uint64_t b : tenth_) written.push_back({b * kBlock, std::min(size, (b + 1) * kBlock)});
    const CopyBound bound = measure_copy_bound(state, written, std::max(1, job_.cpus), o_.reps,
                                               o_.cache_dir + "/cairn-" + o_.child_job + ".bound.r" + std::to_string(g_rank));
    free(state);

    json j;
    j["size_bytes"] = size;
    j["memcpy_ms"] = round3(memcpy_ms);
    j["l1_blocking_copy_ms"] = round3(copy.blocking_ms);
    j["l1_blocking_cow_ms"] = round3(cow.blocking_ms);
    // the part of cairn_checkpoint that is the snapshot itself (the rest: the pipeline's fixed costs)
    j["l1_snapshot_copy_ms"] = round3(copy.snapshot_ms);
    j["l1_snapshot_cow_ms"] = round3(cow.snapshot_ms);
    j["snapshot_complete_copy_ms"] = round3(copy.complete_ms);
    j["snapshot_complete_cow_ms"] = round3(cow.complete_ms);
    j["loop_copy_ms"] = round3(copy.loop_ms);
    j["loop_cow_ms"] = round3(cow.loop_ms);
    j["loop_during_copy_x"] = round3(copy.during_ms / copy.loop_ms);
    j["loop_after_copy_x"] = round3(copy.after_ms / copy.loop_ms);
    j["loop_during_cow_x"] = round3(cow.during_ms / cow.loop_ms);
    j["loop_after_cow_x"] = round3(cow.after_ms / cow.loop_ms);
    j["cow_protected_pct"] = round3(cow.protected_pct);
    j["cow_protected_10pct_pct"] = round3(cow10.protected_pct);
    j["cow_protected_full_10pct_pct"] = round3(full10.protected_pct);
    j["two_thread_copy_10pct_ms"] = round3(two_copy_ms);
    j["cow_writes_waited"] = round3(cow.writes_waited);
    for (const auto& [w, t] : {std::pair<const char*, const ModeTimes*>{"all", &cow}, {"10pct", &cow10}}) {
      j[std::string("cow_fault_wait_") + w + "_ms"] = round3(t->fault_wait_ms);
      j[std::string("cow_unprotect_faults_") + w] = round3(t->unprotect_faults);
      j[std::string("cow_unprotect_wait_") + w + "_ms"] = round3(t->unprotect_wait_ms);
      j[std::string("cow_unprotected_ahead_") + w] = round3(t->unprotected_ahead);
      j[std::string("cow_late_faults_") + w] = round3(t->late_faults);
    }
    j["state_huge_pages_copy_pct"] = round3(copy.huge_pct);
    j["state_huge_pages_cow_pct"] = round3(cow.huge_pct);
    j["state_huge_pages_cow_end_pct"] = round3(cow.huge_end_pct);
    j["state_huge_pages_cow_10pct_end_pct"] = round3(cow10.huge_end_pct);
    // What the application loses per checkpoint, per writer: the blocking plus its passes' extra time
    // until the version is through.
    const std::pair<Writer, const ModeTimes*> modes[][4] = {
        {{Writer::all, &copy}, {Writer::all, &cow}, {Writer::all, &auto_all}, {Writer::all, nullptr}},
        {{Writer::tenth, &copy10}, {Writer::tenth, &cow10}, {Writer::tenth, &auto10}, {Writer::tenth, &full10}}};
    for (const auto& row : modes) {
      std::string w = writer_key(row[0].first);
      j["pass_" + w + "_ms"] = round3(row[1].second->pass_ms);
      j["window_" + w + "_passes"] = row[1].second->passes;
      const char* names[] = {"copy", "cow", "auto", "cow_full"};
      for (int m = 0; m < 4 && row[m].second; ++m) {
        const ModeTimes& t = *row[m].second;
        j["app_lost_" + std::string(names[m]) + "_" + w + "_ms"] = round3(t.app_lost_ms);
        j["app_lost_" + std::string(names[m]) + "_" + w + "_quartiles_ms"] = {round3(t.app_lost_q1_ms), round3(t.app_lost_q3_ms)};
        json reps = json::array();
        for (double x : t.app_lost_reps) reps.push_back(round3(x));
        j["app_lost_" + std::string(names[m]) + "_" + w + "_reps_ms"] = reps;
        j["app_lost_" + std::string(names[m]) + "_" + w + "_first_pass_ms"] = round3(t.first_pass_lost_ms);
        j["blocking_" + std::string(names[m]) + "_" + w + "_ms"] = round3(t.blocking_ms);
        j["window_wait_" + std::string(names[m]) + "_" + w + "_ms"] = round3(t.window_wait_ms);
      }
      j["auto_took_" + w] = row[2].second->took;
      const ContentionSamples& c = contention[row[0].first == Writer::tenth];
      j["other_core_" + w + "_ms"] = round3(median(c.lost));
      j["other_core_" + w + "_quartiles_ms"] = {round3(quantile(c.lost, 0.25)), round3(quantile(c.lost, 0.75))};
      j["other_core_" + w + "_bytes"] = c.bytes;
      j["other_core_" + w + "_helper_ms"] = round3(median(c.helper));
    }
    json t;
    t["l1_blocking_cow"] = target("l1_blocking_cow_ms / memcpy_ms", cow.blocking_ms / memcpy_ms, 0.1);
    t["snapshot_complete_cow"] = target("snapshot_complete_cow_ms / memcpy_ms", cow.complete_ms / memcpy_ms, 1.5);
    t["loop_during_cow"] = target("loop pass right after cairn_checkpoint / loop_cow_ms", cow.during_ms / cow.loop_ms, 1.5);
    // "not at all after": within the noise of two passes of the same loop.
    t["loop_after_cow"] = target("loop pass after the version is through / loop_cow_ms", cow.after_ms / cow.loop_ms, 1.05);
    t["app_lost_cow_10pct"] = target("app_lost_cow_10pct_ms / memcpy_ms", cow10.app_lost_ms / memcpy_ms, 0.25);
    t["app_lost_cow_all"] = target("app_lost_cow_all_ms / memcpy_ms", cow.app_lost_ms / memcpy_ms, 1.0);
    // Beside them, the share of that loss that is memory traffic: the same bytes copied and hashed by
    // another thread, as cairn's copier and seal do, slow the writer by this much (other_core_<writer>_ms).
    t["app_lost_cow_10pct"]["other_core_ratio"] = round3(median(contention[1].lost) / memcpy_ms);
    t["app_lost_cow_all"]["other_core_ratio"] = round3(median(contention[0].lost) / memcpy_ms);
    t["app_lost_auto_10pct"] = target("app_lost_auto_10pct_ms / app_lost_copy_10pct_ms", auto10.app_lost_ms / copy10.app_lost_ms, 1.05);
    t["app_lost_auto_all"] = target("app_lost_auto_all_ms / app_lost_copy_all_ms", auto_all.app_lost_ms / copy.app_lost_ms, 1.05);
    // Issue 24's incremental versions: the tenth writer's loss with write tracking against a full
    // version's (cow, l1_incremental = off), same writer and window. A full version's loss that is not
    // above zero is the noise's, and no ratio is taken of it.
    const char* inc_what = "app_lost_cow_10pct_ms / app_lost_cow_full_10pct_ms (l1_incremental = off)";
    if (full10.app_lost_ms > 0) {
      t["app_lost_incremental_10pct"] = target(inc_what, cow10.app_lost_ms / full10.app_lost_ms, 0.15);
    } else {
      t["app_lost_incremental_10pct"] = {{"what", inc_what}, {"max_ratio", 0.15}, {"ratio", nullptr}, {"pass", false},
                                         {"why", "a full version's loss was not above zero: within this run's noise"}};
    }
    // Beside it: the same loss against copy's, and the machine's own figure, the tenth's bytes copied by
    // two threads (two_thread_copy_10pct_ms) against the full versions' loss.
    t["app_lost_incremental_10pct"]["against_copy_ratio"] =
        copy10.app_lost_ms > 0 ? json(round3(cow10.app_lost_ms / copy10.app_lost_ms)) : json(nullptr);
    t["app_lost_incremental_10pct"]["two_thread_copy_ratio"] =
        full10.app_lost_ms > 0 ? json(round3(two_copy_ms / full10.app_lost_ms)) : json(nullptr);
    // The tenth's bytes copied as fast as this rank can (copy_bound.hpp): the copy's share of the loss.
    add_copy_bound(t["app_lost_incremental_10pct"], bound, cow10.app_lost_ms);
    // How far those ratios move with the repetitions drawn: what tells a miss from the machine's noise.
    for (const auto& [key, a, b] : {std::tuple<const char*, const ModeTimes*, const ModeTimes*>{"app_lost_auto_10pct", &auto10, &copy10},
                                    {"app_lost_auto_all", &auto_all, &copy},
                                    {"app_lost_incremental_10pct", &cow10, &full10}}) {
      const auto [lo, hi] = ratio_interval(a->app_lost_reps, b->app_lost_reps, static_cast<size_t>(o_.reps));
      t[key]["interval_95"] = {round3(lo), round3(hi)};
    }
    j["targets"] = t;
    return j;
  }

  static json target(const char* what, double ratio, double max_ratio) {
    return {{"what", what}, {"max_ratio", max_ratio}, {"ratio", round3(ratio)}, {"pass", ratio <= max_ratio}};
  }

  // memcpy into a pre-faulted shared mapping of a file in cache_dir (what an L1 slot is), every rank
  // at once (as in a checkpoint).
  double memcpy_into_shm(const uint8_t* state, uint64_t size) {
    uint8_t* p = map_slot_like(o_.cache_dir + "/cairn-" + o_.child_job + ".memcpy.r" + std::to_string(g_rank), size);
    std::vector<double> ms;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      double t0 = now();
      memcpy(p, state, size);
      clobber(p);
      double t = max_over_ranks(now() - t0);
      if (i) ms.push_back(t * 1e3);
    }
    munmap(p, size);
    return median(ms);
  }

  // `passes` passes of `writer` over the state; seconds (the first pass's alone in first_pass_).
  __attribute__((noinline)) double timed_window(Writer writer, uint8_t* state, uint64_t size, int passes) {
    double t0 = now();
    for (int p = 0; p < passes; ++p) {
      if (writer == Writer::all)
        write_pass(state, size);
      else
        write_tenth(state, size, tenth_);
      if (p == 0) first_pass_ = now() - t0;
    }
    return now() - t0;
  }

  // A window of `passes` passes without the version's work before and after each with it (A B A B ... A),
  // --reps of the latter: `with` runs one (its seconds on this rank, the version's work included), and
  // each goes against the mean of its two neighbours. Appends the windows without to `window` and the
  // differences to `lost`, in ms of the slowest rank; `first_lost` (if given) gets the same difference
  // for the windows' first passes alone (where `with` runs its window by timed_window).
  void alternate_windows(Writer writer, uint8_t* state, uint64_t size, int passes, std::vector<double>* window,
                         std::vector<double>* lost, const std::function<double()>& with,
                         std::vector<double>* first_lost = nullptr) {
    std::vector<double> first;  // the windows without: their first passes, ms
    auto base_window = [&] {
      barrier();
      window->push_back(max_over_ranks(timed_window(writer, state, size, passes)) * 1e3);
      first.push_back(max_over_ranks(first_pass_) * 1e3);
    };
    base_window();
    for (int i = 0; i < o_.reps; ++i) {
      barrier();
      const double with_ms = max_over_ranks(with()) * 1e3;
      const double with_first_ms = max_over_ranks(first_pass_) * 1e3;
      base_window();
      lost->push_back(with_ms - ((*window)[window->size() - 2] + window->back()) / 2);
      if (first_lost) first_lost->push_back(with_first_ms - (first[first.size() - 2] + first.back()) / 2);
    }
  }

  // One cairn session with snapshot = `mode`: L1 only (no L2, no flush), one slot. Three warm-up versions
  // with a pass of the writer between them (and, with cow, the gathering of the state into huge pages
  // that follows), the writer's pass alone; with the full rewriter, per repetition: cairn_checkpoint, a pass right away, cairn_wait, and a
  // pass once the version is through; then, for either writer, per repetition: a window of passes
  // without a checkpoint and the same window right after cairn_checkpoint, then cairn_wait. The window
  // lasts about 4 memcpys of the state (fixed by the writer's first session), which covers a version's
  // copy and seal; a cairn_wait at its end that still waits is counted as lost (an over-estimate: the
  // application would have gone on). Appends to `s`.
  // `full`: with l1_incremental = off (cairn_init reads it; the caller's setting is put back after).
  void session(const char* mode, Writer writer, uint8_t* state, uint64_t size, double memcpy_ms, ModeSamples& s,
               bool full = false) {
    session_.clean_levels();
    if (setenv("CAIRN_SNAPSHOT", mode, 1) != 0 || setenv("CAIRN_CACHE_VERSIONS", "1", 1) != 0)
      die("setenv: %s", strerror(errno));
    const char* given = getenv("CAIRN_L1_INCREMENTAL");
    const std::optional<std::string> incremental = given ? std::optional<std::string>(given) : std::nullopt;
    if (full && setenv("CAIRN_L1_INCREMENTAL", "off", 1) != 0) die("setenv: %s", strerror(errno));
    tenth_ = pick_tenth(size);
    session_.open("single", 0, [&] { CHECK_CAIRN(cairn_protect("state", state, size, CAIRN_BYTE)); });
    if (full && (incremental ? setenv("CAIRN_L1_INCREMENTAL", incremental->c_str(), 1) : unsetenv("CAIRN_L1_INCREMENTAL")) != 0)
      die("setenv: %s", strerror(errno));
    // The warm-up versions, each with the writer's pass right after cairn_checkpoint, as in the timed
    // versions: those are the writer's steady state, as in a run that checkpoints again and again (write
    // tracking knows the blocks written between every two versions from the third on: architecture.md,
    // "Un-protecting ahead"), and what auto has seen of the writer before them is that writer.
    for (int v = 0; v < kWarmVersions; ++v) {
      CHECK_CAIRN(cairn_checkpoint());
      timed_window(writer, state, size, 1);
      CHECK_CAIRN(cairn_wait());
    }
    s.huge_pct.push_back(max_over_ranks(settle_huge_pages(state, size)));
    std::vector<double> pass;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      double t = max_over_ranks(timed_window(writer, state, size, 1));
      if (i) pass.push_back(t * 1e3);
    }
    s.pass.insert(s.pass.end(), pass.begin(), pass.end());
    for (int i = 0; writer == Writer::all && i < o_.reps; ++i) {
      barrier();
      double t0 = now();
      CHECK_CAIRN(cairn_checkpoint());
      double t1 = now();
      write_pass(state, size);
      double t2 = now();
      CHECK_CAIRN(cairn_wait());
      barrier();
      double t3 = now();
      write_pass(state, size);
      double t4 = now();
      s.blocking.push_back(max_over_ranks(t1 - t0) * 1e3);
      s.during.push_back(max_over_ranks(t2 - t1) * 1e3);
      s.after.push_back(max_over_ranks(t4 - t3) * 1e3);
    }
    if (!s.passes) s.passes = std::max(2, static_cast<int>(std::ceil(4 * memcpy_ms / std::max(median(pass), 1e-3))));
    alternate_windows(writer, state, size, s.passes, &s.window, &s.lost, [&] {
      double t0 = now();
      CHECK_CAIRN(cairn_checkpoint());
      double t1 = now();
      timed_window(writer, state, size, s.passes);
      double t2 = now();
      CHECK_CAIRN(cairn_wait());
      double t3 = now();
      s.waited.push_back(max_over_ranks(t3 - t2) * 1e3);
      s.window_blocking.push_back(max_over_ranks(t1 - t0) * 1e3);
      return t3 - t0;
    }, &s.first_lost);
    s.huge_end_pct.push_back(max_over_ranks(100.0 * static_cast<double>(std::min(huge_bytes(state, size), size)) /
                                            static_cast<double>(size)));
    std::string log = session_.close();
    // rank 0's summary lines of the timed versions (after the warm-up): "(cow: P% write-protected, complete in X ms,
    // W writes waited T ms[, first writes un-protected: U in V ms])"; with copy the snapshot is complete
    // when cairn_checkpoint returns.
    std::istringstream in(log);
    bool chosen = false;
    const bool is_auto = std::strcmp(mode, "auto") == 0;
    int cow_versions = 0;
    for (std::string line; std::getline(in, line);) {
      double v = 0, x = 0;
      if (line.find("snapshot = ") != std::string::npos && !chosen) {
        chosen = line.find(std::string("snapshot = ") + mode) != std::string::npos &&
                 (is_auto || std::strcmp(mode, "copy") == 0 || line.find("copy-on-write") != std::string::npos);
        if (!chosen) die("snapshot = %s was not honoured: %s", mode, line.c_str());
      }
      if (!number_after(line, "info: version ", &v) || v <= kWarmVersions) continue;
      if (number_after(line, "L1 copy ", &x)) s.own.push_back(x);
      auto at = line.find("complete in ");
      if (at == std::string::npos) {
        ++s.copy_versions;
        continue;
      }
      ++cow_versions;
      if (number_after(line, "complete in ", &x)) s.complete.push_back(x);
      if (number_after(line, "(cow: ", &x)) s.pct.push_back(x);
      if (number_after(line.substr(at), " ms, ", &x)) s.waits.push_back(x);
      if (number_after(line, "writes waited ", &x)) s.wait_ms.push_back(x);
      const auto u = line.find("first writes un-protected: ");
      const bool any = u != std::string::npos;
      s.unprot.push_back(any && number_after(line, "first writes un-protected: ", &x) ? x : 0);
      s.unprot_ms.push_back(any && number_after(line.substr(u), " in ", &x) ? x : 0);
      s.ahead.push_back(number_after(line, "blocks un-protected ahead: ", &x) ? x : 0);
      s.late.push_back(number_after(line, "served by the copier: ", &x) ? x : 0);
    }
    s.cow_versions += cow_versions;
    if (g_rank == 0 && !chosen) die("the log does not say which snapshotter cairn_init chose");
    if (g_rank == 0 && std::strcmp(mode, "cow") == 0 && cow_versions == 0)
      die("no copy-on-write summary line in the log (is the state write-protectable?)");
    // A full version protects and copies the whole state (a tracked one only what was written since).
    if (g_rank == 0 && full && !s.pct.empty() && median(s.pct) < 99)
      die("l1_incremental = off, yet the cow versions protected %.1f%% of the state, not all of it", median(s.pct));
  }

  // The bytes a tracked cow version of `writer` copies: the whole state, or for each block of the tenth
  // its bytes from its first page to the end of the 2 MiB page of the address space its last byte lies
  // in (a write un-protects a huge page from the written page up, and the state need not be
  // 2 MiB-aligned, so a block's last huge page reaches past it): what is write-protected and copied per
  // version.
  std::vector<std::pair<uint64_t, uint64_t>> version_ranges(Writer writer, const uint8_t* state, uint64_t size) const {
    if (writer == Writer::all) return {{0, size}};
    const uint64_t base = reinterpret_cast<uintptr_t>(state), huge = 2 << 20;
    std::vector<std::pair<uint64_t, uint64_t>> out;  // [offset, end) in the state, merged
    for (uint64_t b : tenth_) {
      const uint64_t lo = b * kBlock;
      uint64_t hi = (base + std::min(size, (b + 1) * kBlock) + huge - 1) / huge * huge;
      hi = std::min(hi, base + size) - base;
      if (!out.empty() && lo <= out.back().second)
        out.back().second = std::max(out.back().second, hi);
      else
        out.push_back({lo, hi});
    }
    return out;
  }

  static uint64_t ranges_bytes(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    uint64_t bytes = 0;
    for (const auto& [lo, hi] : ranges) bytes += hi - lo;
    return bytes;
  }

  // Per repetition: a window of the writer without, with, and again without a helper thread that, from
  // the window's start, copies the bytes of version_ranges() into a slot-like mapping through
  // process_vm_readv in 2 MiB pieces and hashes them (xxh3, 1 MiB at a time), then stops. The helper
  // runs where the rank's threads may (one core when mpirun binds the rank), as cairn's copier and seal
  // do. The with-window against the mean of its neighbours is what that memory traffic alone costs the
  // writer: the share of cow's loss that is the copy and the hash done as cairn does them, apart from
  // the protection, the faults and the waits.
  void other_core(Writer writer, uint8_t* state, uint64_t size, int passes, ContentionSamples& c) {
    tenth_ = pick_tenth(size);
    passes = std::max(passes, 2);  // the cow sessions' window
    const auto ranges = version_ranges(writer, state, size);
    const uint64_t bytes = ranges_bytes(ranges);
    c.bytes = bytes;
    uint8_t* slot = map_slot_like(o_.cache_dir + "/cairn-" + o_.child_job + ".other.r" + std::to_string(g_rank), bytes);
    // One piece of work per go; the helper sleeps in between (a spinning helper would take the core).
    std::mutex mu;
    std::condition_variable cv;
    bool go = false, quit = false;
    double helper_s = 0;
    std::thread helper([&] {
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return go || quit; });
          if (quit) return;
        }
        double t0 = now();
        uint64_t h = 0;
        copy_ranges(slot, state, ranges, true);
        for (uint64_t off = 0; off < bytes; off += 1 << 20) h ^= XXH3_64bits(slot + off, std::min<uint64_t>(1 << 20, bytes - off));
        clobber(&h);
        std::lock_guard<std::mutex> lock(mu);
        helper_s = now() - t0;
        go = false;
        cv.notify_all();
      }
    });
    std::vector<double> window;
    alternate_windows(writer, state, size, passes, &window, &c.lost, [&] {
      double t0 = now();
      {
        std::lock_guard<std::mutex> lock(mu);
        go = true;
      }
      cv.notify_all();
      timed_window(writer, state, size, passes);
      double helper_ms = 0;
      {
        std::unique_lock<std::mutex> lock(mu);  // the helper's work is part of the version
        cv.wait(lock, [&] { return !go; });
        helper_ms = helper_s * 1e3;
      }
      double with = now() - t0;
      c.helper.push_back(max_over_ranks(helper_ms));
      return with;
    });
    {
      std::lock_guard<std::mutex> lock(mu);
      quit = true;
    }
    cv.notify_all();
    helper.join();
    munmap(slot, bytes);
  }

  // The tenth writer's version (version_ranges) copied into a slot-like mapping by two threads at once,
  // each taking every other 2 MiB piece through process_vm_readv, no writer and no cairn: what the
  // copier and the fault handler together move, as fast as they can here. A writer that rewrites its
  // tenth right after the checkpoint meets every block before it could be saved, so its loss is of
  // this order. Median of --reps after one untimed copy, the slowest rank's.
  double two_thread_copy_ms(uint8_t* state, uint64_t size) {
    tenth_ = pick_tenth(size);
    const auto ranges = version_ranges(Writer::tenth, state, size);
    const uint64_t bytes = ranges_bytes(ranges);
    uint8_t* slot = map_slot_like(o_.cache_dir + "/cairn-" + o_.child_job + ".two.r" + std::to_string(g_rank), bytes);
    std::vector<double> ms;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      const double t0 = now();
      std::thread other([&] { copy_ranges(slot, state, ranges, true, 2, 1); });
      copy_ranges(slot, state, ranges, true, 2, 0);
      other.join();
      const double t = max_over_ranks(now() - t0);
      if (i) ms.push_back(t * 1e3);
    }
    clobber(slot);
    munmap(slot, bytes);
    return median(ms);
  }

  json run_info() {
    json j = machine_info(load_start_, g_nranks);
    struct utsname u {};
    uname(&u);
    j["kernel"] = u.release;
    j["transparent_hugepages"] = first_line_of("/sys/kernel/mm/transparent_hugepage/enabled");
    j["reps"] = o_.reps;
    j["rounds"] = o_.rounds;
    // The CPUs each rank may run on: the copier needs one besides the application's (mpirun binds a
    // rank to one core by default; CAIRN_MPIRUN_ARGS="--bind-to none" lifts it).
    j["cpus_per_rank"] = job_.cpus_per_rank;
    j["statistic"] = "median of the repetitions of every session of a mode and writer (reps x rounds) of the slowest rank's time; complete and waits from rank 0's log";
    describe_dirs(j, o_.cache_dir, session_.dir(), session_.cache_job());
    j["config"] = "redundancy = single, flush_every = 0, cache_versions = 1 (L1 only)";
    j["loop"] = "w[i] = 3 w[i] + 1 over every 8-byte word of the state";
    j["writers"] = "all: the loop over the whole state each pass; 10pct: the loop over the same random tenth of the state's 2 MiB blocks each pass";
    j["app_lost"] = "median over reps of (cairn_checkpoint + a window of passes + cairn_wait) - the mean of the same passes without a checkpoint just before and just after";
    return j;
  }

  const Options& o_;
  const JobInfo& job_;
  Session session_;
  std::vector<uint64_t> tenth_;  // the 10 % writer's blocks
  double first_pass_ = 0;         // timed_window's first pass, seconds
  double load_start_ = 0;
};

}  // namespace

int run_snapshot(const Options& o, const JobInfo& job) {
  SnapshotBench(o, job).run();
  return 0;
}

}  // namespace cairn::bench
