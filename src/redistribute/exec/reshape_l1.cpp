// Reshaping restart from L1, and the checks of the regions it makes first.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "base/clock.hpp"
#include "cache/cache_store.hpp"
#include "mpi/mpi_util.hpp"
#include "l3/l3_store.hpp"
#include "redistribute/exec/reshaper.hpp"
#include "redistribute/plan.hpp"
#include "redundancy/set_code.hpp"
#include "redundancy/exchange/set_rebuild.hpp"
#include "redundancy/set_record.hpp"

namespace cairn {

int regions_fit(const std::map<std::string, Region>& regions, const Manifest& table, int p_new, int rank,
                std::vector<ReshapeWant>* wants) {
  wants->clear();
  for (const auto& e : table.regions) {
    auto d = redistribute::Distribution::from_params(e.distribution, e.dist_params, e.count);
    auto it = regions.find(e.name);
    if (e.kind != RegionKind::memory || !d || d->kind == redistribute::Kind::private_ || it == regions.end() ||
        it->second.elem_size != e.elem_size)
      return 0;
    uint64_t want =
        d->kind == redistribute::Kind::replicated ? d->global_count : redistribute::local_count(*d, p_new, rank);
    if (it->second.count != want || (want > 0 && !it->second.ptr)) return 0;
    wants->push_back({&e, *d});
  }
  for (const auto& [name, r] : regions)
    if (std::none_of(table.regions.begin(), table.regions.end(), [&](const RegionEntry& e) { return e.name == name; }))
      return 0;
  return 1;
}

Result<const RegionEntry*> held_region(const Manifest& m, const ReshapeWant& want, int p_old, int k) {
  const RegionEntry& e = *want.entry;
  auto re = std::find_if(m.regions.begin(), m.regions.end(), [&](const RegionEntry& x) { return x.name == e.name; });
  uint64_t count = want.dist.kind == redistribute::Kind::replicated ? want.dist.global_count
                                                                    : redistribute::local_count(want.dist, p_old, k);
  if (re == m.regions.end() || re->elem_size != e.elem_size || re->count != count)
    return make_error(Code::ERR_CORRUPT, "region '%s' is missing or differs on old rank %d", e.name.c_str(), k);
  return &*re;
}

void adopt_distributions(std::map<std::string, Region>& regions, const std::vector<ReshapeWant>& wants) {
  for (const auto& w : wants) {
    Region& r = regions[w.entry->name];
    r.dist_kind = w.entry->distribution;
    r.dist_params = w.dist.to_params();
  }
}

Result<int> Reshaper::share_table_and_fit(std::string bytes, int root, Manifest* table, std::vector<ReshapeWant>* wants,
                                          const std::function<int()>& streams) {
  wants->clear();
  unsigned long long len = bytes.size();
  CAIRN_MPI(MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, root, app_comm_));
  if (len == 0) return 0;  // the general path says what is wrong
  bytes.resize(len);
  CAIRN_MPI(MPI_Bcast(bytes.data(), static_cast<int>(len), MPI_CHAR, root, app_comm_));
  auto m = decode_manifest(bytes.data(), bytes.size());
  if (!m) return 0;  // the same bytes everywhere: every rank says no
  *table = std::move(m).value();
  int fits = regions_fit(regions_, *table, nranks_, rank_, wants);
  if (fits && streams && streams()) fits = 2;
  int all = 0;
  CAIRN_MPI(MPI_Allreduce(&fits, &all, 1, MPI_INT, MPI_MIN, app_comm_));
  return all;
}

