// Where SCR's parameters come from in a process: the environment and the user config file.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../common/lexical_path.hpp"
#include "../common/whole_file.hpp"
#include "scr_params.hpp"

extern char** environ;

namespace cairn::scr {

Sources process_sources(std::vector<Setting> app, std::vector<std::string>* file_errors, std::string* file_used) {
  Sources s;
  s.env = [](const char* name) -> const char* { return getenv(name); };
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, "SCR_", 4) == 0)
      if (const char* eq = strchr(*e, '=')) s.env_scr_names.emplace_back(*e, static_cast<size_t>(eq - *e));
  s.app = std::move(app);
  // The file cannot name itself: SCR_CONF_FILE and SCR_PREFIX come from the environment or SCR_Config.
  std::string path;
  if (auto conf = lookup(s, "SCR_CONF_FILE")) path = *conf;
  else path = paths::absolute(lookup(s, "SCR_PREFIX").value_or(".")) + "/.scrconf";
  if (auto text = files::read_whole_file(path)) {
    std::vector<std::string> errors;
    s.user_file = parse_config_file(*text, s.env, &errors);
    for (auto& e : errors) file_errors->push_back(path + ":" + e);
    *file_used = path;
  } else if (lookup(s, "SCR_CONF_FILE")) {
    file_errors->push_back("SCR_CONF_FILE=" + path + ": " + strerror(errno));
  }
  return s;
}

const Exported& export_cairn_variables() {
  static const Exported exported = [] {
    Exported out;
    std::string file;
    Sources s = process_sources({}, &out.warnings, &file);
    if (s.env_scr_names.empty() && file.empty()) return out;
    Mapping m = map_parameters(s);
    for (const auto& [env, value] : m.cairn_env) {
      setenv(env.c_str(), value.c_str(), 0);
      out.origin[env] = m.origin[env];
    }
    out.warnings.insert(out.warnings.end(), m.warnings.begin(), m.warnings.end());
    return out;
  }();
  return exported;
}

}  // namespace cairn::scr
