// The restart's plan (plan.hpp): the rules only, over the gathered inventory.
#include "restore/plan.hpp"

#include <algorithm>

#include "redundancy/set_code.hpp"

namespace cairn::restore {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

// "L1 on 3 of 4 ranks (missing: 2)": who lacks the version's record, for the reasons of a passed-over version.
std::string l1_text(const std::vector<int>& good) {
  std::vector<int> missing;
  for (size_t r = 0; r < good.size(); ++r)
    if (!good[r]) missing.push_back(static_cast<int>(r));
  return "L1 on " + std::to_string(good.size() - missing.size()) + " of " + std::to_string(good.size()) +
         " ranks (missing: " + rank_list(missing) + ")";
}

}  // namespace

Status l2_can_rebuild(const redundancy::SetPlacement& sets, Redundancy scheme, const std::vector<int>& good,
                      const std::vector<uint64_t>& flags, const std::string& l1_text,
                      std::vector<std::vector<int>>* lost_per_set) {
  if (lost_per_set) lost_per_set->assign(sets.members.size(), {});
  for (size_t s = 0; s < sets.members.size(); ++s) {
    const auto& mem = sets.members[s];
    std::vector<bool> lost(mem.size());
    bool any = false;
    for (size_t i = 0; i < mem.size(); ++i) {
      lost[i] = !good[static_cast<size_t>(mem[i])];
      any = any || lost[i];
      if (lost[i] && lost_per_set) (*lost_per_set)[s].push_back(mem[i]);
    }
    if (!any) continue;
    for (size_t i = 0; i < mem.size(); ++i)
      if (!lost[i] && !(flags[static_cast<size_t>(mem[i])] & kProtected))
        return make_error(Code::ERR_UNRECOVERABLE, "%s; L2 incomplete (rank %d never finished its redundancy)",
                          l1_text.c_str(), mem[i]);
    auto code = redundancy::SetCode::make(scheme, static_cast<int>(mem.size()), sets.m);
    if (!code || !code->recoverable(lost))
      return make_error(Code::ERR_UNRECOVERABLE, "%s; L2 cannot rebuild set %zu (%s tolerates fewer losses)",
                        l1_text.c_str(), s, redundancy_name(scheme));
  }
  return Status::ok();
}

RestorePlan plan_restore(const RestoreInputs& in) {
  RestorePlan p;
  for (uint64_t v : in.inventory.candidates) {
    p.version = v;
    p.flags = in.inventory.flags_of(v, in.nranks);
    p.in_l3 = in.inventory.in_l3(v);
    std::vector<int> good(static_cast<size_t>(in.nranks));
    for (size_t r = 0; r < good.size(); ++r) good[r] = (p.flags[r] & kHasL1) ? 1 : 0;
    const bool all = std::all_of(good.begin(), good.end(), [](int g) { return g != 0; });
    const bool some = std::any_of(good.begin(), good.end(), [](int g) { return g != 0; });
    std::string why;  // why neither L1 nor L2, should L3 not have it either
    if (all) {
      p.level = RestoreLevel::l1;
    } else if (!some) {
      why = "not in any cache";
    } else if (!in.placement.enabled) {
      why = l1_text(good) + "; L2 off";
    } else {
      Status l2 = l2_can_rebuild(in.placement, in.scheme, good, p.flags, l1_text(good), &p.lost_per_set);
      if (l2.is_ok()) p.level = RestoreLevel::l2;
      else why = l2.message();
    }
    if (p.level == RestoreLevel::none && p.in_l3) p.level = RestoreLevel::l3;
    if (p.level != RestoreLevel::l2) p.lost_per_set.clear();
    if (p.level == RestoreLevel::none) {
      p.passed_over.push_back("version " + std::to_string(v) + ": " + why + "; not in L3");
      continue;
    }
    p.label_root = 0;
    if (p.level != RestoreLevel::l3)
      while (!good[static_cast<size_t>(p.label_root)]) ++p.label_root;
    return p;
  }
  RestorePlan none;
  none.passed_over = std::move(p.passed_over);
  return none;
}

