// The default mode of cairn-bench, on every rank: memcpy, the codec against raw ISA-L, L1, L2 per scheme,
// L3 beside the raw write, and restart from each level. How each figure is measured: docs/performance.md.
#include "levels/levels.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include <isa-l/erasure_code.h>

#include "base/layout.hpp"
#include "base/stream_reader.hpp"
#include "base/units.hpp"
#include "base/xxh.hpp"
#include "levels/incremental_job.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_code.hpp"
#include "restore/mpi/set_rebuild.hpp"
#include "session.hpp"

namespace cairn::bench {
namespace {

const char* const kL2Schemes[] = {"partner", "xor", "rs"};
constexpr int kCodecK = 4, kCodecM = 2;  // the codec comparison: RS(k + m, k) on one core
// Seconds without new memory before slot_prepare_fresh_gbps: a guest with free page reporting hands
// free memory back to the host about two seconds after it was freed (docs/performance.md).
constexpr double kIdleBeforeFresh = 3.0;

class LevelBench {
 public:
  LevelBench(const Options& o) : o_(o), session_(o) {}

  LevelFigures run() {
    f_.dir = session_.dir();
    f_.prefix = session_.prefix();
    f_.cache_job = session_.cache_job();
    f_.size = size_ = o_.size;
    f_.load_start = loadavg_1m();
    if (const char* cv = getenv("CAIRN_CACHE_VERSIONS")) f_.cache_versions = std::max(1, atoi(cv));
    plan_sets();

    state_ = alloc_faulted(size_);
    fill_random(state_, size_, 1000 + static_cast<uint64_t>(g_rank));
    scratch_ = alloc_faulted(size_);

    bench_memcpy();
    if (o_.wants("codec")) bench_codec();
    if (o_.wants("l1")) bench_l1();
    // One rank is one failure group: no L2 (its figures stay null, run.skipped says why).
    if (o_.wants("l2") && g_nranks >= 2) {
      bench_mpi_exchange();
      bench_copy_exchange();
      for (const char* s : kL2Schemes) bench_l2(s);
    }
    if (o_.wants("l3")) {
      bench_raw_write();
      bench_l3();
    }
    if (o_.wants("incremental") && g_nranks >= 2)
      f_.extra["incremental_version"] = measure_incremental_job(
          session_, state_, size_, f_.cache_versions, o_.reps,
          [this] { CHECK_CAIRN(cairn_protect("state", state_, size_, CAIRN_BYTE)); });
    if (o_.wants("restart")) {
      if (!o_.wants("l3")) bench_raw_write();  // raw_read_gbps: the reference of restart_l3_gbps
      bench_restart_l1();
      if (g_nranks >= 2) bench_restart_l2();
      bench_restart_l3();
    }
    session_.clean_levels();
    free(state_);
    free(scratch_);
    return f_;
  }

 private:
  // ---- set-up -------------------------------------------------------------------------------------

  void plan_sets() {
    SetPlan p = default_sets(g_nranks);
    f_.set_size = p.set_size;
    f_.rs_parity = p.rs_parity;
    session_.set_sets(f_.set_size, f_.rs_parity);
  }

  void open_session(const char* redundancy, int flush_every) {
    session_.open(redundancy, flush_every, [this] { CHECK_CAIRN(cairn_protect("state", state_, size_, CAIRN_BYTE)); });
  }

  // warm + reps checkpoints, each followed by cairn_wait. Per timed one: the blocking time of
  // cairn_checkpoint and the time from its start until cairn_wait returns, both the slowest rank's.
  struct CkptTimes {
    std::vector<double> blocking, until_wait;
    std::vector<double> own_blocking;  // this rank's own, every checkpoint (warm-up included)
    double first_blocking = 0;       // the very first checkpoint's
    double slowest_warm_blocking = 0;  // the slowest of the warm-up's (each the first into its slot)
  };
  // `settle`, if given, runs after each cairn_wait (untimed) until the library's background work of
  // that version is over too (L3: rank 0's pruning of old versions, which cairn_wait does not wait for).
  // `compute_s` > 0: before each checkpoint the code computes that long (sweeps writing the state), as
  // a real code does between cairn_protect and its first checkpoint and between checkpoints.
  CkptTimes timed_checkpoints(int warm, const std::function<void()>& settle = {}, double compute_s = 0) {
    CkptTimes t;
    for (int i = 0; i < warm + o_.reps; ++i) {
      if (compute_s > 0) compute(compute_s);
      rewrite_a_word_per_page();  // every version differs from the one before in every chunk
      barrier();
      double t0 = now();
      CHECK_CAIRN(cairn_checkpoint());
      double t1 = now();
      CHECK_CAIRN(cairn_wait());
      double t2 = now();
      if (settle) settle();
      t.own_blocking.push_back(t1 - t0);
      double blocking = max_over_ranks(t1 - t0), until_wait = max_over_ranks(t2 - t0);
      if (i == 0) t.first_blocking = blocking;
      if (i < warm) t.slowest_warm_blocking = std::max(t.slowest_warm_blocking, blocking);
      if (i >= warm) {
        t.blocking.push_back(blocking);
        t.until_wait.push_back(until_wait);
      }
    }
    return t;
  }

