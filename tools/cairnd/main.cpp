// cairnd: the checkpoint service (docs/service.md). One executable, three daemons:
//   cairnd controller --listen HOST:PORT     one per cluster or allocation
//   cairnd manager --controller HOST:PORT    one per checkpoint node; starts the agents
//   cairnd agent                             started by a manager, never by hand
//   cairnd migrate-source / migrate-sink     the two ends of a process migration over the fabric,
//                                            started by `cairn run` (docs/migration.md)
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "cairn/cairn_version.h"
#include "service/agent/agent.hpp"
#include "service/controller/controller.hpp"
#include "service/daemon.hpp"
#include "service/manager/manager.hpp"
#include "service/migrate/migrate.hpp"
#include "service/agent/stage_chain.hpp"
#include "cli_style.hpp"
#include "cli_units.hpp"

namespace {

using namespace cairn;

// The token file's first line (empty path: no token).
Result<std::string> read_token(const std::string& path) {
  if (path.empty()) return std::string();
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(path));
  std::string t = text.substr(0, text.find('\n'));
  if (t.empty()) return make_error(Code::ERR_INVALID_ARG, "%s: the token file is empty", path.c_str());
  if (t.size() > 255) return make_error(Code::ERR_INVALID_ARG, "%s: a token has at most 255 bytes", path.c_str());
  return t;
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "cairnd";
}

