#include "l3/l3_chunks.hpp"

#include <algorithm>

#include "base/layout.hpp"

namespace cairn::l3 {

std::string encode_chunk_record(const ChunkRecord& r) {
  std::string out = "cairn-chunks 1\nversion " + std::to_string(r.version) + "\nchunks " + std::to_string(r.chunks) +
                    "\nchunk_size " + std::to_string(r.chunk_size) + "\ndepth " + std::to_string(r.depth) +
                    "\nstored " + std::to_string(r.stored) + "\n";
  for (const ChunkRun& run : r.runs)
    out += "run " + std::to_string(run.first) + " " + std::to_string(run.count) + " " + std::to_string(run.holder) + " " +
           std::to_string(run.offset) + "\n";
  return out;
}

namespace {

// The next space-separated field of `rest` as a decimal of at most `max`.
bool next_number(std::string_view* rest, uint64_t max, uint64_t* out) {
  size_t sp = rest->find(' ');
  std::string_view field = rest->substr(0, sp);
  *rest = sp == std::string_view::npos ? std::string_view() : rest->substr(sp + 1);
  return parse_decimal(field, max, out);
}

Status corrupt(const char* what) { return make_error(Code::ERR_CORRUPT, "chunk record: %s", what); }

}  // namespace

Result<ChunkRecord> decode_chunk_record(std::string_view text) {
  size_t nl = text.find('\n');
  if (nl == std::string_view::npos || text.substr(0, nl) != "cairn-chunks 1")
    return make_error(Code::ERR_FORMAT, "not a cairn chunk record (format 1)");
  text.remove_prefix(nl + 1);
  ChunkRecord r;
  uint64_t depth = 0, chunk_size = 0;
  bool have_version = false, have_chunks = false, have_size = false, have_depth = false, have_stored = false;
  uint64_t next_chunk = 0;
  while (!text.empty()) {
    nl = text.find('\n');
    if (nl == std::string_view::npos) return corrupt("the last line has no line break (truncated)");
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return corrupt("a line without a value");
    std::string_view key = line.substr(0, sp), rest = line.substr(sp + 1);
    bool ok = true;
    if (key == "version") {
      ok = !have_version && next_number(&rest, UINT64_MAX, &r.version);
      have_version = true;
    } else if (key == "chunks") {
      ok = !have_chunks && next_number(&rest, UINT64_MAX, &r.chunks);
      have_chunks = true;
    } else if (key == "chunk_size") {
      ok = !have_size && next_number(&rest, UINT32_MAX, &chunk_size);
      have_size = true;
    } else if (key == "depth") {
      ok = !have_depth && next_number(&rest, UINT32_MAX, &depth);
      have_depth = true;
    } else if (key == "stored") {
      ok = !have_stored && next_number(&rest, UINT64_MAX, &r.stored);
      have_stored = true;
    } else if (key == "run") {
      ChunkRun run;
      ok = next_number(&rest, UINT64_MAX, &run.first) && next_number(&rest, UINT64_MAX, &run.count) &&
           next_number(&rest, UINT64_MAX, &run.holder) && next_number(&rest, UINT64_MAX, &run.offset);
      if (!ok || !rest.empty()) return corrupt("a malformed run line");
      if (run.first != next_chunk || run.count == 0) return corrupt("runs out of order, overlapping or empty");
      if (__builtin_add_overflow(run.first, run.count, &next_chunk)) return corrupt("a run past 2^64 chunks");
      r.runs.push_back(run);
      continue;
    } else {
      return make_error(Code::ERR_FORMAT, "chunk record: unknown key '%.*s' (written by a newer cairn?)",
                        static_cast<int>(key.size()), key.data());
    }
    if (!ok || !rest.empty()) return make_error(Code::ERR_CORRUPT, "chunk record: bad or repeated '%.*s'",
                                                static_cast<int>(key.size()), key.data());
  }
  if (!have_version || !have_chunks || !have_size || !have_depth || !have_stored) return corrupt("incomplete");
  r.chunk_size = static_cast<uint32_t>(chunk_size);
  r.depth = static_cast<uint32_t>(depth);
  if (r.depth == 0) return corrupt("depth 0 (a full version has no chunk record)");
  if (r.chunks > 0 && r.chunk_size == 0) return corrupt("chunk_size 0");
  if (next_chunk != r.chunks) return corrupt("the runs do not cover every chunk");
  for (const ChunkRun& run : r.runs) {
    if (run.holder > r.version) return corrupt("a run names a newer version");
    uint64_t bytes = 0, end = 0;
    if (__builtin_mul_overflow(run.count, uint64_t{r.chunk_size}, &bytes) ||
        __builtin_add_overflow(run.offset, bytes, &end))
      return corrupt("a run's extent past 2^64");
  }
  return r;
}

std::set<uint64_t> holders_of(const ChunkRecord& r) {
  std::set<uint64_t> out;
  for (const ChunkRun& run : r.runs)
    if (run.holder != r.version) out.insert(run.holder);
  return out;
}

ChunkPlace place_of(const ChunkRecord& r, uint64_t chunk) {
  auto it = std::upper_bound(r.runs.begin(), r.runs.end(), chunk,
                             [](uint64_t c, const ChunkRun& run) { return c < run.first; });
  const ChunkRun& run = *(it - 1);  // runs start at chunk 0 and cover every chunk
  return {run.holder, run.offset + (chunk - run.first) * r.chunk_size};
}

namespace {

bool same_shape(const Manifest& a, const Manifest& b) {
  if (a.nranks != b.nranks || a.rank != b.rank || a.chunk_size != b.chunk_size || a.total_size != b.total_size ||
      a.regions.size() != b.regions.size() || a.chunk_hashes.size() != b.chunk_hashes.size())
    return false;
  for (size_t i = 0; i < a.regions.size(); ++i) {
    const RegionEntry &x = a.regions[i], &y = b.regions[i];
    if (x.name != y.name || x.kind != y.kind || x.offset != y.offset || x.size != y.size) return false;
  }
  return true;
}

// Append chunk c at (holder, offset) to the runs, extending the last run when it continues it.
void append(std::vector<ChunkRun>* runs, uint64_t c, uint64_t holder, uint64_t offset, uint32_t chunk_size) {
  if (!runs->empty()) {
    ChunkRun& last = runs->back();
    if (last.holder == holder && last.first + last.count == c && last.offset + last.count * chunk_size == offset) {
      ++last.count;
      return;
    }
  }
  runs->push_back({c, 1, holder, offset});
}

}  // namespace

Result<IncrementalPlan> plan_incremental(const Manifest& m, const BaseVersion& base, int full_every) {
  if (full_every <= 1) return make_error(Code::ERR_NOT_SUPPORTED, "full_every = %d: every version is full", full_every);
  if (!base.manifest) return make_error(Code::ERR_NOT_SUPPORTED, "no earlier committed version to build on");
  const Manifest& b = *base.manifest;
  if (!same_shape(m, b) || b.version >= m.version)
    return make_error(Code::ERR_NOT_SUPPORTED, "version %llu has another shape (size, chunks or regions)",
                      static_cast<unsigned long long>(b.version));
  const uint32_t depth = base.record ? base.record->depth + 1 : 1;
  if (depth >= static_cast<uint32_t>(full_every))
    return make_error(Code::ERR_NOT_SUPPORTED, "%u incremental versions since the last full one (full_every = %d)",
                      depth - 1, full_every);
  if (base.record && (base.record->version != b.version || base.record->chunks != b.chunk_hashes.size() ||
                      base.record->chunk_size != b.chunk_size))
    return make_error(Code::ERR_NOT_SUPPORTED, "the chunk record of version %llu does not fit its manifest",
                      static_cast<unsigned long long>(b.version));
  IncrementalPlan plan;
  ChunkRecord& r = plan.record;
  r.version = m.version;
  r.chunks = m.chunk_hashes.size();
  r.chunk_size = m.chunk_size;
  r.depth = depth;
  for (uint64_t c = 0; c < r.chunks; ++c) {
    if (m.chunk_hashes[c] == b.chunk_hashes[c]) {
      ChunkPlace p = base.record ? place_of(*base.record, c) : ChunkPlace{b.version, c * b.chunk_size};
      append(&r.runs, c, p.holder, p.offset, r.chunk_size);
    } else {
      append(&r.runs, c, m.version, r.stored, r.chunk_size);
      plan.changed.push_back(c);
      r.stored += std::min<uint64_t>(m.chunk_size, m.total_size - c * m.chunk_size);
    }
  }
  if (plan.changed.size() == r.chunks)
    return make_error(Code::ERR_NOT_SUPPORTED, "every chunk changed since version %llu",
                      static_cast<unsigned long long>(b.version));
  return plan;
}

}  // namespace cairn::l3
