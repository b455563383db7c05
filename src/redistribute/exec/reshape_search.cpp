// The search for a version written by another number of ranks (redistribute/exec/reshaper.hpp).
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


}  // namespace

Reshaper::Reshaper(const ReshapeJob& job, RegionTable& regions, bool in_place, const std::vector<uint64_t>& rejected)
    : job_(job),
      app_comm_(job.comm),
      node_of_rank_(job.node_of_rank),
      layout_(job.layout),
      regions_(regions),
      restart_in_place_(in_place),
      rejected_(rejected) {
  MPI_Comm_rank(app_comm_, &rank_);
  MPI_Comm_size(app_comm_, &nranks_);
}

int Reshaper::spread_on_node(int rank, int k) const {
  std::vector<int> on_node;  // the current ranks on rank's node, in order
  for (int r = 0; r < nranks_; ++r)
    if (node_of_rank_[static_cast<size_t>(r)] == node_of_rank_[static_cast<size_t>(rank)]) on_node.push_back(r);
  return on_node[static_cast<size_t>(k) % on_node.size()];
}

std::vector<int> Reshaper::hosts(const std::vector<std::vector<uint64_t>>& holders) const {
  std::vector<int> host(holders.size(), -1);
  for (size_t k = 0; k < holders.size(); ++k)
    if (!holders[k].empty()) host[k] = spread_on_node(static_cast<int>(holders[k][0]), static_cast<int>(k));
  return host;
}

