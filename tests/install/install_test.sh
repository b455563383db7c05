#!/usr/bin/env bash
# Install cairn into a scratch prefix and use it from outside the tree as a user would: no
# LD_LIBRARY_PATH (the installed programs and libraries find libcairn by their RUNPATHs), no network
# (pip finds every package index out of reach), the installed `cairn run` with a node killed.
#  - C: the quickstart example built with find_package(cairn) against the prefix (run with node 1 killed
#    at its 2nd checkpoint) and against the build tree, and with pkg-config, each printing the
#    failure-free answer;
#  - every installed program and library (ELF) resolves its libraries without LD_LIBRARY_PATH (ldd);
#  - Fortran (when built): heat2d_f built by a Fortran-only project with find_package(cairn COMPONENTS
#    fortran) against the prefix and with pkg-config cairn-fortran, each killed at a checkpoint, and
#    against the build tree and bin/heat2d_f, each printing the installed heat2d's failure-free result;
#  - Python (when built): the package where `cmake --install` put it, run through the installed
#    heat2d.py (its #! line the bindings' interpreter, no PYTHONPATH), and the one that
#    `pip install --no-build-isolation --target DIR ./bindings/python` (docs/python.md) builds offline
#    against the installed cairn: both with a node killed, to heat2d's result; the installed `cairn plot`;
#  - the README's C, Fortran and Python programs built against the prefix (doc_samples_test.py --only
#    README.md), each restarted after a node was killed to its failure-free answer.
# Environment: CAIRN_MPIRUN, CAIRN_MPIRUN_ARGS (the tests' launcher), TEST_PYTHON (the interpreter with
# numpy and mpi4py), TEST_FORTRAN (the Fortran compiler; empty: no Fortran binding), TEST_PYTHON_DIR
# (the package's install directory under the prefix; empty: no Python package).
set -euo pipefail
unset LD_LIBRARY_PATH PYTHONPATH
src=$1 build=$2
work=$(mktemp -d /tmp/cairn-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
cairn=$prefix/bin/cairn
libdir=$(ls -d "$prefix"/lib*/ | head -1)
libdir=${libdir%/}
export PKG_CONFIG_PATH="$libdir/pkgconfig"

# Nothing installed may need LD_LIBRARY_PATH: every ELF file's libraries resolve.
while IFS= read -r f; do
  if [ "$(head -c 4 "$f")" = $'\x7fELF' ] && ldd "$f" 2>&1 | grep -q 'not found'; then
    ldd "$f"
    echo "install test: $f does not find its libraries without LD_LIBRARY_PATH"
    exit 1
  fi
done < <(find "$prefix" -type f \( -perm -u+x -o -name '*.so*' \))
echo "install test: every installed program and library finds its libraries by itself"

# run NAME KILL CMD...: CMD under the installed `cairn run` on 2 ranks over 2 simulated nodes (partner
# copies), with a fresh prefix and cache; KILL=kill: node 1 killed at checkpoint 2, then relaunched.
run() {
  local name=$1 kill=$2
  shift 2
  local inject=()
  [ "$kill" = kill ] && inject=(--kill-node 1 --at-checkpoint 2 --phase compute)
  rm -rf "$work/ckpt" "$work/cache"
  (cd "$work" && CAIRN_PREFIX="$work/ckpt" CAIRN_JOB="install-test-$$" CAIRN_CACHE_DIR="$work/cache" \
     CAIRN_REDUNDANCY=partner CAIRN_MPIRUN_ARGS="${CAIRN_MPIRUN_ARGS---oversubscribe}" \
     "$cairn" run -n 2 --nodes 2 "${inject[@]}" -- "$@") >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; echo "install test: $name failed"; exit 1; }
  if [ "$kill" = kill ] && ! grep -q '^cairn run: attempt 2: restarted from version' "$work/$name.out"; then
    cat "$work/$name.out"
    echo "install test: $name did not restart after node 1 was killed"
    exit 1
  fi
}
# same NAME PATTERN WANT: the last line of NAME's output matching PATTERN is WANT.
same() {
  local got
  got=$(grep -E "$2" "$work/$1.out" | tail -1)
  [ "$got" = "$3" ] || { cat "$work/$1.out"; echo "install test: $1 printed '$got', the failure-free run '$3'"; exit 1; }
}

# ---- C: find_package against the prefix and against the build tree, and pkg-config ----
cmake -S "$src/tests/install" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DQUICKSTART_SOURCE="$src/examples/quickstart/quickstart.c" >/dev/null
cmake --build "$work/consumer" >/dev/null
cmake -S "$src/tests/install" -B "$work/consumer-build-tree" -G Ninja -Dcairn_DIR="$build" \
      -DQUICKSTART_SOURCE="$src/examples/quickstart/quickstart.c" >/dev/null
cmake --build "$work/consumer-build-tree" >/dev/null
cc -std=c99 -o "$work/quickstart-pc" "$src/examples/quickstart/quickstart.c" $(pkg-config --cflags --libs cairn) \
   -Wl,-rpath,"$(pkg-config --variable=libdir cairn)"
run quickstart plain "$work/consumer/quickstart"
want=$(grep '^quickstart: step 300' "$work/quickstart.out") || { cat "$work/quickstart.out"; exit 1; }
# Killed and restarted: the find_package build; the other two only link differently, so one plain run each.
for exe in "$work/consumer/quickstart" "$work/consumer-build-tree/quickstart" "$work/quickstart-pc"; do
  kill=plain
  [ "$exe" = "$work/consumer/quickstart" ] && kill=kill
  run quickstart $kill "$exe"
  same quickstart '^quickstart: ' "$want"
