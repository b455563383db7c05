#!/usr/bin/env bash
# slurm: `cairn run` under a real Slurm. Starts a one-host cluster on 127.0.0.1 with
# scripts/slurm-cluster.sh (which installs Debian's slurm-wlm and munge with apt-get when missing), then,
# inside `salloc` allocations:
#   - simulated nodes under srun: every rank (SLURM_PROCID) gets its CAIRN_NODE from the --multi-prog file;
#   - heat2d failure-free on 8 ranks / 4 simulated nodes, for the reference result;
#   - heat2d with node 2 killed at checkpoint 8: cairn run picks srun by itself, kills the node, relaunches
#     with srun, the job restarts from L2 and prints the reference result bit for bit;
#   - the checkpoint service in one allocation: a cairnd controller whose --scale-up-command is an srun
#     that starts a manager as a job step; manager m0 (one agent) as a step; heat2d on 4 ranks asking for
#     two agents: the second finds every manager full, the command runs (exit status 0), manager m1 joins
#     as a step (squeue -s, its environment), the second agent runs there and writes ranks 2-3's versions,
#     the job history says the service drained every L3 version, and the result is the reference; the
#     managers' steps and the controller stop with status 0 on SIGTERM;
# and outside any allocation, `--launcher srun` is refused with a clear message. The cluster's daemons, the
# service's daemons and the allocation are stopped on every way out (and checked to be gone).
#
# Usage: slurm_test.sh PATH/TO/cairn PATH/TO/heat2d PATH/TO/cairnd
# Needs root (slurmd runs jobs as their users) and, the first time, apt-get. Exit status 77 (skipped)
# when not root. Takes about 30 s once the packages are installed.
set -u

USAGE="usage: slurm_test.sh PATH/TO/cairn PATH/TO/heat2d PATH/TO/cairnd"
CAIRN=${1:?$USAGE}
HEAT=${2:?$USAGE}
CAIRND=${3:?$USAGE}
CLUSTER_SH=$(cd "$(dirname "$0")/../../scripts" && pwd)/slurm-cluster.sh
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the Slurm test starts slurmd, which needs root"
  exit 77
fi

