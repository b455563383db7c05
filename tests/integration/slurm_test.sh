#!/usr/bin/env bash
# slurm: `cairn run` under a real Slurm. Starts a one-host cluster on 127.0.0.1 with
# scripts/slurm-cluster.sh (which installs Debian's slurm-wlm and munge with apt-get when missing), then,
# inside `salloc` allocations:
#   - simulated nodes under srun: every rank (SLURM_PROCID) gets its CAIRN_NODE from the --multi-prog file;
#   - heat2d failure-free on 8 ranks / 4 simulated nodes, for the reference result;
#   - heat2d with node 2 killed at checkpoint 8: cairn run picks srun by itself, kills the node, relaunches
#     with srun, the job restarts from L2 and prints the reference result bit for bit;
# and outside any allocation, `--launcher srun` is refused with a clear message. The cluster's daemons are
# stopped on every way out (and checked to be gone).
#
# Usage: slurm_test.sh PATH/TO/cairn PATH/TO/heat2d
# Needs root (slurmd runs jobs as their users) and, the first time, apt-get. Exit status 77 (skipped)
# when not root. Takes about 20 s once the packages are installed.
set -u

CAIRN=${1:?usage: slurm_test.sh PATH/TO/cairn PATH/TO/heat2d}
HEAT=${2:?usage: slurm_test.sh PATH/TO/cairn PATH/TO/heat2d}
CLUSTER_SH=$(cd "$(dirname "$0")/../../scripts" && pwd)/slurm-cluster.sh
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the Slurm test starts slurmd, which needs root"
  exit 77
fi

# Short, and searchable by all: munged's socket lives under it.
WORK=$(mktemp -d /tmp/cairn-slurm.XXXXXX)
chmod 755 "$WORK"
CLUSTER=$WORK/cluster
cleanup() {
  bash "$CLUSTER_SH" stop "$CLUSTER" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# Only this test's cluster, whatever the caller's environment holds.
for v in $(compgen -v SLURM_); do unset "$v"; done
unset CAIRN_CONFIG CAIRN_LOG CAIRN_LAUNCHER CAIRN_SRUN CAIRN_SRUN_ARGS CAIRN_FLUSH_EVERY CAIRN_REDUNDANCY
export SLURM_CONF=$CLUSTER/etc/slurm.conf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# srun starts the ranks itself, so Open MPI does not learn that 8 ranks share 2 cores (mpirun
# --oversubscribe would tell it): without this its ranks busy-wait, and heat2d takes minutes, not seconds.
export OMPI_MCA_mpi_yield_when_idle=1
HEAT_ARGS=(--n 256 --iters 400 --checkpoint-every 20)

failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }
expect_in() {  # NAME FILE TEXT: FILE contains TEXT (fixed string)
  if grep -qF -- "$3" "$2"; then pass "$1"; else
    fail "$1: '$3' not in $(basename "$2")"
    sed 's/^/    | /' "$2"
  fi
}
expect_re() {  # NAME FILE REGEX
  if grep -qE -- "$3" "$2"; then pass "$1"; else
    fail "$1: /$3/ not in $(basename "$2")"
    sed 's/^/    | /' "$2"
  fi
}
# use NAME: the job's prefix, cache and name.
use() {
  export CAIRN_PREFIX=$WORK/$1/prefix CAIRN_CACHE_DIR=$WORK/$1/cache CAIRN_JOB=slurm-$1-$$
}
# in_allocation NP OUTFILE CMD...: CMD under `salloc -n NP`, output in OUTFILE; returns CMD's status.
in_allocation() {
  local np=$1 out=$2
  shift 2
  timeout 150 salloc -n "$np" --time=10 "$@" >"$out" 2>&1
}
t0=$(date +%s)

# ---- outside an allocation: --launcher srun is refused ---------------------------------------------------
use refused
"$CAIRN" run -n 2 --launcher srun -- true >"$WORK/refused.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && pass "--launcher srun outside an allocation: exit status 2" ||
  fail "--launcher srun outside an allocation: exit status $rc, expected 2"
expect_in "... and says why and what to do" "$WORK/refused.out" \
  "--launcher srun: not inside a Slurm allocation (SLURM_JOB_ID is not set); run \`cairn run\` under salloc"

# ---- the cluster -------------------------------------------------------------------------------------------
if ! bash "$CLUSTER_SH" start "$CLUSTER" >"$WORK/start.out" 2>&1; then
  cat "$WORK/start.out"
  fail "the one-host Slurm cluster did not start"
  exit 1
fi
pass "one-host Slurm cluster up in $(($(date +%s) - t0)) s: $(grep -o 'node .* idle' "$WORK/start.out")"

# ---- simulated nodes under srun --------------------------------------------------------------------------
use nodes
if in_allocation 4 "$WORK/nodes.out" env CAIRN_LOG=info "$CAIRN" run -n 4 --nodes 2 -- \
  sh -c 'echo "rank $SLURM_PROCID step $SLURM_STEP_ID on $CAIRN_NODE"'; then
  pass "cairn run -n 4 --nodes 2 under salloc"
else
  fail "cairn run -n 4 --nodes 2 under salloc: exit status $?"
  sed 's/^/    | /' "$WORK/nodes.out"
