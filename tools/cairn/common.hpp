// Helpers the subcommands of the `cairn` command share: exit statuses, error lines, loading the
// job's configuration and layout, whether the job still runs, PATH lookup and quoting.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "base/config.hpp"
#include "base/layout.hpp"
#include "base/status.hpp"

namespace cairn::tool {

// Exit statuses of the tool itself (a launched job's own status is passed through by `cairn run`).
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the operation ran and failed
constexpr int kExitUsage = 2;    // bad options, bad configuration, command or launcher not found
constexpr int kExitNotReached = 3;  // `cairn run`: the failure-injection point was never reached

// Prints "cairn <who>: <message>" on stderr (one line).
void print_error(const std::string& who, const std::string& message);

// The configuration a job started from here will load: defaults, then `config_path` (or the file
// CAIRN_CONFIG names when `config_path` is empty), then CAIRN_* variables. Warnings are printed.
// Variables that belong to the launcher and the tools, not to the knob table, are not reported as
// unknown (see tool_variables()).
Result<LoadedConfig> load_job_config(const std::string& config_path, const std::string& who);
// CAIRN_* variables that are not knobs: set by or for the launcher and its hooks.
const std::vector<std::string>& tool_variables();

// The job's configuration and layout as `cairn run` and the library derive them: defaults, the config
// file (`config_path`, else CAIRN_CONFIG), CAIRN_* variables; a non-empty `prefix` overrides the
// configured one (and with it the derived job name, as it would for the job). Errors: ERR_CONFIG;
// ERR_INVALID_ARG for a `prefix` that is not a directory, unless !prefix_must_exist (`cairn watch` waits
// for a job to create it, `cairn clean --cache` cleans after a removed one).
struct ToolContext {
  Config config;
  Layout layout;
};
Result<ToolContext> load_tool_context(const std::string& who, const std::string& config_path,
                                      const std::string& prefix, bool prefix_must_exist = true);

// Whether the job is known to have ended: its state file says phase=finalized, or there is none.
bool job_not_running(const Layout& layout);

// The absolute path of an executable: `name` itself when it contains '/', else the first match in
// PATH. Empty when none is found or it is not executable.
std::string find_executable(const std::string& name);
// The directory of this executable (Linux: /proc/self/exe); "" when it cannot be read.
std::string executable_dir();

// Quotes a word for display as a shell would need it ("a b" -> 'a b').
std::string shell_quote(const std::string& word);
std::string join_quoted(const std::vector<std::string>& words);

// The options that every command reading a job's files takes alike: the positional PREFIX (the job's L3
// directory; empty means the configured one) and --config FILE. `text` replaces the help line.
CLI::Option* add_prefix_arg(CLI::App* app, std::string& prefix,
                            const char* text = "L3 directory (default: the configured prefix)");
CLI::Option* add_config_option(CLI::App* app, std::string& config_path,
                               const char* text = "Config file (TOML); default: the file CAIRN_CONFIG names");

// Replaces CLI11's generated "Usage:" line of `app` (it cannot show "-- CMD ARGS...").
void set_usage(CLI::App* app, std::string usage);

// Splits on runs of whitespace.
std::vector<std::string> split_whitespace(const std::string& text);

}  // namespace cairn::tool
