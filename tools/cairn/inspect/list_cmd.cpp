// `cairn list [PREFIX] [--config FILE] [--json]`: every version the job left, newest first, with its
// state at each level (L1 ranks present in the cache directories visible here, L2 protected markers,
// L3 committed or not), label, size and age. Reads records and manifests only, never the data.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "common.hpp"
#include "inspect/inventory.hpp"
#include "format.hpp"

namespace cairn::tool {
namespace {

struct ListOptions {
  std::string prefix, config_path;
  bool json = false;
};

std::string l1_text(const VersionInfo& v) {
  uint32_t have = v.l1_ranks(), n = v.nranks();
  if (l1_verdict(v).state == LevelVerdict::State::damaged) return "damaged";
  if (have == 0) return "-";
  return std::to_string(have) + "/" + std::to_string(n);
}

std::string l2_text(const VersionInfo& v) {
  uint32_t have = v.l2_ranks(), n = v.nranks();
  if (have == 0) return "-";
  std::string s = v.l2_complete() ? "protected" : std::to_string(have) + "/" + std::to_string(n);
  if (!v.scheme().empty()) s += " (" + v.scheme() + ")";
  return s;
}

std::string l3_text(const VersionInfo& v) {
  LevelVerdict d = l3_verdict(v);
  if (d.state == LevelVerdict::State::complete && !v.l3.needs.empty()) {
    std::string on;
    for (uint64_t h : v.l3.needs) on += (on.empty() ? "" : ",") + std::to_string(h);
    return "incr on " + on;
  }
  return d.state == LevelVerdict::State::absent ? "-" : verdict_name(d, true);
}

std::string size_text(const VersionInfo& v) {
  if (v.known_ranks() == 0) return "?";
  return (v.known_ranks() < v.nranks() ? ">= " : "") + format_bytes(v.total_bytes());
}

nlohmann::json version_json(const VersionInfo& v, int64_t now) {
  nlohmann::json j;
  j["version"] = v.version;
  j["label"] = v.label();
  j["nranks"] = v.nranks();
  j["size_bytes"] = v.total_bytes();
  j["size_complete"] = v.known_ranks() == v.nranks();
  int64_t created = v.created_unix_ns();
  j["created_unix_ns"] = created;
  j["age_seconds"] = created ? nlohmann::json(static_cast<double>(now - created) / 1e9) : nlohmann::json();
  LevelVerdict d1 = l1_verdict(v), d3 = l3_verdict(v);
  j["l1"] = {{"ranks", v.l1_ranks()},
             {"complete", v.l1_complete()},
             {"nodes", v.l1_nodes()},
             {"state", verdict_name(d1, false)},
             {"why", d1.why}};
  j["l2"] = {{"protected_ranks", v.l2_ranks()}, {"complete", v.l2_complete()}, {"scheme", v.scheme()}};
  j["l3"] = {{"state", verdict_name(d3, true)},
             {"why", d3.why},
             {"manifests", v.l3.manifests.size()},
             {"data_files", v.l3.data_files},
             {"needs", v.l3.needs},
             {"dir", v.l3.present ? v.l3.dir : std::string()}};
  return j;
}

int run_list(const ListOptions& o) {
  auto ctx = load_tool_context("list", o.config_path, o.prefix);
  if (!ctx) {
    print_error("list", ctx.status().message());
    return kExitUsage;
  }
  Inventory inv = scan_inventory(ctx->layout);
  int64_t now = now_unix_ns();
  if (o.json) {
    nlohmann::json j;
    j["prefix"] = inv.layout.prefix;
    j["cache"] = inv.layout.cache_job;
    j["nodes"] = inv.nodes;
    j["versions"] = nlohmann::json::array();
    for (const auto& [ver, v] : inv.versions) j["versions"].push_back(version_json(v, now));
    printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  if (inv.versions.empty()) {
    fprintf(stderr, "cairn list: no checkpoints in %s or in the cache %s\n", inv.layout.prefix.c_str(),
            inv.layout.cache_job.c_str());
    return kExitOk;
  }
  std::string nodes;
  for (const auto& n : inv.nodes) nodes += (nodes.empty() ? "" : ", ") + n;
  printf("prefix %s\ncache  %s (%s)\n\n", inv.layout.prefix.c_str(), inv.layout.cache_job.c_str(),
         nodes.empty() ? "no node directory here" : ("nodes: " + nodes).c_str());
  printf("%8s  %-16s  %5s  %-7s  %-17s  %-10s  %10s  %s\n", "version", "label", "ranks", "L1", "L2", "L3", "size",
         "age");
  for (const auto& [ver, v] : inv.versions) {
    int64_t created = v.created_unix_ns();
    std::string label = v.label().empty() ? "-" : v.label();
    std::string ranks = v.nranks() ? std::to_string(v.nranks()) : "?";
    printf("%8llu  %-16s  %5s  %-7s  %-17s  %-10s  %10s  %s\n", static_cast<unsigned long long>(ver), label.c_str(),
           ranks.c_str(), l1_text(v).c_str(), l2_text(v).c_str(), l3_text(v).c_str(), size_text(v).c_str(),
           created ? format_duration(static_cast<double>(now - created) / 1e9).c_str() : "?");
  }
  return kExitOk;
}

}  // namespace

Command add_list_command(CLI::App& root) {
  auto o = std::make_shared<ListOptions>();
  CLI::App* app = root.add_subcommand("list", "Versions of a job's checkpoints per level, newest first.");
  add_prefix_arg(app, o->prefix);
  add_config_option(app, o->config_path);
  app->add_flag("--json", o->json, "Print JSON");
  app->footer(
      "L1: ranks whose record is in the cache directories visible from this machine, of the job's ranks.\n"
      "L2: 'protected' when every rank has its protected marker (else how many), with the scheme.\n"
      "L3: committed, incomplete (no COMMIT: never read), damaged (an unreadable COMMIT or manifest, or a\n"
      "version an incremental one names is gone), 'incr on V,...' (committed, incremental: its unchanged\n"
      "chunks lie in those versions' files, which it needs), or '-'.\n"
      "Size: snapshot bytes over all ranks. 'cairn show VERSION' says why a version is damaged.\n"
      "Exit status: 0 (also when there is no checkpoint: said on stderr), 2 for bad options or configuration\n"
      "(a PREFIX that is not a directory).");
  set_usage(app, "cairn list [PREFIX] [--json] [--config FILE]");
  return {app, [o](const Invocation&) { return run_list(*o); }};
}

}  // namespace cairn::tool