int fail(const std::string& what) {
  fprintf(stderr, "cairnd: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cairnd: cairn's checkpoint service. Applications started with service = HOST:PORT register with "
               "the controller; agents on checkpoint nodes move their versions from the nodes' L1 caches to the "
               "parallel file system over libfabric RMA while they compute. See docs/service.md.",
               "cairnd"};
  cli::use_help_style(app);  // before the subcommands: they copy it
  app.set_version_flag("--version", "cairnd " + std::to_string(CAIRN_VERSION_MAJOR) + "." +
                                        std::to_string(CAIRN_VERSION_MINOR) + "." + std::to_string(CAIRN_VERSION_PATCH));
  app.require_subcommand(1);

  std::string log_path, log_level = "info";
  // ---- controller
  CLI::App* ctl = app.add_subcommand("controller", "The controller: registry and decisions, one per cluster or allocation.");
  std::string listen, address_file, token_file, placement = "stacking";
  std::vector<std::string> allow, chains;
  uint32_t max_agents = 64;
  ctl->add_option("--listen", listen, "HOST:PORT to listen on (PORT 0: any free port; see --address-file)")->required();
  ctl->add_option("--address-file", address_file, "Write the HOST:PORT it listens on to this file once listening");
  ctl->add_option("--token-file", token_file,
                  "A file whose first line is the deployment's secret; managers must present it. Without it any "
                  "process that reaches the port may join as a manager and receive application keys");
  ctl->add_option("--allow-prefix", allow,
                  "Accept only applications whose prefix and data prefixes lie under this directory (repeatable; "
                  "default: anywhere the service's user may write)");
  ctl->add_option("--placement", placement,
                  "Agent placement policy: stacking (fill one checkpoint node first), bandwidth (the node with the "
                  "most free measured bandwidth) or interval (the node with the least checkpoint traffic)")
      ->capture_default_str();
  ctl->add_option("--max-agents-per-app", max_agents, "At most this many agents per application")
      ->capture_default_str()->check(CLI::Range(1u, 4096u));
  ctl->add_option("--chain", chains,
                  "NAME=STAGES: what the agents of application NAME ('*': of every other application) do with a "
                  "version, e.g. verify,compress,write,plugin:/abs/libx.so:ARG (repeatable; default "
                  "verify,compress,write; docs/service.md, \"Agent plugins\")");
  bool scale = false;
  double scale_fraction = 0.5, scale_up_interval = 60;
  std::string scale_up_command;
  ctl->add_flag("--scale-agents", scale,
                "Scale each application's agents so that a version drains within --scale-fraction of its "
                "checkpoint interval, between --max-agents-per-app and one (default: the agents it asks for)");
  ctl->add_option("--scale-fraction", scale_fraction, "The share of the interval a version may take to drain")
      ->capture_default_str()->check(CLI::Range(0.01, 1.0));
  ctl->add_option("--scale-up-command", scale_up_command,
                  "Run this (sh -c, with CAIRN_CONTROLLER=HOST:PORT) when a new agent finds every checkpoint node "
                  "full, to ask for one more (e.g. an srun that starts a cairnd manager)");
  ctl->add_option("--scale-up-interval", scale_up_interval, "Run the scale-up command at most once per this long")
      ->capture_default_str()->transform(cli::duration_value())->type_name("DURATION");
  ctl->add_option("--log", log_path, "Log file (appended; '-': stderr)")->capture_default_str();
  ctl->add_option("--log-level", log_level, "error, warn, info or debug")->capture_default_str();
  ctl->footer("Stops cleanly on SIGTERM or SIGINT. Logs to stderr unless --log names a file.");

  // ---- manager
  CLI::App* mgr = app.add_subcommand("manager", "A manager: one per checkpoint node; starts and stops agents.");
  std::string controller, mgr_listen = "127.0.0.1", name, work_dir;
  uint32_t capacity = 4;
  double bandwidth = 0;
  mgr->add_option("--controller", controller, "HOST:PORT of the controller")->required();
  mgr->add_option("--listen", mgr_listen,
                  "The address of this node that ranks reach: agents listen and open their fabric endpoints there")
      ->capture_default_str();
  mgr->add_option("--name", name, "This checkpoint node's name (default: the host name); unique per controller");
  mgr->add_option("--agents", capacity, "Agents this node runs at most")->capture_default_str()->check(CLI::Range(1u, 4096u));
  mgr->add_option("--work-dir", work_dir,
                  "Directory for the agents' logs and turnstiles (default /tmp/cairnd-manager-NAME)");
  mgr->add_option("--token-file", token_file, "The deployment's secret (as given to the controller)");
  mgr->add_option("--agent-bandwidth", bandwidth,
                  "Each agent moves at most this many MB/s (0: no limit), to leave the file system to others")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  mgr->add_option("--log", log_path, "Log file (appended; '-': stderr)");
  mgr->add_option("--log-level", log_level, "error, warn, info or debug (also for its agents)")->capture_default_str();
  mgr->footer("Stops its agents and exits on SIGTERM or SIGINT. Default log: WORK_DIR/manager.log");

  // ---- agent
  CLI::App* agt = app.add_subcommand("agent", "An agent (started by a manager, which writes its assignment to its stdin).");
  std::string agent_listen = "127.0.0.1", agent_work;
  double agent_bw = 0, stall = 60;
  agt->add_option("--listen", agent_listen, "The address ranks connect to")->capture_default_str();
  agt->add_option("--work-dir", agent_work, "Directory for turnstiles of this node");
  agt->add_option("--bandwidth", agent_bw, "At most this many MB/s (0: no limit)")->capture_default_str();
  agt->add_option("--stall-timeout", stall, "Give a transfer up after this long without progress")
      ->capture_default_str()->transform(cli::duration_value())->type_name("DURATION");
  agt->add_option("--log", log_path, "Log file (appended; '-': stderr)");
  agt->add_option("--log-level", log_level, "error, warn, info or debug")->capture_default_str();
  agt->footer("Reads one start_agent message on stdin, reports on stdout; stops on SIGTERM or when stdin closes.");

  // ---- the two ends of a migration over the fabric
  const char* migrate_footer = "Started by cairn run (docs/migration.md), which writes the migration's key to its stdin.";
  CLI::App* msrc = app.add_subcommand("migrate-source", "The reader on the node being emptied by a migration.");
  service::MigrateSourceOptions mso;
  msrc->add_option("--cache-job", mso.cache_job, "The job's cache directory, <cache_dir>/cairn-<job>")->required();
  msrc->add_option("--node", mso.node, "The node whose newest L1 version moves")->required();
  msrc->add_option("--listen", mso.listen, "An address of this node that the spare reaches, or iface:NAME")
      ->capture_default_str();
  msrc->add_option("--provider", mso.provider, "The libfabric provider")->capture_default_str();
  msrc->add_option("--timeout", mso.timeout_s, "How long the writer has to come and finish")
      ->capture_default_str()->transform(cli::duration_value())->check(CLI::PositiveNumber)->type_name("DURATION");
  msrc->add_flag("--wait-go", mso.wait_go,
                 "After the key, ready libfabric and wait for a line 'go' on stdin before reading the cache");
  msrc->add_option("--log", log_path, "Log file (appended; default '-': stderr)");
  msrc->add_option("--log-level", log_level, "error, warn, info or debug")->capture_default_str();
  msrc->footer(std::string(migrate_footer) + " Prints 'listening HOST:PORT' once its files are registered.");
  CLI::App* msink = app.add_subcommand("migrate-sink", "The writer on the spare node of a migration.");
  service::MigrateSinkOptions mko;
  msink->add_option("--cache-job", mko.cache_job, "The job's cache directory, <cache_dir>/cairn-<job>")->required();
  msink->add_option("--node", mko.node, "The spare node, whose cache receives the version")->required();
  msink->add_option("--from", mko.from, "The node being emptied (the reader must offer its cache)");
  msink->add_option("--source", mko.source,
                    "HOST:PORT the reader printed; '-': read it from stdin after the key (start both ends at once)")
      ->required();
  msink->add_option("--provider", mko.provider, "The libfabric provider")->capture_default_str();
  msink->add_option("--buffers", mko.buffers, "Buffers in the pool")->capture_default_str()->check(CLI::Range(2u, 1024u));
  msink->add_option("--buffer-size", mko.buffer_size, "Bytes per buffer, 4K..1G, rounded up to whole chunks (default 8M)")
      ->transform(cli::size_value(4096, uint64_t{1} << 30))->type_name("SIZE");
  msink->add_option("--rma-size", mko.rma_size, "Bytes per fi_read, 4K..1G (default 1M)")
      ->transform(cli::size_value(4096, uint64_t{1} << 30))->type_name("SIZE");
  msink->add_option("--stall-timeout", mko.stall_timeout_s, "Give up when no read completes for this long")
      ->capture_default_str()->transform(cli::duration_value())->check(CLI::PositiveNumber)->type_name("DURATION");
  msink->add_option("--log", log_path, "Log file (appended; default '-': stderr)");
  msink->add_option("--log-level", log_level, "error, warn, info or debug")->capture_default_str();
  msink->footer(std::string(migrate_footer) + " Prints 'progress DONE TOTAL' lines and one JSON line with the outcome.");

  // A bad command line exits 2, as documented (CLI11's own statuses are 105, 106, 109, ...).
  if (int rc = cli::parse_command_line(app, argc, argv, "cairnd"); rc >= 0) return rc;

  if (msrc->parsed()) {
    Status st = service::open_daemon_log(log_path.empty() ? "-" : log_path, "cairnd migrate-source " + mso.node, log_level);
    if (!st.is_ok()) return fail(st.message());
    return service::run_migrate_source(mso);
  }
  if (msink->parsed()) {
    Status st = service::open_daemon_log(log_path.empty() ? "-" : log_path, "cairnd migrate-sink " + mko.node, log_level);
    if (!st.is_ok()) return fail(st.message());
    return service::run_migrate_sink(mko);
  }

  if (ctl->parsed()) {
    service::ControllerOptions o;
    auto hp = wire::parse_host_port(listen);
    if (!hp) return fail(hp.status().message());
    o.listen = *hp;
    o.address_file = address_file;
    auto tok = read_token(token_file);
    if (!tok) return fail(tok.status().message());
    o.token = *tok;
    for (auto& a : allow) {
      if (a.empty() || a[0] != '/') return fail("--allow-prefix " + a + ": give an absolute directory");
      o.allow_prefixes.push_back(a);
    }
    auto pol = service::parse_policy(placement);
    if (!pol) return fail(pol.status().message());
    o.policy = *pol;
    o.max_agents_per_app = max_agents;
    o.scale_agents = scale;
    o.scale_fraction = scale_fraction;
    o.scale_up_command = scale_up_command;
    o.scale_up_interval_s = scale_up_interval;
    for (const auto& c : chains) {
      auto parsed = service::parse_chain_option(c);
      if (!parsed) return fail(parsed.status().message());
      // Load the plugins once here: a chain that cannot load is refused at the start, not agent by agent.
      auto loaded = service::Chain::load(parsed->second);
      if (!loaded) return fail("--chain " + c + ": " + loaded.status().message());
      o.chains[parsed->first] = service::chain_text(parsed->second);
    }
    Status st = service::open_daemon_log(log_path.empty() ? "-" : log_path, "cairnd controller", log_level);
    if (!st.is_ok()) return fail(st.message());
    return service::run_controller(o);
  }
  if (mgr->parsed()) {
    service::ManagerOptions o;
    auto hp = wire::parse_host_port(controller);
    if (!hp) return fail(hp.status().message());
    o.controller = *hp;
    o.listen_host = mgr_listen;
    o.name = name.empty() ? service::host_name() : name;
    o.agents = capacity;
    o.work_dir = fs::absolute(work_dir.empty() ? "/tmp/cairnd-manager-" + o.name : work_dir);
    auto tok = read_token(token_file);
    if (!tok) return fail(tok.status().message());
    o.token = *tok;
    o.agent_bandwidth_mbs = bandwidth;
    o.log_level = log_level;
    o.exe = self_exe();
    Status st = fs::make_dirs(o.work_dir);
    if (st.is_ok())
      st = service::open_daemon_log(log_path.empty() ? o.work_dir + "/manager.log" : log_path,
                                    "cairnd manager " + o.name, log_level);
    if (!st.is_ok()) return fail(st.message());
    return service::run_manager(o);
  }
  service::AgentOptions o;
  o.listen_host = agent_listen;
  o.work_dir = agent_work;
  o.bandwidth_mbs = agent_bw;
  o.stall_timeout_s = stall;
  Status st = service::open_daemon_log(log_path.empty() ? "-" : log_path, "cairnd agent", log_level);
  if (!st.is_ok()) return fail(st.message());
  return service::run_agent(o);
}
