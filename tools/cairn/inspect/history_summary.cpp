#include "inspect/history_summary.hpp"

#include <algorithm>

namespace cairn::history {

void Summarizer::add(const Line& l) {
  const std::string ev = l.event();
  const int64_t t = l.i64("t");
  auto note_time = [&](int64_t x) {
    if (x <= 0) return;
    s_.first_ns = s_.first_ns ? std::min(s_.first_ns, x) : x;
    s_.last_ns = std::max(s_.last_ns, x);
  };
  note_time(t);
  note_time(l.i64("start_ns"));
  note_time(l.i64("end_ns"));
  std::string id = l.str("launch");
  auto found = index_.find(id);
  size_t li;
  if (found == index_.end()) {
    li = s_.launches.size();
    index_[id] = li;
    s_.launches.emplace_back();
    s_.launches[li].id = id;
    s_.launches[li].start_ns = l.has("start_ns") ? l.i64("start_ns") : t;
  } else {
    li = found->second;
  }
  Launch& L = s_.launches[li];
  L.last_ns = std::max({L.last_ns, t, l.i64("end_ns")});
  if (ev == "start") {
    L.started = true;
    L.start_ns = t;
    L.ranks = l.u64("ranks");
    L.groups = l.strings("groups");
    L.nodes = l.u64("nodes", L.groups.size());
    L.start = l;
  } else if (ev == "restart") {
    Restart r;
    r.version = l.u64("version");
    r.level = level_number(l.str("level"));
    r.start_ns = l.i64("start_ns", t);
    r.end_ns = l.i64("end_ns", t);
    r.bytes = l.u64("bytes");
    L.restarts.push_back(r);
  } else if (ev == "restart_rejected") {
    for (auto it = L.restarts.rbegin(); it != L.restarts.rend(); ++it)
      if (it->version == l.u64("version")) {
        it->rejected = true;
        break;
      }
  } else if (ev == "l1" || ev == "l2" || ev == "l3") {
    const int lv = ev[1] - '0';
    const uint64_t v = l.u64("version");
    auto [it, fresh] = s_.versions.try_emplace(v);
    VersionRecord& vr = it->second;
    if (fresh) {
      vr.version = v;
      vr.launch = li;
    }
    LevelRecord& r = vr.level[lv - 1];
    r = LevelRecord{};
    r.reached = true;
    r.launch = li;
    r.start_ns = l.i64("start_ns", t);
    r.end_ns = l.i64("end_ns", t);
    r.bytes = l.u64("bytes");
    r.rank_bytes = l.u64("rank_bytes");
    r.redundancy_bytes = l.u64("redundancy_bytes");
    if (l.has("copied_bytes")) r.copied_bytes = l.u64("copied_bytes");
    if (l.has("sent_bytes") && l.has("full_sent_bytes")) {
      r.sent_bytes = l.u64("sent_bytes");
      r.full_sent_bytes = l.u64("full_sent_bytes");
    }
    r.l3_bytes_written = l.u64("l3_bytes_written");
    r.at_finalize = l.flag("at_finalize");
    r.via = l.str("via");
    r.seconds = lv == 1 ? l.num("copy_s")
                        : (r.end_ns > r.start_ns ? static_cast<double>(r.end_ns - r.start_ns) / 1e9 : 0.0);
    if (lv == 1) L.versions.push_back(v);
  } else if (ev == "fail" || ev == "discard") {
    Failure f;
    f.version = l.u64("version");
    f.level = ev == "fail" ? level_number(l.str("level")) : 0;
    f.t_ns = t;
    f.error = l.str("error");
    f.launch = li;
    s_.failures.push_back(f);
    if (ev == "discard" && f.version) {
      auto [it, fresh] = s_.versions.try_emplace(f.version);
      if (fresh) {
        it->second.version = f.version;
        it->second.launch = li;
      }
      it->second.discarded = true;
    }
  } else if (ev == "end") {
    L.finalized = true;
    L.end_status = l.str("status");
    L.exit_requested = l.flag("exit_requested");
  }  // other events: a newer writer's, ignored
}

Summary summarize(const std::vector<Line>& lines) {
  Summarizer z;
  for (const Line& l : lines) z.add(l);
  return z.summary();
}

LevelStats level_stats(const Summary& s, int level) {
  LevelStats st;
  if (level < 1 || level > 3) return st;
  double bytes = 0, seconds = 0;
  for (const auto& [v, rec] : s.versions) {
    const LevelRecord& r = rec.level[level - 1];
    if (!r.reached) continue;
    st.last_version = v;  // versions in increasing order
    st.last_end_ns = r.end_ns;
    if (r.bandwidth() <= 0) continue;
    ++st.samples;
    st.last = r.bandwidth();
    bytes += static_cast<double>(r.bytes);
    seconds += r.seconds;
  }
  st.mean = seconds > 0 ? bytes / seconds : 0;
  return st;
}

}  // namespace cairn::history
