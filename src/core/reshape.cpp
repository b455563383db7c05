// Restart on another number of ranks. A version written by p_old ranks is read by "hosts" among the
// current ranks: from L1 where every old rank's slot survives on some node (a rank of that node reads
// it, verifies it and hosts it); else from L2, where the old redundancy sets rebuild their lost members
// onto hosts that hold no other member of the set; else from L3 (old rank k's file is read once, by
// rank k mod P). The hosts then send each new rank exactly the pieces its distributed regions need
// (move_regions, also used by live redistribution: one MPI_Ialltoallw per region with datatypes at the
// pieces' addresses, so nothing is packed or unpacked). Reads are parallel, nothing is read twice, every
// byte is verified before it moves.
//
// cairn_restart alone (not after cairn_restart_available), when every rank's regions already have the
// size the new layout gives them, goes further: from L3 every rank reads its own pieces straight from the
// old files into its regions, verifying the chunks they lie in (reshaped_from_l3_direct: no hosts, no
// move); from L1 a host reads the pieces it keeps for itself straight into its regions and sends the
// rest chunk by chunk as each is verified, so that the move overlaps the read (reshape_stream.cpp), or,
// when the plan has too many small pieces for one message each, moves the rest afterwards.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "mpi/mpi_util.hpp"
#include "core/reshape_fit.hpp"
#include "core/runtime.hpp"
#include "pfs/l3_store.hpp"
#include "redistribute/plan.hpp"
#include "redundancy/set_code.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_record.hpp"

