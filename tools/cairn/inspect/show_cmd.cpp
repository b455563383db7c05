// `cairn show VERSION [PREFIX] [--config FILE] [--json]`: one version in detail: its ranks and where
// each is, its regions and files, its chunks and checksums, its L3 directory and its L2 set records.
// Manifests come from the best source per rank (L1 record, else L2 set record, else L3).
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "base/xxh.hpp"
#include "inspect/inventory.hpp"
#include "redistribute/distribution.hpp"
#include "format.hpp"

namespace cairn::tool {
namespace {

struct ShowOptions {
  std::string version_text, prefix, config_path;
  bool json = false;
};

const char* type_name(const RegionEntry& e) {
  static const char* names[] = {"byte", "char", "int", "int32", "int64", "uint32", "uint64", "float", "double", "long",
                                "complex_float", "complex_double"};
  if (e.kind == RegionKind::file) return "file";
  return e.type < sizeof names / sizeof names[0] ? names[e.type] : "unknown";
}

std::string distribution_text(const RegionEntry& e) {
  std::string s = redistribute::kind_name(static_cast<redistribute::Kind>(e.distribution));
  const auto& p = e.dist_params;
  if (e.distribution == 2 && p.size() == 1)
    s += " of " + std::to_string(p[0]);
  else if (e.distribution == 3 && p.size() == 2)
    s += " of " + std::to_string(p[0]) + " by " + std::to_string(p[1]);
  else if ((e.distribution == 4 || e.distribution == 5) && p.size() == 2)
    s += " " + std::to_string(p[0]) + "x" + std::to_string(p[1]);
  else if (!p.empty()) {
    s += " (";
    for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
    s += ")";
  }
  return s;
}

// One region (or file) over every rank that has it.
struct RegionSummary {
  RegionEntry first;  // rank-independent fields from the first rank holding it
  uint64_t count_min = UINT64_MAX, count_max = 0, bytes = 0;
  uint32_t ranks = 0;
};

std::vector<RegionSummary> summarize_regions(const VersionInfo& v) {
  std::vector<RegionSummary> out;
  for (uint32_t r = 0; r < v.nranks(); ++r) {
    const Manifest* m = v.manifest(r);
    if (!m) continue;
    for (const auto& e : m->regions) {
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const RegionSummary& s) { return s.first.name == e.name && s.first.kind == e.kind; });
      if (it == out.end()) {
        out.push_back({});
        it = out.end() - 1;
        it->first = e;
      }
      it->count_min = std::min(it->count_min, e.count);
      it->count_max = std::max(it->count_max, e.count);
      it->bytes += e.size;
      ++it->ranks;
    }
  }
  return out;
}

// One xxh3 over every rank's chunk checksums in rank order: equal digests, equal checksums.
uint64_t checksum_digest(const VersionInfo& v) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (uint32_t r = 0; r < v.nranks(); ++r)
    if (const Manifest* m = v.manifest(r))
      XXH3_64bits_update(st, m->chunk_hashes.data(), m->chunk_hashes.size() * sizeof(uint64_t));
  uint64_t d = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return d;
}

struct DirFile {
  std::string name;
  uint64_t bytes = 0;
};
std::vector<DirFile> dir_files(const std::string& dir) {
  std::vector<DirFile> out;
  auto names = fs::list_dir(dir);
  if (!names) return out;
  for (const auto& n : *names) {
    struct stat st;
    if (::stat((dir + "/" + n).c_str(), &st) == 0) out.push_back({n, static_cast<uint64_t>(st.st_size)});
  }
  // COMMIT first, then by rank number, then the rest.
  auto key = [](const DirFile& f) {
    size_t dash = f.name.find('-'), dot = f.name.find('.');
    long rank = f.name.rfind("rank-", 0) == 0 && dot != std::string::npos ? atol(f.name.c_str() + dash + 1) : -1;
    return std::make_tuple(f.name == "COMMIT" ? 0 : rank >= 0 ? 1 : 2, rank, f.name);
  };
  std::sort(out.begin(), out.end(), [&](const DirFile& a, const DirFile& b) { return key(a) < key(b); });
  return out;
}

std::string count_text(const RegionSummary& s) {
  if (s.count_min == s.count_max) return std::to_string(s.count_min);
  return std::to_string(s.count_min) + ".." + std::to_string(s.count_max);
}

nlohmann::json region_json(const RegionEntry& e) {
  return {{"name", e.name},
          {"kind", e.kind == RegionKind::file ? "file" : "memory"},
          {"type", type_name(e)},
          {"elem_size", e.elem_size},
          {"count", e.count},
          {"offset", e.offset},
          {"size_bytes", e.size},
          {"distribution", redistribute::kind_name(static_cast<redistribute::Kind>(e.distribution))},
          {"dist_params", e.dist_params}};
}

