// `cairn migrate --node I [PREFIX]`: asks the `cairn run` that manages a running job to move the ranks
// of node I to a spare node (PPMR, docs/migration.md), and follows the migration until the job runs
// again on the spare.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "commands.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "base/layout.hpp"
#include "migrate/migration.hpp"
#include "cli_units.hpp"
#include "format.hpp"

namespace cairn::tool {
namespace {

struct MigrateOptions {
  std::string node, prefix, config_path;
  int buffers = 8;
  uint64_t buffer_size = 8ull << 20;
  std::string transport = "auto";
  double timeout = 600;
  bool no_wait = false, json = false;
};

// The launcher managing the job at `layout`, checked to be alive.
Result<LauncherInfo> find_launcher(const Layout& layout) {
  auto text = fs::read_file(layout.launcher_file());
  if (!text)
    return make_error(Code::ERR_INVALID_ARG,
                      "no cairn run manages a job with prefix %s (%s is missing); migration needs the job started "
                      "with cairn run --spares S",
                      layout.prefix.c_str(), layout.launcher_file().c_str());
  LauncherInfo info = parse_launcher_info(*text);
  if (info.pid <= 0 || (::kill(info.pid, 0) != 0 && errno == ESRCH))
    return make_error(Code::ERR_INVALID_ARG, "the cairn run that wrote %s (pid %d) is gone; no job to migrate",
                      layout.launcher_file().c_str(), static_cast<int>(info.pid));
  return info;
}

// "2" (an index into the job's nodes) or "node2" (a name among them) -> the node's current name.
Result<std::string> resolve_node(const std::string& given, const LauncherInfo& info) {
  std::string all;
  for (const auto& n : info.nodes) all += (all.empty() ? "" : ", ") + n;
  if (!given.empty() && given.find_first_not_of("0123456789") == std::string::npos) {
    size_t i = std::stoul(given);
    if (i >= info.nodes.size())
      return make_error(Code::ERR_INVALID_ARG, "--node %s: the job has %zu nodes, numbered 0..%zu (%s)", given.c_str(),
                        info.nodes.size(), info.nodes.size() - 1, all.c_str());
    return info.nodes[i];
  }
  for (const auto& n : info.nodes)
    if (n == given) return n;
  return make_error(Code::ERR_INVALID_ARG, "--node %s: not a node of the job (%s)", given.c_str(), all.c_str());
}

void print_result(const MigrateResult& r, bool json) {
  if (json) {
    nlohmann::json j = {{"id", r.id},
                        {"status", r.status},
                        {"node", r.node},
                        {"spare", r.spare},
                        {"version", r.version},
                        {"bytes", r.bytes},
                        {"wind_down_seconds", r.wind_down_seconds},
                        {"transfer_seconds", r.transfer_seconds},
                        {"move_seconds", r.move_seconds},
                        {"restart_seconds", r.restart_seconds},
                        {"total_seconds", r.total_seconds},
                        {"restart_level", r.restart_level},
                        {"transport", r.transport},
                        {"message", r.message}};
    printf("%s\n", j.dump(2).c_str());
    return;
  }
  if (r.status != "done") {
    printf("migration %s: %s\n", r.status.c_str(), r.message.c_str());
    return;
  }
  double gbps = r.move_seconds > 0 ? static_cast<double>(r.bytes) / r.move_seconds / 1e9 : 0;
  printf("migrated %s to %s: version %llu, %s moved %s in %s (%s moving the bytes, %.2f GB/s)\n", r.node.c_str(),
         r.spare.c_str(), static_cast<unsigned long long>(r.version), format_bytes(r.bytes).c_str(),
         r.transport == "fabric" ? "over the fabric" : "between the caches", format_duration(r.transfer_seconds).c_str(),
         format_duration(r.move_seconds).c_str(), gbps);
  printf("  checkpoint and exit %.2f s, transfer %.2f s, relaunch and restart from %s %.2f s; total %.2f s\n",
         r.wind_down_seconds, r.transfer_seconds, r.restart_level.c_str(), r.restart_seconds, r.total_seconds);
}

int run_migrate(const MigrateOptions& o) {
  auto loaded = load_job_config(o.config_path, "migrate");
  if (!loaded) {
    print_error("migrate", loaded.status().message());
    return kExitUsage;
  }
  Config cfg = loaded->config;
  if (!o.prefix.empty()) cfg.prefix = o.prefix;
  Layout layout = make_layout(cfg);
  auto launcher = find_launcher(layout);
  if (!launcher) {
    print_error("migrate", launcher.status().message());
    return kExitUsage;
  }
  auto node = resolve_node(o.node, *launcher);
  if (!node) {
    print_error("migrate", node.status().message());
    return kExitUsage;
  }
  if (launcher->spares.empty()) {
    print_error("migrate", "the job has no spare node left to move " + *node +
                               " to; start it with cairn run --spares S");
    return kExitUsage;
  }
  if (fs::exists(layout.migrate_file())) {
    print_error("migrate", "a migration is already requested (" + layout.migrate_file() +
                               "); wait for it, or remove the file to withdraw it before the job acts on it");
    return kExitFailure;
  }

  MigrateRequest req;
  req.requested_unix_ns = now_unix_ns();
  req.id = std::to_string(getpid()) + "-" + std::to_string(req.requested_unix_ns);
  req.node = *node;
  req.buffers = o.buffers;
  req.buffer_size = o.buffer_size;
  req.transport = o.transport;
  Status st = fs::write_file_atomic(layout.migrate_file(), format_migrate_request(req));
  if (!st) {
    print_error("migrate", "cannot write the request: " + st.message());
    return kExitFailure;
  }
  if (!o.json)
    printf("migration of %s to %s requested (%s)\n", req.node.c_str(), launcher->spares.front().c_str(),
           layout.migrate_file().c_str());
  if (o.no_wait) return kExitOk;

  // Follow the launcher's answer for this request.
  auto start = std::chrono::steady_clock::now();
  std::string last_status;
  while (true) {
    auto text = fs::read_file(layout.migrate_result_file());
    if (text) {
      MigrateResult r = parse_migrate_result(*text);
      if (r.id == req.id) {
        if (r.status != last_status && !r.final() && !o.json) {
          printf("  %s%s%s\n", r.status.c_str(), r.message.empty() ? "" : ": ", r.message.c_str());
          fflush(stdout);
        }
        last_status = r.status;
        if (r.final()) {
          print_result(r, o.json);
          return r.status == "done" ? kExitOk : kExitFailure;
        }
      }
    }
    if (!fs::exists(layout.launcher_file()) && last_status.empty()) {
      print_error("migrate", "the launcher ended without acting on the request");
      (void)fs::remove_file(layout.migrate_file());
      return kExitFailure;
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > o.timeout) {
      print_error("migrate", "no answer within " + format_duration(o.timeout) + " (last status: " +
                                 (last_status.empty() ? "none" : last_status) +
                                 "); the job may not call cairn_need_checkpoint/cairn_should_exit. The request "
                                 "stays in " + layout.migrate_file() + "; remove it to withdraw it");
      return kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

Command add_migrate_command(CLI::App& root) {
  auto o = std::make_shared<MigrateOptions>();
  CLI::App* app = root.add_subcommand("migrate", "Move the ranks of one node of a running job to a spare node.");
  app->add_option("--node,--host", o->node,
                  "The node to leave: its number in the job (0..K-1) or its name (in a multi-host allocation,\n"
                  "its host: --host n2)")
      ->required()
      ->type_name("I");
  add_prefix_arg(app, o->prefix, "The job's L3 directory (default: the configured prefix)");
  add_config_option(app, o->config_path, "Config file (TOML) for the default prefix; default: CAIRN_CONFIG");
  app->add_option("--buffers", o->buffers, "Buffers in the transfer's pool (bounds the memory in flight)")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str()
      ->type_name("N");
  app->add_option("--buffer-size", o->buffer_size, "Bytes per buffer, 4K..1G (default 8M)")
      ->transform(cli::size_value(4096, uint64_t{1} << 30))
      ->type_name("SIZE");
  app->add_option("--transport", o->transport,
                  "How the snapshots travel: local (cairn run copies between the two caches of its machine), fabric "
                  "(a reader on the node and a writer on the spare, over libfabric) or auto (the job's "
                  "migrate_transport: fabric when the checkpoint service is configured)")
      ->check(CLI::IsMember({"auto", "local", "fabric"}))
      ->capture_default_str()
      ->type_name("T");
  app->add_option("--timeout", o->timeout, "How long to wait for the migration to finish")
      ->capture_default_str()
      ->transform(cli::duration_value())
      ->type_name("DURATION");
  app->add_flag("--no-wait", o->no_wait, "Only place the request");
  app->add_flag("--json", o->json, "Print the outcome as JSON");
  app->footer(
      "The job must run under `cairn run --spares S` and call cairn_need_checkpoint and cairn_should_exit.\n"
      "It checkpoints at its next call and exits; cairn run pipes node I's newest snapshots through a pool\n"
      "of --buffers buffers into the next spare's cache (--transport: between the caches, or over the\n"
      "fabric from a reader on node I to a writer on the spare), verifying every chunk, and relaunches the\n"
      "job with the spare in place of node I: every rank restarts from L1. See docs/migration.md.\n"
      "Exit status: 0 migrated (or requested, with --no-wait); 1 the migration failed or timed out;\n"
      "2 bad options, no cairn run managing the job, or no spare left.");

  return {app, [o](const Invocation&) { return run_migrate(*o); }};
}

}  // namespace cairn::tool