done
echo "install test: quickstart built with find_package (prefix and build tree) and pkg-config, restarted: $want"

heat_args=(--n 48 --iters 30 --checkpoint-every 10)
run heat2d plain "$prefix/bin/heat2d" "${heat_args[@]}"
want=$(grep '^result ' "$work/heat2d.out")

if [ -n "${TEST_FORTRAN:-}" ]; then
  for from in prefix build-tree; do
    where=(-DCMAKE_PREFIX_PATH="$prefix")
    [ "$from" = build-tree ] && where=(-Dcairn_DIR="$build")
    cmake -S "$src/tests/install/fortran" -B "$work/fortran-$from" -G Ninja "${where[@]}" \
          -DCMAKE_Fortran_COMPILER="$TEST_FORTRAN" -DHEAT2D_F_SOURCE="$src/examples/heat2d_f/heat2d_f.F90" >/dev/null
    cmake --build "$work/fortran-$from" >/dev/null
  done
  "$TEST_FORTRAN" -o "$work/heat2d_f-pc" "$src/examples/heat2d_f/heat2d_f.F90" $(pkg-config --cflags --libs cairn-fortran) \
                  -Wl,-rpath,"$(pkg-config --variable=libdir cairn)"
  for exe in "$work/fortran-prefix/heat2d_f" "$work/heat2d_f-pc" "$work/fortran-build-tree/heat2d_f" "$prefix/bin/heat2d_f"; do
    kill=plain
    case $exe in "$work/fortran-prefix/heat2d_f" | "$work/heat2d_f-pc") kill=kill ;; esac
    run heat2d_f $kill "$exe" "${heat_args[@]}"
    same heat2d_f '^result ' "$want"
  done
  echo "install test: heat2d_f from a Fortran-only project (find_package against the prefix and the build tree), pkg-config and bin/, restarted: $want"
fi

if [ -n "${TEST_PYTHON_DIR:-}" ]; then
  py=${TEST_PYTHON:-python3}
  installed="$prefix/$TEST_PYTHON_DIR"
  # The installed heat2d.py runs the bindings' interpreter and finds the installed package by itself.
  head -1 "$prefix/bin/heat2d.py" | grep -qx "#!$py" || { head -1 "$prefix/bin/heat2d.py"; echo "install test: heat2d.py's #! is not $py"; exit 1; }
  run heat2d_py kill "$prefix/bin/heat2d.py" "${heat_args[@]}"
  same heat2d_py '^result ' "$want"
  echo "install test: bin/heat2d.py (#!$py, the package from $installed), restarted: $want"
  # pip as docs/python.md writes it, offline: every package index out of reach (a closed local port).
  # pip builds in the source directory: build a copy (the package and the error generator beside it).
  mkdir -p "$work/src/bindings"
  cp -r "$src/bindings/python" "$src/bindings/gen_errors.py" "$work/src/bindings/"
  PIP_INDEX_URL=http://127.0.0.1:9/ PIP_RETRIES=0 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$py" -m pip install --no-build-isolation --target "$work/pip" "$work/src/bindings/python" >"$work/pip.out" 2>&1 ||
    { cat "$work/pip.out"; echo "install test: pip install --no-build-isolation --target failed offline"; exit 1; }
  for dir in "$installed" "$work/pip"; do
    version=$(cd "$work" && PYTHONPATH="$dir" "$py" -c 'import cairn, os; print(cairn.__version__, os.path.dirname(cairn.__file__))')
    echo "install test: import cairn from $dir: $version"
    [ "${version#* }" = "$dir/cairn" ] || { echo "install test: imported from elsewhere"; exit 1; }
  done
  PYTHONPATH="$work/pip" run heat2d_py kill "$py" "$src/examples/heat2d.py" "${heat_args[@]}"
  same heat2d_py '^result ' "$want"
  echo "install test: the package pip built offline, restarted: $want"
  # The installed `cairn plot` finds the installed package without PYTHONPATH.
  (cd "$work" && CAIRN_PREFIX="$work/ckpt" CAIRN_JOB="install-test-$$" CAIRN_CACHE_DIR="$work/cache" \
     "$cairn" plot --out "$work/plot.svg") | tee "$work/plot.out"
  grep -q "wrote $work/plot.svg" "$work/plot.out" && grep -q 'id="bandwidth-L1"' "$work/plot.svg"
  echo "install test: the installed cairn plot"
fi

# The README's programs, built against the prefix as its last section says, restarted after a kill.
samples=(--source "$src" --cairn "$cairn" --only README.md
         --cc cc "--cflags=$(pkg-config --cflags cairn)" "--libs=$(pkg-config --libs cairn) -Wl,-rpath,$libdir")
[ -n "${TEST_FORTRAN:-}" ] &&
  samples+=(--fc "$TEST_FORTRAN" "--fflags=$(pkg-config --cflags cairn-fortran)"
            "--flibs=$(pkg-config --libs cairn-fortran) -Wl,-rpath,$libdir")
[ -n "${TEST_PYTHON_DIR:-}" ] && samples+=(--python "${TEST_PYTHON:-python3}" --pythonpath "$prefix/$TEST_PYTHON_DIR")
"${TEST_PYTHON:-python3}" "$src/tests/integration/doc_samples_test.py" "${samples[@]}"
echo "install test: passed"
