#!/usr/bin/env bash
# A program started as one of several tasks whose MPI library did not connect to the launcher (every
# task a singleton: an MPICH program under srun --mpi=pmix, say) is refused at cairn_init with the
# launcher's variable named and what to do, and leaves no prefix behind; a job of one task runs.
# The launcher's environment is given to a singleton run of heat2d (no launcher needed).
# Usage: singleton_mismatch_test.sh HEAT2D
set -u
heat=$1
work=$(mktemp -d /tmp/cairn-singleton.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }

refused() {  # NAME=VALUE: the variable the launcher set
  local var=$1 out="$work/out.$1"
  env "$var" CAIRN_PREFIX="$work/p" CAIRN_CACHE_DIR="$work/c" timeout 60 "$heat" --n 64 --iters 10 \
    --checkpoint-every 5 >"$out" 2>&1
  local rc=$?
  [ "$rc" -ne 0 ] && pass "$var: cairn_init refused (exit $rc)" || fail "$var: the job ran (exit 0)"
  grep -q "MPI_COMM_WORLD has 1 process, but the launcher started 4 ($var)" "$out" &&
    pass "$var: the message names the variable" || { fail "$var: no message naming $var"; cat "$out"; }
  grep -q -- "--mpi=pmi2" "$out" && pass "$var: the message says what to do" || fail "$var: no advice"
  [ ! -e "$work/p" ] && pass "$var: no prefix made" || fail "$var: a prefix was made"
  rm -rf "$work/p" "$work/c"
}
refused SLURM_STEP_NUM_TASKS=4
refused PMI_SIZE=4

env SLURM_STEP_NUM_TASKS=1 CAIRN_PREFIX="$work/p" CAIRN_CACHE_DIR="$work/c" timeout 60 "$heat" --n 64 --iters 10 \
  --checkpoint-every 5 >"$work/one" 2>&1 && grep -q "^result " "$work/one" &&
  pass "a job of one task runs" || { fail "a job of one task did not run"; cat "$work/one"; }

[ "$fails" -eq 0 ] && echo "singleton_mismatch: all passed" || { echo "singleton_mismatch: $fails failed"; exit 1; }
