#!/usr/bin/env bash
# Install cairn into a scratch prefix, then use it from outside the tree:
#  - C: the quickstart example built with find_package(cairn) (against the prefix and against the build
#    tree) and with pkg-config, run on 2 ranks;
#  - Fortran (when built): heat2d_f built with find_package(cairn COMPONENTS fortran) and with pkg-config
#    cairn-fortran, each printing the installed heat2d's result;
#  - Python (when built): the package where `cmake --install` put it, and the one
#    `pip install --no-build-isolation --target DIR ./bindings/python` (docs/python.md) builds offline
#    against the installed cairn: both import
#    and run heat2d.py to heat2d's result; the installed `cairn plot` finds the installed package itself.
# Environment: CAIRN_MPIRUN, CAIRN_MPIRUN_ARGS (the tests' launcher), TEST_PYTHON (the interpreter with
# numpy and mpi4py), TEST_FORTRAN (the Fortran compiler; empty: no Fortran binding), TEST_PYTHON_DIR
# (the package's install directory under the prefix; empty: no Python package).
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d /tmp/cairn-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DQUICKSTART_SOURCE="$src/examples/quickstart/quickstart.c" >/dev/null
cmake --build "$work/consumer" >/dev/null
# The build tree is a package too (cairn_DIR=BUILD): the same project against it.
cmake -S "$src/tests/install" -B "$work/consumer-build-tree" -G Ninja -Dcairn_DIR="$build" \
      -DQUICKSTART_SOURCE="$src/examples/quickstart/quickstart.c" >/dev/null
cmake --build "$work/consumer-build-tree" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/ | head -1)
libdir=${libdir%/}
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c99 -o "$work/quickstart-pc" "$src/examples/quickstart/quickstart.c" $(pkg-config --cflags --libs cairn)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# run NAME CMD...: CMD on 2 ranks with a fresh prefix and cache; its output in $work/NAME.out.
run() {
  local name=$1
  shift
  (cd "$work" && CAIRN_PREFIX="$work/ckpt" CAIRN_JOB="install-test-$$" CAIRN_CACHE_DIR="$work/cache" \
     ${CAIRN_MPIRUN:-mpirun} ${CAIRN_MPIRUN_ARGS---oversubscribe} -np 2 "$@") >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; echo "install test: $name failed"; exit 1; }
  cat "$work/$name.out"
}
fresh() { rm -rf "$work/ckpt" "$work/cache"; }
for exe in "$work/consumer/quickstart" "$work/consumer-build-tree/quickstart" "$work/quickstart-pc"; do
  run quickstart "$exe"
  grep -q "quickstart: step 300" "$work/quickstart.out"
  fresh
done
echo "install test: find_package (the prefix and the build tree) and pkg-config builds ran"

heat_args=(--n 48 --iters 30 --checkpoint-every 10)
run heat2d "$work/prefix/bin/heat2d" "${heat_args[@]}"
want=$(grep '^result ' "$work/heat2d.out")
# same_result NAME: the run NAME printed heat2d's result.
same_result() {
  grep -qx "$want" "$work/$1.out" || { echo "install test: $1 did not print heat2d's '$want'"; exit 1; }
}

if [ -n "${TEST_FORTRAN:-}" ]; then
  cmake -S "$src/tests/install/fortran" -B "$work/fortran" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
        -DCMAKE_Fortran_COMPILER="$TEST_FORTRAN" -DHEAT2D_F_SOURCE="$src/examples/heat2d_f/heat2d_f.F90" >/dev/null
  cmake --build "$work/fortran" >/dev/null
  "$TEST_FORTRAN" -o "$work/heat2d_f-pc" "$src/examples/heat2d_f/heat2d_f.F90" $(pkg-config --cflags --libs cairn-fortran)
  for exe in "$work/fortran/heat2d_f" "$work/heat2d_f-pc"; do
    fresh
    run heat2d_f "$exe" "${heat_args[@]}"
    same_result heat2d_f
  done
  echo "install test: heat2d_f built with find_package(cairn COMPONENTS fortran) and with pkg-config cairn-fortran"
fi

if [ -n "${TEST_PYTHON_DIR:-}" ]; then
  py=${TEST_PYTHON:-python3}
  installed="$work/prefix/$TEST_PYTHON_DIR"
  # pip builds in the source directory: build a copy (the package and the error generator beside it).
  mkdir -p "$work/src/bindings"
  cp -r "$src/bindings/python" "$src/bindings/gen_errors.py" "$work/src/bindings/"
  # pip as docs/python.md writes it, offline: every package index out of reach (a closed local port).
  PIP_INDEX_URL=http://127.0.0.1:9/ PIP_RETRIES=0 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$py" -m pip install --no-build-isolation --target "$work/pip" "$work/src/bindings/python" >"$work/pip.out" 2>&1 ||
    { cat "$work/pip.out"; echo "install test: pip install --no-build-isolation --target failed offline"; exit 1; }
  for dir in "$installed" "$work/pip"; do
    version=$(cd "$work" && PYTHONPATH="$dir" "$py" -c 'import cairn, os; print(cairn.__version__, os.path.dirname(cairn.__file__))')
    echo "install test: import cairn from $dir: $version"
    [ "${version#* }" = "$dir/cairn" ] || { echo "install test: imported from elsewhere"; exit 1; }
    fresh
    PYTHONPATH="$dir" run heat2d_py "$py" "$src/examples/heat2d.py" "${heat_args[@]}"
    same_result heat2d_py
  done
  # The installed `cairn plot` finds the installed package without PYTHONPATH.
  (cd "$work" && env -u PYTHONPATH CAIRN_PREFIX="$work/ckpt" CAIRN_JOB="install-test-$$" CAIRN_CACHE_DIR="$work/cache" \
     "$work/prefix/bin/cairn" plot --out "$work/plot.svg") | tee "$work/plot.out"
  grep -q "wrote $work/plot.svg" "$work/plot.out" && grep -q 'id="bandwidth-L1"' "$work/plot.svg"
  echo "install test: the Python package installed by CMake and by pip, and the installed cairn plot"
fi
