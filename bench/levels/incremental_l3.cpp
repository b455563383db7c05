// cairn-bench --incremental (incremental_l3.hpp): the L3 bytes and the restart speed of an incremental
// version against a full one, in this process, through the library's own writer and reader; and the L1
// copy of the same change (l1_incremental): the copy snapshotter told what its slot holds, against the
// plain copy (a memcpy of the state) and the seal's hashing that a plain copy leaves to the worker.
#include "levels/incremental_l3.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "base/fsutil.hpp"
#include "base/layout.hpp"
#include "cache/cow/cow_snapshot.hpp"
#include "cache/snapshot.hpp"
#include "bench.hpp"
#include "l3/l3_store.hpp"

namespace cairn::bench {
namespace {

constexpr uint32_t kChunk = 1u << 20;  // the chunk_size knob's default
constexpr uint64_t kBlock = 2u << 20;  // the application writes its state in blocks of this

uint64_t file_bytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The L3 bytes of one rank of version v: every file of it in the version directory.
uint64_t version_bytes(const Layout& l, uint64_t v) {
  uint64_t total = 0;
  for (const std::string& p : {l3::data_path(l, v, 0), l3::manifest_path(l, v, 0), l3::chunks_path(l, v, 0)})
    total += file_bytes(p);
  return total;
}

// The application's state: anonymous memory aligned to 2 MiB (its blocks are the huge pages that
// copy-on-write protects whole), as a solver's large arrays are.
struct State {
  explicit State(uint64_t n) : size_(n) {
    const uint64_t huge = 2 << 20;
    map_len_ = n + huge;
    void* m = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) die("mmap of %llu bytes: %s", static_cast<unsigned long long>(map_len_), strerror(errno));
    map_ = static_cast<uint8_t*>(m);
    p_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uint64_t>(map_) + huge - 1) & ~(huge - 1));
  }
  ~State() { munmap(map_, map_len_); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  uint64_t size() const { return size_; }
  uint8_t& operator[](uint64_t i) { return p_[i]; }

 private:
  uint8_t *map_ = nullptr, *p_ = nullptr;
  uint64_t map_len_ = 0, size_ = 0;
};

Manifest manifest_of(const State& data, uint64_t v) {
  Manifest m;
  m.version = v;
  m.nranks = 1;
  m.chunk_size = kChunk;
  m.total_size = data.size();
  RegionEntry e;
  e.name = "state";
  e.count = e.size = data.size();
  m.regions.push_back(e);
  m.chunk_hashes = chunk_hashes(data.data(), data.size(), kChunk);
  return m;
}

// The raw write of `len` bytes to a new file, as L3's limit: pwrite in 64 MiB pieces, fsync.
double raw_write(const std::string& path, const uint8_t* data, uint64_t len) {
  double t0 = now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  for (uint64_t off = 0; off < len;) {
    ssize_t n = ::pwrite(fd, data + off, std::min<uint64_t>(len - off, 64ull << 20), static_cast<off_t>(off));
    if (n <= 0) break;
    off += static_cast<uint64_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  double t = now() - t0;
  ::unlink(path.c_str());
  return t;
}

Status timed_read(const Layout& l, uint64_t v, std::vector<uint8_t>* into, double* seconds) {
  CAIRN_ASSIGN_OR_RETURN(m, l3::read_manifest(l, v, 0));
  double t0 = now();
  CAIRN_TRY(l3::read_data_verified(l, m, whole_stream(m, into->data())));
  *seconds = now() - t0;
  return Status::ok();
}

}  // namespace