namespace cairn {
namespace {

bool parse_rank_dir(const std::string& name, uint64_t* rank) {
  if (name.size() < 2 || name[0] != 'r') return false;
  uint64_t r = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    r = r * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *rank = r;
  return true;
}

constexpr size_t kTuple = 5;  // (old rank, version, old rank count, reporting rank, protected)

// The current ranks on the node of `rank`, in order.
std::vector<int> ranks_on_node_of(const std::vector<std::string>& node_of_rank, int rank) {
  std::vector<int> out;
  for (size_t r = 0; r < node_of_rank.size(); ++r)
    if (node_of_rank[r] == node_of_rank[static_cast<size_t>(rank)]) out.push_back(static_cast<int>(r));
  return out;
}

}  // namespace

int regions_fit(const std::map<std::string, Region>& regions, const Manifest& table, int p_new, int rank,
                std::vector<ReshapeWant>* wants) {
  wants->clear();
  for (const auto& e : table.regions) {
    auto d = redist::Distribution::from_params(e.distribution, e.dist_params, e.count);
    auto it = regions.find(e.name);
    if (e.kind != RegionKind::memory || !d || d->kind == redist::Kind::private_ || it == regions.end() ||
        it->second.elem_size != e.elem_size)
      return 0;
    uint64_t want = d->kind == redist::Kind::replicated ? d->global_count : redist::local_count(*d, p_new, rank);
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
  uint64_t count = want.dist.kind == redist::Kind::replicated ? want.dist.global_count : redist::local_count(want.dist, p_old, k);
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

// Candidates written by another rank count, newest first, each tried from L1 then L3.
Status Runtime::find_reshaped(RestartChoice* out, std::string* why, uint64_t above, uint64_t at_most) {
  // The lowest rank of each node reports every record in the node's cache written by another count.
  bool leader = true;
  for (int r = 0; r < rank_; ++r)
    if (node_of_rank_[static_cast<size_t>(r)] == cfg_.node) leader = false;
  std::vector<uint64_t> mine;
  if (leader) {
    std::string node_dir = layout_.node_cache(cfg_.node);
    auto dirs = fs::list_dir(node_dir);
    for (const auto& d : dirs ? *dirs : std::vector<std::string>{}) {
      uint64_t old_rank;
      if (!parse_rank_dir(d, &old_rank)) continue;
      CacheStore other;
      if (!other.open(node_dir + "/" + d, cfg_.cache_versions).is_ok()) continue;
      for (uint64_t v : other.versions()) {
        auto rec = other.read_record(v);
        if (!rec || rec->manifest.nranks == static_cast<uint32_t>(nranks_) || rec->manifest.rank != old_rank) continue;
        mine.insert(mine.end(), {old_rank, v, rec->manifest.nranks, static_cast<uint64_t>(rank_),
                                 other.is_protected(v) ? 1ull : 0ull});
      }
    }
  }
  std::vector<uint64_t> all;
  CAIRN_TRY(allgather_u64(app_comm_, mine, &all));
  std::map<uint64_t, uint64_t> versions;  // version -> p_old
  for (size_t i = 0; i < all.size(); i += kTuple) versions[all[i + 1]] = all[i + 2];
  // L3: committed versions of another rank count, listed by rank 0.
  std::vector<uint64_t> l3;
  if (rank_ == 0)
    for (const auto& c : l3::list_committed(layout_))
      if (c.nranks != static_cast<uint32_t>(nranks_)) l3.insert(l3.end(), {c.version, c.nranks});
  int nl3 = static_cast<int>(l3.size());
  CAIRN_MPI(MPI_Bcast(&nl3, 1, MPI_INT, 0, app_comm_));
  l3.resize(static_cast<size_t>(nl3));
  if (nl3) CAIRN_MPI(MPI_Bcast(l3.data(), nl3, MPI_UINT64_T, 0, app_comm_));
  std::set<uint64_t> in_l3;
  for (size_t i = 0; i < l3.size(); i += 2) versions.emplace(l3[i], l3[i + 1]), in_l3.insert(l3[i]);
  for (uint64_t r : rejected_) versions.erase(r);
  std::erase_if(versions, [&](const auto& kv) { return kv.first <= above || kv.first > at_most; });

  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    uint64_t v = it->first;
    int p_old = static_cast<int>(it->second);
    std::vector<std::vector<uint64_t>> holders(static_cast<size_t>(p_old));  // reporting ranks per old rank
    std::vector<bool> prot(static_cast<size_t>(p_old), false);
    for (size_t i = 0; i < all.size(); i += kTuple)
      if (all[i + 1] == v && all[i + 2] == static_cast<uint64_t>(p_old) && all[i] < static_cast<uint64_t>(p_old)) {
        holders[all[i]].push_back(all[i + 3]);
        if (all[i + 4]) prot[all[i]] = true;
      }
    std::string attempt;
    bool complete = std::all_of(holders.begin(), holders.end(), [](auto& h) { return !h.empty(); });
    RestartChoice c;
    c.version = v;
    c.p_old = p_old;
    if (complete) {
      Status st = reshaped_from_l1(v, p_old, holders, &c.held, &c.in_place);
      if (st.code() == Code::ERR_MPI || st.code() == Code::ERR_INTERNAL) return st;
      if (st.is_ok()) {
        c.level = CAIRN_LEVEL_L1;
        c.host_of_old.resize(static_cast<size_t>(p_old));
        for (int k = 0; k < p_old; ++k) c.host_of_old[k] = static_cast<int>(holders[k][0]);
        // The host of old rank k is a rank of the first reporting node, spread over that node's ranks.
        for (int k = 0; k < p_old; ++k) {
          std::vector<int> on_node;
          for (int r = 0; r < nranks_; ++r)
            if (node_of_rank_[r] == node_of_rank_[holders[k][0]]) on_node.push_back(r);
          c.host_of_old[k] = on_node[static_cast<size_t>(k) % on_node.size()];
        }
        *out = std::move(c);
        return Status::ok();
      }
      attempt = "L1: " + st.message() + "; ";
    } else {
      int have = static_cast<int>(std::count_if(holders.begin(), holders.end(), [](auto& h) { return !h.empty(); }));
      attempt = "L1 holds " + std::to_string(have) + " of its " + std::to_string(p_old) + " ranks; ";
    }
    // L2: rebuild the old ranks that are missing (or failed verification) from their redundancy sets.
    // Only where some old rank's copy was protected (its L2 redundancy complete): a version written
    // without L2 (redundancy single) has no set records to rebuild from.
    bool any_holder = std::any_of(holders.begin(), holders.end(), [](auto& h) { return !h.empty(); });
    bool any_protected = std::any_of(prot.begin(), prot.end(), [](bool p) { return p; });
    if (any_holder && !any_protected) attempt += "L2: no redundancy data (not protected at L2); ";
    if (any_holder && any_protected) {
      Status st = reshaped_from_l2(v, p_old, holders, prot, &c.held, &c.host_of_old);
      if (st.code() == Code::ERR_MPI) return st;
      if (st.is_ok()) {
        c.level = CAIRN_LEVEL_L2;
        *out = std::move(c);
        return Status::ok();
      }
      attempt += "L2: " + st.message() + "; ";
    }
    if (in_l3.count(v)) {
      bool direct = false;
      Status st = reshaped_from_l3_direct(v, p_old, &direct);
      if (st.is_ok() && !direct) st = reshaped_from_l3(v, p_old, &c.held);
      if (st.code() == Code::ERR_MPI) return st;
      if (st.is_ok()) {
        c.level = CAIRN_LEVEL_L3;
        c.in_place = direct;
        c.host_of_old.resize(static_cast<size_t>(p_old));
        for (int k = 0; k < p_old; ++k) c.host_of_old[k] = k % nranks_;
        *out = std::move(c);
        return Status::ok();
      }
      attempt += "L3: " + st.message();
    } else {
      attempt += "not in L3";
    }
    *why += " version " + std::to_string(v) + " (written by " + std::to_string(p_old) + " ranks): " + attempt + ".";
    if (rank_ == 0) LOG_WARN("restart: version %llu (%d ranks) is not recoverable: %s", static_cast<unsigned long long>(v), p_old, attempt.c_str());
  }
  return Status(Code::ERR_NO_CHECKPOINT, "no version of another rank count");
}

Status Runtime::reshaped_from_l1(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                                 std::vector<HeldStream>* held, bool* streamed) {
  held->clear();
  *streamed = false;
  double t0 = now_seconds();
  // The host of old rank k: a rank of the first reporting node, spread over that node's ranks.
  std::vector<int> host_of_old(static_cast<size_t>(p_old));
  for (int k = 0; k < p_old; ++k) {
    auto on_node = ranks_on_node_of(node_of_rank_, static_cast<int>(holders[k][0]));
    host_of_old[k] = on_node[static_cast<size_t>(k) % on_node.size()];
  }
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
      if (other.open(layout_.rank_cache(cfg_.node, 0), cfg_.cache_versions).is_ok()) {
        auto rec = other.read_record(v);
        if (rec) bytes = encode_manifest(rec->manifest);
      }
    }
    unsigned long long len = bytes.size();
    CAIRN_MPI(MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, host_of_old[0], app_comm_));
    bytes.resize(len);
    if (len) CAIRN_MPI(MPI_Bcast(bytes.data(), static_cast<int>(len), MPI_CHAR, host_of_old[0], app_comm_));
    auto m = decode_manifest(bytes.data(), bytes.size());
    int fits = 0;
    if (len && m) {
      table = std::move(m).value();
      fits = regions_fit(regions_, table, nranks_, rank_, &wants);
      if (fits && streamable(table, wants, p_old, nranks_, rank_, host_of_old)) fits = 2;
    }
    CAIRN_MPI(MPI_Allreduce(&fits, &place, 1, MPI_INT, MPI_MIN, app_comm_));
  }
  if (place == 2) {  // the move overlaps the read (reshape_stream.cpp)
    Status st = reshaped_from_l1_streamed(v, p_old, host_of_old, wants);
    *streamed = st.is_ok();
    return st;
  }
  Status local = Status::ok();
  for (int k = 0; k < p_old && local.is_ok(); ++k) {
    if (host_of_old[k] != rank_) continue;
    local = [&]() -> Status {
      // (reshaped_from_l2 reads the same way, read-write: the set exchange takes non-const buffers)
      CacheStore other;
      CAIRN_TRY(other.open(layout_.rank_cache(cfg_.node, k), cfg_.cache_versions));
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
          CAIRN_ASSIGN_OR_RETURN(plan, redist::plan_for_src(w.dist, p_old, nranks_, k));
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

Status Runtime::reshaped_from_l3(uint64_t v, int p_old, std::vector<HeldStream>* held) {
  held->clear();
  double t0 = now_seconds();
  Status local = Status::ok();
  for (int k = rank_; k < p_old && local.is_ok(); k += nranks_) {
    local = [&]() -> Status {
      CAIRN_ASSIGN_OR_RETURN(m, l3::read_manifest(layout_, v, static_cast<uint32_t>(k)));
      HeldStream h;
      h.old_rank = k;
      // Anonymous memory, not zero-filled; read and verified chunk by chunk in one pass.
      auto buf = MappedFile::anonymous(m.total_size);
      if (!buf)
        return make_error(Code::ERR_NO_MEMORY, "no memory to stage old rank %d of version %llu: %s", k,
                          static_cast<unsigned long long>(v), buf.status().message().c_str());
      h.map = std::make_shared<MappedFile>(std::move(buf).value());
      CAIRN_TRY(l3::read_data_verified(layout_, m, whole_stream(m, h.map->data())));
      h.manifest = std::move(m);
      h.data = h.map->data();
      held->push_back(std::move(h));
      return Status::ok();
    }();
  }
  double read_ms = (now_seconds() - t0) * 1e3;
  Status all = agree(app_comm_, local);
  if (!all.is_ok()) held->clear();
  else if (rank_ == 0)
    LOG_INFO("restart: version %llu (%d ranks) read and verified at L3 in %.1f ms on rank 0 (%zu old ranks' files)",
             static_cast<unsigned long long>(v), p_old, read_ms, held->size());
  return all;
}

Status Runtime::reshaped_from_l3_direct(uint64_t v, int p_old, bool* done) {
  *done = false;
  if (!restart_in_place_) return Status::ok();  // cairn_restart_available: the regions stay untouched
  double t0 = now_seconds();
  // The version's region table (old rank 0's manifest), read once and shared.
  std::string table;
  if (rank_ == 0) {
    auto m0 = l3::read_manifest(layout_, v, 0);
    if (m0) table = encode_manifest(*m0);
  }
  unsigned long long tlen = table.size();
  CAIRN_MPI(MPI_Bcast(&tlen, 1, MPI_UNSIGNED_LONG_LONG, 0, app_comm_));
  if (tlen == 0) return Status::ok();  // the general path says what is wrong
  table.resize(tlen);
  CAIRN_MPI(MPI_Bcast(table.data(), static_cast<int>(tlen), MPI_CHAR, 0, app_comm_));
  auto m0 = decode_manifest(table.data(), table.size());
  if (!m0) return Status::ok();
  // Direct only if every rank's regions already are what the new layout needs (no resize, nothing the
  // general path would refuse), decided together: otherwise no region is touched here.
  std::vector<ReshapeWant> wants;
  int fits = regions_fit(regions_, *m0, nranks_, rank_, &wants);
  int all_fit = 0;
  CAIRN_MPI(MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, app_comm_));
  if (!all_fit) return Status::ok();

  // This rank's pieces, per old rank, as destinations of that old rank's stream.
  Status local = [&]() -> Status {
    std::map<int, std::vector<std::pair<size_t, redist::Transfer>>> by_old;
    for (size_t i = 0; i < wants.size(); ++i) {
      CAIRN_ASSIGN_OR_RETURN(plan, redist::plan_for_dst(wants[i].dist, p_old, nranks_, rank_));
      for (const auto& t : plan) by_old[t.src].push_back({i, t});
    }
    for (const auto& [k, pieces] : by_old) {
      CAIRN_ASSIGN_OR_RETURN(mk, l3::read_manifest(layout_, v, static_cast<uint32_t>(k)));
      std::vector<StreamExtent> extents;
      for (const auto& [i, t] : pieces) {
        const RegionEntry& e = *wants[i].entry;
        CAIRN_ASSIGN_OR_RETURN(re, held_region(mk, wants[i], p_old, k));
        extents.push_back({re->offset + t.src_offset * e.elem_size, t.count * e.elem_size,
                           static_cast<uint8_t*>(regions_[e.name].ptr) + t.dst_offset * e.elem_size});
      }
      std::sort(extents.begin(), extents.end(), [](const StreamExtent& a, const StreamExtent& b) { return a.offset < b.offset; });
      CAIRN_TRY(l3::read_ranges_verified(layout_, mk, extents));
    }
    return Status::ok();
  }();
  double read_ms = (now_seconds() - t0) * 1e3;
  if (!local.is_ok())
    LOG_WARN("restart: version %llu (%d ranks) in L3: %s", static_cast<unsigned long long>(v), p_old, local.message().c_str());
  CAIRN_TRY(agree(app_comm_, local));
  adopt_distributions(regions_, wants);
  if (rank_ == 0)
    LOG_INFO("restart: version %llu (%d ranks) read from L3 by every rank straight into its regions and verified "
             "in %.1f ms on rank 0", static_cast<unsigned long long>(v), p_old, read_ms);
  *done = true;
  return Status::ok();
}

// L2 across rank counts. The old ranks whose caches survive are hosted on their nodes (as for L1) and
// verified; every old redundancy set that lost members within its tolerance is rebuilt by its members'
// hosts -- one current rank per old member, the lost members' hosts taken from ranks that host no
// other member of that set -- over a communicator split for that set.
Status Runtime::reshaped_from_l2(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                                 const std::vector<bool>& prot, std::vector<HeldStream>* held,
                                 std::vector<int>* host_of_old) {
  held->clear();
  host_of_old->assign(static_cast<size_t>(p_old), -1);
  for (int k = 0; k < p_old; ++k)
    if (!holders[k].empty()) {
      auto on_node = ranks_on_node_of(node_of_rank_, static_cast<int>(holders[k][0]));
      (*host_of_old)[k] = on_node[static_cast<size_t>(k) % on_node.size()];
    }
  // Hosts verify their survivors and report (k, ok, scheme, m, n, members...) from the set records.
  std::vector<uint64_t> report;
  std::map<int, std::string> set_bytes_of;  // hosted survivor -> its set record
  for (int k = 0; k < p_old; ++k) {
    if ((*host_of_old)[k] != rank_) continue;
    Status st = [&]() -> Status {
      CacheStore other;
      CAIRN_TRY(other.open(layout_.rank_cache(cfg_.node, k), cfg_.cache_versions));
      CAIRN_ASSIGN_OR_RETURN(rec, other.read_record(v));
      CAIRN_ASSIGN_OR_RETURN(map, MappedFile::open_rw(other.slot_path(static_cast<int>(rec.slot)), 0, false));
      if (map.size() < rec.manifest.total_size)
        return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", map.path().c_str());
      CAIRN_TRY(verify_stream(rec.manifest, map.data(), rec.manifest.total_size).prefixed(map.path()));
      CAIRN_ASSIGN_OR_RETURN(bytes, other.read_set(v));
      CAIRN_ASSIGN_OR_RETURN(set, redundancy::decode_set_record(bytes));
      HeldStream h;
      h.old_rank = k;
      h.manifest = rec.manifest;
      h.map = std::make_shared<MappedFile>(std::move(map));
      h.data = h.map->data();
      h.red_path = other.red_path(static_cast<int>(rec.slot));
      held->push_back(std::move(h));
      set_bytes_of[k] = bytes;
      report.insert(report.end(), {static_cast<uint64_t>(k), 1, static_cast<uint64_t>(set.scheme), set.m, set.n});
      report.insert(report.end(), set.ranks.begin(), set.ranks.end());
      return Status::ok();
    }();
    if (!st.is_ok()) {
      LOG_WARN("restart: old rank %d of version %llu: %s", k, static_cast<unsigned long long>(v), st.message().c_str());
      report.insert(report.end(), {static_cast<uint64_t>(k), 0, 0, 0, 0});
    }
  }
  std::vector<uint64_t> all;
  CAIRN_TRY(allgather_u64(app_comm_, report, &all));

  // The global picture, the same on every rank: which old ranks are good, and the sets.
  std::vector<bool> good(static_cast<size_t>(p_old), false);
  struct OldSet {
    Redundancy scheme;
    int m;
    std::vector<int> members;
  };
  std::map<int, OldSet> sets;     // keyed by the set's first member
  std::vector<int> set_of(static_cast<size_t>(p_old), -1);
  for (size_t i = 0; i < all.size();) {
    int k = static_cast<int>(all[i]);
    bool ok = all[i + 1] != 0;
    int setn = static_cast<int>(all[i + 4]);
    if (ok && k < p_old) {
      good[k] = prot[k];
      OldSet s{static_cast<Redundancy>(all[i + 2]), static_cast<int>(all[i + 3]), {}};
      for (int j = 0; j < setn; ++j) s.members.push_back(static_cast<int>(all[i + 5 + j]));
      if (!s.members.empty()) {
        for (int mbr : s.members)
          if (mbr < p_old) set_of[mbr] = s.members.front();
        sets[s.members.front()] = s;
      }
    }
    i += 5 + static_cast<size_t>(ok ? setn : 0);
  }
  std::string reason;
  for (int k = 0; k < p_old && reason.empty(); ++k)
    if (!good[k] && set_of[k] < 0) reason = "old rank " + std::to_string(k) + " is lost and no survivor of its set reports it";
  std::vector<int> to_rebuild;  // sets with losses
  for (auto& [id, s] : sets) {
    if (!reason.empty()) break;
    std::vector<bool> lost(s.members.size());
    bool any = false;
    for (size_t i = 0; i < s.members.size(); ++i) any |= (lost[i] = !good[static_cast<size_t>(s.members[i])]);
    if (!any) continue;
    auto code = redundancy::SetCode::make(s.scheme, static_cast<int>(s.members.size()), s.m);
    if (!code || !code->recoverable(lost))
      reason = "set of old ranks " + std::to_string(s.members.front()) + ".. lost more members than " +
               redundancy_name(s.scheme) + " tolerates";
    else if (static_cast<int>(s.members.size()) > nranks_)
      reason = "a set of " + std::to_string(s.members.size()) + " members cannot be rebuilt by " + std::to_string(nranks_) + " ranks";
    to_rebuild.push_back(id);
  }
  if (!reason.empty()) {
    held->clear();
    return Status(Code::ERR_UNRECOVERABLE, reason);
  }
  // Hosts of lost members: ranks hosting no other member of the set, spread round-robin.
  int next = 0;
  for (int id : to_rebuild) {
    std::set<int> used;
    for (int mbr : sets[id].members)
      if (good[static_cast<size_t>(mbr)]) used.insert((*host_of_old)[mbr]);
    for (int mbr : sets[id].members) {
      if (good[static_cast<size_t>(mbr)]) continue;
      while (used.count(next % nranks_)) ++next;
      (*host_of_old)[mbr] = next % nranks_;
      used.insert(next % nranks_);
      ++next;
    }
  }
  // A survivor that failed verification is rebuilt: its mapping is no longer what we hold.
  std::erase_if(*held, [&](const HeldStream& h) { return !good[static_cast<size_t>(h.old_rank)]; });

  Status local = Status::ok();
  for (int id : to_rebuild) {
    const OldSet& s = sets[id];
    int my_member = -1;
    for (size_t i = 0; i < s.members.size(); ++i)
      if ((*host_of_old)[s.members[i]] == rank_) my_member = static_cast<int>(i);
    MPI_Comm comm = MPI_COMM_NULL;
    CAIRN_MPI(MPI_Comm_split(app_comm_, my_member >= 0 ? id : MPI_UNDEFINED, my_member, &comm));
    if (comm == MPI_COMM_NULL) continue;
    Status st = [&]() -> Status {
      int n_members = static_cast<int>(s.members.size());
      std::vector<bool> lost(static_cast<size_t>(n_members));
      int first = -1;
      for (int i = 0; i < n_members; ++i) {
        lost[i] = !good[static_cast<size_t>(s.members[i])];
        if (!lost[i] && first < 0) first = i;
      }
      std::string bytes = my_member == first ? set_bytes_of[s.members[first]] : std::string();
      unsigned long long len = bytes.size();
      CAIRN_MPI(MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, first, comm));
      bytes.resize(len);
      CAIRN_MPI(MPI_Bcast(bytes.data(), static_cast<int>(len), MPI_CHAR, first, comm));
      auto code = redundancy::SetCode::make(s.scheme, n_members, s.m);
      auto rec = redundancy::decode_set_record(bytes);
      std::vector<size_t> lens;
      Manifest mine;
      Status prep = code.is_ok() ? rec.status() : code.status();
      for (int i = 0; prep.is_ok() && i < n_members; ++i) {
        auto mi = decode_manifest(rec->manifests[i].data(), rec->manifests[i].size());
        if (!mi) prep = mi.status();
        else lens.push_back(mi->total_size), (i == my_member ? (void)(mine = *mi) : (void)0);
      }
      HeldStream h;
      uint8_t* data = nullptr;
      std::shared_ptr<MappedFile> red;
      std::vector<uint8_t> scratch_red;
      if (prep.is_ok()) {
        size_t red_len = std::max<size_t>(code->redundancy_len(*std::max_element(lens.begin(), lens.end())), 1);
        if (lost[my_member]) {
          h.storage.assign(std::max<uint64_t>(mine.total_size, 1), 0);
          data = h.storage.data();
          scratch_red.assign(red_len, 0);
        } else {
          auto it = std::find_if(held->begin(), held->end(), [&](const HeldStream& x) { return x.old_rank == s.members[my_member]; });
          data = const_cast<uint8_t*>(it->data);
          auto m = MappedFile::open_rw(it->red_path, 0, false);
          if (!m) prep = m.status();
          else if (m->size() < red_len) prep = make_error(Code::ERR_CORRUPT, "%s: shorter than the redundancy data", it->red_path.c_str());
          else red = std::make_shared<MappedFile>(std::move(m).value());
        }
      }
      CAIRN_TRY(agree(comm, prep));  // the whole set exchanges, or none of it
      CAIRN_TRY(redundancy::rebuild_set(comm, *code, lost, data, lens, red ? red->data() : scratch_red.data(),
                                        cfg_.exchange_chunk));
      if (lost[my_member]) {
        CAIRN_TRY(verify_stream(mine, data, mine.total_size).prefixed("rebuilt old rank " + std::to_string(s.members[my_member])));
        h.old_rank = s.members[my_member];
        h.manifest = mine;
        h.data = h.storage.data();
        held->push_back(std::move(h));
      }
      return Status::ok();
    }();
    MPI_Comm_free(&comm);
    if (st.code() == Code::ERR_MPI) return st;
    if (!st.is_ok() && local.is_ok()) local = st;
  }
  Status all_ok = agree(app_comm_, local);
  if (!all_ok.is_ok()) held->clear();
  else if (rank_ == 0) LOG_INFO("restart: version %llu (%d ranks) rebuilt at L2 for the new layout", static_cast<unsigned long long>(v), p_old);
  return all_ok;
}

