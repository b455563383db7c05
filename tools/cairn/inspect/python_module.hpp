// Running a module of the Python package cairn (bindings/python) from the `cairn` command: `cairn plot`
// draws with cairn.plot (matplotlib). The package is found next to this executable, in the build tree
// (BUILD/bindings/python) or where `cmake --install` put it (<prefix>/CAIRN_PYTHON_INSTALL_DIR), and
// otherwise on the interpreter's own path (a `pip install`). The interpreter is the one the build was
// configured with (CMake's Python3_EXECUTABLE), else `python3` from PATH.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::tool {

struct PythonPackage {
  std::string interpreter;  // absolute path, or a name looked up in PATH
  std::string directory;    // the directory holding cairn/ to put on PYTHONPATH; empty: none found here
};
PythonPackage locate_python_package();

// Runs `interpreter -m module args...` with the package's directory first on PYTHONPATH and waits for
// it. Returns its exit status; ERR_NOT_SUPPORTED when the interpreter or the package cannot be started
// (the message says what to install or set).
Result<int> run_python_module(const std::string& module, const std::vector<std::string>& args);

}  // namespace cairn::tool