  // One word of every 4 KiB page changed (untimed): every chunk of the next version differs from the
  // last one's, as in a state rewritten between checkpoints, so that L1 and L2 move whole versions, not
  // the changes only (which they do where the copy knows each chunk's hash before the exchange).
  void rewrite_a_word_per_page() {
    auto* w = reinterpret_cast<uint64_t*>(state_);
    for (uint64_t i = 0; i < size_ / sizeof(uint64_t); i += 4096 / sizeof(uint64_t)) w[i] += 1;
    clobber(state_);
  }

  // Sweeps over the state, each writing every word, until `seconds` passed (on every rank; untimed).
  void compute(double seconds) {
    auto* w = reinterpret_cast<uint64_t*>(state_);
    const uint64_t n = size_ / sizeof(uint64_t);
    double t0 = now();
    do {
      for (uint64_t i = 0; i < n; ++i) w[i] = w[i] * 6364136223846793005ull + 1442695040888963407ull;
      clobber(state_);
    } while (now() - t0 < seconds);
    barrier();
  }

  // The library's timings of the timed versions (after the warm-up ones), with the bench's own.
  json stages_of(const CkptTimes& t) {
    json s = stage_json(history_stage_times(session_, static_cast<uint64_t>(f_.cache_versions) + 1), size_);
    s["blocking_ms"] = round3(median(t.blocking) * 1e3);
    s["until_wait_ms"] = round3(median(t.until_wait) * 1e3);
    return s;
  }

  // ---- memcpy ---------------------------------------------------------------------------------------

  void bench_memcpy() {
    // One core: rank 0 copies while the others wait in a barrier.
    std::vector<double> one, all, shm;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      if (g_rank == 0) {
        double t0 = now();
        memcpy(scratch_, state_, size_);
        clobber(scratch_);
        if (i) one.push_back(now() - t0);
      }
      barrier();
    }
    // Every rank at once (what the ranks of a node share during a checkpoint).
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      double t0 = now();
      memcpy(scratch_, state_, size_);
      clobber(scratch_);
      double t = max_over_ranks(now() - t0);
      if (i) all.push_back(t);
    }
    // One core preparing a slot (a new file in cache_dir allocated and mapped populated, as the cache's
    // background preparation does): what the first checkpoint into a slot costs where the preparation
    // has not finished before it (l1_checkpoint_first_gbps).
    std::vector<double> prep;
    if (g_rank == 0) {
      for (int i = 0; i < 1 + o_.reps; ++i) {
        double t0 = now();
        uint8_t* p = map_slot_like(o_.cache_dir + "/cairn-" + o_.child_job + ".prepare", size_);
        double t = now() - t0;
        munmap(p, size_);
        if (i) prep.push_back(t);
      }
    }
    // One core into a pre-faulted shared mapping of a file in cache_dir (what an L1 slot is). The first
    // pass is the first write of pages that are allocated and populated but were never written:
    // slot_first_write_gbps, the bound of a first checkpoint into a slot prepared in the background
    // where populating a page does not make its first write cheap (docs/performance.md).
    double first_write = 0;
    if (g_rank == 0) {
      uint8_t* p = map_slot_like(o_.cache_dir + "/cairn-" + o_.child_job + ".memcpy", size_);
      for (int i = 0; i < 1 + o_.reps; ++i) {
        double t0 = now();
        memcpy(p, state_, size_);
        clobber(p);
        if (i) shm.push_back(now() - t0);
        else first_write = now() - t0;
      }
      munmap(p, size_);
    }
    // Every rank at once preparing a slot as the cache does, after kIdleBeforeFresh seconds in which no
    // rank touched new memory: the pages then come from memory that was free for a while, as a job's first
    // slots' do. Where the machine hands such memory back to the host (a guest with free page reporting:
    // run.free_page_reporting) its first touch waits for the host, and slot_prepare_gbps, measured on
    // pages rank 0 had just freed, does not show it. There slot_prepare_fresh_gbps bounds the first
    // checkpoints, with slot_first_write_gbps (targets.l1_checkpoint_first.ratio_vs_slot_prepare_fresh).
    barrier();
    std::this_thread::sleep_for(std::chrono::duration<double>(kIdleBeforeFresh));
    barrier();
    {
      double t0 = now();
      uint8_t* p = map_slot_like(o_.cache_dir + "/cairn-" + o_.child_job + ".fresh." + std::to_string(g_rank), size_);
      double t = max_over_ranks(now() - t0);
      munmap(p, size_);
      f_.slot_prepare_fresh_s = t;
    }
    barrier();
    f_.figures["memcpy_gbps"] = gbps(size_, median(one));
    f_.extra["memcpy_all_ranks_gbps"] = gbps(size_, median(all));
    f_.memcpy_all_s = median(all);
    f_.extra["memcpy_shm_gbps"] = gbps(size_, median(shm));
    f_.extra["slot_prepare_gbps"] = gbps(size_, median(prep));
    f_.extra["slot_first_write_gbps"] = gbps(size_, first_write);
    f_.extra["slot_prepare_fresh_gbps"] = gbps(size_, f_.slot_prepare_fresh_s);
    f_.slot_first_write_s = first_write;
    f_.memcpy_s = median(one);
  }

