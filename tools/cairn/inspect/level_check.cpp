#include "inspect/level_check.hpp"

#include <vector>

#include "cache/cache_store.hpp"
#include "cache/snapshot_slot.hpp"
#include "format.hpp"
#include "l3/l3_store.hpp"

namespace cairn::tool {

const char* state_name(LevelCheck::State s) {
  switch (s) {
    case LevelCheck::State::good:
      return "good";
    case LevelCheck::State::bad:
      return "bad";
    case LevelCheck::State::incomplete:
      return "incomplete";
    case LevelCheck::State::absent:
      return "absent";
  }
  return "unknown";
}

uint64_t l1_check_bytes(const VersionInfo& v) {
  uint64_t total = 0;
  for (uint32_t r = 0; r < v.nranks(); ++r)
    if (const L1Copy* c = v.l1_copy(r)) total += c->manifest.total_size;
  return total;
}

uint64_t l3_check_bytes(const VersionInfo& v) {
  if (!v.l3.committed) return 0;
  uint64_t total = 0;
  for (const auto& [r, m] : v.l3.manifests) total += m.total_size;
  return total;
}

namespace {

void note_bad(LevelCheck* out, const std::string& message) {
  out->state = LevelCheck::State::bad;
  if (out->error.empty()) out->error = message;
}

}  // namespace

LevelCheck check_l1(const VersionInfo& v, Progress* progress) {
  LevelCheck out;
  out.nranks = v.nranks();
  for (const auto& c : v.l1)
    if (!c.record_error.empty())
      note_bad(&out, "rank " + std::to_string(c.rank) + " (" + node_rank(c) + "): " + c.record_error);
  std::vector<uint32_t> missing;
  for (uint32_t r = 0; r < out.nranks; ++r) {
    const L1Copy* c = v.l1_copy(r);
    if (!c) {
      missing.push_back(r);
      continue;
    }
    ++out.ranks_checked;
    Status st = map_verified_slot(c->rank_dir, L1Record{c->slot, c->manifest}).status();
    if (progress) progress->add(c->manifest.total_size);
    if (!st.is_ok()) {
      note_bad(&out, "rank " + std::to_string(r) + " (" + node_rank(*c) + ", slot " + std::to_string(c->slot) +
                         "): " + st.message());
      continue;
    }
    ++out.ranks_good;
    out.chunks += c->manifest.chunk_hashes.size();
    out.bytes += c->manifest.total_size;
  }
  if (out.state == LevelCheck::State::bad) return out;
  if (out.ranks_checked == 0) {
    out.state = LevelCheck::State::absent;
    out.error = "no L1 record here";
  } else if (!missing.empty()) {
    out.state = LevelCheck::State::incomplete;
    out.error = "no record here for rank" + std::string(missing.size() > 1 ? "s " : " ") + rank_ranges(missing);
  } else {
    out.state = LevelCheck::State::good;
  }
  return out;
}

LevelCheck check_l3(const Layout& layout, const VersionInfo& v, Progress* progress) {
  LevelCheck out;
  out.nranks = v.nranks();
  LevelVerdict verdict = l3_verdict(v);
  if (verdict.state == LevelVerdict::State::absent) return out;
  if (!v.l3.committed) {  // a damaged COMMIT is bad; no COMMIT, incomplete (the inventory's one verdict)
    out.state = verdict.state == LevelVerdict::State::damaged ? LevelCheck::State::bad : LevelCheck::State::incomplete;
    out.error = verdict.why;
    return out;
  }
  out.nranks = v.l3.commit.nranks;
  std::vector<uint8_t> buffer;
  for (uint32_t r = 0; r < out.nranks; ++r) {
    ++out.ranks_checked;
    auto m = l3::read_manifest(layout, v.version, r);
    if (!m) {
      note_bad(&out, "rank " + std::to_string(r) + ": " + m.status().message());
      continue;
    }
    if (m->nranks != out.nranks) {
      note_bad(&out, "rank " + std::to_string(r) + ": " + l3::manifest_path(layout, v.version, r) + " is of a job of " +
                         std::to_string(m->nranks) + " ranks, COMMIT says " + std::to_string(out.nranks));
      continue;
    }
    // read_data reads every layout (one file per rank, N-to-M files, zstd) and checks the length.
    auto where = l3_where(layout, v.version, r);
    std::string file = where ? where->file : l3::data_path(layout, v.version, r);
    buffer.resize(m->total_size);
    Status st = l3::read_data(layout, *m, buffer.data());
    if (st.is_ok()) st = verify_stream(*m, buffer.data(), m->total_size);
    if (progress) progress->add(m->total_size);
    if (!st.is_ok()) {
      note_bad(&out, "rank " + std::to_string(r) + " (" + file + "): " + st.message());
      continue;
    }
    ++out.ranks_good;
    out.chunks += m->chunk_hashes.size();
    out.bytes += m->total_size;
  }
  if (out.state != LevelCheck::State::bad) out.state = LevelCheck::State::good;
  return out;
}

}  // namespace cairn::tool
