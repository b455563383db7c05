// The `cairn` command: the launcher and the tools around checkpointed jobs. Builds without MPI, so it
// runs on login nodes. Each subcommand lives in its own file (see commands.hpp).
#include <cstdio>
#include <string>
#include <vector>

#include "cairn/cairn_version.h"
#include "cli_style.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace {

using cairn::tool::Command;

// Every subcommand, in the order `cairn --help` lists them.
using AddCommand = Command (*)(CLI::App&);
constexpr AddCommand kCommands[] = {
    cairn::tool::add_run_command,
    cairn::tool::add_config_command,
    cairn::tool::add_interval_command,
    cairn::tool::add_strerror_command,
    cairn::tool::add_halt_command,
    cairn::tool::add_list_command,
    cairn::tool::add_show_command,
    cairn::tool::add_verify_command,
    cairn::tool::add_flush_command,
    cairn::tool::add_clean_command,
    cairn::tool::add_index_command,
    cairn::tool::add_watch_command,
    cairn::tool::add_plot_command,
    cairn::tool::add_migrate_command,
    cairn::tool::add_status_command,
};

std::string version_text() {
  return "cairn " + std::to_string(CAIRN_VERSION_MAJOR) + "." + std::to_string(CAIRN_VERSION_MINOR) + "." +
         std::to_string(CAIRN_VERSION_PATCH);
}

// CLI11 messages start with a capital and may span lines; the tool prints one line.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  cairn::tool::Invocation invocation;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == "--") {
      invocation.has_separator = true;
      invocation.trailing.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      args.resize(i);
      break;
    }

  CLI::App app{"cairn: multilevel checkpoint/restart for MPI applications: the launcher and the tools.",
               "cairn"};
  cairn::cli::use_help_style(app);  // before the subcommands: they copy it
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.footer("Run 'cairn COMMAND --help' for the options of one command.");
  std::vector<Command> commands;
  for (AddCommand add : kCommands) commands.push_back(add(app));

  if (args.empty() && !invocation.has_separator) {
    fputs(app.help().c_str(), stderr);
    return cairn::tool::kExitUsage;
  }

  auto parsed_command = [&]() -> const Command* {
    for (const auto& c : commands)
      if (c.app->parsed()) return &c;
    return nullptr;
  };
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const Command* c = parsed_command();
    if (!c && !args.empty() && args.front()[0] != '-') {
      std::string names;
      for (const auto& known : commands) names += (names.empty() ? "" : ", ") + known.app->get_name();
      fprintf(stderr, "cairn: unknown command '%s' (commands: %s; see 'cairn --help')\n", args.front().c_str(),
              names.c_str());
      return cairn::tool::kExitUsage;
    }
    std::string who = c ? c->app->get_name() : std::string();
    std::string help = c ? "cairn " + who + " --help" : "cairn --help";
    fprintf(stderr, "cairn%s%s: %s (see '%s')\n", who.empty() ? "" : " ", who.c_str(), one_line(e.what()).c_str(),
            help.c_str());
    return cairn::tool::kExitUsage;
  }

  const Command* c = parsed_command();
  if (!c) return cairn::tool::kExitUsage;  // require_subcommand(1) makes this unreachable
  if (invocation.has_separator && !c->takes_trailing_command) {
    cairn::tool::print_error(c->app->get_name(), "unexpected '--': this command runs no other command");
    return cairn::tool::kExitUsage;
  }
  return c->run(invocation);
}
