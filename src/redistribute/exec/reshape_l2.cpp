// Reshaping restart from L2: a lost old rank read from the copy a survivor of its set keeps, or the old
// redundancy sets rebuild their lost members onto new hosts.
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
namespace {

// What the host of old rank k reads of version v before any data: its record and its set record.
struct HostedSet {
  L1Record rec;
  std::string set_bytes;
  redundancy::SetRecord set;
  std::vector<uint64_t> lens;  // every member's stream length
  std::string slot_path, red_path;
};

Result<HostedSet> read_hosted_set(const Layout& layout, const std::string& node, int k, int cache_versions, uint64_t v) {
  CacheStore other;
  CAIRN_TRY(other.open(layout.rank_cache(node, k), cache_versions));
  HostedSet h;
  CAIRN_ASSIGN_OR_RETURN(rec, other.read_record(v));
  h.rec = std::move(rec);
  CAIRN_ASSIGN_OR_RETURN(bytes, other.read_set(v));
  h.set_bytes = std::move(bytes);
  CAIRN_ASSIGN_OR_RETURN(set, redundancy::decode_set_record(h.set_bytes));
  h.set = std::move(set);
  for (const std::string& mb : h.set.manifests) {
    CAIRN_ASSIGN_OR_RETURN(mf, decode_manifest(mb.data(), mb.size()));
    h.lens.push_back(mf.total_size);
  }
  h.slot_path = other.slot_path(static_cast<int>(h.rec.slot));
  h.red_path = other.red_path(static_cast<int>(h.rec.slot));
  return h;
}

// A host's report of old rank k, for every rank: (k, 1, scheme, m, n, members..., stream lengths...), or
// (k, 0, 0, 0, 0) where it could not read them (hs null).
void append_report(std::vector<uint64_t>* out, int k, const HostedSet* hs) {
  if (!hs) {
    out->insert(out->end(), {static_cast<uint64_t>(k), 0, 0, 0, 0});
    return;
  }
  const redundancy::SetRecord& set = hs->set;
  out->insert(out->end(), {static_cast<uint64_t>(k), 1, static_cast<uint64_t>(set.scheme), set.m, set.n});
  out->insert(out->end(), set.ranks.begin(), set.ranks.end());
  out->insert(out->end(), hs->lens.begin(), hs->lens.end());
}

// Every host's reports, gathered: the same picture on every rank.
struct SetReports {
  std::vector<bool> reported;            // old rank k's host read its record and set record
  std::vector<int> set_of;               // old rank -> its set's first member (-1: no report names it)
  std::map<int, restore::OldSet> sets;   // keyed by the set's first member
};

SetReports parse_reports(const std::vector<uint64_t>& all, int p_old) {
  SetReports r;
  r.reported.assign(static_cast<size_t>(p_old), false);
  r.set_of.assign(static_cast<size_t>(p_old), -1);
  for (size_t i = 0; i + 5 <= all.size();) {
    int k = static_cast<int>(all[i]);
    bool ok = all[i + 1] != 0;
    int setn = static_cast<int>(all[i + 4]);
    if (ok && i + 5 + 2 * static_cast<size_t>(setn) > all.size()) break;  // cannot happen: every rank sends whole reports
    if (ok && k < p_old) {
      r.reported[static_cast<size_t>(k)] = true;
      restore::OldSet s{static_cast<Redundancy>(all[i + 2]), static_cast<int>(all[i + 3]), {}, {}};
      for (int j = 0; j < setn; ++j) s.members.push_back(static_cast<int>(all[i + 5 + j]));
      for (int j = 0; j < setn; ++j) s.lens.push_back(all[i + 5 + setn + j]);
      if (!s.members.empty()) {
        for (int mbr : s.members)
          if (mbr >= 0 && mbr < p_old) r.set_of[static_cast<size_t>(mbr)] = s.members.front();
        r.sets[s.members.front()] = s;
      }
    }
    i += 5 + static_cast<size_t>(ok ? 2 * setn : 0);
  }
  return r;
}

}  // namespace