# Short, and searchable by all: munged's socket lives under it.
WORK=$(mktemp -d /tmp/cairn-slurm.XXXXXX)
chmod 755 "$WORK"
CLUSTER=$WORK/cluster
CTL_PID= APP_PID= JOB=
cleanup() {
  [ -n "$APP_PID" ] && kill -TERM "$APP_PID" 2>/dev/null
  [ -n "$CTL_PID" ] && kill -TERM "$CTL_PID" 2>/dev/null
  [ -n "$JOB" ] && scancel "$JOB" 2>/dev/null
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
# wait_child PID SECONDS: the exit status of this shell's child PID, waiting at most SECONDS; one still
# running then is killed (status 124).
wait_child() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1"
    wait "$1"
    return 124
  fi
  wait "$1"
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

# ---- the service: the scale-up command starts a manager as a job step ---------------------------------------
# One allocation (salloc --no-shell: the test runs its steps in it with SLURM_JOB_ID set, as a batch script
# would): a controller whose --scale-up-command is an srun that starts a second manager as a step and returns;
# manager m0 (one agent) as a step; heat2d on 4 ranks asking for two agents. The second agent finds m0 full,
# the controller runs the command, m1 joins and serves ranks 2-3.
use service
SVC=$WORK/service
mkdir -p "$SVC"
t1=$(date +%s)
salloc --no-shell -n 8 --time=10 -J cairn-service >"$SVC/salloc.out" 2>&1
JOB=$(sed -n 's/^salloc: Granted job allocation \([0-9][0-9]*\)$/\1/p' "$SVC/salloc.out")
if [ -n "$JOB" ]; then pass "allocation $JOB for the service"; else
  fail "salloc --no-shell granted no allocation"
  sed 's/^/    | /' "$SVC/salloc.out"
fi
SCALE_UP="(srun --overlap -N1 -n1 -J cairnd-m1 $CAIRND manager --controller \$CAIRN_CONTROLLER --name m1 --agents 1 \
--work-dir $SVC/m1 --log $SVC/m1.log --log-level info; echo \$? >$SVC/m1.exit) </dev/null >$SVC/m1.srun.out 2>&1 &"
SLURM_JOB_ID=$JOB "$CAIRND" controller --listen 127.0.0.1:0 --address-file "$SVC/controller.address" \
  --log "$SVC/controller.log" --log-level info --scale-up-command "$SCALE_UP" </dev/null >"$SVC/controller.out" 2>&1 &
CTL_PID=$!
for _ in $(seq 100); do [ -s "$SVC/controller.address" ] && break; sleep 0.1; done
ADDR=$(cat "$SVC/controller.address" 2>/dev/null)
[ -n "$ADDR" ] && pass "controller listening at $ADDR" || fail "the controller wrote no address (see controller.log)"
SLURM_JOB_ID=$JOB srun --overlap -N1 -n1 -J cairnd-m0 "$CAIRND" manager --controller "$ADDR" --name m0 --agents 1 \
  --work-dir "$SVC/m0" --log "$SVC/m0.log" --log-level info </dev/null >"$SVC/m0.srun.out" 2>&1 &
M0_SRUN=$!
# status_lines: the facts of `cairn status --json` (stdin) that the checks read, one per line; this job's
# application only.
status_lines() {
  python3 -c '
import json, sys
st = json.load(sys.stdin)
for m in st["managers"]:
    print("manager %s pid %d capacity %d" % (m["name"], m["pid"], m["capacity"]))
agents = {a["id"]: a for a in st["agents"]}
for app in st["applications"]:
    if app["prefix"] != sys.argv[1]:
        continue
    print("application agent_count %d" % app["agent_count"])
    for slot, aid in enumerate(app["agents"]):
        a = agents.get(aid, {})
        print("application slot %d agent %d on %s state %s transfers %s" % (slot, aid, a.get("manager"), a.get("state"),
                                                                           a.get("transfers")))
print("scale_up runs %d state %s" % (st["scale_up"]["runs"], st["scale_up"]["state"]))
' "$CAIRN_PREFIX"
}
service_status() { "$CAIRN" status --service "$ADDR" --json 2>/dev/null | status_lines 2>/dev/null; }
for _ in $(seq 100); do service_status | grep -q '^manager m0 ' && break; sleep 0.1; done
squeue -s -h -j "$JOB" -o '%i %j' >"$SVC/steps-m0.txt" 2>&1
expect_re "manager m0 runs as a step of the allocation" "$SVC/steps-m0.txt" "^$JOB\.[0-9]+ cairnd-m0$"
SLURM_JOB_ID=$JOB CAIRN_SERVICE=$ADDR CAIRN_SERVICE_AGENTS=2 CAIRN_LOG=info CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=4 \
  timeout 120 "$CAIRN" run -n 4 --nodes 2 -- "$HEAT" "${HEAT_ARGS[@]}" --sleep-ms 10 >"$SVC/heat2d.out" 2>&1 &
APP_PID=$!
# While the job runs: the last status that shows it, and the steps and m1's environment once m1 joined.
while kill -0 "$APP_PID" 2>/dev/null; do
  service_status >"$SVC/status.now"
  grep -q '^application ' "$SVC/status.now" && cp "$SVC/status.now" "$SVC/status.lines"
  if [ ! -s "$SVC/steps-m1.txt" ] && m1=$(sed -n 's/^manager m1 pid \([0-9]*\) .*/\1/p' "$SVC/status.now") && [ -n "$m1" ]; then
    squeue -s -h -j "$JOB" -o '%i %j' >"$SVC/steps-m1.txt" 2>&1
    tr '\0' '\n' <"/proc/$m1/environ" | grep -E '^SLURM_(JOB_ID|STEP_ID)=' >"$SVC/m1.environ"
    echo "$m1" >"$SVC/m1.pid"
  fi
  sleep 0.3
done
wait "$APP_PID"
rc=$?
APP_PID=
[ "$rc" -eq 0 ] && pass "heat2d with two agents asked for, under the allocation ($(($(date +%s) - t1)) s)" ||
  { fail "heat2d through the service: exit status $rc"; sed 's/^/    | /' "$SVC/heat2d.out" | tail -n 40; }
expect_re "the second agent found every manager full and the controller ran the scale-up command" "$SVC/controller.log" \
  'every checkpoint node is full \(.*\): running the scale-up command \(pid [0-9]+\): \(srun --overlap'
expect_re "... which returned with exit status 0" "$SVC/controller.log" 'scale-up command \(pid [0-9]+\) ended: exit status 0$'
expect_re "cairn status counts one run of it, ended with status 0" "$SVC/status.lines" '^scale_up runs 1 state last run exit status 0$'
expect_re "manager m1 joined" "$SVC/status.lines" '^manager m1 pid [0-9]+ capacity 1$'
expect_re "... as a step of the allocation (squeue -s)" "$SVC/steps-m1.txt" "^$JOB\.[0-9]+ cairnd-m1$"
m1_step=$(sed -n "s/^$JOB\.\([0-9]*\) cairnd-m1$/\1/p" "$SVC/steps-m1.txt")
expect_in "... its process is that step's task (its environment)" "$SVC/m1.environ" "SLURM_JOB_ID=$JOB"
expect_in "... of step ${m1_step:-?}" "$SVC/m1.environ" "SLURM_STEP_ID=${m1_step:-none}"
expect_re "the application's first agent runs on m0" "$SVC/status.lines" '^application slot 0 agent [0-9]+ on m0 state up '
expect_re "its second agent was placed on m1 and moved versions" "$SVC/status.lines" \
  '^application slot 1 agent [0-9]+ on m1 state up transfers [1-9][0-9]*$'
if grep -qsE 'rank [23] version [0-9]+: [0-9]+ bytes verified and written' "$SVC"/m1/agent-*.log; then
  pass "m1's agent wrote versions of ranks 2-3: $(grep -hoE 'rank [23] version [0-9]+' "$SVC"/m1/agent-*.log | tr '\n' ',')"
else
  fail "m1's agent log shows no version of ranks 2-3 written"
  tail -n 20 "$SVC"/m1/agent-*.log 2>/dev/null | sed 's/^/    | /'
fi
# The job history's via: every L3 copy of the job moved by the service, none by the embedded flusher.
via_service=$(grep '"ev":"l3"' "$CAIRN_PREFIX/.cairn/history" 2>/dev/null | grep -c '"via":"service"')
via_other=$(grep '"ev":"l3"' "$CAIRN_PREFIX/.cairn/history" 2>/dev/null | grep -vc '"via":"service"')
[ "$via_service" -ge 1 ] && [ "$via_other" -eq 0 ] && pass "the service drained every L3 version ($via_service, history's via)" ||
  fail "L3 versions via the service: $via_service, otherwise: $via_other (the job history)"
service_result=$(sed -n 's/^result \([0-9a-f]\{16\}\)$/\1/p' "$SVC/heat2d.out" | tail -n 1)
if [ -n "$reference" ] && [ "$service_result" = "$reference" ]; then
  pass "the result through the service equals the failure-free one ($service_result)"
else
  fail "the result through the service '$service_result' differs from the failure-free '$reference'"
fi
# Stop the managers' steps with SIGTERM (scancel signals the step's task; SIGTERM to srun would end the
# step with SIGKILL), then the controller; each must exit 0.
for name in cairnd-m0 cairnd-m1; do
  step=$(squeue -s -h -j "$JOB" -o '%i %j' | sed -n "s/^$JOB\.\([0-9]*\) $name\$/\1/p")
  [ -n "$step" ] && scancel --signal=TERM "$JOB.$step"
done
wait_child "$M0_SRUN" 20
rc=$?
[ "$rc" -eq 0 ] && pass "manager m0's step ended with status 0 on SIGTERM" || fail "manager m0's step: exit status $rc"
for _ in $(seq 100); do [ -s "$SVC/m1.exit" ] && break; sleep 0.1; done
[ "$(cat "$SVC/m1.exit" 2>/dev/null)" = 0 ] && pass "manager m1's step ended with status 0 on SIGTERM" ||
  { fail "manager m1's step: exit status '$(cat "$SVC/m1.exit" 2>/dev/null)'"; sed 's/^/    | /' "$SVC/m1.srun.out"; }
kill -TERM "$CTL_PID"
wait_child "$CTL_PID" 20
rc=$?
CTL_PID=
[ "$rc" -eq 0 ] && pass "the controller ended with status 0 on SIGTERM" || fail "the controller: exit status $rc"
scancel "$JOB"
for _ in $(seq 100); do [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] && break; sleep 0.1; done
[ -z "$(squeue -h -s -j "$JOB" 2>/dev/null)" ] && pass "no step of allocation $JOB left" ||
  fail "steps left: $(squeue -h -s -j "$JOB")"
left=""
for p in $(cat "$SVC/m1.pid" 2>/dev/null) $(sed -n 's/^manager m0 pid \([0-9]*\) .*/\1/p' "$SVC/status.lines"); do
  [ -d "/proc/$p" ] && left="$left $p"
done
[ -z "$left" ] && pass "no cairnd manager left" || fail "managers still running:$left"

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