  // ---- codec: raw ISA-L against cairn's SetCode, one core --------------------------------------------

  void bench_codec() {
    size_t len = static_cast<size_t>(size_ / kCodecK) / 64 * 64;
    if (len == 0) die("--size is too small for the codec comparison (k = %d)", kCodecK);
    uint64_t bytes = static_cast<uint64_t>(len) * kCodecK;
    std::vector<double> isal, ours;
    bool identical = true;
    if (g_rank == 0) {
      uint8_t* par = alloc_faulted(2 * kCodecM * static_cast<uint64_t>(len));
      const uint8_t* data[kCodecK];
      uint8_t* p_isal[kCodecM];
      uint8_t* p_ours[kCodecM];
      for (int j = 0; j < kCodecK; ++j) data[j] = state_ + static_cast<size_t>(j) * len;
      for (int p = 0; p < kCodecM; ++p) {
        p_isal[p] = par + static_cast<size_t>(p) * len;
        p_ours[p] = par + static_cast<size_t>(kCodecM + p) * len;
      }
      // Raw ISA-L: the Cauchy matrix cairn documents for rs, tables expanded once (as cairn does).
      std::vector<uint8_t> matrix(static_cast<size_t>(kCodecK + kCodecM) * kCodecK), tables(32 * kCodecK * kCodecM);
      gf_gen_cauchy1_matrix(matrix.data(), kCodecK + kCodecM, kCodecK);
      ec_init_tables(kCodecK, kCodecM, &matrix[kCodecK * kCodecK], tables.data());
      auto code = cairn::redundancy::SetCode::make(cairn::Redundancy::rs, kCodecK + kCodecM, kCodecM);
      if (!code) die("SetCode::make(rs, %d, %d): %s", kCodecK + kCodecM, kCodecM, code.status().message().c_str());
      constexpr size_t kMaxLen = size_t{1} << 30;  // ec_encode_data takes an int length
      auto raw = [&] {
        double t0 = now();
        for (size_t off = 0; off < len; off += kMaxLen) {
          size_t n = std::min(kMaxLen, len - off);
          unsigned char* s[kCodecK];
          unsigned char* d[kCodecM];
          for (int j = 0; j < kCodecK; ++j) s[j] = const_cast<uint8_t*>(data[j]) + off;
          for (int p = 0; p < kCodecM; ++p) d[p] = p_isal[p] + off;
          ec_encode_data(static_cast<int>(n), kCodecK, kCodecM, tables.data(), s, d);
        }
        clobber(par);
        return now() - t0;
      };
      auto cairn = [&] {
        double t0 = now();
        code->encode_stripe(len, data, p_ours);
        clobber(par);
        return now() - t0;
      };
      // Two warm-up rounds, then the order alternates so that neither side always runs second.
      for (int i = 0; i < 2 + o_.reps; ++i) {
        double a, b;
        if (i % 2) b = cairn(), a = raw();
        else a = raw(), b = cairn();
        if (i >= 2) isal.push_back(a), ours.push_back(b);
      }
      for (int p = 0; p < kCodecM; ++p) identical = identical && memcmp(p_isal[p], p_ours[p], len) == 0;
      free(par);
    }
    barrier();
    f_.figures["isal_rs_encode_gbps"] = gbps(bytes, median(isal));
    f_.figures["rs_encode_gbps"] = gbps(bytes, median(ours));
    f_.isal_s = median(isal);
    f_.rs_s = median(ours);
    f_.extra["codec"] = {{"k", kCodecK}, {"m", kCodecM}, {"shard_bytes", len}, {"parity_identical", identical}};
    if (g_rank == 0 && !identical) die("cairn's rs parity differs from raw ISA-L's on the same data and matrix");
  }

