"""Builds the package cairn against an installed cairn (pip install ./bindings/python; docs/python.md).

The C library, its headers and its MPI are found with `pkg-config cairn` (set PKG_CONFIG_PATH to
<prefix>/lib/pkgconfig when cairn is installed elsewhere than the default places); pybind11 and mpi4py
come from the Python that runs the build. cairn/errors.py is generated into the build from the installed
header's error list by ../gen_errors.py, the generator the CMake build uses.
"""
import os
import shlex
import subprocess
import sys
import sysconfig

import mpi4py
from pybind11.setup_helpers import Pybind11Extension
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, os.pardir, "gen_errors.py")


def pkg_config(option):
    try:
        out = subprocess.run(["pkg-config", option, "cairn"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"setup.py: pkg-config cannot find cairn ({e}): install cairn (cmake --install BUILD) and set "
                 "PKG_CONFIG_PATH to <prefix>/lib/pkgconfig")
    return shlex.split(out)


CFLAGS, LIBS = pkg_config("--cflags"), pkg_config("--libs")
INCLUDE_DIRS = [f[2:] for f in CFLAGS if f.startswith("-I")]
LIBRARY_DIRS = [f[2:] for f in LIBS if f.startswith("-L")]


class BuildPyWithErrors(build_py):
    """Also writes cairn/errors.py, one exception class per code of the installed cairn_errors.h."""

    def run(self):
        super().run()
        if not os.path.exists(GENERATOR):
            sys.exit(f"setup.py: {GENERATOR} is missing: build from a cairn source tree (bindings/python)")
        cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
        out = os.path.join(self.build_lib, "cairn", "errors.py")
        subprocess.run([sys.executable, GENERATOR, "--cc", cc, *[f"-I{d}" for d in INCLUDE_DIRS], "--python", out],
                       check=True)


extension = Pybind11Extension(
    "cairn._cairn", [os.path.join("src", "cairn_module.cpp")],
    include_dirs=[mpi4py.get_include(), *INCLUDE_DIRS],
    library_dirs=LIBRARY_DIRS,
    runtime_library_dirs=LIBRARY_DIRS,  # the installed libcairn, wherever its prefix is
    libraries=[f[2:] for f in LIBS if f.startswith("-l")],
    extra_link_args=[f for f in LIBS if not f.startswith(("-l", "-L"))],
    extra_compile_args=[f for f in CFLAGS if not f.startswith("-I")],
    define_macros=[("OMPI_SKIP_MPICXX", "1"), ("MPICH_SKIP_MPICXX", "1")],
    cxx_std=17,
)

setup(version=pkg_config("--modversion")[0], ext_modules=[extension], cmdclass={"build_py": BuildPyWithErrors})
