# The Python interpreter of the bindings, their tests and the test scripts, and where the package installs.
#
# Python3_EXECUTABLE: the first of `python3` on PATH and /usr/bin/python3 that imports numpy and mpi4py.
# Debian's python3-numpy, python3-mpi4py and python3-matplotlib belong to /usr/bin/python3; a pyenv or
# virtualenv python3 first on PATH usually has none of them. -DPython3_EXECUTABLE=... chooses another.
#
# CAIRN_PYTHON_INSTALL_DIR: where `cmake --install` puts the package `cairn`, relative to the prefix:
# lib/python3.X/dist-packages for Debian's interpreters (on their path under /usr/local), else
# lib/python3.X/site-packages. The installed `cairn plot` finds the package there by itself.
if(NOT DEFINED Python3_EXECUTABLE)
  find_program(_cairn_path_python NAMES python3 NO_CACHE)
  foreach(_cairn_candidate ${_cairn_path_python} /usr/bin/python3)
    if(EXISTS "${_cairn_candidate}")
      execute_process(COMMAND ${_cairn_candidate} -c "import numpy, mpi4py" RESULT_VARIABLE _cairn_rc
                      OUTPUT_QUIET ERROR_QUIET TIMEOUT 60)
      if(_cairn_rc EQUAL 0)
        set(Python3_EXECUTABLE ${_cairn_candidate} CACHE FILEPATH
            "Python interpreter of the bindings and tests (one that imports numpy and mpi4py)")
        break()
      endif()
    endif()
  endforeach()
endif()
find_package(Python3 COMPONENTS Interpreter)  # the tests require it; the library does not

if(Python3_Interpreter_FOUND AND NOT DEFINED CACHE{CAIRN_PYTHON_INSTALL_DIR})
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
    "import sys; print('lib/python%d.%d/%s' % (sys.version_info[0], sys.version_info[1], 'dist-packages' if any(p.endswith('dist-packages') for p in sys.path) else 'site-packages'))"
    OUTPUT_VARIABLE _cairn_pydir OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(CAIRN_PYTHON_INSTALL_DIR "${_cairn_pydir}" CACHE PATH
      "Where the Python package cairn is installed (relative: under CMAKE_INSTALL_PREFIX)")
endif()
# The build tree's package: bindings/python puts the extension and the .py files here.
set(CAIRN_PYTHON_BUILD_DIR ${PROJECT_BINARY_DIR}/bindings/python)
