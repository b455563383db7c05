#!/usr/bin/env bash
# SCR codes on cairn, as a user builds and runs them: install cairn into a scratch prefix, build one of
# the SCR test programs (C, C++ or Fortran; no cairn-specific code) against the INSTALLED scr.h/scrf.h
# with -lscr or -lcairn_scr, configure it with SCR's own variables only, and run it under the installed
# `cairn run` on 4 simulated nodes: a node killed (recovery from L2 and from L3) and a halt (recovery
# from L1). Every recovered run must print the failure-free result; each restart must come from the
# expected level.
#
#   scr_apps_test.sh SOURCE_DIR BUILD_DIR c|cxx|fortran MPICC
set -euo pipefail
src=$1 build=$2 lang=$3 mpicc=$4
work=$(mktemp -d /tmp/cairn-scr-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$work/install" >/dev/null
P=$work/install
libdir=$(ls -d "$P"/lib*/ | head -1)
libdir=${libdir%/}
export PATH="$P/bin:$PATH" PKG_CONFIG_PATH="$libdir/pkgconfig"
mpidir=$(dirname "$mpicc")
mpisuffix=${mpicc##*/mpicc}  # "" for Open MPI's mpicc, ".mpich" for mpicc.mpich
case $lang in
  c)  # SCR's way: -I<scr>/include -L<scr>/lib -lscr (here the libscr.so link cairn installs)
      "$mpicc" -O1 -o "$work/app" "$src/tests/scr/scr_heat.c" -I"$P/include/cairn-scr" -L"$libdir/cairn-scr" -lscr \
        -Wl,-rpath,"$libdir" ;;
  cxx)  # pkg-config: -lcairn_scr; and CMake: find_package(cairn), cairn::scr (built, not run)
      "$mpidir/mpicxx$mpisuffix" -O1 -std=c++17 -o "$work/app" "$src/tests/scr/scr_heat.cpp" \
        $(pkg-config --cflags --libs cairn-scr) -Wl,-rpath,"$libdir"
      cmake -S "$src/tests/scr/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_CXX_COMPILER="$mpidir/mpicxx$mpisuffix" -DCMAKE_C_COMPILER="$mpicc" \
        -DMPI_C_COMPILER="$mpicc" -DSCR_HEAT_SOURCE="$src/tests/scr/scr_heat.cpp" >/dev/null
      cmake --build "$work/consumer" >/dev/null
      [ -x "$work/consumer/scr_heat_cxx" ] || fail "the CMake build (cairn::scr) made no program" ;;
  fortran)
      "$mpidir/mpifort$mpisuffix" -O1 -o "$work/app" "$src/tests/scr/scr_heat.f90" -I"$P/include/cairn-scr" \
        -L"$libdir/cairn-scr" -lscr -Wl,-rpath,"$libdir" ;;
  *) fail "unknown language $lang" ;;
esac

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export SCR_CHECKPOINT_INTERVAL=5 SCR_FLUSH=4 SCR_SET_SIZE=4

# run NAME [cairn run options] -- : one job in its own prefix (the working directory) and cache.
run() {
  local name=$1; shift
  mkdir -p "$work/$name"
  (cd "$work/$name" && SCR_PREFIX="$work/$name" SCR_CACHE_BASE="$work/cache-$name" \
     cairn run -n 4 --nodes 4 "$@" -- "$work/app" >"$work/$name.out" 2>&1) || {
    cat "$work/$name.out"; fail "$name: cairn run exited non-zero"; }
}
result_of() { grep -io '^result [0-9a-f]\{16\}' "$work/$1.out" | tail -1 | tr 'A-F' 'a-f'; }
# expect NAME LEVEL: the last attempt restarted at LEVEL (L1, L2, L3) and printed the reference result.
expect() {
  local got
  got=$(result_of "$1")
  [ -n "$got" ] || { cat "$work/$1.out"; fail "$1: no result line"; }
  [ "$got" = "$ref" ] || { cat "$work/$1.out"; fail "$1: $got differs from the failure-free $ref"; }
  grep -q "restarted from version [0-9]* at $2" "$work/$1.out" || { cat "$work/$1.out"; fail "$1: no restart from $2"; }
  echo "PASS $lang $1: restarted at $2, $got"
}
# halted NAME: the job stopped early on a halt (no result), then is run again without it.
halt_then_resume() {
  local name=$1; shift
  mkdir -p "$work/$name"
  cairn halt "$work/$name" --checkpoints 2 >/dev/null
  run "$name" "$@"
  ! grep -qi '^result' "$work/$name.out" || fail "$name: the halted job ran to its end"
  mv "$work/$name.out" "$work/$name.halted.out"
  cairn halt "$work/$name" --unset >/dev/null
  run "$name" "$@"
}

SCR_COPY_TYPE=SINGLE run reference
ref=$(result_of reference)
[ -n "$ref" ] || { cat "$work/reference.out"; fail "no failure-free result"; }
echo "failure-free: $ref"

case $lang in
  c)
    SCR_COPY_TYPE=XOR run l2 --kill-node 2 --at-checkpoint 6
    expect l2 L2
    SCR_COPY_TYPE=SINGLE run l3 --kill-node 1 --at-checkpoint 7
    expect l3 L3
    SCR_COPY_TYPE=XOR halt_then_resume l1
    expect l1 L1
    # Output datasets landed under the prefix, whole, and nothing partial is left.
    for r in 0 1 2 3; do
      grep -q "^step 40 rank $r " "$work/l2/output/step_40/rank_$r.txt" || fail "output step 40 of rank $r missing"
      [ -s "$work/l2/final/rank_$r.ckpt" ] || fail "final/rank_$r.ckpt (checkpoint and output) missing"
    done
    [ -z "$(find "$work/l2" -name '*.cairn-partial.*')" ] || fail "partial output files left behind"
    ;;
  cxx)
    SCR_COPY_TYPE=PARTNER run l2 --kill-node 3 --at-checkpoint 5 --phase compute
    expect l2 L2
    # SCR_HALT_EXIT=1: the library ends the halted job itself, cleanly (MPI finalized, exit status 0).
    SCR_COPY_TYPE=XOR SCR_HALT_EXIT=1 halt_then_resume l1
    grep -q "SCR_HALT_EXIT=1: finalizing and exiting" "$work/l1.halted.out" || fail "SCR_HALT_EXIT did not end the job"
    expect l1 L1
    ;;
  fortran)
    # The redundancy comes from the user config file <SCR_PREFIX>/.scrconf, as SCR reads it.
    mkdir -p "$work/l2"
    printf '# Reed-Solomon over the 4 nodes\nSCR_COPY_TYPE=RS\nSCR_SET_FAILURES=2  # two lost nodes per set\n' \
      >"$work/l2/.scrconf"
    run l2 --kill-node 1,2 --at-checkpoint 6
    expect l2 L2
    SCR_COPY_TYPE=SINGLE run l3 --kill-node 0 --at-checkpoint 6
    expect l3 L3
    ;;
esac
echo "scr_apps_test: $lang passed"
