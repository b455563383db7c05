// `cairn clean [PREFIX] [--keep N] [--level l1|l3|all] [--cache] [--dry-run] [--config FILE]`: removes older
// versions, level by level, but never the newest good one (complete at that level and verified by
// reading it back) nor anything newer than it; removes L3 directories without COMMIT that are older
// than the newest committed version. Prints what it removes.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cache/cache_store.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "base/version_index.hpp"
#include "inspect/inventory.hpp"
#include "format.hpp"
#include "inspect/level_check.hpp"
#include "l3/l3_store.hpp"
#include "progress.hpp"

namespace cairn::tool {
namespace {

struct CleanOptions {
  std::string prefix, config_path, level = "all";
  int keep = 1;
  bool dry_run = false, cache = false, json = false;
};

// What clean says: its lines for people on stdout, or with --json on stderr and, with what it removed,
// in one JSON document on stdout at the end.
struct CleanReport {
  bool json = false;
  nlohmann::json removed = nlohmann::json::array(), notes = nlohmann::json::array(),
                 errors = nlohmann::json::array();
  void line(const std::string& text) {
    fprintf(json ? stderr : stdout, "cairn clean: %s\n", text.c_str());
    notes.push_back(text);
  }
  void error(const std::string& text) {
    print_error("clean", text);
    errors.push_back(text);
  }
};

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

struct Cleaner {
  const CleanOptions& o;
  const Inventory& inv;
  CleanReport& report;
  const VersionIndex& index;  // skipped versions (cairn index) are neither a good version nor removed
  bool failed = false;
  int removed = 0;

  void say(const std::string& what) {
    fprintf(o.json ? stderr : stdout, "cairn clean: %s%s\n", o.dry_run ? "would remove " : "removed ", what.c_str());
    report.removed.push_back(what);
    ++removed;
  }
  void check(const Status& st) {
    if (!st.is_ok()) {
      report.error(st.message());
      failed = true;
    }
  }

  // The newest version of `complete` (newest first) whose check is good, or 0. Verifies only when
  // something older could be removed: with nothing to remove, there is nothing to protect.
  template <class Check>
  uint64_t newest_good(const std::vector<const VersionInfo*>& complete, const char* level, Check check) {
    for (const VersionInfo* v : complete) {
      LevelCheck c = check(*v);
      if (c.state == LevelCheck::State::good) return v->version;
      report.line(fmt("%s version %llu is not good (%s); looking at older ones", level,
                      static_cast<unsigned long long>(v->version), c.error.c_str()));
    }
    return 0;
  }

  void clean_l1() {
    std::vector<const VersionInfo*> present, complete;
    for (const auto& [ver, v] : inv.versions) {
      if (v.l1.empty() || index.skip.count(ver)) continue;
      present.push_back(&v);
      if (v.l1_complete()) complete.push_back(&v);
    }
    if (present.size() <= static_cast<size_t>(o.keep) && present.size() == complete.size()) return;
    uint64_t total = 0;
    for (const VersionInfo* v : complete) total += l1_check_bytes(*v);
    uint64_t good;
    {
      Progress progress("clean: verifying L1", total);
      good = newest_good(complete, "L1", [&](const VersionInfo& v) { return check_l1(v, &progress); });
    }
    if (!good) {
      report.line("L1: no version is complete and good in the cache visible here; L1 left alone");
      return;
    }
    std::set<uint64_t> keep{good};
    for (size_t i = 0; i < complete.size() && i < static_cast<size_t>(o.keep); ++i) keep.insert(complete[i]->version);
    report.line(fmt("L1: newest good version %llu; keeping %s", static_cast<unsigned long long>(good),
                    join(keep).c_str()));
    std::set<std::string> touched;
    std::set<uint64_t> dropped;
    for (const VersionInfo* v : present) {
      if (v->version > good || keep.count(v->version)) continue;
      dropped.insert(v->version);
      for (const auto& c : v->l1) {
        touched.insert(c.rank_dir);
        if (o.dry_run) continue;
        CacheStore store;
        Status st = store.open(c.rank_dir, kMaxL1Slots);
        if (st.is_ok()) st = store.drop(v->version);
        check(st);
      }
      say("L1 version " + std::to_string(v->version) + (v->l1_complete() ? "" : " (incomplete)") + " from " +
          std::to_string(v->l1.size()) + " rank director" + (v->l1.size() == 1 ? "y" : "ies"));
    }
    release_slots(touched, dropped);
  }