// L2 across rank counts, where no lost old rank needs a decode (partner, and xor or rs sets whose parity
// is a copy of one member, as xor of two): every lost old rank's stream lies whole in the redundancy data
// of a survivor of its set. That copy is read as an L1 slot is (from_l1_streamed): chunk by chunk, each
// verified against the lost rank's manifest from the set record and sent at once to its new owners. No
// staging, no rebuild: the lost rank's bytes cross between processes once, as a survivor's do.
Status Reshaper::from_l2_copies(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                                const std::vector<bool>& prot, bool* streamed, std::vector<int>* read_by) {
  *streamed = false;
  if (!restart_in_place_) return Status::ok();
  const std::vector<int> host_of_old = hosts(holders);
  std::map<int, HostedSet> hosted;
  std::vector<uint64_t> report;
  for (int k = 0; k < p_old; ++k) {
    if (host_of_old[static_cast<size_t>(k)] != rank_) continue;
    auto hs = read_hosted_set(layout_, job_.node, k, job_.cache_versions, v);
    if (hs) hosted[k] = std::move(hs).value();
    append_report(&report, k, hs ? &hosted[k] : nullptr);
  }
  std::vector<uint64_t> all;
  CAIRN_TRY(allgather_u64(app_comm_, report, &all));
  SetReports r = parse_reports(all, p_old);
  if (std::find(r.reported.begin(), r.reported.end(), false) == r.reported.end()) return Status::ok();  // nothing lost
  restore::L2CopyPlan plan = restore::plan_l2_copies(r.reported, prot, r.set_of, r.sets);
  if (!plan.reason.empty()) {
    if (rank_ == 0) LOG_INFO("restart: version %llu (%d ranks) at L2: %s", static_cast<unsigned long long>(v), p_old, plan.reason.c_str());
    return Status::ok();
  }
  // Each lost old rank's copy is read by a rank of its holder's node, spread over that node's ranks as
  // hosts() spreads the slots (by old rank), so that a node with several ranks does not leave the copy
  // to the rank that reads the holder's own slot.
  std::vector<int> source_host = host_of_old;
  std::map<int, CopiedStream> copies;
  Status local = Status::ok();
  for (int k = 0; k < p_old; ++k) {
    const restore::CopySource& src = plan.sources[static_cast<size_t>(k)];
    if (src.holder < 0) continue;
    source_host[static_cast<size_t>(k)] = spread_on_node(host_of_old[static_cast<size_t>(src.holder)], k);
    if (source_host[static_cast<size_t>(k)] != rank_) continue;
    auto read = hosted.find(src.holder);  // where the holder's host is another rank of this node: read here too
    if (read == hosted.end()) {
      auto hs = read_hosted_set(layout_, job_.node, src.holder, job_.cache_versions, v);
      if (!hs) {
        if (local.is_ok()) local = hs.status();
        continue;
      }
      read = hosted.emplace(src.holder, std::move(hs).value()).first;
    }
    const HostedSet& hs = read->second;
    const restore::OldSet& s = r.sets.at(r.set_of[static_cast<size_t>(k)]);
    const size_t i = static_cast<size_t>(std::find(s.members.begin(), s.members.end(), k) - s.members.begin());
    auto m = i < hs.set.manifests.size() ? decode_manifest(hs.set.manifests[i].data(), hs.set.manifests[i].size())
                                         : Result<Manifest>(make_error(Code::ERR_CORRUPT, "no manifest"));
    if (!m || m->rank != static_cast<uint32_t>(k) || m->nranks != static_cast<uint32_t>(p_old) || m->version != v) {
      if (local.is_ok())
        local = make_error(Code::ERR_CORRUPT, "%s: the set record's manifest of old rank %d is not that of version %llu",
                           hs.red_path.c_str(), k, static_cast<unsigned long long>(v));
      continue;
    }
    copies[k] = CopiedStream{hs.red_path, src.offset, std::move(m).value()};
  }
  CAIRN_TRY(agree(app_comm_, local));
  // The version's region table: old rank 0's manifest, from its slot's record or from its copy's.
  const int root = source_host[0];
  std::string bytes;
  if (root == rank_) bytes = encode_manifest(plan.sources[0].holder < 0 ? hosted.at(0).rec.manifest : copies.at(0).manifest);
  std::vector<ReshapeWant> wants;
  Manifest table;
  CAIRN_ASSIGN_OR_RETURN(fit, share_table_and_fit(std::move(bytes), root, &table, &wants, [&] {
                           return streamable(table, wants, p_old, nranks_, rank_, source_host);
                         }));
  if (fit != 2) return Status::ok();  // the general path: rebuild, then move
  CAIRN_TRY(from_l1_streamed(v, p_old, source_host, wants, copies, "L2 (each lost old rank from the copy its set keeps)"));
  *streamed = true;
  *read_by = std::move(source_host);
  return Status::ok();
}

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
  // 1. Hosts read their survivors' records and set records and report them (append_report).
  std::vector<uint64_t> report;
  std::map<int, std::string> set_bytes_of;  // hosted survivor -> its set record
  for (int k = 0; k < p_old; ++k) {
    if ((*host_of_old)[k] != rank_) continue;
    Status st = [&]() -> Status {
      CAIRN_ASSIGN_OR_RETURN(hs, read_hosted_set(layout_, job_.node, k, job_.cache_versions, v));
      CAIRN_ASSIGN_OR_RETURN(map, MappedFile::open_rw(hs.slot_path, 0, false));
      if (map.size() < hs.rec.manifest.total_size)
        return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", map.path().c_str());
      HeldStream h;
      h.old_rank = k;
      h.manifest = hs.rec.manifest;
      h.map = std::make_shared<MappedFile>(std::move(map));
      h.data = h.map->data();
      h.red_path = hs.red_path;
      held->push_back(std::move(h));
      append_report(&report, k, &hs);
      set_bytes_of[k] = std::move(hs.set_bytes);
      return Status::ok();
    }();
    if (!st.is_ok()) {
      warn(k, st);
      append_report(&report, k, nullptr);
    }
  }
  std::vector<uint64_t> all;
  CAIRN_TRY(allgather_u64(app_comm_, report, &all));
  const double t_reported = now_seconds();

  // 2. The global picture, the same on every rank: which old ranks are good, and the sets.
  SetReports r = parse_reports(all, p_old);
  std::vector<bool> good(static_cast<size_t>(p_old), false);
  for (int k = 0; k < p_old; ++k) good[static_cast<size_t>(k)] = r.reported[static_cast<size_t>(k)] && prot[static_cast<size_t>(k)];
  std::map<int, restore::OldSet>& sets = r.sets;
  const std::vector<int>& set_of = r.set_of;
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
                                          restore::Populate::no, &buf, it->data);
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
