#!/usr/bin/env bash
# A Python program that ends with its Session open (python_unclosed_session.py): cairn warns and
# finalizes it at exit, before mpi4py finalizes MPI, and the version it took is committed in L3 for the
# next launch. Usage: python_unclosed_session_test.sh PYTHON
# Environment: PYTHONPATH (the build tree's package), CAIRN_MPIRUN, CAIRN_MPIRUN_ARGS.
set -euo pipefail
py=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cairn-unclosed.XXXXXX")
trap 'rm -rf "$work"' EXIT
export CAIRN_PREFIX=$work/prefix CAIRN_CACHE_DIR=$work/cache CAIRN_JOB=unclosed-$$
run() { ${CAIRN_MPIRUN:-mpirun} ${CAIRN_MPIRUN_ARGS---oversubscribe} -np 2 "$py" "$here/python_unclosed_session.py" "$@"; }
run >"$work/out" 2>&1 || { cat "$work/out"; echo "FAIL: the first run"; exit 1; }
cat "$work/out"
grep -q "cairn: a Session was left open; finalizing it at exit" "$work/out" || { echo "FAIL: no warning"; exit 1; }
run --check
