// `cairn config [--list|--json|--markdown|--sample] [--config FILE]`: the knob table, from its one declaration
// in src/base/knob_table.cpp.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
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
  bool json = false;
  std::string config_path;
};

// A TOML literal of the knobs' kinds (42, 0.5, true, "1M") is JSON too; a string with a control character
// is not, and is given as its text.
nlohmann::json toml_literal_json(const std::string& literal) {
  auto j = nlohmann::json::parse(literal, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json(literal) : j;
}

}  // namespace

Command add_config_command(CLI::App& root) {
  auto opts = std::make_shared<ConfigOptions>();
  CLI::App* app = root.add_subcommand("config", "Show the configuration knobs and their effective values.");
  auto* list = app->add_flag("--list", opts->list,
                             "Every knob with its effective value and where it came from (the default)");
  auto* md = app->add_flag("--markdown", opts->markdown, "The knob table in Markdown (docs/config.md)");
  auto* sample = app->add_flag("--sample", opts->sample, "A commented sample config file (TOML)");
  auto* json = app->add_flag("--json", opts->json,
                             "Every knob as JSON: name, environment variable, type, value, where it came from, "
                             "default, accepted values");
  list->excludes(md)->excludes(sample);
  json->excludes(md)->excludes(sample);
  md->excludes(sample);
  add_config_option(app, opts->config_path,
                    "Config file (TOML) to apply for --list; default: the file CAIRN_CONFIG names");
  app->footer("Precedence: CAIRN_<KNOB> environment variables over the config file over the defaults.\n"
              "Exit status: 0, or 2 when the configuration is invalid (the message names the knob).");

  return {app, [opts](const Invocation&) {
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
    if (opts->json) {
      nlohmann::json knobs = nlohmann::json::array();
      const auto values = knob_values_toml(loaded->config);
      for (size_t i = 0; i < knob_table().size(); ++i) {
        const KnobInfo& k = knob_table()[i];
        knobs.push_back({{"name", k.name},
                         {"env", k.env},
                         {"type", k.type},
                         {"value", toml_literal_json(values[i])},
                         {"origin", i < loaded->origins.size() ? loaded->origins[i] : ""},
                         {"default", k.default_text},
                         {"accepted", k.bounds}});
      }
      printf("%s\n", nlohmann::json{{"config_file", path}, {"knobs", knobs}}.dump(2).c_str());
      return kExitOk;
    }
    fputs(render_knob_list(*loaded).c_str(), stdout);
    return kExitOk;
  }};
}

}  // namespace cairn::tool
