// Reshaping restart from L3: hosted (old rank k read by rank k mod P), or direct into the regions.
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

Status Reshaper::from_l3(uint64_t v, int p_old, std::vector<HeldStream>* held) {
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

Status Reshaper::from_l3_direct(uint64_t v, int p_old, bool* done) {
  *done = false;
  if (!restart_in_place_) return Status::ok();  // cairn_restart_available: the regions stay untouched
  double t0 = now_seconds();
  // The version's region table (old rank 0's manifest), read once and shared. Direct only if every
  // rank's regions already are what the new layout needs (no resize, nothing the general path would
  // refuse), decided together: otherwise no region is touched here.
  std::string bytes;
  if (rank_ == 0) {
    auto m0 = l3::read_manifest(layout_, v, 0);
    if (m0) bytes = encode_manifest(*m0);
  }
  Manifest table;
  std::vector<ReshapeWant> wants;  // into `table`
  CAIRN_ASSIGN_OR_RETURN(all_fit, share_table_and_fit(std::move(bytes), 0, &table, &wants));
  if (!all_fit) return Status::ok();

  // This rank's pieces, per old rank, as destinations of that old rank's stream.
  Status local = [&]() -> Status {
    std::map<int, std::vector<std::pair<size_t, redistribute::Transfer>>> by_old;
    for (size_t i = 0; i < wants.size(); ++i) {
      CAIRN_ASSIGN_OR_RETURN(plan, redistribute::plan_for_dst(wants[i].dist, p_old, nranks_, rank_));
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

}  // namespace cairn
