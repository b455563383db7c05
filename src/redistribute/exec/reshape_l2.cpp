// Reshaping restart from L2: the old redundancy sets rebuild their lost members onto new hosts.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "base/clock.hpp"
#include "cache/cache_store.hpp"
#include "mpi/mpi_util.hpp"
#include "l3/l3_store.hpp"
#include "redistribute/exec/reshaper.hpp"
#include "redistribute/plan.hpp"
#include "redundancy/set_record.hpp"
#include "restore/mpi/set_rebuild.hpp"
#include "restore/plan.hpp"

namespace cairn {

// L2 across rank counts. The old ranks whose caches survive are hosted on their nodes (as for L1); every
// old redundancy set that lost members within its tolerance is rebuilt by its members' hosts -- one
// current rank per old member, the lost members' hosts taken from ranks that host no other member of that
// set -- over a communicator split for that set.
//
// The hosts report what they hold (records and set records, read without hashing the data) before they
// verify it. So a lost member's host knows what it will rebuild, and faults in its staging memory while
// the survivors are hashed. If a survivor then fails its check, every rank learns it, the layout is made
// again with that old rank lost too, and staging prepared for another layout is dropped.
Status Reshaper::from_l2(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                         const std::vector<bool>& prot, std::vector<HeldStream>* held, std::vector<int>* host_of_old) {
  held->clear();
  *host_of_old = hosts(holders);
  const double t0 = now_seconds();
  auto warn = [&](int k, const Status& st) {
    LOG_WARN("restart: old rank %d of version %llu: %s", k, static_cast<unsigned long long>(v), st.message().c_str());
  };
  // 1. Hosts read their survivors' records and set records and report
  //    (k, ok, scheme, m, n, members..., stream lengths...).
  std::vector<uint64_t> report;
  std::map<int, std::string> set_bytes_of;  // hosted survivor -> its set record
  for (int k = 0; k < p_old; ++k) {
    if ((*host_of_old)[k] != rank_) continue;
    Status st = [&]() -> Status {
      CacheStore other;
      CAIRN_TRY(other.open(layout_.rank_cache(job_.node, k), job_.cache_versions));
      CAIRN_ASSIGN_OR_RETURN(rec, other.read_record(v));
      CAIRN_ASSIGN_OR_RETURN(map, MappedFile::open_rw(other.slot_path(static_cast<int>(rec.slot)), 0, false));
      if (map.size() < rec.manifest.total_size)
        return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", map.path().c_str());
      CAIRN_ASSIGN_OR_RETURN(bytes, other.read_set(v));
      CAIRN_ASSIGN_OR_RETURN(set, redundancy::decode_set_record(bytes));
      std::vector<uint64_t> lens;
      for (const std::string& mb : set.manifests) {
        CAIRN_ASSIGN_OR_RETURN(mf, decode_manifest(mb.data(), mb.size()));
        lens.push_back(mf.total_size);
      }
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
      report.insert(report.end(), lens.begin(), lens.end());
      return Status::ok();
    }();
    if (!st.is_ok()) {
      warn(k, st);
      report.insert(report.end(), {static_cast<uint64_t>(k), 0, 0, 0, 0});
    }
  }
  std::vector<uint64_t> all;
  CAIRN_TRY(allgather_u64(app_comm_, report, &all));
  const double t_reported = now_seconds();

  // 2. The global picture, the same on every rank: which old ranks are good, and the sets.
  std::vector<bool> good(static_cast<size_t>(p_old), false);
  std::map<int, restore::OldSet> sets;  // keyed by the set's first member
  std::vector<int> set_of(static_cast<size_t>(p_old), -1);
  for (size_t i = 0; i < all.size();) {
    int k = static_cast<int>(all[i]);
    bool ok = all[i + 1] != 0;
    int setn = static_cast<int>(all[i + 4]);
    if (ok && k < p_old) {
      good[k] = prot[k];
      restore::OldSet s{static_cast<Redundancy>(all[i + 2]), static_cast<int>(all[i + 3]), {}, {}};
      for (int j = 0; j < setn; ++j) s.members.push_back(static_cast<int>(all[i + 5 + j]));
      for (int j = 0; j < setn; ++j) s.lens.push_back(all[i + 5 + setn + j]);
      if (!s.members.empty()) {
        for (int mbr : s.members)
          if (mbr < p_old) set_of[mbr] = s.members.front();
        sets[s.members.front()] = s;
      }
    }
    i += 5 + static_cast<size_t>(ok ? 2 * setn : 0);
  }
  restore::ReshapeL2Plan lay = restore::plan_reshape_l2(good, set_of, sets, *host_of_old, nranks_);
  if (!lay.reason.empty()) {
    held->clear();
    return Status(Code::ERR_UNRECOVERABLE, lay.reason);
  }

  // 3. The survivors are hashed; meanwhile the hosts of lost members fault in their staging memory.
  std::map<int, restore::SetBuffers> staged;  // lost old rank this rank hosts -> its staging memory
  std::vector<std::pair<restore::SetBuffers*, uint64_t>> to_stage;  // and its length
  for (int id : lay.to_rebuild) {
    const restore::OldSet& s = sets.at(id);
    for (size_t i = 0; i < s.members.size(); ++i)
      if (!good[static_cast<size_t>(s.members[i])] && lay.host_of_old[s.members[i]] == rank_)
        to_stage.push_back({&staged[s.members[i]], s.lens[i]});
  }
  std::thread stager([&] {  // a failure here leaves the buffer empty: the rebuild maps it again, and says why
    for (auto [buf, len] : to_stage) (void)restore::staging_buffers(len, 0, buf, /*populate=*/true);
  });
  std::vector<uint64_t> failed;
  for (const HeldStream& h : *held)
    if (Status st = verify_stream(h.manifest, h.data, h.manifest.total_size).prefixed(h.map->path()); !st.is_ok()) {
      warn(h.old_rank, st);
      failed.push_back(static_cast<uint64_t>(h.old_rank));
    }
  stager.join();
  const double t_verified = now_seconds();
  std::vector<uint64_t> all_failed;
  CAIRN_TRY(allgather_u64(app_comm_, failed, &all_failed));
  if (!all_failed.empty()) {  // rebuilt too: a survivor whose mapping is no longer what we hold
    for (uint64_t k : all_failed) good[static_cast<size_t>(k)] = false;
    lay = restore::plan_reshape_l2(good, set_of, sets, *host_of_old, nranks_);
    if (!lay.reason.empty()) {
      held->clear();
      return Status(Code::ERR_UNRECOVERABLE, lay.reason);
    }
    std::erase_if(staged, [&](const auto& e) { return lay.host_of_old[e.first] != rank_; });  // another's now
  }
  *host_of_old = lay.host_of_old;
  std::erase_if(*held, [&](const HeldStream& h) { return !good[static_cast<size_t>(h.old_rank)]; });

  // 4. The rebuild, one set at a time.
  Status local = Status::ok();
  for (int id : lay.to_rebuild) {
    const restore::OldSet& s = sets[id];
    int my_member = -1;
    for (size_t i = 0; i < s.members.size(); ++i)
      if ((*host_of_old)[s.members[i]] == rank_) my_member = static_cast<int>(i);
    MPI_Comm comm = MPI_COMM_NULL;
    CAIRN_MPI(MPI_Comm_split(app_comm_, my_member >= 0 ? id : MPI_UNDEFINED, my_member, &comm));
    if (comm == MPI_COMM_NULL) continue;
    Status st = [&]() -> Status {
      restore::SetRebuildJob j{comm, my_member, restore::lost_members(s.members, [&](int k) { return good[static_cast<size_t>(k)]; }),
                               v, job_.exchange_chunk, std::nullopt};
      // the same outcome on every member of the set (or ERR_MPI)
      CAIRN_ASSIGN_OR_RETURN(set, restore::share_set(std::move(j), [&] { return Result<std::string>(set_bytes_of[s.members[my_member]]); }));
      const int k = s.members[static_cast<size_t>(my_member)];
      // A lost member's data only (the new job protects itself anew: the old redundancy data is not
      // needed), placed into staging memory and verified as it lands.
      restore::SetBuffers buf;
      std::optional<LandingVerifier> landing;
      Status ready = Status::ok();
      if (set.job.i_lost()) {
        auto it = staged.find(k);
        if (it != staged.end() && it->second.data_file && it->second.data_file->size() >= set.plan.mine.total_size)
          buf = std::move(it->second);
        else
          ready = restore::staging_buffers(set.plan.mine.total_size, 0, &buf);
        if (ready.is_ok()) landing.emplace(set.plan.mine, buf.data);
      } else {
        auto it = std::find_if(held->begin(), held->end(), [&](const HeldStream& x) { return x.old_rank == k; });
        ready = restore::survivor_buffers("", it->red_path, it->manifest.total_size, set.plan.redundancy_len,
                                          /*populate=*/false, &buf, it->data);
      }
      CAIRN_TRY(set.exchange_data(ready, buf.data, buf.red, /*gentle=*/false, landing ? &*landing : nullptr));
      if (landing) CAIRN_TRY(landing->result().prefixed("rebuilt old rank " + std::to_string(k)));
      if (set.job.i_lost()) {
        HeldStream h;
        h.old_rank = k;
        h.manifest = set.plan.mine;
        h.map = std::make_shared<MappedFile>(std::move(*buf.data_file));
        h.data = h.map->data();
        held->push_back(std::move(h));
      }
      return Status::ok();
    }();
    MPI_Comm_free(&comm);
    if (st.code() == Code::ERR_MPI) return st;
    if (!st.is_ok() && local.is_ok()) local = st;
  }
  const double t_rebuilt = now_seconds();
  Status all_ok = agree(app_comm_, local);
  if (!all_ok.is_ok()) held->clear();
  else if (rank_ == 0)
    LOG_INFO("restart: version %llu (%d ranks) rebuilt at L2 for the new layout in %.1f ms on rank 0: the reports gathered "
             "%.1f ms, the survivors it hosts verified (the lost members' staging faulted in meanwhile) %.1f ms, the lost "
             "members rebuilt %.1f ms",
             static_cast<unsigned long long>(v), p_old, (now_seconds() - t0) * 1e3, (t_reported - t0) * 1e3,
             (t_verified - t_reported) * 1e3, (t_rebuilt - t_verified) * 1e3);
  return all_ok;
}

}  // namespace cairn