  // ---- L1 and L2 ----------------------------------------------------------------------------------------

  void bench_l1() {
    session_.clean_levels();
    open_session("single", 0);
    // The first cache_versions checkpoints are the warm-up (each the first of its slot); the code
    // computes before every checkpoint (the time a real code has between cairn_protect and its first
    // checkpoint, in which the library prepares the slots): 10 memcpys of the state, at least 0.25 s.
    double compute_s = std::max(0.25, 10 * f_.memcpy_s);
    CkptTimes t = timed_checkpoints(f_.cache_versions, {}, compute_s);
    session_.close();
    f_.figures["l1_checkpoint_gbps"] = gbps(size_, median(t.blocking));
    f_.l1_s = median(t.blocking);
    // The first checkpoints: the slowest of the warm-up, each the first into its slot (a preparation
    // that only moved its cost from the first to the second would show here), and the very first.
    f_.extra["l1_checkpoint_first_gbps"] = gbps(size_, t.slowest_warm_blocking);
    f_.extra["l1_checkpoint_very_first_gbps"] = gbps(size_, t.first_blocking);
    f_.l1_first_s = t.slowest_warm_blocking;
    f_.extra["l1_compute_between_s"] = round3(compute_s);
    f_.stages["l1"] = stages_of(t);
    f_.l1_first_split = first_checkpoints_split(t);
  }

  // Rank 0's checkpoints split into the copy (the library's copy_s, from the history: from mapping the
  // slot, a wait for its preparation included, to the end of the snapshot) and the rest of its
  // cairn_checkpoint (describing the version, choosing, lending and releasing the slot, the hand-over,
  // and any time the core went to other threads or processes): the warm-up's one by one, the later
  // ones' medians. Says it for rank 0; the target's first checkpoint is the slowest rank's. Null on the
  // other ranks, and where the history does not have one copy per checkpoint or a copy longer than its
  // checkpoint (the two clocks differ by more than 0.05 ms: the pairing is wrong).
  json first_checkpoints_split(const CkptTimes& t) {
    const std::vector<double> copy = history_stage_times(session_, 1).copy;  // ms, version 1 on
    if (g_rank != 0 || copy.size() != t.own_blocking.size() || copy.size() <= static_cast<size_t>(f_.cache_versions))
      return nullptr;
    json first_copy = json::array(), first_rest = json::array();
    std::vector<double> later_copy, later_rest;
    for (size_t i = 0; i < copy.size(); ++i) {
      const double rest = t.own_blocking[i] * 1e3 - copy[i];
      if (rest < -0.05) return nullptr;
      if (i < static_cast<size_t>(f_.cache_versions)) {
        first_copy.push_back(round3(copy[i]));
        first_rest.push_back(round3(rest));
      } else {
        later_copy.push_back(copy[i]);
        later_rest.push_back(rest);
      }
    }
    return {{"copy_ms", first_copy}, {"after_copy_ms", first_rest}, {"later_copy_ms", round3(median(later_copy))},
            {"later_after_copy_ms", round3(median(later_rest))}};
  }

  // mpi_exchange_gbps: the limit of L2 on this MPI: every rank sends its state to the next rank and
  // receives the previous rank's, in the L2 exchange's messages (exchange_chunk, CAIRN_EXCHANGE_CHUNK,
  // default 4 MiB), all posted at once, from and into pre-faulted memory -- the bytes a partner set
  // moves per rank, and as many as each xor or rs member sends while it encodes. Slowest rank's time.
  // The exchange_chunk knob as the sessions get it (CAIRN_EXCHANGE_CHUNK, else its default).
  static uint64_t exchange_chunk_setting() {
    uint64_t chunk = 4ull << 20;
    if (const char* e = getenv("CAIRN_EXCHANGE_CHUNK")) {
      auto parsed = cairn::units::parse_size(e, 1ull << 30);
      if (parsed && *parsed > 0) chunk = *parsed;
    }
    return chunk;
  }