nlohmann::json show_json(const Inventory& inv, const VersionInfo& v) {
  nlohmann::json j;
  j["version"] = v.version;
  j["found"] = true;
  j["label"] = v.label();
  j["nranks"] = v.nranks();
  j["created_unix_ns"] = v.created_unix_ns();
  j["size_bytes"] = v.total_bytes();
  j["checksum_digest"] = hex64(checksum_digest(v));
  j["ranks"] = nlohmann::json::array();
  for (uint32_t r = 0; r < v.nranks(); ++r) {
    nlohmann::json rj{{"rank", r}};
    const Manifest* m = v.manifest(r);
    if (m) {
      rj["node"] = m->node;
      rj["size_bytes"] = m->total_size;
      rj["chunk_size"] = m->chunk_size;
      rj["chunks"] = m->chunk_hashes.size();
      rj["created_unix_ns"] = m->created_unix_ns;
      rj["regions"] = nlohmann::json::array();
      for (const auto& e : m->regions) rj["regions"].push_back(region_json(e));
    } else {
      rj["manifest"] = nullptr;
    }
    const L1Copy* c = v.l1_copy(r);
    rj["l1"] = c ? nlohmann::json{{"node", c->node}, {"dir", c->rank_dir}, {"slot", c->slot}} : nlohmann::json();
    rj["l3"] = v.l3.manifests.count(r) > 0;
    j["ranks"].push_back(rj);
  }
  j["regions"] = nlohmann::json::array();
  for (const auto& s : summarize_regions(v)) {
    nlohmann::json rj = region_json(s.first);
    rj.erase("offset");
    rj["count"] = {{"min", s.count_min}, {"max", s.count_max}};
    rj["size_bytes"] = s.bytes;
    rj["ranks"] = s.ranks;
    j["regions"].push_back(rj);
  }
  nlohmann::json l1 = nlohmann::json::array();
  for (const auto& c : v.l1)
    l1.push_back({{"node", c.node},
                  {"rank", c.rank},
                  {"dir", c.rank_dir},
                  {"record", c.has_record},
                  {"record_error", c.record_error},
                  {"slot", c.slot},
                  {"protected", c.is_protected},
                  {"set", c.has_set}});
  j["l1"] = {{"ranks", v.l1_ranks()}, {"complete", v.l1_complete()}, {"copies", l1}};
  nlohmann::json sets = nlohmann::json::array();
  for (const auto& s : v.sets)
    sets.push_back({{"scheme", redundancy_name(s.scheme)}, {"n", s.n}, {"m", s.m}, {"ranks", s.ranks}});
  j["l2"] = {{"protected_ranks", v.l2_ranks()}, {"complete", v.l2_complete()}, {"sets", sets}, {"errors", v.l2_errors}};
  nlohmann::json files = nlohmann::json::array();
  if (v.l3.present)
    for (const auto& f : dir_files(v.l3.dir)) files.push_back({{"name", f.name}, {"bytes", f.bytes}});
  nlohmann::json data = nlohmann::json::array();
  for (uint32_t r = 0; v.l3.present && r < v.nranks(); ++r) {
    auto w = l3_where(inv.layout, v.version, r);
    if (w)
      data.push_back(
          {{"rank", r}, {"file", w->file}, {"offset", w->offset}, {"stored_bytes", w->stored}, {"zstd", w->zstd}});
  }
  LevelVerdict d1 = l1_verdict(v), d3 = l3_verdict(v);
  j["l1"]["state"] = verdict_name(d1, false);
  j["l1"]["why"] = d1.why;
  j["l3"] = {{"state", verdict_name(d3, true)},
             {"why", d3.why},
             {"dir", v.l3.present ? v.l3.dir : std::string()},
             {"files", files},
             {"data", data},
             {"errors", v.l3.errors}};
  if (v.l3.committed)
    j["l3"]["commit"] = {
        {"version", v.l3.commit.version}, {"nranks", v.l3.commit.nranks}, {"label", v.l3.commit.label}};
  j["prefix"] = inv.layout.prefix;
  j["cache"] = inv.layout.cache_job;
  return j;
}

