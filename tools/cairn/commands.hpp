// The subcommands of the `cairn` command and how each plugs into main.cpp: a subcommand file defines
// one add_<name>_command() that registers its options on the root app and returns what runs it.
// Adding a subcommand: write tools/cairn/<room>/<name>_cmd.cpp (launch/, inspect/, maintain/, migrate/),
// declare its function here, list it in main.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cairn::tool {

// The command line split at the first "--": the words after it belong to the launched command.
struct Invocation {
  bool has_separator = false;
  std::vector<std::string> trailing;  // the words after "--"
};

// A subcommand: its CLI11 app (options registered, values bound) and what runs it once parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int(const Invocation&)> run;
  bool takes_trailing_command = false;  // accepts "-- CMD ARGS..."
};

// One function per subcommand, each in its own file; main.cpp lists them.
Command add_run_command(CLI::App& root);
Command add_config_command(CLI::App& root);
Command add_interval_command(CLI::App& root);
Command add_strerror_command(CLI::App& root);
Command add_halt_command(CLI::App& root);
Command add_list_command(CLI::App& root);
Command add_show_command(CLI::App& root);
Command add_verify_command(CLI::App& root);
Command add_flush_command(CLI::App& root);
Command add_clean_command(CLI::App& root);
Command add_index_command(CLI::App& root);
Command add_watch_command(CLI::App& root);
Command add_plot_command(CLI::App& root);
Command add_migrate_command(CLI::App& root);
Command add_status_command(CLI::App& root);

}  // namespace cairn::tool