  void bench_mpi_exchange() {
    const uint64_t chunk = exchange_chunk_setting();
    const int next = (g_rank + 1) % g_nranks, prev = (g_rank + g_nranks - 1) % g_nranks;
    std::vector<double> t;
    std::vector<MPI_Request> reqs;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      reqs.clear();
      barrier();
      double t0 = now();
      for (uint64_t off = 0; off < size_; off += chunk) {
        const int n = static_cast<int>(std::min(chunk, size_ - off));
        reqs.emplace_back();
        MPI_Irecv(scratch_ + off, n, MPI_BYTE, prev, 77, MPI_COMM_WORLD, &reqs.back());
        reqs.emplace_back();
        MPI_Isend(state_ + off, n, MPI_BYTE, next, 77, MPI_COMM_WORLD, &reqs.back());
      }
      MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
      double s = max_over_ranks(now() - t0);
      if (i) t.push_back(s);
    }
    f_.extra["mpi_exchange_gbps"] = gbps(size_, median(t));
    f_.mpi_exchange_s = median(t);
    f_.extra["mpi_exchange_chunk"] = chunk;
    exchange_chunk_ = chunk;
  }

  // copy_exchange_gbps: the least time in which a rank both copies its state into a mapped file of
  // cache_dir (as the L1 copy writes its slot) and exchanges that copy, received into another such file
  // (as partner's redundancy file), with the rank's own thread doing both: the bound of an L2 version's
  // protection (l2_*_gbps counts from the start of cairn_checkpoint) where the exchange costs the rank's
  // CPU, as a shared-memory exchange does. The faster of two ways, both slowest rank's: one after the
  // other (copy_exchange.serial_gbps), and the exchange's receives posted first with each piece sent as
  // soon as it is copied, testing the requests between pieces (copy_exchange.overlapped_gbps).
  void bench_copy_exchange() {
    const uint64_t chunk = exchange_chunk_;
    const int next = (g_rank + 1) % g_nranks, prev = (g_rank + g_nranks - 1) % g_nranks;
    const std::string base = o_.cache_dir + "/cairn-" + o_.child_job + ".r" + std::to_string(g_rank);
    uint8_t* copy = map_slot_like(base + ".copy", size_);
    uint8_t* into = map_slot_like(base + ".received", size_);
    std::vector<double> serial, overlapped;
    std::vector<MPI_Request> recvs, sends;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      for (bool overlap : {false, true}) {
        recvs.clear();
        sends.clear();
        barrier();
        double t0 = now();
        if (!overlap) memcpy(copy, state_, size_);
        for (uint64_t off = 0; off < size_; off += chunk) {
          recvs.emplace_back();
          MPI_Irecv(into + off, static_cast<int>(std::min(chunk, size_ - off)), MPI_BYTE, prev, 78, MPI_COMM_WORLD,
                    &recvs.back());
        }
        for (uint64_t off = 0; off < size_; off += chunk) {
          const int n = static_cast<int>(std::min(chunk, size_ - off));
          if (overlap) {
            memcpy(copy + off, state_ + off, static_cast<size_t>(n));
            int flag = 0;
            MPI_Testall(static_cast<int>(recvs.size()), recvs.data(), &flag, MPI_STATUSES_IGNORE);
          }
          sends.emplace_back();
          MPI_Isend(copy + off, n, MPI_BYTE, next, 78, MPI_COMM_WORLD, &sends.back());
        }
        MPI_Waitall(static_cast<int>(recvs.size()), recvs.data(), MPI_STATUSES_IGNORE);
        MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
        clobber(copy);
        double s = max_over_ranks(now() - t0);
        if (i) (overlap ? overlapped : serial).push_back(s);
      }
    }
    munmap(copy, size_);
    munmap(into, size_);
    f_.copy_exchange_s = std::min(median(serial), median(overlapped));
    f_.extra["copy_exchange_gbps"] = gbps(size_, f_.copy_exchange_s);
    f_.extra["copy_exchange"] = {{"serial_gbps", gbps(size_, median(serial))},
                                 {"overlapped_gbps", gbps(size_, median(overlapped))}};
  }

  void bench_l2(const char* scheme) {
    session_.clean_levels();
    open_session(scheme, 0);
    CkptTimes t = timed_checkpoints(f_.cache_versions);
    session_.close();
    f_.figures[std::string("l2_") + scheme + "_gbps"] = gbps(size_, median(t.until_wait));
    f_.l2_s[scheme] = median(t.until_wait);
    f_.stages[std::string("l2_") + scheme] = stages_of(t);
  }

  // ---- L3 ---------------------------------------------------------------------------------------------

  // write(2) in the L3 writer's pieces + fsync of a new file in the prefix directory, every rank at
  // once (as the ranks flush at once); then reading it back from the device; then the same write over
  // the file's own blocks (no O_TRUNC), as a flush into a recycled file (recycle_flushed) does.
  void bench_raw_write() {
    session_.clean_levels();
    const std::string& prefix = session_.prefix();
    if (g_rank == 0) {
      std::error_code ec;
      stdfs::create_directories(prefix, ec);
      if (ec) die("mkdir %s: %s", prefix.c_str(), ec.message().c_str());
    }
    barrier();
    std::string path = prefix + "/raw-write.r" + std::to_string(g_rank);
    std::vector<double> wr, rd, ow;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      barrier();
      double t0 = now();
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
      write_all(fd, state_, size_, path);
      if (fsync(fd) != 0) die("fsync %s: %s", path.c_str(), strerror(errno));
      close(fd);
      double t = max_over_ranks(now() - t0);
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      barrier();
      t0 = now();
      read_all(fd, scratch_, size_, path);
      double tr = max_over_ranks(now() - t0);
      close(fd);
      barrier();
      t0 = now();
      fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
      write_all(fd, state_, size_, path);
      if (fsync(fd) != 0) die("fsync %s: %s", path.c_str(), strerror(errno));
      close(fd);
      double to = max_over_ranks(now() - t0);
      if (unlink(path.c_str()) != 0) die("unlink %s: %s", path.c_str(), strerror(errno));
      if (i) wr.push_back(t), rd.push_back(tr), ow.push_back(to);
    }
    f_.figures["raw_write_gbps"] = gbps(size_, median(wr));
    f_.extra["raw_read_gbps"] = gbps(size_, median(rd));
    f_.extra["raw_overwrite_gbps"] = gbps(size_, median(ow));
    f_.raw_write_s = median(wr);
    f_.raw_read_s = median(rd);
    f_.raw_overwrite_s = median(ow);
  }

  // Rank 0 prunes L3 to keep_flushed versions after a flushed version left the pipeline, so cairn_wait
  // returns before the deletions are done. Wait (untimed) until the prefix holds no more than
  // keep_flushed version directories, so that the next flush starts with an idle pipeline; 10 s at most.
  void wait_for_prune() {
    if (g_rank == 0) {
      int keep = 2;
      if (const char* k = getenv("CAIRN_KEEP_FLUSHED")) keep = std::max(1, atoi(k));
      for (int tries = 0; tries < 10000; ++tries) {
        std::error_code ec;
        int versions = 0;
        for (auto it = stdfs::directory_iterator(session_.prefix(), ec); !ec && it != stdfs::directory_iterator();
             it.increment(ec)) {
          uint64_t v = 0;
          if (cairn::Layout::parse_l3_version_name(it->path().filename().string(), &v)) ++versions;
        }
        if (versions <= keep) break;
        usleep(1000);
      }
    }
    barrier();
  }

  void bench_l3() {
    session_.clean_levels();
    open_session("single", 1);
    // The target figure: every flush starts with an idle pipeline (the previous version's pruning done).
    CkptTimes t = timed_checkpoints(f_.cache_versions, [this] { wait_for_prune(); });
    session_.close();
    f_.figures["l3_flush_gbps"] = gbps(size_, median(t.until_wait));
    f_.l3_s = median(t.until_wait);
    StageTimes st = history_stage_times(session_, static_cast<uint64_t>(f_.cache_versions) + 1);
    f_.figures["l3_flush_stage_gbps"] = st.l3.empty() ? json(nullptr) : gbps(size_, median(st.l3) / 1e3);
    f_.stages["l3"] = stages_of(t);
    // Back to back: the next checkpoint right after cairn_wait returns, while rank 0 may still be
    // pruning (its worker prunes before it takes up the next version), as for an application that
    // flushes every checkpoint with nothing to compute in between.
    session_.clean_levels();
    open_session("single", 1);
    CkptTimes b = timed_checkpoints(f_.cache_versions);
    session_.close();
    f_.extra["l3_flush_back_to_back_gbps"] = gbps(size_, median(b.until_wait));
    f_.l3_back_to_back_s = median(b.until_wait);
    f_.stages["l3_back_to_back"] = stages_of(b);
  }

  // ---- restart ----------------------------------------------------------------------------------------

  // One version of the state, taken and completed at every level the configuration asks for.
  uint64_t take_reference_version(const char* redundancy, int flush_every) {
    session_.clean_levels();
    reinterpret_cast<uint64_t*>(state_)[0] += 1;
    uint64_t hash = XXH3_64bits(state_, size_);
    open_session(redundancy, flush_every);
    CHECK_CAIRN(cairn_checkpoint());
    CHECK_CAIRN(cairn_wait());
    session_.close();
    return hash;
  }

  // `reps` times: remove what `lose` removes, fresh cairn_init, time cairn_restart (slowest rank),
  // check the level it came from and the bytes it restored.
  std::vector<double> timed_restarts(const char* redundancy, int flush_every, uint64_t hash, int want_level,
                                     const std::function<void()>& lose, bool available_first = true) {
    std::vector<double> times;
    for (int i = 0; i < o_.reps; ++i) {
      auto r = session_.timed_restart(redundancy, flush_every, want_level, lose, [this] { memset(state_, 0, size_); },
                                      [this] { CHECK_CAIRN(cairn_protect("state", state_, size_, CAIRN_BYTE)); },
                                      available_first);
      if (XXH3_64bits(state_, size_) != hash) die("restart from L%d restored different bytes", want_level);
      times.push_back(r.seconds);
    }
    return times;
  }

  // The headline: cairn_restart_available() + cairn_restart(), as applications call them; the second
  // figure cairn_restart() alone. Then the machine's own limit on reading that slot back.
  void bench_restart_l1() {
    uint64_t hash = take_reference_version("single", 0);
    auto t = timed_restarts("single", 0, hash, CAIRN_LEVEL_L1, [] {});
    f_.figures["restart_l1_gbps"] = gbps(size_, median(t));
    f_.restart_l1_s = median(t);
    auto alone = timed_restarts("single", 0, hash, CAIRN_LEVEL_L1, [] {}, false);
    f_.extra["restart_l1_call_alone_gbps"] = gbps(size_, median(alone));
    bench_slot_read();
  }

  // slot_read_gbps: what reading this rank's L1 slot into private memory costs on this machine
  // (timed_slot_read, session.hpp).
  void bench_slot_read() {
    std::string path = newest_slot_file(session_);
    SlotRead r = timed_slot_read(path, state_, size_, o_.reps);
    f_.slot_read_s = r.best_s();
    f_.slot_read_first_s = std::min(r.pread_first_s, r.map_memcpy_first_s);
    f_.figures["slot_read_gbps"] = gbps(size_, f_.slot_read_s);
    f_.extra["slot_read"] = {{"pread_gbps", gbps(size_, r.pread_s)},
                             {"map_memcpy_gbps", gbps(size_, r.map_memcpy_s)},
                             {"pread_first_gbps", gbps(size_, r.pread_first_s)},
                             {"map_memcpy_first_gbps", gbps(size_, r.map_memcpy_first_s)},
                             {"file", path}};
  }

  void bench_restart_l2() {
    uint64_t hash = take_reference_version("xor", 0);
    std::string lost = session_.cache_job() + "/node" + std::to_string(g_nranks - 1);
    auto t = timed_restarts("xor", 0, hash, CAIRN_LEVEL_L2, [&] {
      std::error_code ec;
      if (stdfs::remove_all(lost, ec) == 0 || ec) die("cannot remove the cache of the lost node %s", lost.c_str());
    });
    f_.figures["restart_l2_gbps"] = gbps(size_, median(t));
    f_.restart_l2_s = median(t);
    f_.extra["restart_l2_lost"] = "node" + std::to_string(g_nranks - 1) + " (xor)";
    bench_mpi_receive();
  }

  // mpi_receive_gbps: the transfer of restart_l2 alone, nothing verified or placed. The rank whose cache
  // restart_l2 removes receives a state's bytes from rank 0 over the same MPI and from and into the same
  // kinds of memory as in its restart: rank 0 sends from its L1 slot file, mapped anew each time and
  // within the timing, as a restarting survivor maps its cache's files (populated where they lie on huge
  // pages, else faulted in as the transfer reads them: restore::Populate::where_huge_pages); the
  // pieces are of at most kLandingPiece, as many in flight as the L2 exchange keeps for steps of one piece
  // (exchange_depth: restart_l2's xor of two; an xor or rs step of a larger set holds k pieces, fewer fly),
  // received into a ring of such pieces reused (the landing buffers: huge-page aligned and advised,
  // written once before). Every scheme moves at least this to a lost rank (xor and rs: k times as many
  // bytes). The slowest of the two, median of reps after one untimed.
  void bench_mpi_receive() {
    const int from = 0, to = g_nranks - 1;
    const uint64_t piece = std::min<uint64_t>(exchange_chunk_setting(), cairn::restore::kLandingPiece);
    const int depth = cairn::redundancy::exchange_depth(piece);
    const uint64_t steps = (size_ + piece - 1) / piece;
    const size_t huge = size_t{2} << 20;
    const size_t ring_len = (static_cast<size_t>(depth) * piece + huge - 1) / huge * huge;
    void* ring_mem = nullptr;
    if (posix_memalign(&ring_mem, huge, ring_len) != 0) die("bench_mpi_receive: out of memory");
    (void)madvise(ring_mem, ring_len, MADV_HUGEPAGE);
    auto* ring = static_cast<uint8_t*>(ring_mem);
    memset(ring, 0, ring_len);
    const std::string path = g_rank == from ? newest_slot_file(session_, from) : std::string();
    std::vector<MPI_Request> reqs(static_cast<size_t>(depth), MPI_REQUEST_NULL);
    std::vector<double> t;
    for (int i = 0; i < 1 + o_.reps; ++i) {
      void* map = MAP_FAILED;
      barrier();
      double t0 = now();
      if (g_rank == from) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) die("open %s: %s", path.c_str(), strerror(errno));
        const bool populate = cairn::map_to_read(static_cast<uint64_t>(st.st_blksize));
        map = mmap(nullptr, size_, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
        close(fd);
        if (map == MAP_FAILED) die("mmap %s: %s", path.c_str(), strerror(errno));
      }
      const auto* source = static_cast<const uint8_t*>(map);
      if (g_rank == from || g_rank == to) {
        for (uint64_t s = 0; s < steps; ++s) {
          MPI_Request& r = reqs[static_cast<size_t>(s % static_cast<uint64_t>(depth))];
          MPI_Wait(&r, MPI_STATUS_IGNORE);  // the slot's previous piece (MPI_REQUEST_NULL: none)
          const uint64_t off = s * piece;
          const int n = static_cast<int>(std::min(piece, size_ - off));
          if (g_rank == to)
            MPI_Irecv(ring + (s % static_cast<uint64_t>(depth)) * piece, n, MPI_BYTE, from, 78, MPI_COMM_WORLD, &r);
          else
            MPI_Isend(source + off, n, MPI_BYTE, to, 78, MPI_COMM_WORLD, &r);
        }
        MPI_Waitall(depth, reqs.data(), MPI_STATUSES_IGNORE);
      }
      double s = max_over_ranks(now() - t0);
      if (i) t.push_back(s);
      if (map != MAP_FAILED) munmap(map, size_);
    }
    free(ring_mem);
    f_.extra["mpi_receive_gbps"] = gbps(size_, median(t));
    f_.extra["mpi_receive_piece"] = piece;
    f_.mpi_receive_s = median(t);
  }

  void bench_restart_l3() {
    uint64_t hash = take_reference_version("single", 1);
    std::string prefix = session_.prefix(), cache = session_.cache_job();
    auto t = timed_restarts("single", 1, hash, CAIRN_LEVEL_L3, [&] {
      std::error_code ec;
      if (stdfs::remove_all(cache, ec) == 0 || ec) die("cannot remove the cache %s", cache.c_str());
      evict(prefix);
    });
    f_.figures["restart_l3_gbps"] = gbps(size_, median(t));
    f_.restart_l3_s = median(t);
  }

  const Options& o_;
  Session session_;
  LevelFigures f_;
  uint64_t size_ = 0;
  uint8_t* state_ = nullptr;
  uint8_t* scratch_ = nullptr;
  uint64_t exchange_chunk_ = 4ull << 20;  // the L2 exchange's message size (bench_mpi_exchange)
};

}  // namespace

int run_levels(const Options& o, const JobInfo& job) {
  LevelBench b(o);
  LevelFigures f = b.run();
  if (g_rank == 0) report_levels(o, job, f);
  return 0;
}

}  // namespace cairn::bench