ReshapeL2Plan plan_reshape_l2(const std::vector<bool>& good, const std::vector<int>& set_of,
                              const std::map<int, OldSet>& sets, std::vector<int> host_of_old, int nranks) {
  ReshapeL2Plan out;
  const int p_old = static_cast<int>(good.size());
  for (int k = 0; k < p_old && out.reason.empty(); ++k)
    if (!good[k] && set_of[k] < 0) out.reason = "old rank " + std::to_string(k) + " is lost and no survivor of its set reports it";
  for (const auto& [id, s] : sets) {
    if (!out.reason.empty()) break;
    std::vector<bool> lost(s.members.size());
    bool any = false;
    for (size_t i = 0; i < s.members.size() && out.reason.empty(); ++i) {
      if (s.members[i] < 0 || s.members[i] >= p_old)
        out.reason = "the set of old ranks " + std::to_string(s.members.front()) + ".. names old rank " +
                     std::to_string(s.members[i]) + ", and the version has " + std::to_string(p_old);
      else
        any |= (lost[i] = !good[static_cast<size_t>(s.members[i])]);
    }
    if (!any || !out.reason.empty()) continue;
    auto code = redundancy::SetCode::make(s.scheme, static_cast<int>(s.members.size()), s.m);
    if (!code || !code->recoverable(lost))
      out.reason = "set of old ranks " + std::to_string(s.members.front()) + ".. lost more members than " +
                   redundancy_name(s.scheme) + " tolerates";
    else if (static_cast<int>(s.members.size()) > nranks)
      out.reason = "a set of " + std::to_string(s.members.size()) + " members cannot be rebuilt by " +
                   std::to_string(nranks) + " ranks";
    else
      out.to_rebuild.push_back(id);
  }
  if (!out.reason.empty()) {
    out.to_rebuild.clear();
    out.host_of_old = std::move(host_of_old);
    return out;
  }
  // Hosts of lost members: ranks hosting no other member of the set, spread round-robin. A set has no
  // more members than there are ranks (above), so a free rank is always found.
  int next = 0;
  for (int id : out.to_rebuild) {
    const OldSet& s = sets.at(id);
    std::vector<bool> used(static_cast<size_t>(nranks), false);
    for (int mbr : s.members)
      if (good[static_cast<size_t>(mbr)] && host_of_old[mbr] >= 0 && host_of_old[mbr] < nranks) used[host_of_old[mbr]] = true;
    for (int mbr : s.members) {
      if (good[static_cast<size_t>(mbr)]) continue;
      while (used[static_cast<size_t>(next % nranks)]) ++next;
      host_of_old[mbr] = next % nranks;
      used[static_cast<size_t>(next % nranks)] = true;
      ++next;
    }
  }
  out.host_of_old = std::move(host_of_old);
  return out;
}

L2CopyPlan plan_l2_copies(const std::vector<bool>& held, const std::vector<bool>& prot, const std::vector<int>& set_of,
                          const std::map<int, OldSet>& sets) {
  L2CopyPlan out;
  const int p_old = static_cast<int>(held.size());
  out.sources.assign(static_cast<size_t>(p_old), CopySource{});
  auto qualifies = [&](int h) { return h >= 0 && h < p_old && held[static_cast<size_t>(h)] && prot[static_cast<size_t>(h)]; };
  for (int k = 0; k < p_old && out.reason.empty(); ++k) {
    if (held[static_cast<size_t>(k)]) continue;
    auto it = set_of[static_cast<size_t>(k)] < 0 ? sets.end() : sets.find(set_of[static_cast<size_t>(k)]);
    if (it == sets.end()) {
      out.reason = "old rank " + std::to_string(k) + " is lost and no survivor of its set reports it";
      break;
    }
    const OldSet& s = it->second;
    const auto me = std::find(s.members.begin(), s.members.end(), k);
    auto code = redundancy::SetCode::make(s.scheme, static_cast<int>(s.members.size()), s.m);
    if (me == s.members.end() || !code || s.lens.size() != s.members.size()) {
      out.reason = "the set record of old rank " + std::to_string(k) + " does not describe its set";
      break;
    }
    const uint64_t max_len = *std::max_element(s.lens.begin(), s.lens.end());
    const auto copies = code->copies_of(static_cast<int>(me - s.members.begin()), max_len);
    for (const auto& at : copies) {
      const int h = s.members[static_cast<size_t>(at.holder)];
      if (!qualifies(h)) continue;
      out.sources[static_cast<size_t>(k)] = {h, at.offset};
      break;
    }
    if (copies.empty())
      out.reason = "no member of the set of old rank " + std::to_string(k) + " keeps a copy of its data (" +
                   redundancy_name(s.scheme) + " of " + std::to_string(s.members.size()) + ": it must be decoded)";
    else if (out.sources[static_cast<size_t>(k)].holder < 0)
      out.reason = "the members that keep a copy of old rank " + std::to_string(k) +
                   "'s data are lost or their version was not protected";
  }
  if (!out.reason.empty()) out.sources.assign(static_cast<size_t>(p_old), CopySource{});
  return out;
}

}  // namespace cairn::restore
