// `cairn status [--service HOST:PORT] [--json]`: what the checkpoint service is doing -- its managers
// (checkpoint nodes), agents and applications, their load and throughput -- as the controller reports
// it (docs/service.md, "cairn status"). The address is --service, else the `service` knob (CAIRN_SERVICE,
// the config file), as the jobs see it. One request, one answer; no MPI, no libfabric.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "common.hpp"
#include "wire/control_messages.hpp"
#include "wire/socket.hpp"
#include "format.hpp"

namespace cairn::tool {
namespace {

struct StatusOptions {
  std::string service, config_path;
  bool json = false;
  double timeout = 5;
};

std::string gbps(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.2f GB/s", v);
  return buf;
}

void print_human(const nlohmann::json& doc) {
  const auto& c = doc["controller"];
  printf("controller %s (pid %d, up %.0f s, placement %s)\n", c.value("address", "").c_str(), c.value("pid", 0),
         c.value("uptime_s", 0.0), c.value("placement", "").c_str());
  printf("\nmanagers (checkpoint nodes): %zu\n", doc["managers"].size());
  for (const auto& m : doc["managers"])
    printf("  %-3llu %-16s %-16s agents %zu/%u  pid %u  bandwidth %.1f MB/s measured, traffic %.1f MB/s\n",
           m.value("id", 0ull), m.value("name", "").c_str(), m.value("host", "").c_str(), m["agents"].size(),
           m.value("capacity", 0u), m.value("pid", 0u), m.value("bandwidth_bps", 0.0) / 1e6,
           m.value("demand_bps", 0.0) / 1e6);
  printf("\nagents: %zu\n", doc["agents"].size());
  for (const auto& a : doc["agents"]) {
    std::string active = "idle";
    if (a.contains("active")) {
      const auto& x = a["active"];
      char buf[160];
      snprintf(buf, sizeof buf, "rank %u version %llu: %s of %s", x.value("rank", 0u), x.value("version", 0ull),
               format_bytes(x.value("bytes_done", 0ull)).c_str(), format_bytes(x.value("bytes_total", 0ull)).c_str());
      active = buf;
    }
    printf("  %-3llu app %-3llu slot %-2u on %-12s %-8s pid %-7u %s drained in %llu transfers (%llu failed), %s; %s\n",
           a.value("id", 0ull), a.value("application", 0ull), a.value("slot", 0u), a.value("manager", "").c_str(),
           a.value("state", "").c_str(), a.value("pid", 0u), format_bytes(a.value("bytes_drained", 0ull)).c_str(),
           a.value("transfers", 0ull), a.value("transfers_failed", 0ull), gbps(a.value("drain_gbps", 0.0)).c_str(),
           active.c_str());
    printf("        %s\n", a.value("why", "").c_str());
  }
  printf("\napplications: %zu\n", doc["applications"].size());
  for (const auto& p : doc["applications"]) {
    printf("  %-3llu %-14s %u ranks (%zu connected), %s/version every %.1f s (%.1f MB/s), %s, %zu agent(s), %s "
           "drained, prefix %s, chain %s\n",
           p.value("id", 0ull), p.value("name", "").c_str(), p.value("nranks", 0u), p.value("ranks_connected", size_t{0}),
           format_bytes(p.value("bytes_per_version", 0ull)).c_str(), p.value("interval_s", 0.0),
           p.value("demand_bps", 0.0) / 1e6, p.value("mode", "").c_str(), p["agents"].size(),
           format_bytes(p.value("bytes_drained", 0ull)).c_str(), p.value("prefix", "").c_str(),
           p.value("chain", "").c_str());
    if (p.contains("scaling")) printf("      agents: %s\n", p["scaling"].value("why", "").c_str());
  }
  if (doc.contains("scale_up") && !doc["scale_up"].value("command", "").empty())
    printf("\nscale-up command: run %u time(s), %s\n", doc["scale_up"].value("runs", 0u),
           doc["scale_up"].value("state", "").c_str());
}

}  // namespace

Command add_status_command(CLI::App& root) {
  auto opts = std::make_shared<StatusOptions>();
  CLI::App* app = root.add_subcommand("status", "Show the checkpoint service: managers, agents, applications.");
  app->add_option("--service", opts->service,
                  "HOST:PORT of the service's controller; default: the `service` knob (CAIRN_SERVICE, the config file)")
      ->type_name("HOST:PORT");
  add_config_option(app, opts->config_path, "Config file (TOML) for the default service; default: CAIRN_CONFIG");
  app->add_flag("--json", opts->json, "Print the controller's JSON document (docs/service.md)");
  app->add_option("--timeout", opts->timeout, "Seconds to wait for the controller")->capture_default_str();
  app->footer("Exit status: 0, 1 when the controller cannot be reached or answers with an error, 2 for bad options.");
  return {app, [opts](const Invocation&) {
    if (opts->service.empty()) {
      auto loaded = load_job_config(opts->config_path, "status");
      if (!loaded) {
        print_error("status", loaded.status().message());
        return kExitUsage;
      }
      opts->service = loaded->config.service;
      if (opts->service.empty()) {
        print_error("status", "no checkpoint service configured: give --service HOST:PORT, or set CAIRN_SERVICE "
                              "(or `service` in the config file) as for the jobs");
        return kExitUsage;
      }
    }
    auto hp = wire::parse_host_port(opts->service);
    if (!hp) {
      print_error("status", hp.status().message());
      return kExitUsage;
    }
    auto fd = wire::connect_tcp(*hp, opts->timeout);
    if (!fd) {
      print_error("status", "cannot reach the checkpoint service at " + opts->service + ": " + fd.status().message());
      return kExitFailure;
    }
    wire::Connection conn(std::move(*fd), opts->service);
    auto answer = wire::request(conn, wire::frame(wire::StatusRequest{}), opts->timeout);
    auto reply = answer ? wire::expect<wire::StatusReply>(*answer) : Result<wire::StatusReply>(answer.status());
    if (!reply) {
      print_error("status", opts->service + ": " + reply.status().message());
      return kExitFailure;
    }
    auto doc = nlohmann::json::parse(reply->json, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      print_error("status", opts->service + ": the controller's answer is not a JSON object");
      return kExitFailure;
    }
    if (opts->json)
      printf("%s\n", doc.dump(2).c_str());
    else
      print_human(doc);
    return kExitOk;
  }};
}

}  // namespace cairn::tool