int run_incremental(const IncrementalOptions& o) {
  uint64_t size = 0;
  if (!parse_size(o.size_text, &size) || size < kChunk) {
    fprintf(stderr, "cairn-bench: --incremental: --size %s: expected at least 1M\n", o.size_text.c_str());
    return 2;
  }
  Config cfg;
  cfg.prefix = o.prefix_base + "/cairn-bench-incremental-" + std::to_string(getpid());
  cfg.cache_dir = cfg.prefix + "/cache";
  Layout l = make_layout(cfg);
  if (Status st = fs::make_dirs(l.prefix); !st.is_ok()) {
    fprintf(stderr, "cairn-bench: --incremental: %s\n", st.message().c_str());
    return 1;
  }
  const double load_start = loadavg_1m();
  State state(size);
  std::vector<uint8_t> back(size);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= state.size(); i += 8) {
    uint64_t x = rng();
    memcpy(&state[i], &x, 8);
  }
  const uint64_t nchunks = (size + kChunk - 1) / kChunk;
  std::vector<double> full_s, incr_s, raw_s, read_full_s, read_incr_s, l1_full_s, l1_hash_s, l1_incr_s;
  uint64_t l1_unchanged = 0;
  // The L1 slot: touched once, as a slot that held versions before is.
  std::vector<uint8_t> slot(size, 0);
  auto copier = make_copy_snapshotter();
  uint64_t full_bytes = 0, incr_bytes = 0, changed_bytes = 0;
  // Copy-on-write with write tracking (the snapshotter the library takes by default where it can): a
  // full snapshot, then the incremental one into the same slot, told which snapshot the slot holds.
  auto cow_made = make_cow_snapshotter();
  std::unique_ptr<Snapshotter> cow = cow_made.is_ok() ? std::move(cow_made).value() : nullptr;
  std::vector<uint8_t> cow_slot(cow ? size : 0, 0);
  std::vector<double> cow_full_s, cow_full_block_s, cow_incr_s, cow_incr_block_s, cow_hash_s;
  uint64_t cow_full_copied = 0, cow_incr_copied = 0, cow_changed_chunks = 0;
  // One cow snapshot into cow_slot (the previous one it holds told when `gen`): begin .. complete and the
  // blocking part of it appended to `total` and `blocking`.
  auto timed_cow = [&](const std::vector<SnapshotRegion>& regions, const std::vector<uint64_t>& held, uint64_t gen,
                       std::vector<double>* total, std::vector<double>* blocking) -> Status {
    cow->set_chunking(kChunk, size);
    if (gen) cow->set_previous(held, gen);
    const double t0 = now();
    CAIRN_TRY(cow->begin(regions, cow_slot.data()));
    const double tb = now();
    CAIRN_TRY(cow->complete());
    blocking->push_back(tb - t0);
    total->push_back(now() - t0);
    return Status::ok();
  };
  auto fail = [&](const Status& st) {
    fprintf(stderr, "cairn-bench: --incremental: %s\n", st.message().c_str());
    fs::remove_tree(cfg.prefix).ignore();
    return 1;
  };
  for (int rep = 0; rep < o.reps; ++rep) {
    const uint64_t vf = 2 * static_cast<uint64_t>(rep) + 1, vi = vf + 1;
    l3::WriteOptions full, incremental;
    incremental.full_every = 16;
    Manifest mf = manifest_of(state, vf);
    double t0 = now();
    if (Status st = l3::write_rank(l, mf, state.data(), {}, &full); !st.is_ok()) return fail(st);
    full_s.push_back(now() - t0);
    if (Status st = l3::commit(l, vf, 1, ""); !st.is_ok()) return fail(st);
    raw_s.push_back(raw_write(l.prefix + "/raw", state.data(), size));
    // L1, the full version: the plain copy (blocking), then the seal's hashing of the slot (worker).
    const std::vector<SnapshotRegion> regions{{"state", state.data(), size, 0}};
    t0 = now();
    copier->set_chunking(kChunk, size);
    if (Status st = copier->begin(regions, slot.data()); !st.is_ok()) return fail(st);
    l1_full_s.push_back(now() - t0);
    t0 = now();
    const std::vector<uint64_t> held = chunk_hashes(slot.data(), size, kChunk);
    l1_hash_s.push_back(now() - t0);
    uint64_t cow_gen = 0;
    if (cow) {
      if (Status st = timed_cow(regions, held, 0, &cow_full_s, &cow_full_block_s); !st.is_ok()) return fail(st);
      cow_full_copied = size;  // all of it: protected, or copied in begin()
      cow_gen = cow->report().generation;
    }
    // 10 % of the state rewritten: every tenth of its 2 MiB blocks, every word of it.
    changed_bytes = 0;
    for (uint64_t b = (rep % 10) * kBlock; b < size; b += 10 * kBlock) {
      const uint64_t len = std::min<uint64_t>(kBlock, size - b);
      for (uint64_t i = b; i + 8 <= b + len; i += 8) {
        uint64_t w;
        memcpy(&w, state.data() + i, 8);
        w = 3 * w + 1;
        memcpy(state.data() + i, &w, 8);
      }
      changed_bytes += len;
    }
    // L1, the incremental version into the same slot: each chunk hashed, the changed ones copied.
    copier->set_chunking(kChunk, size);
    copier->set_previous(held);
    t0 = now();
    if (Status st = copier->begin(regions, slot.data()); !st.is_ok()) return fail(st);
    l1_incr_s.push_back(now() - t0);
    l1_unchanged = copier->report().unchanged_bytes;
    if (memcmp(slot.data(), state.data(), size) != 0 || copier->report().chunk_hashes != chunk_hashes(state.data(), size, kChunk))
      return fail(make_error(Code::ERR_INTERNAL, "the incremental L1 copy left other bytes or hashes"));
    if (cow) {
      if (Status st = timed_cow(regions, held, cow_gen, &cow_incr_s, &cow_incr_block_s); !st.is_ok()) return fail(st);
      const SnapshotReport r = cow->report();
      if (r.chunk_changed.size() != nchunks || r.chunk_known.size() != nchunks)
        return fail(make_error(Code::ERR_INTERNAL, "the cow snapshot did not track the writes (was the state's memory write-protectable?)"));
      // The seal hashes only the changed chunks: the others' hashes are the slot's.
      t0 = now();
      std::vector<uint64_t> sealed = r.chunk_hashes;
      cow_changed_chunks = 0;
      for (uint64_t c = 0; c < nchunks; ++c)
        if (!r.chunk_known[c]) {
          sealed[c] = chunk_hashes(cow_slot.data() + c * kChunk, std::min<uint64_t>(kChunk, size - c * kChunk), kChunk)[0];
          ++cow_changed_chunks;
        }
      cow_hash_s.push_back(now() - t0);
      cow_incr_copied = size - r.unchanged_bytes;
      // Tracked in whole 2 MiB blocks at worst, so the blocks written and nothing more (bytes, not time).
      if (cow_incr_copied > changed_bytes + 2 * kBlock)
        return fail(make_error(Code::ERR_INTERNAL, "the incremental cow snapshot copied %llu bytes for %llu written",
                               static_cast<unsigned long long>(cow_incr_copied), static_cast<unsigned long long>(changed_bytes)));
      if (memcmp(cow_slot.data(), state.data(), size) != 0 || sealed != chunk_hashes(state.data(), size, kChunk))
        return fail(make_error(Code::ERR_INTERNAL, "the incremental cow snapshot left other bytes or hashes"));
    }
    Manifest mi = manifest_of(state, vi);
    t0 = now();
    if (Status st = l3::write_rank(l, mi, state.data(), {}, &incremental); !st.is_ok()) return fail(st);
    incr_s.push_back(now() - t0);
    if (Status st = l3::commit(l, vi, 1, ""); !st.is_ok()) return fail(st);
    if (!fs::exists(l3::chunks_path(l, vi, 0)))
      return fail(make_error(Code::ERR_INTERNAL, "version %llu was written full", static_cast<unsigned long long>(vi)));
    full_bytes = version_bytes(l, vf);
    incr_bytes = version_bytes(l, vi);
    double rf = 0, ri = 0;
    if (Status st = timed_read(l, vf, &back, &rf); !st.is_ok()) return fail(st);
    if (Status st = timed_read(l, vi, &back, &ri); !st.is_ok()) return fail(st);
    if (memcmp(back.data(), state.data(), size) != 0)
      return fail(make_error(Code::ERR_INTERNAL, "the incremental version read back other bytes"));
    read_full_s.push_back(rf);
    read_incr_s.push_back(ri);
    for (uint64_t v : {vi, vf})  // the incremental one first: it names the full one
      if (Status st = l3::remove_version(l, v); !st.is_ok()) return fail(st);
  }
  fs::remove_tree(cfg.prefix).ignore();

  const double bytes_ratio = static_cast<double>(incr_bytes) / static_cast<double>(full_bytes);
  const double rf = median(read_full_s), ri = median(read_incr_s);
  const double read_ratio = ri > 0 ? rf / ri : 0;
  json j;
  j["mode"] = "incremental";
  j["size_bytes"] = size;
  j["chunk_size"] = kChunk;
  j["changed_fraction"] = static_cast<double>(changed_bytes) / static_cast<double>(size);
  j["reps"] = o.reps;
  j["l3_full_bytes"] = full_bytes;
  j["l3_incremental_bytes"] = incr_bytes;
  j["l3_bytes_ratio"] = bytes_ratio;
  j["l3_bytes_ratio_target"] = 0.15;
  j["write_full_s"] = median(full_s);
  j["write_incremental_s"] = median(incr_s);
  j["write_full_gbps"] = gbps(size, median(full_s));
  j["raw_write_gbps"] = gbps(size, median(raw_s));
  j["restart_full_gbps"] = gbps(size, rf);
  j["restart_incremental_gbps"] = gbps(size, ri);
  j["restart_speed_ratio"] = read_ratio;
  j["restart_speed_ratio_target"] = 0.8;
  const double l1f = median(l1_full_s), l1h = median(l1_hash_s),
               l1i = median(l1_incr_s);
  j["l1_copy_full_ms"] = l1f * 1e3;           // the plain copy: a memcpy of the state (its limit)
  j["l1_seal_hash_full_ms"] = l1h * 1e3;      // what the seal then hashes on the worker
  j["l1_copy_incremental_ms"] = l1i * 1e3;    // hash every chunk, copy the changed ones; the seal has nothing left
  j["l1_bytes_copied_ratio"] = 1.0 - static_cast<double>(l1_unchanged) / static_cast<double>(size);
  j["l1_blocking_ratio"] = l1f > 0 ? l1i / l1f : 0;             // the application's wait, against the plain copy
  j["l1_work_ratio"] = l1f + l1h > 0 ? l1i / (l1f + l1h) : 0;   // the rank's whole L1 work, against copy + seal
  double cow_work_ratio = 0, versions_ratio = 0;
  if (cow) {
    const double cf = median(cow_full_s), ci = median(cow_incr_s),
                 ch = median(cow_hash_s);
    j["l1_cow_full_ms"] = cf * 1e3;  // begin .. complete: protect, the copier's copy of everything
    j["l1_cow_full_blocking_ms"] = median(cow_full_block_s) * 1e3;
    j["l1_cow_incremental_ms"] = ci * 1e3;  // protect what was written, copy the chunks written since
    j["l1_cow_incremental_blocking_ms"] = median(cow_incr_block_s) * 1e3;
    j["l1_cow_seal_hash_incremental_ms"] = ch * 1e3;  // the seal's hashing of the changed chunks
    j["l1_cow_bytes_copied_ratio"] = static_cast<double>(cow_incr_copied) / static_cast<double>(cow_full_copied);
    cow_work_ratio = cf + l1h > 0 ? (ci + ch) / (cf + l1h) : 0;
    j["l1_cow_work_ratio"] = cow_work_ratio;  // incremental copy + seal against full copy + seal
    // A version's bytes at all three levels, incremental against full: L1 what the cow snapshot copied,
    // L2 partner's (it sends the changed chunks only: the encode skips every step of unchanged ones),
    // L3 the files.
    const double l2_incr = static_cast<double>(cow_changed_chunks) * kChunk;
    versions_ratio = (static_cast<double>(cow_incr_copied) + l2_incr + static_cast<double>(incr_bytes)) /
                     (static_cast<double>(cow_full_copied) + static_cast<double>(size) + static_cast<double>(full_bytes));
    j["version_bytes_ratio"] = versions_ratio;
    j["version_bytes_ratio_target"] = 0.15;
  } else {
    j["l1_cow"] = "not measured: " + cow_made.status().message();
  }
  j["machine"] = machine_info(load_start, 1);
  if (o.json) {
    printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  printf("incremental version, one rank of %s, %.0f %% of it rewritten (every tenth 2 MiB block; %llu chunks; median of %d)\n",
         o.size_text.c_str(), 100.0 * j["changed_fraction"].get<double>(), static_cast<unsigned long long>(nchunks), o.reps);
  printf("  L3 bytes   full %llu, incremental %llu: ratio %.3f (target <= 0.15)\n",
         static_cast<unsigned long long>(full_bytes), static_cast<unsigned long long>(incr_bytes), bytes_ratio);
  printf("  write      full %.3f s, incremental %.3f s; raw write of the full state %.3f s\n", median(full_s),
         median(incr_s), median(raw_s));
  printf("  restart    full %.3f s, incremental %.3f s: speed ratio %.2f (target >= 0.8; from the page cache)\n",
         rf, ri, read_ratio);
  printf("  L1 copy    full %.1f ms (memcpy) + seal's hashing %.1f ms; incremental %.1f ms (hash all, copy %.0f %%): "
         "blocking ratio %.2f, work ratio %.2f\n",
         l1f * 1e3, l1h * 1e3, l1i * 1e3, 100.0 * j["l1_bytes_copied_ratio"].get<double>(), j["l1_blocking_ratio"].get<double>(),
         j["l1_work_ratio"].get<double>());
  if (cow)
    printf("  L1 cow     full %.1f ms (%.2f blocking) + seal %.1f ms; incremental %.1f ms (%.2f blocking, copy %.0f %%) + seal "
           "%.1f ms: work ratio %.2f\n"
           "  all levels the incremental version's L1 + L2 (partner) + L3 bytes against the full one's: %.3f (target <= 0.15)\n",
           j["l1_cow_full_ms"].get<double>(), j["l1_cow_full_blocking_ms"].get<double>(), l1h * 1e3,
           j["l1_cow_incremental_ms"].get<double>(), j["l1_cow_incremental_blocking_ms"].get<double>(),
           100.0 * j["l1_cow_bytes_copied_ratio"].get<double>(), j["l1_cow_seal_hash_incremental_ms"].get<double>(),
           cow_work_ratio, versions_ratio);
  else
    printf("  L1 cow     not measured: %s\n", cow_made.status().message().c_str());
  return 0;
}

}  // namespace cairn::bench