void show_text(const Layout& layout, const VersionInfo& v) {
  int64_t now = now_unix_ns(), created = v.created_unix_ns();
  uint32_t n = v.nranks();
  printf("version %llu, label \"%s\", %u ranks, %s%s\n", static_cast<unsigned long long>(v.version), v.label().c_str(),
         n, format_bytes(v.total_bytes()).c_str(), v.known_ranks() < n ? " (ranks missing)" : "");
  if (created)
    printf("written %s (%s ago)\n", format_utc(created).c_str(),
           format_duration(static_cast<double>(now - created) / 1e9).c_str());

  // Where it is.
  printf("\nlevels\n");
  std::string l1 = std::to_string(v.l1_ranks()) + "/" + std::to_string(n) + " ranks";
  for (const auto& node : v.l1_nodes()) {
    std::vector<uint32_t> ranks;
    for (const auto& c : v.l1)
      if (c.node == node && c.has_record) ranks.push_back(c.rank);
    l1 += (l1.find(':') == std::string::npos ? ": " : ", ") + node + " (rank" + (ranks.size() > 1 ? "s " : " ") +
          rank_ranges(ranks) + ")";
  }
  printf("  L1  %s\n", l1.c_str());
  if (v.l2_ranks() || !v.sets.empty()) {
    printf("  L2  protected on %u/%u ranks%s\n", v.l2_ranks(), n,
           v.scheme().empty()
               ? ""
               : (", " + v.scheme() + ", " + std::to_string(v.sets.size()) + " set record(s) seen").c_str());
    for (const auto& s : v.sets)
      printf("        set: %s, %u members + %u parity, ranks %s\n", redundancy_name(s.scheme), s.n, s.m,
             rank_ranges(s.ranks).c_str());
  } else {
    printf("  L2  -\n");
  }
  for (const auto& e : v.l2_errors) printf("        unreadable set record: %s\n", e.c_str());
  LevelVerdict d3 = l3_verdict(v);
  if (d3.state == LevelVerdict::State::absent)
    printf("  L3  -\n");
  else if (d3.why.empty())
    printf("  L3  %s: %s\n", verdict_name(d3, true), v.l3.dir.c_str());
  else
    printf("  L3  %s (%s): %s\n", verdict_name(d3, true), d3.why.c_str(), v.l3.dir.c_str());
  for (const auto& c : v.l1)
    if (!c.record_error.empty()) printf("  unreadable L1 record: %s\n", c.record_error.c_str());
  for (const auto& e : v.l3.errors) printf("  unreadable L3 manifest: %s\n", e.c_str());

  printf("\nranks\n  %5s  %-10s  %10s  %7s  %-16s  %s\n", "rank", "node", "size", "chunks", "L1", "L3");
  for (uint32_t r = 0; r < n; ++r) {
    const Manifest* m = v.manifest(r);
    const L1Copy* c = v.l1_copy(r);
    std::string where = c ? c->node + " slot " + std::to_string(c->slot) : "-";
    printf("  %5u  %-10s  %10s  %7s  %-16s  %s\n", r, m ? (m->node.empty() ? "-" : m->node.c_str()) : "?",
           m ? format_bytes(m->total_size).c_str() : "?", m ? std::to_string(m->chunk_hashes.size()).c_str() : "?",
           where.c_str(), v.l3.manifests.count(r) ? "yes" : "-");
  }

  auto regions = summarize_regions(v);
  printf("\nregions\n  %-20s  %-6s  %-7s  %16s  %10s  %5s  %s\n", "name", "kind", "type", "count per rank", "size",
         "ranks", "distribution");
  bool any_file = false;
  for (const auto& s : regions) {
    if (s.first.kind == RegionKind::file) {
      any_file = true;
      continue;
    }
    printf("  %-20s  %-6s  %-7s  %16s  %10s  %5u  %s\n", s.first.name.c_str(), "memory", type_name(s.first),
           count_text(s).c_str(), format_bytes(s.bytes).c_str(), s.ranks, distribution_text(s.first).c_str());
  }
  printf("\nfiles\n");
  if (!any_file) printf("  (none)\n");
  for (const auto& s : regions)
    if (s.first.kind == RegionKind::file)
      printf("  %-40s  %10s  on %u rank(s)\n", s.first.name.c_str(), format_bytes(s.bytes).c_str(), s.ranks);

  uint64_t chunks = 0;
  uint32_t chunk_size = 0;
  for (uint32_t r = 0; r < n; ++r)
    if (const Manifest* m = v.manifest(r))
      chunks += m->chunk_hashes.size(), chunk_size = std::max(chunk_size, m->chunk_size);
  printf("\nchunks\n  %llu chunks of %s over %u ranks (the last of each rank may be short); xxh3-64 each\n",
         static_cast<unsigned long long>(chunks), format_bytes(chunk_size).c_str(), v.known_ranks());
  printf("  digest of every chunk checksum, in rank order: %s\n", hex64(checksum_digest(v)).c_str());

  if (v.l3.present) {
    printf("\nL3 layout: %s\n", v.l3.dir.c_str());
    for (const auto& f : dir_files(v.l3.dir))
      printf("  %-24s  %12llu B\n", f.name.c_str(), static_cast<unsigned long long>(f.bytes));
    if (v.l3.committed)
      printf("  COMMIT: version %llu, %u ranks, label \"%s\"\n", static_cast<unsigned long long>(v.l3.commit.version),
             v.l3.commit.nranks, v.l3.commit.label.c_str());
    // Data kept outside the version directory (N-to-M files, other prefixes) or compressed.
    for (uint32_t r = 0; r < n; ++r) {
      if (!fs::exists(l3::where_path(layout, v.version, r))) continue;
      auto w = l3_where(layout, v.version, r);
      if (!w)
        printf("  rank %u: %s\n", r, w.status().message().c_str());
      else
        printf("  rank %u: %s at byte %llu, %llu B stored%s\n", r, w->file.c_str(),
               static_cast<unsigned long long>(w->offset), static_cast<unsigned long long>(w->stored),
               w->zstd ? " (zstd)" : "");
    }
    // An incremental version: which versions' files hold each rank's unchanged chunks.
    for (uint32_t r = 0; r < n; ++r) {
      const std::string cpath = l3::chunks_path(layout, v.version, r);
      if (!fs::exists(cpath)) continue;
      auto text = fs::read_file(cpath);
      auto rec = text ? l3::decode_chunk_record(*text) : Result<l3::ChunkRecord>(text.status());
      if (!rec) {
        printf("  rank %u: %s\n", r, rec.status().prefixed(cpath).message().c_str());
        continue;
      }
      uint64_t own = 0;
      for (const auto& run : rec->runs) own += run.holder == rec->version ? run.count : 0;
      std::string in;
      for (uint64_t h : l3::holders_of(*rec)) in += (in.empty() ? "" : ", ") + std::to_string(h);
      printf("  rank %u: incremental (depth %u): %llu of %llu chunks written here (%llu B), the others in version%s %s\n",
             r, rec->depth, static_cast<unsigned long long>(own), static_cast<unsigned long long>(rec->chunks),
             static_cast<unsigned long long>(rec->stored), l3::holders_of(*rec).size() > 1 ? "s" : "", in.c_str());
    }
  }
}

