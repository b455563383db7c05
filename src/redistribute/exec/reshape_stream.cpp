// The L1 path of a reshaping restart when every rank's regions already have their new size (cairn_restart,
// whether or not cairn_restart_available came first): the move overlaps the read. The same path reads, at
// L2, a lost old rank's copy in a survivor's redundancy data (from_l2_copies), as it reads a slot. The
// host of each old rank reads that rank's slot a unit at a time (about 2 MiB of whole chunks) -- its own pieces straight
// into its regions, the rest into a small ring of unit buffers or, mapped for ranks of this host, left
// where they lie -- verifies each chunk while it is in cache, and sends the unit's pieces to their new
// owners at once.
// The slot is read as the same-count restart reads one on this machine (slot_read_way): out of a mapping
// (a new read-only one, whichever of the two mappings the restart takes), or with pread, piece by piece,
// each piece hashed where it landed. Out of a mapping, the host's own pieces are copied and hashed in one
// pass (xxh3_copy); where all the other pieces of a stream go to ranks of this host, they are hashed where
// they lie in the mapping and sent from there (no copy into the ring: the receiver's copy is the only one,
// as in a bare move of the same bytes; nothing writes a slot during a restart), else copied into the ring
// as they are hashed. Nothing waits for a whole slot to be read.
//
// The receivers know every message in advance: each rank computes the same plans from the version's
// region table, plus each old stream's chunk size and region offsets, which the hosts share first.
// So every receive is posted, straight into the regions, before the first unit is read, and Open
// MPI's shared-memory transport copies each message on the receiver's side while the hosts read on.
// Messages are split at the old stream's unit boundaries (a message per 64 KiB chunk cost each host a
// rendezvous per 64 KiB) and tagged by region; per (host, region) both sides walk the pieces in (unit,
// old rank, offset) order -- a host that holds several old ranks reads their units side by side, several
// at once on threads of its own -- which MPI's ordering then matches.
//
// A chunk that fails to read or verify does not stop the messages: the host sends the rest of what it
// promised from its buffer or the mapping without reading on (every receiver is waiting for those
// bytes), and every rank then agrees on the failure, so no rank restarts from them.
#include <fcntl.h>
#include <sys/stat.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "base/chunk_check.hpp"
#include "base/stream_reader.hpp"
#include "base/clock.hpp"
#include "base/fsutil.hpp"
#include "cache/cache_store.hpp"
#include "base/log.hpp"
#include "mpi/mpi_util.hpp"
#include "redistribute/exec/reshaper.hpp"
#include "redistribute/plan.hpp"