Status Runtime::move_regions(MPI_Comm comm, int p_old, const std::vector<int>& host_of_old,
                             const std::vector<int>& new_rank_of, const std::vector<HeldStream>& held,
                             bool restart) {
  int me = 0, size = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &size);
  int my_new = new_rank_of[static_cast<size_t>(me)];
  int p_new = static_cast<int>(std::count_if(new_rank_of.begin(), new_rank_of.end(), [](int r) { return r >= 0; }));
  std::vector<int> comm_of_new(static_cast<size_t>(p_new));
  for (int u = 0; u < size; ++u)
    if (new_rank_of[u] >= 0) comm_of_new[static_cast<size_t>(new_rank_of[u])] = u;

  // The region table of the version: old rank 0's manifest, from its host.
  std::string table;
  for (const auto& h : held)
    if (h.old_rank == 0) table = encode_manifest(h.manifest);
  unsigned long long tlen = table.size();
  CAIRN_MPI(MPI_Bcast(&tlen, 1, MPI_UNSIGNED_LONG_LONG, host_of_old[0], comm));
  table.resize(tlen);
  CAIRN_MPI(MPI_Bcast(table.data(), static_cast<int>(tlen), MPI_CHAR, host_of_old[0], comm));
  CAIRN_ASSIGN_OR_RETURN(m0, decode_manifest(table.data(), table.size()));

  // Check every region and size the new buffers before anything moves.
  struct Move {
    const RegionEntry* entry;
    redist::Distribution dist;
  };
  std::vector<Move> moves;
  Status check = Status::ok();
  for (const auto& e : m0.regions) {
    if (e.kind != RegionKind::memory) {
      check = make_error(Code::ERR_NOT_SUPPORTED, "file '%s': files cannot move to another rank count", e.name.c_str());
      break;
    }
    auto d = redist::Distribution::from_params(e.distribution, e.dist_params, e.count);
    if (!d) {
      check = d.status().prefixed("region '" + e.name + "'");
      break;
    }
    if (d->kind == redist::Kind::private_ && p_old != p_new) {
      check = make_error(Code::ERR_NOT_SUPPORTED, "region '%s' is private (per-rank data): it cannot move from %d to %d ranks; "
                         "protect it with cairn_protect_distributed to make it redistributable", e.name.c_str(), p_old, p_new);
      break;
    }
    moves.push_back({&e, *d});
  }
  if (check.is_ok() && my_new >= 0 && restart) {
    for (const auto& [name, r] : regions_) {
      bool found = std::any_of(m0.regions.begin(), m0.regions.end(), [&](const RegionEntry& e) { return e.name == name; });
      if (!found) {
        check = make_error(Code::ERR_UNKNOWN_REGION, "region '%s' is protected but version %llu has no such region",
                           name.c_str(), static_cast<unsigned long long>(m0.version));
        break;
      }
    }
  }
  // What this process sends, per move and destination process: (address, bytes) pieces in the order
  // the receiver expects them, by old rank then offset. Nothing is copied here: the pieces are sent
  // straight out of the held streams (slots, staging buffers, the live copy).
  using Pieces = std::vector<std::pair<const void*, uint64_t>>;
  std::vector<std::vector<Pieces>> sends(moves.size());  // per move, per comm rank
  std::vector<const HeldStream*> by_old;
  for (const auto& h : held) by_old.push_back(&h);
  std::sort(by_old.begin(), by_old.end(), [](const HeldStream* a, const HeldStream* b) { return a->old_rank < b->old_rank; });
  if (check.is_ok()) {
    for (size_t i = 0; i < moves.size() && check.is_ok(); ++i) {
      sends[i].assign(static_cast<size_t>(size), {});
      const RegionEntry& e = *moves[i].entry;
      for (const HeldStream* hp : by_old) {
        const HeldStream& h = *hp;
        auto re = std::find_if(h.manifest.regions.begin(), h.manifest.regions.end(),
                               [&](const RegionEntry& x) { return x.name == e.name; });
        if (re == h.manifest.regions.end() || re->elem_size != e.elem_size) {
          check = make_error(Code::ERR_CORRUPT, "region '%s' is missing or differs on old rank %d", e.name.c_str(), h.old_rank);
          break;
        }
        // The plan reads local_count elements of this old rank's piece: it must hold that many.
        uint64_t held_want = moves[i].dist.kind == redist::Kind::replicated
                                 ? moves[i].dist.global_count
                                 : redist::local_count(moves[i].dist, p_old, h.old_rank);
        if (re->count != held_want) {
          check = make_error(Code::ERR_SIZE_MISMATCH, "region '%s' of old rank %d of %d holds %llu elements, its %s "
                             "distribution gives it %llu", e.name.c_str(), h.old_rank, p_old,
                             static_cast<unsigned long long>(re->count), redist::kind_name(moves[i].dist.kind),
                             static_cast<unsigned long long>(held_want));
          break;
        }
        auto plan = redist::plan_for_src(moves[i].dist, p_old, p_new, h.old_rank);
        if (!plan) {
          check = plan.status().prefixed("region '" + e.name + "'");
          break;
        }
        // Sorted by (dst, dst_offset): for one destination that is also source order.
        for (const auto& t : *plan) {
          if (h.self_placed && comm_of_new[static_cast<size_t>(t.dst)] == me) continue;  // already there
          const uint8_t* src = h.data + re->offset + t.src_offset * e.elem_size;
          sends[i][static_cast<size_t>(comm_of_new[static_cast<size_t>(t.dst)])].push_back({src, t.count * e.elem_size});
        }
      }
    }
  }
  // Size this rank's new buffers (resize callbacks).
  if (check.is_ok() && my_new >= 0) {
    for (const auto& mv : moves) {
      const RegionEntry& e = *mv.entry;
      uint64_t want = mv.dist.kind == redist::Kind::replicated ? mv.dist.global_count
                                                                : redist::local_count(mv.dist, p_new, my_new);
      auto it = regions_.find(e.name);
      if (it == regions_.end()) {
        check = make_error(Code::ERR_UNKNOWN_REGION, "region '%s' of the version is not protected on this rank", e.name.c_str());
        break;
      }
      Region& r = it->second;
      if (r.elem_size != e.elem_size) {
        check = make_error(Code::ERR_SIZE_MISMATCH, "region '%s': elements of %u bytes now, %u in the version", e.name.c_str(),
                           r.elem_size, e.elem_size);
        break;
      }
      if (r.count != want) {
        if (!r.resize) {
          check = make_error(Code::ERR_SIZE_MISMATCH, "region '%s': %zu elements protected, rank %d of %d needs %llu "
                             "(register a resize callback with cairn_set_resize, or protect the right count)",
                             e.name.c_str(), r.count, my_new, p_new, static_cast<unsigned long long>(want));
          break;
        }
        void* p = r.resize(e.name.c_str(), static_cast<size_t>(want), r.resize_user);
        if (!p && want > 0) {
          check = make_error(Code::ERR_NO_MEMORY, "region '%s': the resize callback returned NULL for %llu elements",
                             e.name.c_str(), static_cast<unsigned long long>(want));
          break;
        }
        r.ptr = p;
        r.count = static_cast<size_t>(want);
      }
      r.dist_kind = e.distribution;
      r.dist_params = mv.dist.to_params();
    }
  }
  CAIRN_TRY(agree(comm, check));

  // Move, region by region: one MPI_Alltoallw each, with a datatype per peer that lists the pieces at
  // their absolute addresses (MPI_BOTTOM), so the bytes go from the held streams straight into the new
  // buffers: no packing, no unpacking, no staging of what moves.
  auto make_type = [](const Pieces& pieces, MPI_Datatype* type, int* count) -> Status {
    *type = MPI_BYTE;
    *count = 0;
    if (pieces.empty()) return Status::ok();
    constexpr uint64_t kMaxBlock = uint64_t{1} << 30;  // block lengths are ints
    std::vector<int> lens;
    std::vector<MPI_Aint> displs;
    for (const auto& [addr, bytes] : pieces)
      for (uint64_t at = 0; at < bytes; at += kMaxBlock) {
        MPI_Aint a = 0;
        CAIRN_MPI(MPI_Get_address(static_cast<const uint8_t*>(addr) + at, &a));
        lens.push_back(static_cast<int>(std::min(kMaxBlock, bytes - at)));
        displs.push_back(a);
      }
    CAIRN_MPI(MPI_Type_create_hindexed(static_cast<int>(lens.size()), lens.data(), displs.data(), MPI_BYTE, type));
    CAIRN_MPI(MPI_Type_commit(type));
    *count = 1;
    return Status::ok();
  };
  std::set<int> placed_here;  // old ranks hosted here whose pieces for this process are in place
  for (const auto& h : held)
    if (h.self_placed) placed_here.insert(h.old_rank);
  Status kept = Status::ok();
  for (size_t i = 0; i < moves.size(); ++i) {
    const RegionEntry& e = *moves[i].entry;
    std::vector<Pieces> recvs(static_cast<size_t>(size));
    if (my_new >= 0) {
      // Sorted by (src, src_offset): per host, the order in which it sends.
      CAIRN_ASSIGN_OR_RETURN(incoming, redist::plan_for_dst(moves[i].dist, p_old, p_new, my_new));
      uint8_t* dst = static_cast<uint8_t*>(regions_[e.name].ptr);
      for (const auto& t : incoming) {
        if (host_of_old[static_cast<size_t>(t.src)] == me && placed_here.count(t.src)) continue;  // already there
        recvs[static_cast<size_t>(host_of_old[static_cast<size_t>(t.src)])].push_back(
            {dst + t.dst_offset * e.elem_size, t.count * e.elem_size});
      }
    }
    std::vector<int> scount(static_cast<size_t>(size)), rcount(static_cast<size_t>(size)), zero(static_cast<size_t>(size), 0);
    std::vector<MPI_Datatype> stype(static_cast<size_t>(size), MPI_BYTE), rtype(static_cast<size_t>(size), MPI_BYTE);
    auto free_types = [&] {
      for (auto* v : {&stype, &rtype})
        for (auto& t : *v)
          if (t != MPI_BYTE) MPI_Type_free(&t);
    };
    // Post the exchange (what stays here has count 0 in it), copy what stays here while the peers pull
    // their pieces (Open MPI's shared-memory transport copies large messages on the receiver's side),
    // then wait.
    Status built = Status::ok();
    for (int u = 0; u < size && built.is_ok(); ++u) {
      if (u == me) continue;
      built = make_type(sends[i][static_cast<size_t>(u)], &stype[static_cast<size_t>(u)], &scount[static_cast<size_t>(u)]);
      if (built.is_ok()) built = make_type(recvs[static_cast<size_t>(u)], &rtype[static_cast<size_t>(u)], &rcount[static_cast<size_t>(u)]);
    }
    if (!built.is_ok()) {
      free_types();
      return built;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ialltoallw(MPI_BOTTOM, scount.data(), zero.data(), stype.data(), MPI_BOTTOM, rcount.data(), zero.data(),
                            rtype.data(), comm, &req);
    if (rc == MPI_SUCCESS) {
      // Piece against piece: both lists are in the same order.
      const Pieces& from = sends[i][static_cast<size_t>(me)];
      const Pieces& to = recvs[static_cast<size_t>(me)];
      size_t a = 0, b = 0;
      uint64_t at_a = 0, at_b = 0;
      while (a < from.size() && b < to.size()) {
        uint64_t n = std::min(from[a].second - at_a, to[b].second - at_b);
        memcpy(const_cast<uint8_t*>(static_cast<const uint8_t*>(to[b].first)) + at_b,
               static_cast<const uint8_t*>(from[a].first) + at_a, n);
        if ((at_a += n) == from[a].second) ++a, at_a = 0;
        if ((at_b += n) == to[b].second) ++b, at_b = 0;
      }
      if ((a != from.size() || b != to.size()) && kept.is_ok())  // the plans disagree: cannot happen
        kept = make_error(Code::ERR_INTERNAL, "region '%s': the bytes to keep and their places differ", e.name.c_str());
      rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    free_types();
    std::vector<Pieces>().swap(sends[i]);
    if (rc != MPI_SUCCESS) return make_error(Code::ERR_MPI, "MPI_Ialltoallw moving region '%s' failed (%d)", e.name.c_str(), rc);
  }
  CAIRN_TRY(agree(comm, kept));
  return Status::ok();
}

}  // namespace cairn