int run_show(const ShowOptions& o) {
  uint64_t version = 0;
  if (!parse_version_arg(o.version_text, &version)) {
    print_error("show", "'" + o.version_text + "' is not a version (a number from 1, or v00000042)");
    return kExitUsage;
  }
  auto ctx = load_tool_context("show", o.config_path, o.prefix);
  if (!ctx) {
    print_error("show", ctx.status().message());
    return kExitUsage;
  }
  Inventory inv = scan_inventory(ctx->layout);
  auto it = inv.versions.find(version);
  if (it == inv.versions.end()) {
    if (inv.versions.empty())
      print_error("show", "no checkpoints in " + inv.layout.prefix + " or in the cache " + inv.layout.cache_job);
    else
      print_error("show", "no version " + std::to_string(version) + " in " + inv.layout.prefix + " or in the cache " +
                              inv.layout.cache_job + " (newest: " + std::to_string(inv.versions.begin()->first) +
                              "; see 'cairn list')");
    if (o.json)  // still one JSON document: what was asked, and that nothing holds it
      printf("%s\n", nlohmann::json{{"version", version},
                                     {"found", false},
                                     {"prefix", inv.layout.prefix},
                                     {"cache", inv.layout.cache_job},
                                     {"exit_status", kExitNothing}}
                          .dump(2)
                          .c_str());
    return kExitNothing;
  }
  if (o.json)
    printf("%s\n", show_json(inv, it->second).dump(2).c_str());
  else
    show_text(inv.layout, it->second);
  // The same verdict as list and verify: a version damaged at a level is something bad.
  const bool damaged = l1_verdict(it->second).state == LevelVerdict::State::damaged ||
                       l3_verdict(it->second).state == LevelVerdict::State::damaged;
  return damaged ? kExitFailure : kExitOk;
}

}  // namespace

Command add_show_command(CLI::App& root) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* app =
      root.add_subcommand("show", "One checkpoint version in detail: ranks, regions, files, chunks, layout.");
  app->add_option("version", o->version_text, "Version number (or its L3 directory name, v00000042)")
      ->required()
      ->type_name("VERSION");
  add_prefix_arg(app, o->prefix);
  add_config_option(app, o->config_path);
  app->add_flag("--json", o->json, "Print JSON");
  app->footer(
      "Exit status: 0 shown, 1 shown and damaged at some level (an unreadable record, COMMIT or manifest),\n"
      "2 bad options or configuration, 3 no such version.");
  set_usage(app, "cairn show VERSION [PREFIX] [--json] [--config FILE]");
  return {app, [o](const Invocation&) { return run_show(*o); }};
}

}  // namespace cairn::tool