// The versions of another rank count in (above, at_most] that the nodes' records and the L3 commits
// list, newest first. Reads no data.
Status Reshaper::candidates(std::vector<ReshapeCandidate>* out, uint64_t above, uint64_t at_most) {
  out->clear();
  // The lowest rank of each node reports every record in the node's cache written by another count.
  bool leader = true;
  for (int r = 0; r < rank_; ++r)
    if (node_of_rank_[static_cast<size_t>(r)] == job_.node) leader = false;
  std::vector<uint64_t> mine;
  if (leader) {
    std::string node_dir = layout_.node_cache(job_.node);
    auto dirs = fs::list_dir(node_dir);
    for (const auto& d : dirs ? *dirs : std::vector<std::string>{}) {
      uint64_t old_rank;
      if (!parse_rank_dir(d, &old_rank)) continue;
      CacheStore other;
      if (!other.open(node_dir + "/" + d, job_.cache_versions).is_ok()) continue;
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
    ReshapeCandidate c;
    c.version = it->first;
    c.p_old = static_cast<int>(it->second);
    c.holders.resize(static_cast<size_t>(c.p_old));
    c.prot.assign(static_cast<size_t>(c.p_old), false);
    for (size_t i = 0; i < all.size(); i += kTuple)
      if (all[i + 1] == c.version && all[i + 2] == static_cast<uint64_t>(c.p_old) && all[i] < static_cast<uint64_t>(c.p_old)) {
        c.holders[all[i]].push_back(all[i + 3]);
        if (all[i + 4]) c.prot[all[i]] = true;
      }
    c.in_l3 = in_l3.count(c.version) > 0;
    out->push_back(std::move(c));
  }
  return Status::ok();
}

bool ReshapeCandidate::whole_in_l1() const {
  return std::all_of(holders.begin(), holders.end(), [](auto& h) { return !h.empty(); });
}

bool ReshapeCandidate::rebuildable_at_l2() const {
  return std::any_of(holders.begin(), holders.end(), [](auto& h) { return !h.empty(); }) &&
         std::any_of(prot.begin(), prot.end(), [](bool p) { return p; });
}

Status Reshaper::probe(uint64_t above, uint64_t at_most, ReshapeProbe* out) {
  *out = ReshapeProbe{};
  std::vector<ReshapeCandidate> all;
  CAIRN_TRY(candidates(&all, above, at_most));
  auto it = std::find_if(all.begin(), all.end(), [](const ReshapeCandidate& c) {
    return c.whole_in_l1() || c.rebuildable_at_l2() || c.in_l3;
  });
  if (it == all.end()) return Status::ok();
  const ReshapeCandidate& c = *it;
  out->version = c.version;
  out->p_old = c.p_old;
  out->level = c.whole_in_l1() ? CAIRN_LEVEL_L1 : c.rebuildable_at_l2() ? CAIRN_LEVEL_L2 : CAIRN_LEVEL_L3;
  // The label: from the record of the first old rank some node holds (its node's lowest rank reads it),
  // else from the commit (rank 0).
  int root = 0, old_rank = -1;
  for (int k = 0; k < c.p_old && old_rank < 0; ++k)
    if (!c.holders[static_cast<size_t>(k)].empty()) {
      old_rank = k;
      root = static_cast<int>(c.holders[static_cast<size_t>(k)][0]);
    }
  char label[256] = {0};
  if (rank_ == root) {
    if (old_rank >= 0) {
      CacheStore other;
      if (other.open(layout_.rank_cache(job_.node, old_rank), job_.cache_versions).is_ok()) {
        auto rec = other.read_record(c.version);
        if (rec) snprintf(label, sizeof label, "%s", rec->manifest.label.c_str());
      }
    } else {
      auto commit = l3::read_commit(layout_, c.version);
      if (commit) snprintf(label, sizeof label, "%s", commit->label.c_str());
    }
  }
  CAIRN_MPI(MPI_Bcast(label, sizeof label, MPI_CHAR, root, app_comm_));
  out->label = label;
  return Status::ok();
}

// Candidates written by another rank count, newest first, each tried from L1, L2, then L3.
Status Reshaper::find(ReshapedVersion* out, std::string* why, uint64_t above, uint64_t at_most) {
  std::vector<ReshapeCandidate> all;
  CAIRN_TRY(candidates(&all, above, at_most));
  for (const ReshapeCandidate& cand : all) {
    const uint64_t v = cand.version;
    const int p_old = cand.p_old;
    const auto& holders = cand.holders;
    const auto& prot = cand.prot;
    std::string attempt;
    bool complete = cand.whole_in_l1();
    ReshapedVersion c;
    c.version = v;
    c.p_old = p_old;
    if (complete) {
      Status st = from_l1(v, p_old, holders, &c.held, &c.in_place);
      if (st.code() == Code::ERR_MPI || st.code() == Code::ERR_INTERNAL) return st;
      if (st.is_ok()) {
        c.level = CAIRN_LEVEL_L1;
        c.host_of_old = hosts(holders);
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
    if (any_holder && !cand.rebuildable_at_l2()) attempt += "L2: no redundancy data (not protected at L2); ";
    if (cand.rebuildable_at_l2()) {
      // Where no lost old rank needs a decode, its copy is streamed as a slot is; else (or where that
      // fails: a survivor's chunk that does not verify) the sets rebuild their lost members.
      bool streamed = false;
      Status st = from_l2_copies(v, p_old, holders, prot, &streamed, &c.host_of_old);
      if (st.code() == Code::ERR_MPI || st.code() == Code::ERR_INTERNAL) return st;
      if (st.is_ok() && streamed) {
        c.level = CAIRN_LEVEL_L2;
        c.in_place = true;
        *out = std::move(c);
        return Status::ok();
      }
      if (!st.is_ok()) attempt += "L2 from the sets' copies: " + st.message() + "; ";
      st = from_l2(v, p_old, holders, prot, &c.held, &c.host_of_old);
      if (st.code() == Code::ERR_MPI) return st;
      if (st.is_ok()) {
        c.level = CAIRN_LEVEL_L2;
        *out = std::move(c);
        return Status::ok();
      }
      attempt += "L2: " + st.message() + "; ";
    }
    if (cand.in_l3) {
      bool direct = false;
      Status st = from_l3_direct(v, p_old, &direct);
      if (st.is_ok() && !direct) st = from_l3(v, p_old, &c.held);
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

}  // namespace cairn