fi
expect_re "auto picked srun inside the allocation" "$WORK/nodes.out" \
  '^cairn run: launcher: srun \(auto: inside Slurm allocation [0-9]+\)$'
expect_re "the srun command line" "$WORK/nodes.out" \
  "^cairn run: attempt 1 \(srun\): /.*/srun --mpi=pmix --kill-on-bad-exit=1 --quit-on-interrupt -n 4 --multi-prog $CAIRN_PREFIX/.cairn/srun-multi-prog.conf$"
placement=$(grep -E '^rank [0-9]+ step [0-9]+ on ' "$WORK/nodes.out" | sed 's/ step [0-9]*//' | sort | tr '\n' ',')
[ "$placement" = "rank 0 on node0,rank 1 on node0,rank 2 on node1,rank 3 on node1," ] &&
  pass "each srun task got its node: $placement" || { fail "srun tasks and nodes: '$placement'"; sed 's/^/    | /' "$WORK/nodes.out"; }

# ---- heat2d failure-free: the reference ----------------------------------------------------------------
use reference
t1=$(date +%s)
if in_allocation 8 "$WORK/reference.out" env CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=4 "$CAIRN" run -n 8 --nodes 4 -- \
  "$HEAT" "${HEAT_ARGS[@]}"; then
  pass "heat2d failure-free under salloc ($(($(date +%s) - t1)) s)"
else
  fail "heat2d failure-free under salloc: exit status $?"
  sed 's/^/    | /' "$WORK/reference.out"
fi
reference=$(sed -n 's/^result \([0-9a-f]\{16\}\)$/\1/p' "$WORK/reference.out" | tail -n 1)
[ -n "$reference" ] && pass "reference result $reference" || fail "the failure-free run printed no result"

# ---- heat2d with node 2 killed at checkpoint 8 ---------------------------------------------------------
use kill
t1=$(date +%s)
if in_allocation 8 "$WORK/kill.out" env CAIRN_LOG=info CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=4 \
  "$CAIRN" run -n 8 --nodes 4 --kill-node 2 --at-checkpoint 8 -- "$HEAT" "${HEAT_ARGS[@]}"; then
  pass "heat2d with node 2 killed, under salloc ($(($(date +%s) - t1)) s)"
else
  fail "heat2d with node 2 killed, under salloc: exit status $?"
fi
grep -v '^cairn\[' "$WORK/kill.out" >"$WORK/kill.launcher"  # without the library's log lines
expect_re "srun was the launcher" "$WORK/kill.launcher" '^cairn run: launcher: srun \(auto: inside Slurm allocation [0-9]+\)$'
expect_re "attempt 1 ran under srun" "$WORK/kill.launcher" '^cairn run: attempt 1 \(srun\): .*/srun .*--multi-prog '
expect_re "attempt 2 ran under srun" "$WORK/kill.launcher" '^cairn run: attempt 2 \(srun\): .*/srun .*--multi-prog '
expect_in "only node2's ranks were told to stop at checkpoint 8" "$WORK/kill.launcher" \
  "4-5 env CAIRN_NODE=node2 CAIRN_INJECT=checkpoint:8 CAIRN_INJECT_DIR=$CAIRN_PREFIX/.cairn/inject"
expect_in "node 2 was killed" "$WORK/kill.launcher" "cairn run: killed node2 (ranks 4,5) at checkpoint 8, phase checkpoint"
expect_re "srun saw the tasks die and ended the step" "$WORK/kill.launcher" '^srun: error: .*tasks 4-5: Killed'
expect_in "the job was relaunched" "$WORK/kill.launcher" "cairn run: relaunching the job (attempt 2)"
expect_in "two attempts, one failed" "$WORK/kill.launcher" "cairn run: summary (srun): 2 attempts, 1 failed"
expect_re "attempt 2 restarted from version 7 at L2" "$WORK/kill.launcher" \
  '^cairn run: attempt 2: restarted from version 7 at L2[ ;]'
killed_result=$(sed -n 's/^result \([0-9a-f]\{16\}\)$/\1/p' "$WORK/kill.out" | tail -n 1)
if [ -n "$reference" ] && [ "$killed_result" = "$reference" ]; then
  pass "the recovered run's result equals the failure-free one ($killed_result)"
else
  fail "the recovered run's result '$killed_result' differs from the failure-free '$reference'"
  sed 's/^/    | /' "$WORK/kill.out" | tail -n 60
fi

# ---- no daemon left behind --------------------------------------------------------------------------------
pids=$(cat "$CLUSTER"/run/*.pid 2>/dev/null | tr '\n' ' ')
bash "$CLUSTER_SH" stop "$CLUSTER" >"$WORK/stop.out" 2>&1
left=""
for p in $pids; do [ -d "/proc/$p" ] && left="$left $p"; done
[ -n "$pids" ] && [ -z "$left" ] && pass "the daemons ($pids) were stopped" ||
  { fail "daemons still running after stop:$left (pids: $pids)"; cat "$WORK/stop.out"; }

echo "took $(($(date +%s) - t0)) s"
if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; the daemons' logs:"
  tail -n 20 "$CLUSTER"/log/* 2>/dev/null
  exit 1
fi
echo "all checks passed"
