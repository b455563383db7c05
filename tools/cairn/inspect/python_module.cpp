#include "inspect/python_module.hpp"

#include <unistd.h>

#include <cstdlib>

#include "common.hpp"
#include "base/fsutil.hpp"
#include "launch/process.hpp"

namespace cairn::tool {
PythonPackage locate_python_package() {
  PythonPackage p;
  p.interpreter = fs::exists(CAIRN_PYTHON_EXECUTABLE) ? CAIRN_PYTHON_EXECUTABLE : "python3";
  const std::string here = executable_dir();
  for (const char* relative : {CAIRN_PYTHON_BUILD_REL, CAIRN_PYTHON_INSTALL_REL}) {
    if (!*relative) continue;
    std::string dir = relative[0] == '/' ? std::string(relative) : here + "/" + relative;
    if (!here.empty() && fs::exists(dir + "/cairn/plot.py")) {
      p.directory = dir;
      break;
    }
  }
  return p;
}

Result<int> run_python_module(const std::string& module, const std::vector<std::string>& args) {
  PythonPackage p = locate_python_package();
  std::string interpreter = find_executable(p.interpreter);
  if (interpreter.empty())
    return make_error(Code::ERR_NOT_SUPPORTED, "no Python interpreter: %s is not there (install python3)",
                      p.interpreter.c_str());
  std::vector<std::string> argv = {interpreter, "-m", module};
  argv.insert(argv.end(), args.begin(), args.end());
  EnvAssignments env;
  if (!p.directory.empty()) {
    const char* old = getenv("PYTHONPATH");
    env.emplace_back("PYTHONPATH", p.directory + (old && *old ? ":" + std::string(old) : ""));
  }
  CAIRN_ASSIGN_OR_RETURN(child, spawn(argv, env, /*own_group=*/false));
  int status = exit_code_of(wait_for(child));
  if (status == 126 || status == 127)
    return make_error(Code::ERR_NOT_SUPPORTED, "cannot run %s", interpreter.c_str());
  return status;
}

}  // namespace cairn::tool
