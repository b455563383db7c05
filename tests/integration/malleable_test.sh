#!/usr/bin/env bash
# malleable: live redistribution (cairn_redistribute) in one run that grows from 4 to 6 ranks
# (MPI_Comm_spawn + MPI_Intercomm_merge) and shrinks to 3 (MPI_Comm_split), against the same steps on
# a fixed 4-rank communicator (--fixed). Both must print the same `result` line bit for bit, and the
# malleable run must say it grew and shrank.
#
# Usage: malleable_test.sh PATH/TO/malleable [ELEMENTS]
# Environment: CAIRN_MPIRUN (default mpirun), and for Open MPI as root OMPI_ALLOW_RUN_AS_ROOT=1
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
#
# MPI_Comm_spawn under Open MPI 4.1 (checked as root on a 2-core machine):
#  - The spawned processes are placed on the slots mpirun was given. With 4 ranks already on every
#    slot, the spawn fails with "All nodes which are allocated for this job are already filled"
#    (MPI_ERR_SPAWN) unless oversubscription is allowed: `mpirun --oversubscribe` is enough and applies
#    to the spawned job too (OMPI_MCA_rmaps_base_oversubscribe=1 in the environment does the same).
#    No hostfile or explicit host with slots is needed on one machine.
#  - The spawned processes inherit mpirun's environment: OMPI_ALLOW_RUN_AS_ROOT* (root is allowed for
#    them too) and the CAIRN_* variables below, so they use the same prefix, cache and job as the
#    ranks they join.
#  - Parting: MPI_Comm_disconnect on the merged communicator hangs in Open MPI 4.1 (PMIx fence); the
#    example frees it and disconnects the intercommunicator instead (see malleable.c).
set -u

APP=${1:?usage: malleable_test.sh PATH/TO/malleable [ELEMENTS]}
N=${2:-100003}
MPIRUN=${CAIRN_MPIRUN:-mpirun}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-malleable.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset CAIRN_CONFIG CAIRN_LOG CAIRN_NODE

failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }

# run NAME ARGS... : the example on 4 ranks with its own prefix, cache and job under $WORK/NAME;
# stdout in $WORK/NAME.out, stderr in $WORK/NAME.err.
run() {
  local name=$1
  shift
  mkdir -p "$WORK/$name"
  CAIRN_PREFIX=$WORK/$name/prefix CAIRN_CACHE_DIR=$WORK/$name/cache CAIRN_JOB=malleable-$name \
    timeout 120 "$MPIRUN" --oversubscribe -np 4 "$APP" --n "$N" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  if [ "$rc" -eq 0 ]; then pass "$name run (exit 0)"; else
    fail "$name run: exit status $rc$([ "$rc" -eq 124 ] && echo ' (timed out)')"
    sed 's/^/    out: /' "$WORK/$name.out"
    sed 's/^/    err: /' "$WORK/$name.err" | tail -40
  fi
}

# result NAME : the hash of the `result` line, which must be the last line of stdout.
result() {
  tail -n 1 "$WORK/$1.out" | sed -n 's/^result \([0-9a-f]\{16\}\)$/\1/p'
}

expect_line() {
  if grep -qxF -- "$3" "$WORK/$2.out"; then pass "$1"; else
    fail "$1: no line '$3' in the $2 run's output"
    sed 's/^/    | /' "$WORK/$2.out"
  fi
}

run malleable
malleable_ok=$failures
run fixed --fixed

expect_line "grew 4 -> 6" malleable "malleable: grew 4 -> 6 at step 10"
expect_line "shrank 6 -> 3" malleable "malleable: shrank 6 -> 3 at step 20"
expect_line "finished on 3 ranks" malleable "malleable: finished 30 steps on 3 ranks"
expect_line "fixed: finished on 4 ranks" fixed "malleable: finished 30 steps on 4 ranks"

got=$(result malleable)
want=$(result fixed)
if [ -z "$got" ]; then fail "malleable: the last line is not 'result <16 hex>'"; else pass "malleable: result $got"; fi
if [ -z "$want" ]; then fail "fixed: the last line is not 'result <16 hex>'"; else pass "fixed: result $want"; fi
if [ -n "$got" ] && [ "$got" = "$want" ]; then
  pass "same result grown and shrunk as on a fixed communicator"
else
  fail "results differ: malleable '$got', fixed '$want'"
fi

# The spawned processes' versions landed in the same cache as the job's (ranks 4 and 5 after growing).
[ "$malleable_ok" -eq 0 ] && for r in r4 r5; do
  if ls "$WORK/malleable/cache"/*/*/"$r"/*.l1 >/dev/null 2>&1; then  # cache/cairn-<job>/<node>/r<k>
    pass "a version of rank ${r#r} of 6 in the job's cache"
  else
    fail "no version of rank ${r#r} of 6 in $WORK/malleable/cache"
    find "$WORK/malleable/cache" -maxdepth 4 | sed 's/^/    | /'
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
