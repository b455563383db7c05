#include "common.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "base/fsutil.hpp"
#include "base/state_file.hpp"
#include "cli_style.hpp"
#include "scr_params.hpp"

namespace cairn::tool {

void print_error(const std::string& who, const std::string& message) {
  fprintf(stderr, "cairn %s: %s\n", who.c_str(), message.c_str());
}

const std::vector<std::string>& tool_variables() {
  static const std::vector<std::string> names = {
      "CAIRN_MPIRUN",       "CAIRN_MPIRUN_ARGS", "CAIRN_INJECT", "CAIRN_INJECT_DIR",
      "CAIRN_ATTEMPT",      "CAIRN_CACHE_JOB",   "CAIRN_KILLED_NODES",
  };
  return names;
}

std::string executable_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

Result<LoadedConfig> load_job_config(const std::string& config_path, const std::string& who) {
  // SCR's parameters (SCR_PREFIX, SCR_CACHE_BASE, ...) name an SCR code's prefix and cache: the tools and
  // the jobs they start see them as CAIRN_* variables, below the user's own (docs/scr.md).
  // A value that came from SCR is reported under the SCR name the user wrote, and SCR's warnings (an
  // unknown parameter, a value cairn does not accept: ignored, as SCR_Init ignores them) are printed as
  // SCR_Init prints them, never dropped.
  const scr::Exported& scr = scr::export_cairn_variables();
  for (const auto& w : scr.warnings) fprintf(stderr, "cairn %s: warning: SCR: %s\n", who.c_str(), w.c_str());
  auto scr_names = [&](std::string text) {
    for (const auto& [env, param] : scr.origin) {
      const std::string from = "environment variable " + env;
      for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + 1)) {
        const size_t end = at + from.size();
        if (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) continue;
        const std::string as = "SCR parameter " + param + " (as " + env + ")";
        text.replace(at, from.size(), as);
        at += as.size() - 1;
      }
    }
    return text;
  };
  std::vector<std::string> names = process_env_cairn_names();
  const auto& ours = tool_variables();
  std::erase_if(names, [&](const std::string& n) {
    return std::find(ours.begin(), ours.end(), n) != ours.end();
  });
  auto loaded = load_config(config_path.empty() ? nullptr : config_path.c_str(), process_env(), names);
  if (!loaded) return Status(loaded.status().code(), scr_names(loaded.status().message()));
  for (auto& o : loaded->origins) o = scr_names(o);
  for (const auto& w : loaded->warnings) fprintf(stderr, "cairn %s: warning: %s\n", who.c_str(), scr_names(w).c_str());
  return loaded;
}

namespace {
bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}
}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? fs::absolute(name) : "";
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = fs::join(dir.empty() ? "." : dir, name);
    if (is_executable_file(candidate)) return fs::absolute(candidate);
    start = end + 1;
  }
  return {};
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_-+=/.,:@%") == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string join_quoted(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

namespace {
class FixedUsageFormatter : public cli::HelpFormatter {
 public:
  explicit FixedUsageFormatter(std::string usage) : usage_(std::move(usage)) {}
  std::string make_usage(const CLI::App*, std::string) const override { return "Usage: " + usage_ + "\n"; }

 private:
  std::string usage_;
};
}  // namespace

CLI::Option* add_prefix_arg(CLI::App* app, std::string& prefix, const char* text) {
  return app->add_option("prefix", prefix, text)->type_name("PREFIX");
}

CLI::Option* add_config_option(CLI::App* app, std::string& config_path, const char* text) {
  return app->add_option("--config", config_path, text)->type_name("FILE");
}

void set_usage(CLI::App* app, std::string usage) {
  app->formatter(std::make_shared<FixedUsageFormatter>(std::move(usage)));
}

std::vector<std::string> split_whitespace(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && !isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i) words.push_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

namespace {
bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
}  // namespace

Result<ToolContext> load_tool_context(const std::string& who, const std::string& config_path,
                                      const std::string& prefix, bool prefix_must_exist) {
  auto loaded = load_job_config(config_path.empty() ? std::string() : fs::absolute(config_path), who);
  if (!loaded) return loaded.status();
  ToolContext ctx;
  ctx.config = loaded->config;
  if (!prefix.empty()) {
    // A prefix named on the command line must be there: a typo is not an empty prefix. (The configured
    // one may not exist yet: no job has run.)
    if (prefix_must_exist && !is_directory(prefix))
      return make_error(Code::ERR_INVALID_ARG, "%s: %s", prefix.c_str(),
                        fs::exists(prefix) ? "not a directory" : "no such directory (PREFIX names a job's prefix)");
    ctx.config.prefix = prefix;
  }
  ctx.layout = make_layout(ctx.config);
  return ctx;
}

bool job_not_running(const Layout& layout) {
  auto state = state_file::read_state(layout.state_file());
  if (!state) return false;
  return !state->has_value() || (*state)->phase == "finalized";
}

}  // namespace cairn::tool
