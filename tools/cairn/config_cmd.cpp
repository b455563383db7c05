// `cairn config [--list|--markdown|--sample] [--config FILE]`: the knob table, from its one declaration
// in src/base/knob_table.cpp.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "common.hpp"
#include "base/config.hpp"
#include "base/fsutil.hpp"

namespace cairn::tool {
namespace {

struct ConfigOptions {
  bool list = false;
  bool markdown = false;
  bool sample = false;
  std::string config_path;
};

}  // namespace

Command add_config_command(CLI::App& root) {
  auto opts = std::make_shared<ConfigOptions>();
  CLI::App* app = root.add_subcommand("config", "Show the configuration knobs and their effective values.");
  auto* list = app->add_flag("--list", opts->list,
                             "Every knob with its effective value and where it came from (the default)");
  auto* md = app->add_flag("--markdown", opts->markdown, "The knob table in Markdown (docs/config.md)");
  auto* sample = app->add_flag("--sample", opts->sample, "A commented sample config file (TOML)");
  list->excludes(md)->excludes(sample);
  md->excludes(sample);
  app->add_option("--config", opts->config_path,
                  "Config file (TOML) to apply for --list; default: the file CAIRN_CONFIG names")
      ->type_name("FILE");
  app->footer("Precedence: CAIRN_<KNOB> environment variables over the config file over the defaults.\n"
              "Exit status: 0, or 2 when the configuration is invalid (the message names the knob).");

  Command cmd;
  cmd.app = app;
  cmd.run = [opts](const Invocation&) {
    if (opts->markdown) {
      fputs(render_knob_markdown().c_str(), stdout);
      return kExitOk;
    }
    if (opts->sample) {
      fputs(render_sample_toml().c_str(), stdout);
      return kExitOk;
    }
    std::string path = opts->config_path.empty() ? std::string() : fs::absolute(opts->config_path);
    auto loaded = load_job_config(path, "config");
    if (!loaded) {
      print_error("config", loaded.status().message());
      return kExitUsage;
    }
    fputs(render_knob_list(*loaded).c_str(), stdout);
    return kExitOk;
  };
  return cmd;
}

}  // namespace cairn::tool
