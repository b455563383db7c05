// Moving distributed regions between layouts: one MPI_Ialltoallw per region, with datatypes at the
// pieces' addresses, so nothing is packed or unpacked.
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

Status move_regions(MPI_Comm comm, RegionTable& regions, int p_old, const std::vector<int>& host_of_old,
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
    redistribute::Distribution dist;
  };
  std::vector<Move> moves;
  Status check = Status::ok();
  for (const auto& e : m0.regions) {
    if (e.kind != RegionKind::memory) {
      check = make_error(Code::ERR_NOT_SUPPORTED, "file '%s': files cannot move to another rank count", e.name.c_str());
      break;
    }
    auto d = redistribute::Distribution::from_params(e.distribution, e.dist_params, e.count);
    if (!d) {
      check = d.status().prefixed("region '" + e.name + "'");
      break;
    }
    if (d->kind == redistribute::Kind::private_ && p_old != p_new) {
      check = make_error(Code::ERR_NOT_SUPPORTED, "region '%s' is private (per-rank data): it cannot move from %d to %d ranks; "
                         "protect it with cairn_protect_distributed to make it redistributable", e.name.c_str(), p_old, p_new);
      break;
    }
    moves.push_back({&e, *d});
  }
  if (check.is_ok() && my_new >= 0 && restart) {
    for (const auto& [name, r] : regions) {
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
        uint64_t held_want = moves[i].dist.kind == redistribute::Kind::replicated
                                 ? moves[i].dist.global_count
                                 : redistribute::local_count(moves[i].dist, p_old, h.old_rank);
        if (re->count != held_want) {
          check = make_error(Code::ERR_SIZE_MISMATCH, "region '%s' of old rank %d of %d holds %llu elements, its %s "
                             "distribution gives it %llu", e.name.c_str(), h.old_rank, p_old,
                             static_cast<unsigned long long>(re->count), redistribute::kind_name(moves[i].dist.kind),
                             static_cast<unsigned long long>(held_want));
          break;
        }
        auto plan = redistribute::plan_for_src(moves[i].dist, p_old, p_new, h.old_rank);
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
      uint64_t want = mv.dist.kind == redistribute::Kind::replicated ? mv.dist.global_count
                                                                      : redistribute::local_count(mv.dist, p_new, my_new);
      auto it = regions.find(e.name);
      if (it == regions.end()) {
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
      CAIRN_ASSIGN_OR_RETURN(incoming, redistribute::plan_for_dst(moves[i].dist, p_old, p_new, my_new));
      uint8_t* dst = static_cast<uint8_t*>(regions[e.name].ptr);
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