  // After versions were dropped from these rank directories: a directory left without any version
  // holds only slots nobody will read, and goes; in the others, the slots (data and L2 redundancy)
  // that no remaining record names go. Only when the job has ended: a running job's slots are open.
  // A remaining version whose record cannot be read may own any slot, so then no slot is removed.
  void release_slots(const std::set<std::string>& dirs, const std::set<uint64_t>& dropped) {
    if (dirs.empty()) return;
    if (!job_not_running(inv.layout)) {
      report.line(fmt("slots kept: the job state (%s) says the job has not finished",
                      inv.layout.state_file().c_str()));
      return;
    }
    for (const auto& dir : dirs) {
      CacheStore store;
      if (!store.open(dir, kMaxL1Slots).is_ok()) continue;
      std::set<uint32_t> used;
      bool versions_left = false, unknown_slot = false;
      auto names = fs::list_dir(dir);
      if (!names) continue;
      // (With --dry-run the dropped versions' files are still there: they count as gone.)
      for (const auto& n : *names) {
        uint64_t v;
        VersionFile kind;
        if (!parse_version_file_name(n, &v, &kind) || dropped.count(v)) continue;
        versions_left = true;
        if (kind == VersionFile::record) {
          auto rec = store.read_record(v);
          if (rec)
            used.insert(rec->slot);
          else
            unknown_slot = true;
        } else if ((kind == VersionFile::protected_marker || kind == VersionFile::set) &&
                   !fs::exists(store.record_path(v))) {
          unknown_slot = true;  // a marker or set record without its record: its slot is unknown
        }
      }
      if (!versions_left) {
        if (!o.dry_run) check(fs::remove_tree(dir));
        say("rank directory " + dir + " (no version left)");
        continue;
      }
      if (unknown_slot) continue;
      std::vector<std::string> gone;
      uint64_t bytes = 0;
      for (const auto& n : *names) {
        uint32_t slot;
        SlotFile kind;
        if (!parse_slot_file_name(n, &slot, &kind) || used.count(slot)) continue;
        struct stat st;
        if (::stat((dir + "/" + n).c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
        if (!o.dry_run) check(fs::remove_file(dir + "/" + n));
        gone.push_back(n);
      }
      if (gone.empty()) continue;
      std::sort(gone.begin(), gone.end());
      std::string list;
      for (const auto& g : gone) list += (list.empty() ? "" : " ") + g;
      say("unused slots of " + dir + ": " + list + " (" + format_bytes(bytes) + ")");
    }
  }

  // The recycle pool (recycle_flushed, docs/format.md): data files of removed versions, kept for the
  // job's next flush to overwrite. Once the job state says the job has ended they go; while it may be
  // running (a killed job's state says so too) they stay, as its slots do.
  void release_pool() {
    const std::string pool = l3::recycle_dir(inv.layout);
    auto names = fs::list_dir(pool);
    if (!names || names->empty() || !job_not_running(inv.layout)) return;
    uint64_t bytes = 0;
    for (const auto& n : *names) {
      struct stat st;
      if (::stat((pool + "/" + n).c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
    }
    if (!o.dry_run) check(l3::drop_recycled(inv.layout));
    say("L3 recycle pool " + pool + " (" + std::to_string(names->size()) + " data file" +
        (names->size() == 1 ? "" : "s") + " of removed versions, " + format_bytes(bytes) + ")");
  }

  void clean_l3() {
    release_pool();
    std::vector<const VersionInfo*> committed;
    size_t dirs = 0;
    for (const auto& [ver, v] : inv.versions) {
      if (!v.l3.present || index.skip.count(ver)) continue;
      ++dirs;
      if (v.l3.committed) committed.push_back(&v);
    }
    if (dirs == 0) return;
    uint64_t newest_committed = committed.empty() ? 0 : committed.front()->version;
    // Directories without COMMIT older than the newest committed version: never read, never finished.
    // Removed together below (l3::remove_versions reads the prefix's chunk records once for all).
    std::vector<std::pair<const VersionInfo*, const char*>> doomed;  // newest first
    auto remove_dir = [&](const VersionInfo& v, const char* what) { doomed.emplace_back(&v, what); };
    std::set<uint64_t> keep;
    uint64_t good = 0;
    bool removable = committed.size() > static_cast<size_t>(o.keep);
    if (removable) {
      uint64_t total = 0;
      for (const VersionInfo* v : committed) total += l3_check_bytes(*v);
      {
        Progress progress("clean: verifying L3", total);
        good = newest_good(committed, "L3", [&](const VersionInfo& v) { return check_l3(inv.layout, v, &progress); });
      }
      if (!good) report.line("L3: no committed version is good; committed versions left alone");
    }
    if (good) {
      keep.insert(good);
      for (size_t i = 0; i < committed.size() && i < static_cast<size_t>(o.keep); ++i)
        keep.insert(committed[i]->version);
      report.line(fmt("L3: newest good version %llu; keeping %s", static_cast<unsigned long long>(good),
                      join(keep).c_str()));
      // Incremental versions that stay need the versions holding their chunks (named directly: one level).
      std::set<uint64_t> held;
      for (const VersionInfo* v : committed)
        if (v->version >= good || keep.count(v->version))
          for (uint64_t h : v->l3.needs)
            if (!keep.count(h) && h < good) {
              held.insert(h);
              report.line(fmt("L3: keeping version %llu: version %llu, incremental, has chunks in it",
                              static_cast<unsigned long long>(h), static_cast<unsigned long long>(v->version)));
            }
      keep.merge(held);
    }
    for (const auto& [ver, v] : inv.versions) {
      if (!v.l3.present || index.skip.count(ver)) continue;
      if (!v.l3.committed) {
        if (ver < newest_committed) remove_dir(v, "incomplete");
      } else if (good && ver < good && !keep.count(ver)) {
        remove_dir(v, "committed");
      }
    }
    std::set<uint64_t> versions;
    for (const auto& [v, what] : doomed) versions.insert(v->version);
    std::map<uint64_t, Status> outcome;
    if (!o.dry_run && !versions.empty()) outcome = l3::remove_versions(inv.layout, versions);
    for (const auto& [v, what] : doomed) {
      if (!o.dry_run) check(outcome.at(v->version));
      say("L3 version " + std::to_string(v->version) + " (" + what + "): " + v->l3.dir);
    }
  }

  static std::string join(const std::set<uint64_t>& s) {
    std::string out;
    for (auto it = s.rbegin(); it != s.rend(); ++it) out += (out.empty() ? "" : ", ") + std::to_string(*it);
    return out;
  }
};

// --cache: the job's whole L1 cache as this machine sees it goes, every version of every node directory
// here. Refused while the job runs, and while the prefix records the job and its cache holds a version
// newer than the newest committed at L3 (the only copy of it: flush it first, or use --level l1). A cache
// whose prefix holds no record of it (the prefix was removed: base/prefix_owner.hpp) is not this
// prefix's checkpoint and may go.
int clean_cache(const CleanOptions& o, const Inventory& inv, CleanReport& report) {
  const Layout& l = inv.layout;
  if (!fs::exists(l.cache_job)) {
    fprintf(stderr, "cairn clean: nothing to clean: no cache %s on this node\n", l.cache_job.c_str());
    return kExitOk;
  }
  if (!job_not_running(l)) {
    report.error("--cache: the job state (" + l.state_file() + ") says the job has not finished; its cache is in use");
    return kExitFailure;
  }
  if (fs::exists(l.identity_file())) {
    uint64_t newest_l1 = 0, newest_l3 = 0;
    for (const auto& [ver, v] : inv.versions) {
      if (v.l1_complete()) newest_l1 = std::max(newest_l1, ver);
      if (v.l3.committed) newest_l3 = std::max(newest_l3, ver);
    }
    if (newest_l1 > newest_l3) {
      report.error("--cache: the cache holds version " + std::to_string(newest_l1) +
                   ", newer than anything committed in " + l.prefix +
                   " (the job's last good checkpoint): flush it first (cairn flush), or remove older versions only "
                   "(--level l1)");
      return kExitFailure;
    }
  }
  if (!o.dry_run) {
    Status st = fs::remove_tree(l.cache_job);
    if (!st.is_ok()) {
      report.error(st.message());
      return kExitFailure;
    }
  }
  fprintf(o.json ? stderr : stdout, "cairn clean: %s the cache %s\n", o.dry_run ? "would remove" : "removed",
          l.cache_job.c_str());
  report.removed.push_back("the cache " + l.cache_job);
  return kExitOk;
}

int clean(const CleanOptions& o, const Inventory& inv, CleanReport& report) {
  if (o.cache) return clean_cache(o, inv, report);
  if (inv.versions.empty()) {
    fprintf(stderr, "cairn clean: nothing to clean: no checkpoints in %s or in the cache %s\n",
            inv.layout.prefix.c_str(), inv.layout.cache_job.c_str());
    return kExitOk;
  }
  auto index = read_index(inv.layout.index_file());
  if (!index) {
    report.error(index.status().message() + "; nothing removed");
    return kExitFailure;
  }
  Cleaner cleaner{o, inv, report, *index};
  if (o.level != "l3") cleaner.clean_l1();
  if (o.level != "l1") cleaner.clean_l3();
  if (cleaner.removed == 0 && !cleaner.failed) fprintf(stderr, "cairn clean: nothing to remove\n");
  return cleaner.failed ? kExitFailure : kExitOk;
}

int run_clean(const CleanOptions& o) {
  if (o.keep < 1) {
    print_error("clean", "--keep must be at least 1 (the newest good version is never removed)");
    return kExitUsage;
  }
  auto ctx = load_tool_context("clean", o.config_path, o.prefix, /*prefix_must_exist=*/!o.cache);
  if (!ctx) {
    print_error("clean", ctx.status().message());
    return kExitUsage;
  }
  Inventory inv = scan_inventory(ctx->layout);
  CleanReport report;
  report.json = o.json;
  const int status = clean(o, inv, report);
  if (o.json)
    printf("%s\n", nlohmann::json{{"prefix", inv.layout.prefix},
                                   {"cache", inv.layout.cache_job},
                                   {"level", o.cache ? "cache" : o.level},
                                   {"dry_run", o.dry_run},
                                   {"removed", report.removed},
                                   {"notes", report.notes},
                                   {"errors", report.errors},
                                   {"exit_status", status}}
                        .dump(2)
                        .c_str());
  return status;
}

}  // namespace

Command add_clean_command(CLI::App& root) {
  auto o = std::make_shared<CleanOptions>();
  CLI::App* app = root.add_subcommand("clean", "Remove older checkpoint versions, never the newest good one.");
  add_prefix_arg(app, o->prefix);
  app->add_option("--keep", o->keep, "Complete versions to keep at each level, newest first (default 1)")
      ->type_name("N");
  app->add_option("--level", o->level, "Levels to clean: l1 (the cache visible here), l3 (the prefix) or all")
      ->check(CLI::IsMember({"l1", "l3", "all"}))
      ->type_name("LEVEL");
  app->add_flag("--cache", o->cache,
                "Remove the job's whole L1 cache on this node (every version; refused while the job runs or "
                "when it holds a version not yet flushed to the prefix)");
  app->add_flag("--dry-run", o->dry_run, "Print what would be removed, remove nothing");
  app->add_flag("--json", o->json, "Print JSON: what was removed, notes, errors, exit status (the lines go to stderr)");
  add_config_option(app, o->config_path);
  app->footer(
      "At each level the newest good version (complete there, and every chunk verified) and every newer\n"
      "version are kept, with the N newest complete ones; older versions are removed (at L1 with their L2\n"
      "data). L3 directories without COMMIT older than the newest committed version are removed too.\n"
      "--cache removes the job's cache directory on this node (run it on every node that ran the job):\n"
      "how to start afresh after removing a prefix, whose cache is otherwise refused at the next launch.\n"
      "Exit status: 0 (also when there is nothing to remove), 1 a removal failed or was refused, 2 bad options.");
  set_usage(app, "cairn clean [PREFIX] [--keep N] [--level l1|l3|all] [--cache] [--dry-run] [--json] [--config FILE]");
  return {app, [o](const Invocation&) { return run_clean(*o); }};
}

}  // namespace cairn::tool
