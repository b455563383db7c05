// Restart on another number of ranks. A version written by p_old ranks is read by "hosts" among the
// current ranks: from L1 where every old rank's slot survives on some node (a rank of that node reads
// it, verifies it and hosts it); else from L2, where the old redundancy sets rebuild their lost members
// onto hosts that hold no other member of the set; else from L3 (old rank k's file is read once, by
// rank k mod P). The hosts then send each new rank exactly the pieces its distributed regions need
// (move_regions, also used by live redistribution). Reads are parallel, nothing is read twice, every
// byte is verified before it moves.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/fsutil.hpp"
#include "core/log.hpp"
#include "core/mpi_util.hpp"
#include "core/runtime.hpp"
#include "pfs/l3_store.hpp"
#include "redistribute/plan.hpp"
#include "redundancy/set_code.hpp"
#include "redundancy/set_exchange.hpp"
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
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(nranks_)), displs(static_cast<size_t>(nranks_));
  CAIRN_MPI(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, app_comm_));
  int total = 0;
  for (int r = 0; r < nranks_; ++r) displs[r] = total, total += counts[r];
  std::vector<uint64_t> all(static_cast<size_t>(total));
  CAIRN_MPI(MPI_Allgatherv(mine.data(), n, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T, app_comm_));
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
      Status st = reshaped_from_l1(v, p_old, holders, &c.held);
      if (st.code() == Code::ERR_MPI) return st;
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
    bool any_holder = std::any_of(holders.begin(), holders.end(), [](auto& h) { return !h.empty(); });
    if (any_holder) {
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
      Status st = reshaped_from_l3(v, p_old, &c.held);
      if (st.code() == Code::ERR_MPI) return st;
      if (st.is_ok()) {
        c.level = CAIRN_LEVEL_L3;
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
                                 std::vector<HeldStream>* held) {
  held->clear();
  Status local = Status::ok();
  for (int k = 0; k < p_old && local.is_ok(); ++k) {
    int reporter = static_cast<int>(holders[k][0]);
    std::vector<int> on_node;
    for (int r = 0; r < nranks_; ++r)
      if (node_of_rank_[r] == node_of_rank_[reporter]) on_node.push_back(r);
    if (on_node[static_cast<size_t>(k) % on_node.size()] != rank_) continue;
    local = [&]() -> Status {
      // (reshaped_from_l2 reads the same way, read-write: the set exchange takes non-const buffers)
      CacheStore other;
      CAIRN_TRY(other.open(layout_.rank_cache(cfg_.node, k), cfg_.cache_versions));
      CAIRN_ASSIGN_OR_RETURN(rec, other.read_record(v));
      CAIRN_ASSIGN_OR_RETURN(map, MappedFile::open_ro(other.slot_path(static_cast<int>(rec.slot))));
      if (map.size() < rec.manifest.total_size)
        return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", map.path().c_str());
      CAIRN_TRY(verify_stream(rec.manifest, map.data(), rec.manifest.total_size).prefixed(map.path()));
      HeldStream h;
      h.old_rank = k;
      h.manifest = rec.manifest;
      h.map = std::make_shared<MappedFile>(std::move(map));
      h.data = h.map->data();
      held->push_back(std::move(h));
      return Status::ok();
    }();
  }
  Status all = agree(app_comm_, local);
  if (!all.is_ok()) held->clear();
  return all;
}

Status Runtime::reshaped_from_l3(uint64_t v, int p_old, std::vector<HeldStream>* held) {
  held->clear();
  Status local = Status::ok();
  for (int k = rank_; k < p_old && local.is_ok(); k += nranks_) {
    local = [&]() -> Status {
      CAIRN_ASSIGN_OR_RETURN(m, l3::read_manifest(layout_, v, static_cast<uint32_t>(k)));
      HeldStream h;
      h.old_rank = k;
      try {
        h.storage.assign(std::max<uint64_t>(m.total_size, 1), 0);
      } catch (const std::bad_alloc&) {
        return make_error(Code::ERR_NO_MEMORY, "no memory to stage old rank %d of version %llu", k,
                          static_cast<unsigned long long>(v));
      }
      CAIRN_TRY(l3::read_data(layout_, m, h.storage.data()));
      CAIRN_TRY(verify_stream(m, h.storage.data(), m.total_size).prefixed(l3::data_path(layout_, v, k)));
      h.manifest = std::move(m);
      h.data = h.storage.data();
      held->push_back(std::move(h));
      return Status::ok();
    }();
  }
  Status all = agree(app_comm_, local);
  if (!all.is_ok()) held->clear();
  return all;
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
  int n = static_cast<int>(report.size());
  std::vector<int> counts(static_cast<size_t>(nranks_)), displs(static_cast<size_t>(nranks_));
  CAIRN_MPI(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, app_comm_));
  int total = 0;
  for (int r = 0; r < nranks_; ++r) displs[r] = total, total += counts[r];
  std::vector<uint64_t> all(static_cast<size_t>(total));
  CAIRN_MPI(MPI_Allgatherv(report.data(), n, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T, app_comm_));

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
  // Pack what this process sends before any buffer is resized (live: the sources are those buffers).
  std::vector<std::vector<std::vector<char>>> sends(moves.size());  // per move, per comm rank
  if (check.is_ok()) {
    for (size_t i = 0; i < moves.size() && check.is_ok(); ++i) {
      sends[i].assign(static_cast<size_t>(size), {});
      const RegionEntry& e = *moves[i].entry;
      for (const auto& h : held) {
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
        for (const auto& t : *plan) {
          const char* src = reinterpret_cast<const char*>(h.data) + re->offset + t.src_offset * e.elem_size;
          auto& buf = sends[i][static_cast<size_t>(comm_of_new[static_cast<size_t>(t.dst)])];
          buf.insert(buf.end(), src, src + t.count * e.elem_size);
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

  // Move, region by region: one all-to-all each; receivers unpack in plan order.
  for (size_t i = 0; i < moves.size(); ++i) {
    const RegionEntry& e = *moves[i].entry;
    std::vector<int> scount(static_cast<size_t>(size)), sdispl(static_cast<size_t>(size)),
        rcount(static_cast<size_t>(size), 0), rdispl(static_cast<size_t>(size));
    std::vector<char> sbuf;
    for (int u = 0; u < size; ++u) {
      sdispl[u] = static_cast<int>(sbuf.size());
      scount[u] = static_cast<int>(sends[i][u].size());
      sbuf.insert(sbuf.end(), sends[i][u].begin(), sends[i][u].end());
      std::vector<char>().swap(sends[i][u]);
    }
    std::vector<redist::Transfer> incoming;
    if (my_new >= 0) {
      CAIRN_ASSIGN_OR_RETURN(plan, redist::plan_for_dst(moves[i].dist, p_old, p_new, my_new));
      incoming = std::move(plan);
      for (const auto& t : incoming) rcount[static_cast<size_t>(host_of_old[static_cast<size_t>(t.src)])] += static_cast<int>(t.count * e.elem_size);
    }
    int total = 0;
    for (int u = 0; u < size; ++u) rdispl[u] = total, total += rcount[u];
    std::vector<char> rbuf(static_cast<size_t>(total));
    CAIRN_MPI(MPI_Alltoallv(sbuf.data(), scount.data(), sdispl.data(), MPI_BYTE, rbuf.data(), rcount.data(),
                            rdispl.data(), MPI_BYTE, comm));
    if (my_new >= 0) {
      std::vector<size_t> cursor(rdispl.begin(), rdispl.end());
      char* dst = static_cast<char*>(regions_[e.name].ptr);
      for (const auto& t : incoming) {
        size_t& c = cursor[static_cast<size_t>(host_of_old[static_cast<size_t>(t.src)])];
        memcpy(dst + t.dst_offset * e.elem_size, rbuf.data() + c, t.count * e.elem_size);
        c += t.count * e.elem_size;
      }
    }
  }
  return Status::ok();
}

}  // namespace cairn
