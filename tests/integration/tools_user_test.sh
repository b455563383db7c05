#!/usr/bin/env bash
# tools_user: what a new user meets around the tools (issue 22), with heat2d under `cairn run`:
#  - a cache that outlived its removed prefix is refused (cairn run, and cairn_init under a bare mpirun),
#    `cairn clean --cache` removes it and the next run starts afresh;
#
# Usage: tools_user_test.sh PATH/TO/cairn PATH/TO/heat2d
# Environment: CAIRN_MPIRUN (default mpirun), CAIRN_MPIRUN_ARGS (e.g. --oversubscribe) and, for Open MPI
# as root, OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -u

CAIRN=${1:?usage: tools_user_test.sh PATH/TO/cairn PATH/TO/heat2d}
HEAT=${2:?usage: tools_user_test.sh PATH/TO/cairn PATH/TO/heat2d}
MPIRUN=${CAIRN_MPIRUN:-mpirun}
export CAIRN_LAUNCHER=mpirun
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-tools-user.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset CAIRN_CONFIG CAIRN_LOG CAIRN_FLUSH_EVERY CAIRN_FLUSH_ON_FINALIZE CAIRN_KEEP_FLUSHED CAIRN_CACHE_VERSIONS CAIRN_JOB CAIRN_ADOPT

failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }

# expect_rc NAME RC CMD... : runs CMD (stdout in $WORK/out, stderr in $WORK/err), checks its status.
expect_rc() {
  local name=$1 want=$2
  shift 2
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then pass "$name"; else
    fail "$name: exit status $rc, expected $want"
    sed 's/^/    out: /' "$WORK/out"
    sed 's/^/    err: /' "$WORK/err"
  fi
}
# expect_fail NAME CMD... : as expect_rc, for any status but 0.
expect_fail() {
  local name=$1
  shift
  "$@" >"$WORK/out" 2>"$WORK/err"
  if [ $? -ne 0 ]; then pass "$name"; else
    fail "$name: exit status 0"
    sed 's/^/    out: /' "$WORK/out"
  fi
}
# expect_in NAME FILE TEXT : FILE contains TEXT (fixed string).
expect_in() {
  if grep -qF -- "$3" "$2"; then pass "$1"; else
    fail "$1: '$3' not in $(basename "$2")"
    sed 's/^/    | /' "$2"
  fi
}
expect_not_in() {
  if ! grep -qF -- "$3" "$2"; then pass "$1"; else
    fail "$1: '$3' unexpectedly in $(basename "$2")"
    sed 's/^/    | /' "$2"
  fi
}
# expect_json NAME FILE [EXPR]: FILE is one JSON document (python3 -m json.tool accepts it) and the python3
# expression EXPR over it (bound to j) is true.
expect_json() {
  if ! python3 -m json.tool "$2" >/dev/null 2>"$WORK/pyerr"; then
    fail "$1: not JSON"
    sed 's/^/    | /' "$2" | head -20
    sed 's/^/    py: /' "$WORK/pyerr"
    return
  fi
  if [ -z "${3:-}" ]; then pass "$1"; return; fi
  if python3 -c "import json,sys; j=json.load(open('$2')); sys.exit(0 if ($3) else 1)" 2>"$WORK/pyerr"; then
    pass "$1"
  else
    fail "$1: $3"
    sed 's/^/    | /' "$2" | head -40
    sed 's/^/    py: /' "$WORK/pyerr"
  fi
}
# use NAME: a prefix and a cache of its own; the job name is derived from the prefix, as for a user.
use() {
  export CAIRN_PREFIX=$WORK/$1/prefix CAIRN_CACHE_DIR=$WORK/$1/cache
}
# heat [ARGS...]: heat2d on 4 ranks / 2 simulated nodes; the output is in $WORK/run.out.
heat() {
  "$CAIRN" run -n 4 --nodes 2 -- "$HEAT" --n 64 --iters 100 --checkpoint-every 10 "$@" >"$WORK/run.out" 2>&1
}

# ---- a cache that outlived its prefix (issue 22, 6) ---------------------------------------------
use orphan
heat || { sed 's/^/    | /' "$WORK/run.out"; fail "orphan: first run"; }
reference=$(grep '^result ' "$WORK/run.out")
[ -n "$reference" ] && pass "orphan: first run: $reference" || fail "orphan: first run printed no result"
ls "$CAIRN_CACHE_DIR"/cairn-*/node0/r0/v*.l1 >/dev/null 2>&1 && pass "orphan: the cache holds versions" \
  || fail "orphan: the first run left no version in the cache"
rm -rf "$CAIRN_PREFIX"
expect_rc "orphan: cairn run refuses the cache of a removed prefix" 2 heat
expect_in "orphan: cairn run says why" "$WORK/run.out" "has no record of them"
expect_in "orphan: cairn run says how to clean" "$WORK/run.out" "cairn clean --cache $CAIRN_PREFIX"
# The library refuses it too, under a bare mpirun (no cairn run to check first).
mkdir -p "$CAIRN_PREFIX"
CAIRN_NODE=node0 expect_fail "orphan: cairn_init refuses it" "$MPIRUN" ${CAIRN_MPIRUN_ARGS:-} -n 1 "$HEAT" --n 64 --iters 10 --checkpoint-every 10
expect_in "orphan: cairn_init says how to clean" "$WORK/err" "cairn clean --cache"
expect_not_in "orphan: nothing restarted" "$WORK/out" "restart: version"
rm -rf "$CAIRN_PREFIX"
expect_rc "orphan: clean --cache --dry-run" 0 "$CAIRN" clean --cache --dry-run
expect_in "orphan: dry run says what" "$WORK/out" "would remove the cache $CAIRN_CACHE_DIR/cairn-"
ls "$CAIRN_CACHE_DIR"/cairn-* >/dev/null 2>&1 && pass "orphan: dry run removed nothing" || fail "orphan: dry run removed the cache"
expect_rc "orphan: clean --cache" 0 "$CAIRN" clean --cache
ls "$CAIRN_CACHE_DIR"/cairn-* >/dev/null 2>&1 && fail "orphan: clean --cache left the cache" || pass "orphan: clean --cache removed it"
heat || { sed 's/^/    | /' "$WORK/run.out"; fail "orphan: the run after clean --cache"; }
expect_not_in "orphan: a fresh start, no restart" "$WORK/run.out" "restart: version"
[ "$(grep '^result ' "$WORK/run.out")" = "$reference" ] && pass "orphan: the fresh run's result" \
  || fail "orphan: the fresh run's result differs"
# The job's own cache, with its prefix intact and a version newer than L3: --cache is refused.
CAIRN_FLUSH_EVERY=100 CAIRN_FLUSH_ON_FINALIZE=false heat --no-restart
expect_rc "orphan: clean --cache refuses the only copy of the newest version" 1 "$CAIRN" clean --cache
expect_in "orphan: and says why" "$WORK/err" "newer than anything committed"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