namespace cairn {
namespace {
using ull = unsigned long long;

constexpr int kTagBase = 7100;                         // + region index; the job's communicator has no other point-to-point
constexpr size_t kMaxRegions = 16384;                  // keeps the tags under MPI's guaranteed 32767
constexpr uint64_t kMaxMessage = uint64_t{1} << 30;    // MPI counts are ints
constexpr uint64_t kRingBytes = uint64_t{32} << 20;    // unit buffers per host, in all (at most 8)
constexpr uint64_t kMaxChunk = uint64_t{64} << 20;     // larger chunks: the general path
constexpr uint64_t kMaxMessages = uint64_t{1} << 16;   // more (small block_cyclic blocks): the general path
constexpr uint64_t kUnitBytes = uint64_t{2} << 20;     // what a host reads, verifies and sends at a time
std::atomic<bool> g_others_remote{false};              // treat_other_ranks_as_remote_for_tests

// The step of a stream of chunks of `chunk` bytes: whole chunks, about kUnitBytes (one chunk where
// chunks are larger).
uint64_t unit_of(uint64_t chunk) { return chunk * std::max<uint64_t>(1, kUnitBytes / chunk); }

// Calls f(offset, size) for [off, off + len) cut at every multiple of unit and at kMaxMessage: the
// messages of one piece, the same on both sides.
void for_each_message(uint64_t off, uint64_t len, uint64_t unit, const std::function<void(uint64_t, uint64_t)>& f) {
  for (uint64_t end = off + len; off < end;) {
    uint64_t n = std::min({end - off, (off / unit + 1) * unit - off, kMaxMessage});
    f(off, n);
    off += n;
  }
}

// Wait for `reqs`. Where ranks outnumber cores (`leave_core`), poll, and sleep between polls once a
// poll completes nothing: a busy wait, even one that yields, takes its fair share of a core from the
// hosts that still read and the receivers that copy, and a poll that did complete something goes
// again at once, so that what has arrived moves in one go (one poll starts only a few copies).
// Elsewhere, MPI_Waitall.
Status wait_for(std::vector<MPI_Request>& reqs, bool leave_core) {
  if (!leave_core) {
    CAIRN_MPI(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE));
    return Status::ok();
  }
  const struct timespec pause = {0, 20 * 1000};
  std::vector<int> done(reqs.size());
  for (;;) {
    int n = 0;
    CAIRN_MPI(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n, done.data(), MPI_STATUSES_IGNORE));
    if (n == MPI_UNDEFINED) return Status::ok();  // none left
    if (n == 0) nanosleep(&pause, nullptr);
  }
}
// Runs f(0) .. f(n - 1) on the calling thread and on `helpers` threads of its own (started once, for
// the whole restart), and returns when every call has returned. No MPI in f.
class Helpers {
 public:
  explicit Helpers(int helpers) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { serve(); });
  }
  ~Helpers() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  Helpers(const Helpers&) = delete;
  Helpers& operator=(const Helpers&) = delete;

  void run(size_t n, const std::function<void(size_t)>& f) {
    if (threads_.empty() || n <= 1) {
      for (size_t i = 0; i < n; ++i) f(i);
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      f_ = &f, n_ = n, next_ = 0, done_ = 0;
      ++round_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> l(mu_);
    finished_.wait(l, [&] { return done_ == n_; });
    f_ = nullptr;
  }

 private:
  void work() {  // the current round's calls, one at a time, until none is left
    for (;;) {
      size_t i = 0;
      const std::function<void(size_t)>* f = nullptr;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!f_ || next_ >= n_) return;
        i = next_++;
        f = f_;
      }
      (*f)(i);
      std::lock_guard<std::mutex> l(mu_);
      if (++done_ == n_) finished_.notify_all();
    }
  }
  void serve() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        wake_.wait(l, [&] { return stop_ || round_ != seen; });
        if (stop_) return;
        seen = round_;
      }
      work();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, finished_;
  std::vector<std::thread> threads_;
  const std::function<void(size_t)>* f_ = nullptr;
  size_t n_ = 0, next_ = 0, done_ = 0;
  uint64_t round_ = 0;
  bool stop_ = false;
};

}  // namespace

void treat_other_ranks_as_remote_for_tests(bool remote) { g_others_remote = remote; }

int streamable(const Manifest& table, const std::vector<ReshapeWant>& wants, int p_old, int p_new, int rank,
               const std::vector<int>& host_of_old) {
  if (table.chunk_size == 0 || table.chunk_size > kMaxChunk || wants.size() > kMaxRegions) return 0;
  uint64_t messages = 0;
  for (const auto& w : wants) {
    auto in = redistribute::plan_for_dst(w.dist, p_old, p_new, rank);
    if (!in) return 0;
    const uint64_t unit = unit_of(table.chunk_size);
    for (const auto& t : *in) messages += 1 + t.count * w.entry->elem_size / unit;
    for (int k = 0; k < p_old; ++k) {
      if (host_of_old[static_cast<size_t>(k)] != rank) continue;
      auto out = redistribute::plan_for_src(w.dist, p_old, p_new, k);
      if (!out) return 0;
      for (const auto& t : *out) messages += 1 + t.count * w.entry->elem_size / unit;
    }
  }
  return messages <= kMaxMessages;
}