Status Reshaper::from_l1(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                                 std::vector<HeldStream>* held, bool* streamed) {
  held->clear();
  *streamed = false;
  double t0 = now_seconds();
  const std::vector<int> host_of_old = hosts(holders);
  // cairn_restart alone, and every rank's regions already of their new size (decided together, on the
  // version's region table from old rank 0's host): a host reads the pieces it keeps for itself straight
  // into its regions, and only what goes to other ranks stays in the slot's mapping to be sent.
  std::vector<ReshapeWant> wants;
  Manifest table;
  int place = 0;
  if (restart_in_place_) {
    std::string bytes;
    if (host_of_old[0] == rank_) {
      CacheStore other;
      if (other.open(layout_.rank_cache(job_.node, 0), job_.cache_versions).is_ok()) {
        auto rec = other.read_record(v);
        if (rec) bytes = encode_manifest(rec->manifest);
      }
    }
    CAIRN_ASSIGN_OR_RETURN(fit, share_table_and_fit(std::move(bytes), host_of_old[0], &table, &wants, [&] {
                             return streamable(table, wants, p_old, nranks_, rank_, host_of_old);
                           }));
    place = fit;
  }
  if (place == 2) {  // the move overlaps the read (reshape_stream.cpp)
    Status st = from_l1_streamed(v, p_old, host_of_old, wants);
    *streamed = st.is_ok();
    return st;
  }
  Status local = Status::ok();
  for (int k = 0; k < p_old && local.is_ok(); ++k) {
    if (host_of_old[k] != rank_) continue;
    local = [&]() -> Status {
      // (reshaped_from_l2 reads the same way, read-write: the set exchange takes non-const buffers)
      CacheStore other;
      CAIRN_TRY(other.open(layout_.rank_cache(job_.node, k), job_.cache_versions));
      CAIRN_ASSIGN_OR_RETURN(rec, other.read_record(v));
      const Manifest& m = rec.manifest;
      CAIRN_ASSIGN_OR_RETURN(map, MappedFile::open_ro(other.slot_path(static_cast<int>(rec.slot))));
      if (map.size() < m.total_size)
        return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", map.path().c_str());
      HeldStream h;
      if (!place) {
        CAIRN_TRY(verify_stream(m, map.data(), m.total_size).prefixed(map.path()));
      } else {
        // The stream tiled: this process's own pieces land in its regions (pread), the rest is hashed
        // where it lies in the mapping; every chunk verified once, in one pass.
        std::vector<StreamExtent> mine;
        for (const auto& w : wants) {
          const RegionEntry& e = *w.entry;
          CAIRN_ASSIGN_OR_RETURN(re, held_region(m, w, p_old, k));
          CAIRN_ASSIGN_OR_RETURN(plan, redistribute::plan_for_src(w.dist, p_old, nranks_, k));
          for (const auto& t : plan)
            if (t.dst == rank_)
              mine.push_back({re->offset + t.src_offset * e.elem_size, t.count * e.elem_size,
                              static_cast<uint8_t*>(regions_[e.name].ptr) + t.dst_offset * e.elem_size});
        }
        std::sort(mine.begin(), mine.end(), [](const StreamExtent& a, const StreamExtent& b) { return a.offset < b.offset; });
        std::vector<StreamExtent> tiles;
        uint64_t at = 0;
        for (const auto& x : mine) {
          if (x.offset > at) tiles.push_back({at, x.offset - at, map.data() + at});
          tiles.push_back(x);
          at = x.offset + x.size;
        }
        if (at < m.total_size) tiles.push_back({at, m.total_size - at, map.data() + at});
        CAIRN_ASSIGN_OR_RETURN(fd, fs::open_file(map.path(), O_RDONLY));
        struct stat sb;
        if (fstat(fd.get(), &sb) != 0) return posix_error("fstat", map.path(), errno);
        const uint8_t* base = map.data();
        StreamSource file = map_to_read(static_cast<uint64_t>(sb.st_blksize)) ? copy_source(base)
                                                                              : pread_source(fd.get(), 0, map.path());
        CAIRN_TRY(read_verified(m, tiles, [&](uint64_t off, uint64_t len, uint8_t* dst) {
                    return dst == base + off ? Status::ok() : file(off, len, dst);  // in the mapping already
                  }).prefixed(map.path()));
        h.self_placed = true;
      }
      h.old_rank = k;
      h.manifest = m;
      h.map = std::make_shared<MappedFile>(std::move(map));
      h.data = h.map->data();
      held->push_back(std::move(h));
      return Status::ok();
    }();
  }
  double read_ms = (now_seconds() - t0) * 1e3;
  Status all = agree(app_comm_, local);
  if (!all.is_ok()) held->clear();
  else if (rank_ == 0)
    LOG_INFO("restart: version %llu (%d ranks) read and verified at L1 in %.1f ms on rank 0 (%zu old ranks hosted%s)",
             static_cast<unsigned long long>(v), p_old, read_ms, held->size(),
             place ? ", each host's own pieces read straight into its regions" : "");
  return all;
}

}  // namespace cairn