Status Reshaper::from_l1_streamed(uint64_t v, int p_old, const std::vector<int>& host_of_old,
                                  const std::vector<ReshapeWant>& wants, const std::map<int, CopiedStream>& copies,
                                  const char* level) {
  const size_t nw = wants.size();
  const double t0 = now_seconds();
  // 1. Each host opens the slots of its old ranks and checks them against the table; nothing is read yet.
  struct Hosted {
    int k = 0;
    Manifest m;
    std::vector<uint64_t> offsets;  // per want: the region's offset in this stream
    std::string path;
    uint64_t base = 0;  // of the stream in the file (a copy in a redundancy file)
    fs::Fd fd;
    std::optional<MappedFile> map;  // copied out of a mapping where slot_read_way says so
  };
  std::vector<Hosted> hosted;
  bool mapped = false;  // rank 0's log: how the slots were read
  std::optional<MappedFile> ring;
  uint64_t slot_bytes = 0;
  size_t nslots = 0;
  Status local = [&]() -> Status {
    for (int k = 0; k < p_old; ++k) {
      if (host_of_old[static_cast<size_t>(k)] != rank_) continue;
      Hosted h;
      h.k = k;
      if (auto c = copies.find(k); c != copies.end()) {
        h.m = c->second.manifest;
        h.path = c->second.path;
        h.base = c->second.offset;
      } else {
        CacheStore other;
        CAIRN_TRY(other.open(layout_.rank_cache(job_.node, k), job_.cache_versions));
        CAIRN_ASSIGN_OR_RETURN(rec, other.read_record(v));
        h.m = std::move(rec.manifest);
        h.path = other.slot_path(static_cast<int>(rec.slot));
      }
      CAIRN_TRY(check_chunk_table(h.m).status().prefixed(h.path));
      if (h.m.chunk_size > kMaxChunk)
        return make_error(Code::ERR_NOT_SUPPORTED, "%s: chunks of %u bytes (the streamed restart buffers at most %llu)",
                          h.path.c_str(), h.m.chunk_size, static_cast<ull>(kMaxChunk));
      for (const auto& w : wants) {
        CAIRN_ASSIGN_OR_RETURN(re, held_region(h.m, w, p_old, k));
        h.offsets.push_back(re->offset);
      }
      CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(h.path, O_RDONLY));
      struct stat sb;
      if (fstat(fd.get(), &sb) != 0) return posix_error("fstat", h.path, errno);
      if (static_cast<uint64_t>(sb.st_size) < h.base + h.m.total_size)
        return make_error(Code::ERR_CORRUPT, "%s: shorter than the version's stream of old rank %d", h.path.c_str(), k);
      if (slot_read_way(static_cast<uint64_t>(sb.st_blksize), fd.get(), h.base + h.m.total_size) != SlotRead::pread) {
        // Not populated: the copy faults the pages in as it goes, so the first unit is sent at once (a
        // populated mapping was measured no faster in all).
        auto mm = MappedFile::open_ro(h.path, /*populate=*/false);
        if (mm && mm->size() >= h.base + h.m.total_size) h.map = std::move(mm).value(), mapped = true;
      }
      h.fd = std::move(fd);
      slot_bytes = std::max<uint64_t>(slot_bytes, unit_of(h.m.chunk_size));
      hosted.push_back(std::move(h));
    }
    if (slot_bytes) {
      nslots = static_cast<size_t>(std::clamp<uint64_t>(kRingBytes / slot_bytes, 2, 8));
      auto buf = MappedFile::anonymous(nslots * slot_bytes);
      if (!buf) return buf.status().prefixed("chunk buffers of the streamed restart");
      ring = std::move(buf).value();
    }
    return Status::ok();
  }();
  CAIRN_TRY(agree(app_comm_, local));

  // 2. Every rank learns each old stream's chunk size and region offsets: (k, chunk size, offsets...).
  const size_t rec_len = 2 + nw;
  std::vector<uint64_t> desc;
  for (const auto& h : hosted) {
    desc.push_back(static_cast<uint64_t>(h.k));
    desc.push_back(h.m.chunk_size);
    desc.insert(desc.end(), h.offsets.begin(), h.offsets.end());
  }
  std::vector<uint64_t> all;
  CAIRN_TRY(allgather_u64(app_comm_, desc, &all));
  std::vector<uint64_t> chunk_of(static_cast<size_t>(p_old), 0);
  std::vector<const uint64_t*> offsets_of(static_cast<size_t>(p_old), nullptr);
  for (size_t i = 0; i + rec_len <= all.size(); i += rec_len)
    if (all[i] < static_cast<uint64_t>(p_old)) chunk_of[all[i]] = all[i + 1], offsets_of[all[i]] = &all[i + 2];
  // Cannot happen after the agreement above (every old rank has a host that opened it); checked
  // before any message is posted so that no rank waits for one.
  if (std::any_of(chunk_of.begin(), chunk_of.end(), [](uint64_t c) { return c == 0; }))
    return make_error(Code::ERR_INTERNAL, "streamed restart: an old rank of version %llu has no host", static_cast<ull>(v));

  HostShare share;
  CAIRN_TRY(host_share(app_comm_, &share, /*busy=*/!hosted.empty()));
  // A rank that hosts nothing only receives: it sleeps between polls, leaving its core to the hosts'
  // threads (as every rank does where ranks outnumber cores).
  const bool leave_core = share.outnumbered() || hosted.empty();
  // A host reads this many units at once (one per thread): restart_threads, else the cores of its machine
  // over the ranks there that host streams (those that host none only receive), at most 4 and at most
  // the cores of this rank's own affinity mask; and at most half the ring, so that a batch's reads
  // overlap the previous batch's sends.
  const int threads = job_.restart_threads > 0 ? job_.restart_threads
                                               : std::min(share.threads_per_busy_rank(4), share.own_cores);
  const size_t batch = std::clamp<size_t>(static_cast<size_t>(threads), 1, std::max<size_t>(nslots / 2, 1));

  // 3. Post every receive, straight into the regions. Per region and host, in the order the host sends:
  // by unit of the old stream, then old rank, then offset (a host that holds several old ranks reads
  // their units side by side).
  struct In {
    int host;
    uint64_t unit;
    int k;
    uint64_t at, len;
    uint8_t* dst;
  };
  std::vector<MPI_Request> recvs;
  uint64_t received = 0;
  std::vector<In> ins;
  for (size_t i = 0; i < nw; ++i) {
    const RegionEntry& e = *wants[i].entry;
    CAIRN_ASSIGN_OR_RETURN(plan, redistribute::plan_for_dst(wants[i].dist, p_old, nranks_, rank_));
    uint8_t* base = static_cast<uint8_t*>(regions_.at(e.name).ptr);
    ins.clear();
    for (const auto& t : plan) {
      int host = host_of_old[static_cast<size_t>(t.src)];
      if (host == rank_) continue;  // read here, straight into the region
      uint64_t off = offsets_of[static_cast<size_t>(t.src)][i] + t.src_offset * e.elem_size;
      uint8_t* dst = base + t.dst_offset * e.elem_size;
      const uint64_t unit = unit_of(chunk_of[static_cast<size_t>(t.src)]);
      for_each_message(off, t.count * e.elem_size, unit, [&](uint64_t at, uint64_t len) {
        ins.push_back({host, at / unit, t.src, at, len, dst + (at - off)});
      });
    }
    std::stable_sort(ins.begin(), ins.end(), [](const In& x, const In& y) {
      return std::tie(x.host, x.unit, x.k, x.at) < std::tie(y.host, y.unit, y.k, y.at);
    });
    for (const In& m : ins) {
      MPI_Request r = MPI_REQUEST_NULL;
      CAIRN_MPI(MPI_Irecv(m.dst, static_cast<int>(m.len), MPI_BYTE, m.host, kTagBase + static_cast<int>(i), app_comm_, &r));
      recvs.push_back(r);
      received += m.len;
    }
  }

  // 4. Hosts: read, verify and send, a unit (kUnitBytes of whole chunks) at a time, in stream order, the
  // streams of several old ranks side by side (unit 0 of each, then unit 1, ...), `batch` units at once.
  // (Reading the units with pieces for other ranks first was measured slower: the receivers' copies then
  // compete with every read; spreading them evenly among the others, no faster than stream order.)
  struct Out {
    uint64_t offset, size;
    int dst, tag;
  };
  struct Pieces {
    std::vector<StreamExtent> own;  // this rank's pieces: straight into its regions
    std::vector<Out> outs;          // the messages, each inside one unit
  };
  std::vector<Pieces> pieces(hosted.size());
  std::vector<std::pair<size_t, uint64_t>> order;  // (hosted stream, unit) holding a wanted byte
  for (size_t j = 0; j < hosted.size(); ++j) {
    const Hosted& h = hosted[j];
    auto& [own, outs] = pieces[j];
    for (size_t i = 0; i < nw; ++i) {
      const RegionEntry& e = *wants[i].entry;
      CAIRN_ASSIGN_OR_RETURN(plan, redistribute::plan_for_src(wants[i].dist, p_old, nranks_, h.k));
      uint8_t* base = static_cast<uint8_t*>(regions_.at(e.name).ptr);
      for (const auto& t : plan) {
        uint64_t off = h.offsets[i] + t.src_offset * e.elem_size, len = t.count * e.elem_size;
        if (t.dst == rank_) {
          own.push_back({off, len, base + t.dst_offset * e.elem_size});
        } else {
          for_each_message(off, len, unit_of(h.m.chunk_size), [&](uint64_t at, uint64_t l) {
            outs.push_back({at, l, t.dst, kTagBase + static_cast<int>(i)});
          });
        }
      }
    }
    std::sort(own.begin(), own.end(), [](const StreamExtent& x, const StreamExtent& y) { return x.offset < y.offset; });
    std::stable_sort(outs.begin(), outs.end(), [](const Out& x, const Out& y) { return x.offset < y.offset; });
    size_t o = 0, q = 0;
    const uint64_t unit = unit_of(h.m.chunk_size);
    for (uint64_t c = 0, a = 0; a < h.m.total_size; ++c, a += unit) {
      const uint64_t b = std::min(a + unit, h.m.total_size);
      while (o < own.size() && own[o].offset + own[o].size <= a) ++o;
      while (q < outs.size() && outs[q].offset < a) ++q;
      if ((q < outs.size() && outs[q].offset < b) || (o < own.size() && own[o].offset < b)) order.push_back({j, c});
    }
  }

  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  // A mapped stream whose pieces all go to ranks of this host is verified where it lies and sent from the
  // mapping (the host's shared-memory transport reads it). Pieces that leave the host go through the ring:
  // a network may register a send buffer for writing, which a read-only mapping refuses.
  std::vector<bool> in_place(hosted.size(), false);
  size_t in_place_n = 0;
  for (size_t j = 0; j < hosted.size(); ++j) {
    const auto& outs = pieces[j].outs;
    in_place[j] = hosted[j].map && std::all_of(outs.begin(), outs.end(), [&](const Out& m) {
                    return share.on_this_host(m.dst) && !g_others_remote.load(std::memory_order_relaxed);
                  });
    in_place_n += in_place[j] ? 1 : 0;
  }

  const double setup_ms = (now_seconds() - t0) * 1e3;  // opened, described, receives posted
  std::vector<std::vector<MPI_Request>> in_flight(nslots);  // the sends out of each unit's buffer
  std::vector<MPI_Request> from_map;                        // the sends out of mapped streams
  size_t next_slot = 0;
  Status failed = Status::ok();  // the first chunk that did not read or verify; later chunks are not read
  uint64_t sent = 0;
  std::vector<StreamSource> sources;
  for (auto& h : hosted) sources.push_back(pread_source(h.fd.get(), h.base, h.path));
  // The own pieces of stream j from the first that ends past `at`.
  auto own_from = [&](size_t j, uint64_t at) {
    const auto& own = pieces[j].own;
    return std::partition_point(own.begin(), own.end(), [&](const StreamExtent& x) { return x.offset + x.size <= at; });
  };
  // Unit u of stream j into this rank's pieces and the unit buffer `buf` between them, verified.
  auto read_unit = [&](size_t j, uint64_t u, uint8_t* buf) -> Status {
    const Hosted& h = hosted[j];
    const auto& own = pieces[j].own;
    const uint64_t unit = unit_of(h.m.chunk_size);
    const uint64_t a = u * unit, b = std::min(a + unit, h.m.total_size);
    std::vector<StreamExtent> into;  // where the unit's bytes land
    auto x = own_from(j, a);
    for (uint64_t at = a; at < b;) {
      if (x != own.end() && x->offset <= at) {  // a piece of this rank's
        const uint64_t end = std::min(b, x->offset + x->size);
        into.push_back({at, end - at, x->dst + (at - x->offset)});
        at = end;
        ++x;
      } else {  // up to the next one: the buffer, or where it lies in a mapped stream
        const uint64_t end = x != own.end() ? std::min(b, x->offset) : b;
        // (The mapping's bytes are only read: an extent at the stream's own bytes is hashed in place.)
        into.push_back({at, end - at, in_place[j] ? const_cast<uint8_t*>(h.map->data()) + h.base + at : buf + (at - a)});
        at = end;
      }
    }
    const uint64_t chunk = h.m.chunk_size;
    return read_chunks_verified(h.m, into, a / chunk, (b + chunk - 1) / chunk, h.map ? h.map->data() + h.base : nullptr,
                                sources[j]).prefixed(h.path);
  };
  Helpers helpers(static_cast<int>(std::min(batch, order.size())) - 1);  // none on a rank that reads nothing
  std::vector<size_t> slot_of(batch);
  std::vector<Status> got(batch, Status::ok());
  for (size_t first = 0; first < order.size(); first += batch) {
    const size_t n = std::min(batch, order.size() - first);
    for (size_t e = 0; e < n; ++e) {
      const size_t s = slot_of[e] = next_slot++ % nslots;
      if (!in_flight[s].empty()) {
        CAIRN_TRY(wait_for(in_flight[s], leave_core));
        in_flight[s].clear();
      }
    }
    if (failed.is_ok()) {
      helpers.run(n, [&](size_t e) {
        got[e] = read_unit(order[first + e].first, order[first + e].second, ring->data() + slot_of[e] * slot_bytes);
      });
      for (size_t e = 0; e < n && failed.is_ok(); ++e) failed = got[e];
    }
    for (size_t e = 0; e < n; ++e) {  // the sends, in the order the receivers posted theirs
      const auto [j, u] = order[first + e];
      const auto& [own, outs] = pieces[j];
      const uint64_t unit = unit_of(hosted[j].m.chunk_size);
      const uint64_t a = u * unit, b = std::min(a + unit, hosted[j].m.total_size);
      uint8_t* buf = ring->data() + slot_of[e] * slot_bytes;  // unit byte a lands at buf[0]
      const uint8_t* in_map = in_place[j] ? hosted[j].map->data() + hosted[j].base : nullptr;
      // Sends out of the mapping hold no buffer: they are waited for at the end.
      auto& reqs = in_map ? from_map : in_flight[slot_of[e]];
      auto q = std::partition_point(outs.begin(), outs.end(), [&](const Out& m) { return m.offset < a; });
      for (; q != outs.end() && q->offset < b; ++q) {
        const Out& m = *q;
        // A mapped stream's bytes were verified where they lie and go from there. Elsewhere a piece that
        // also stays here (replicated regions) landed in the region, not in the buffer.
        const uint8_t* from = in_map ? in_map + m.offset : buf + (m.offset - a);
        for (auto x = own_from(j, m.offset); !in_map && x != own.end() && x->offset < m.offset + m.size; ++x) {
          if (x->offset <= m.offset && x->offset + x->size >= m.offset + m.size) {
            from = x->dst + (m.offset - x->offset);
            break;
          }
          uint64_t lo = std::max(x->offset, m.offset), hi = std::min(x->offset + x->size, m.offset + m.size);
          memcpy(buf + (lo - a), x->dst + (lo - x->offset), hi - lo);
        }
        MPI_Request r = MPI_REQUEST_NULL;
        CAIRN_MPI(MPI_Isend(from, static_cast<int>(m.size), MPI_BYTE, m.dst, m.tag, app_comm_, &r));
        reqs.push_back(r);
        sent += m.size;
      }
    }
    int done = 0;  // let the pieces coming here, and those sent from a mapping, move while this host reads on
    if (!recvs.empty()) CAIRN_MPI(MPI_Testall(static_cast<int>(recvs.size()), recvs.data(), &done, MPI_STATUSES_IGNORE));
    if (!from_map.empty()) CAIRN_MPI(MPI_Testall(static_cast<int>(from_map.size()), from_map.data(), &done, MPI_STATUSES_IGNORE));
  }
  double read_ms = (now_seconds() - t0) * 1e3;
  // The rest of the wait: this rank has nothing more to read, the hosts may still be reading. The
  // barrier keeps a rank that is through from spinning in the agreement below while others still read.
  std::vector<MPI_Request> rest = std::move(recvs);
  for (auto& reqs : in_flight) rest.insert(rest.end(), reqs.begin(), reqs.end());
  rest.insert(rest.end(), from_map.begin(), from_map.end());
  rest.push_back(MPI_REQUEST_NULL);
  CAIRN_MPI(MPI_Ibarrier(app_comm_, &rest.back()));
  CAIRN_TRY(wait_for(rest, leave_core));
  double all_ms = (now_seconds() - t0) * 1e3;
  if (!failed.is_ok())
    LOG_WARN("restart: version %llu (%d ranks) at %s: %s", static_cast<ull>(v), p_old, level, failed.message().c_str());
  CAIRN_TRY(agree(app_comm_, failed));
  adopt_distributions(regions_, wants);
  LOG_DEBUG("restart: this rank's part of the streamed restart at %s: set-up %.1f ms, %.1f ms reading, %.1f ms in all "
            "(%zu old ranks hosted, %.1f MiB sent, %.1f MiB received)",
            level, setup_ms, read_ms, all_ms, hosted.size(), static_cast<double>(sent) / (1 << 20),
            static_cast<double>(received) / (1 << 20));
  if (rank_ == 0)
    LOG_INFO("restart: version %llu (%d ranks) read at %s and sent to the new owners as verified, %s: "
             "%.1f ms reading (%zu units at a time), %.1f ms in all on rank 0 (%zu old ranks hosted, %zu of them from a "
             "copy in a set's redundancy data, %.1f MiB sent, %.1f MiB received)",
             static_cast<ull>(v), p_old, level, hosted.empty()                  ? "hosting none"
             : in_place_n == hosted.size() ? "verified in a mapping and sent from it"
             : mapped                      ? "copied out of a mapping (pieces leave this host)"
                                           : "pread",
             read_ms, batch, all_ms, hosted.size(), copies.size(), static_cast<double>(sent) / (1 << 20),
             static_cast<double>(received) / (1 << 20));
  return Status::ok();
}

}  // namespace cairn
