#!/usr/bin/env bash
# tool_cli: the `cairn` command without the library: strerror, config, run's option checking, simulated
# nodes under a real mpirun, and the failure-injection protocol played by a fake job (a shell script
# that writes the pid./reached. files as the library does).
#
# Usage: tool_cli_test.sh PATH/TO/cairn
# Environment: CAIRN_MPIRUN (default mpirun), CAIRN_MPIRUN_ARGS (e.g. --oversubscribe), and for
# Open MPI as root OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -u

CAIRN=${1:?usage: tool_cli_test.sh PATH/TO/cairn}
# The mpirun checks below use a fake or the real mpirun even if the suite runs inside a Slurm allocation
# (where auto would pick srun); the Slurm checks set --launcher themselves.
export CAIRN_LAUNCHER=${CAIRN_LAUNCHER:-mpirun}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-tool-cli.XXXXXX")
export WORK
trap 'rm -rf "$WORK"' EXIT
# Everything the config can point at stays inside the scratch directory.
export CAIRN_PREFIX=$WORK/prefix CAIRN_CACHE_DIR=$WORK/cache CAIRN_JOB=tooltest
unset CAIRN_CONFIG CAIRN_LOG

. "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # failures, pass, fail, expect_rc, expect_in

# ---- strerror -----------------------------------------------------------------------------------
expect_rc "strerror -5" 0 "$CAIRN" strerror -5
expect_in "strerror -5 text" "$WORK/out" "CAIRN_ERR_IO (-5): I/O error"
expect_rc "strerror ERR_IO" 0 "$CAIRN" strerror ERR_IO
expect_in "strerror ERR_IO text" "$WORK/out" "CAIRN_ERR_IO (-5): I/O error"
expect_rc "strerror CAIRN_ERR_CORRUPT" 0 "$CAIRN" strerror CAIRN_ERR_CORRUPT
expect_in "strerror by full name" "$WORK/out" "CAIRN_ERR_CORRUPT (-9)"
expect_rc "strerror unknown code" 2 "$CAIRN" strerror NO_SUCH_ERROR
expect_rc "strerror --list" 0 "$CAIRN" strerror --list
expect_in "strerror --list has SUCCESS" "$WORK/out" "CAIRN_SUCCESS (0): success"
expect_in "strerror --list has ERR_INTERNAL" "$WORK/out" "CAIRN_ERR_INTERNAL (-99)"
expect_rc "strerror --markdown" 0 "$CAIRN" strerror --markdown
expect_in "strerror --markdown row" "$WORK/out" '| -5 | `CAIRN_ERR_IO` | I/O error |'
expect_rc "--version" 0 "$CAIRN" --version
expect_in "--version text" "$WORK/out" "cairn "

# ---- config -------------------------------------------------------------------------------------
expect_rc "config --list" 0 "$CAIRN" config --list
expect_in "config --list shows cache_versions" "$WORK/out" "cache_versions"
expect_rc "config --markdown" 0 "$CAIRN" config --markdown
expect_rc "config --sample" 0 "$CAIRN" config --sample
expect_rc "bad knob in the environment" 2 env CAIRN_CACHE_VERSIONS=0 "$CAIRN" config --list
expect_in "the message names the variable" "$WORK/err" "CAIRN_CACHE_VERSIONS"
printf 'cache_versions = 3\n' >"$WORK/good.toml"
expect_rc "config --list --config FILE" 0 "$CAIRN" config --list --config "$WORK/good.toml"
expect_in "the file's value is shown" "$WORK/out" "3"
# SCR's parameters are reported under their own names, and a value cairn does not accept is said, not
# dropped (it is ignored, as SCR_Init ignores it).
expect_rc "SCR_PREFIX: config --list" 0 env -u CAIRN_PREFIX SCR_PREFIX="$WORK/scr-prefix" "$CAIRN" config --list
expect_in "SCR_PREFIX: its value" "$WORK/out" "= \"$WORK/scr-prefix\""
expect_in "SCR_PREFIX: reported under its name" "$WORK/out" "SCR parameter SCR_PREFIX (as CAIRN_PREFIX)"
expect_rc "SCR_COPY_TYPE=BOGUS: config --list" 0 env SCR_COPY_TYPE=BOGUS "$CAIRN" config --list
expect_in "SCR_COPY_TYPE=BOGUS: a warning names it" "$WORK/err" "cairn config: warning: SCR: SCR_COPY_TYPE=BOGUS"
expect_in "SCR_COPY_TYPE=BOGUS: and says it is ignored" "$WORK/err" "ignored"
expect_rc "SCR_SET_SIZE=1: refused" 2 env SCR_SET_SIZE=1 "$CAIRN" config --list
expect_in "SCR_SET_SIZE=1: the error names the SCR parameter" "$WORK/err" "SCR parameter SCR_SET_SIZE (as CAIRN_SET_SIZE)"

# ---- interval --levels --write: the plan as cairn's knobs, in a config file the job loads ----------
expect_rc "interval --levels (2) --write" 0 "$CAIRN" interval --levels "3s:8h,2m:1w" --write "$WORK/plan2.toml"
expect_in "interval: prints the knobs it writes" "$WORK/out" "flush_every = 29"
expect_rc "interval: the written file is a valid config" 0 "$CAIRN" config --list --config "$WORK/plan2.toml"
expect_in "interval: flush_every from the plan" "$WORK/out" "flush_every"
grep -q '^flush_every *= 29 ' "$WORK/out" && pass "interval: flush_every = 29 loaded" || { fail "interval: flush_every not 29"; cat "$WORK/out"; }
grep -q '^l2_every *= 1 ' "$WORK/out" && pass "interval: l2_every = 1 for two levels" || fail "interval: l2_every not 1"
grep -q '^interval_seconds *= 407.9 ' "$WORK/out" && pass "interval: interval_seconds from the plan" || fail "interval: interval_seconds"
expect_rc "interval: --write never overwrites" 1 "$CAIRN" interval --levels "3s:8h,2m:1w" --write "$WORK/plan2.toml"
expect_in "interval: and says so" "$WORK/err" "the file exists"
expect_rc "interval --levels (3) --write" 0 "$CAIRN" interval --levels "2s:6h,20s:2d,5m:1w" --write "$WORK/plan3.toml" --json
python3 -c "
import json, sys, tomllib
j = json.load(open(sys.argv[1])); t = tomllib.load(open(sys.argv[2], 'rb'))
lv = j['multilevel']['levels']
assert t['l2_every'] == lv[1]['every'] == j['config']['l2_every'] > 1, (t, lv)
assert t['flush_every'] == lv[1]['every'] * lv[2]['every'] == j['config']['flush_every'], (t, lv)
" "$WORK/out" "$WORK/plan3.toml" 2>"$WORK/pyerr" && pass "interval: 3 levels give l2_every and flush_every" \
  || { fail "interval: 3 levels"; cat "$WORK/pyerr" "$WORK/plan3.toml"; }
expect_rc "interval: --write without --levels" 2 "$CAIRN" interval --mtbf 1d --checkpoint-cost 10s --write "$WORK/x.toml"
expect_rc "interval: --write with 4 levels" 2 "$CAIRN" interval --levels "1s:1h,2s:2h,3s:3h,4s:4h" --write "$WORK/x.toml"

# ---- sizes and durations: one syntax for the knobs and every option (base/units.hpp) ------------
expect_rc "CAIRN_HALT_SECONDS=5m" 0 env CAIRN_HALT_SECONDS=5m "$CAIRN" config --list
grep -q '^halt_seconds *= 300.0 ' "$WORK/out" && pass "CAIRN_HALT_SECONDS=5m is 300 s" || fail "CAIRN_HALT_SECONDS=5m"
expect_rc "CAIRN_CHUNK_SIZE=64KiB" 0 env CAIRN_CHUNK_SIZE=64KiB "$CAIRN" config --list
expect_rc "CAIRN_HALT_SECONDS=5 parsecs is refused" 2 env CAIRN_HALT_SECONDS="5 parsecs" "$CAIRN" config --list
expect_in "and says what a duration is" "$WORK/err" "not a duration"
expect_rc "watch --stall 10m --interval 250ms is accepted" 3 "$CAIRN" watch --once --stall 10m --interval 250ms
expect_rc "watch --stall 10 parsecs is refused" 2 "$CAIRN" watch --once --stall "10 parsecs"
expect_rc "migrate --buffer-size 2G is refused (at most 1G)" 2 "$CAIRN" migrate --node node0 --buffer-size 2G

# ---- help texts and bad options: no CLI11 internals, exit status 2 everywhere (cairn, cairnd, bench) --
for cmd in "run" "migrate" "watch" "clean" "index" "interval" "config"; do
  # shellcheck disable=SC2086
  "$CAIRN" $cmd --help >"$WORK/out" 2>&1
  if grep -Eq '\{false\}|\{true\}|:UINT|:INT|:SIZE|:POSITIVE|:NONNEGATIVE| in \[|kb\(=1024b\)' "$WORK/out"; then
    fail "cairn $cmd --help shows CLI11's internals"; grep -E '\{false\}|:UINT|:INT|:SIZE| in \[' "$WORK/out" | sed 's/^/    | /'
  else pass "cairn $cmd --help is clean"; fi
done
"$CAIRN" run --help >"$WORK/out" 2>&1
expect_in "run --help: a negated flag by its two names" "$WORK/out" "--scavenge, --no-scavenge"
"$CAIRN" migrate --help >"$WORK/out" 2>&1
expect_in "migrate --help: a size option says SIZE" "$WORK/out" "--buffer-size SIZE"
CAIRND=${TEST_BUILD_DIR:-}/tools/cairnd
if [ -x "$CAIRND" ]; then
  expect_rc "cairnd --bogus exits 2" 2 "$CAIRND" --bogus
  expect_rc "cairnd controller without --listen exits 2" 2 "$CAIRND" controller
  expect_rc "cairnd manager --agents x exits 2" 2 "$CAIRND" manager --controller 127.0.0.1:1 --agents x
  expect_in "cairnd: one line naming itself" "$WORK/err" "cairnd: "
  expect_rc "cairnd agent --stall-timeout 2m --help" 0 "$CAIRND" agent --stall-timeout 2m --help
  for sub in controller manager agent migrate-source migrate-sink; do
    "$CAIRND" $sub --help >"$WORK/out" 2>&1
    if grep -Eq '\{false\}|:UINT|:INT|:SIZE|:POSITIVE| in \[|kb\(=1024b\)' "$WORK/out"; then
      fail "cairnd $sub --help shows CLI11's internals"; grep -E '\{false\}|:UINT|:INT|:SIZE|:POSITIVE| in \[' "$WORK/out" | sed 's/^/    | /'
    else pass "cairnd $sub --help is clean"; fi
  done
fi
BENCH=${TEST_BUILD_DIR:-}/bench/cairn-bench
if [ -x "$BENCH" ]; then
  expect_rc "cairn-bench --bogus exits 2" 2 "$BENCH" --bogus
  expect_rc "cairn-bench --ranks x exits 2" 2 "$BENCH" --ranks x
  expect_rc "cairn-bench --size 1Q exits 2" 2 "$BENCH" --size 1Q --ranks 1 --only l1
  expect_rc "cairn-bench --placement without --service exits 2" 2 "$BENCH" --placement
  expect_rc "cairn-bench --help" 0 "$BENCH" --help
  for word in --redistribute --snapshot --scr --file-api --interpose --service --placement --migrate --nodes \
              --versions --agent-bandwidth --buffers --buffer-size --only --to --cairnd --provider "default 256M" \
              --device --cuda-driver --campaign --spares --mtbf --factors --schedule; do
    expect_in "cairn-bench --help lists $word" "$WORK/out" "$word"
  done
  # --campaign and --device are modes of the one command line: their options, help and refusals are its own
  expect_rc "cairn-bench --campaign --help" 0 "$BENCH" --campaign --help
  for word in --spares --step-ms --work --mtbf --mix --seed --factors --no-l3-only --flush-every --app --plot \
              --keep --schedule --from --reanalyse --nodes --cairn "default: 40" "--campaign 16M"; do
    expect_in "cairn-bench --campaign --help lists $word" "$WORK/out" "$word"
  done
  if grep -qF -- "--cuda-driver" "$WORK/out"; then fail "cairn-bench --campaign --help shows --device's options"
  else pass "cairn-bench --campaign --help shows its own options only"; fi
  expect_rc "cairn-bench --device --help" 0 "$BENCH" --device --help
  expect_in "cairn-bench --device --help lists --cuda-driver" "$WORK/out" "--cuda-driver"
  expect_rc "cairn-bench --campaign --bogus exits 2" 2 "$BENCH" --campaign --bogus
  expect_in "cairn-bench --campaign --bogus: one line" "$WORK/err" "cairn-bench: The following argument was not expected: --bogus"
  expect_rc "cairn-bench --campaign --ranks 1 exits 2" 2 "$BENCH" --campaign --ranks 1
  expect_rc "cairn-bench --campaign --mtbf 0 exits 2" 2 "$BENCH" --campaign --mtbf 0
  expect_rc "cairn-bench --campaign --factors x exits 2" 2 "$BENCH" --campaign --factors x
  expect_rc "cairn-bench --campaign --schedule --json" 0 "$BENCH" --campaign --schedule --json --seed 3
  expect_in "cairn-bench --campaign --schedule --json: the schedule" "$WORK/out" '"schedule"'
  expect_rc "cairn-bench --device --spares 2 exits 2" 2 "$BENCH" --device --spares 2
  expect_in "cairn-bench --device --spares: says whose option" "$WORK/err" "--spares goes with --campaign"
  expect_rc "cairn-bench --device --size 1Q exits 2" 2 "$BENCH" --device --size 1Q
  expect_rc "cairn-bench --device --reps 500 exits 2" 2 "$BENCH" --device --reps 500
  expect_rc "cairn-bench --campaign --device exits 2" 2 "$BENCH" --campaign --device
fi

# ---- run: bad arguments are one line and exit status 2 -------------------------------------------
expect_rc "run without -n" 2 "$CAIRN" run -- true
expect_rc "run without --" 2 "$CAIRN" run -n 2 true
expect_in "run without -- says so" "$WORK/err" "missing '--'"
expect_rc "run with nothing after --" 2 "$CAIRN" run -n 2 --
expect_rc "run --nodes > -n" 2 "$CAIRN" run -n 2 --nodes 3 -- true
expect_rc "run --nodes 0" 2 "$CAIRN" run -n 2 --nodes 0 -- true
expect_rc "run --kill-node without --at-checkpoint" 2 "$CAIRN" run -n 4 --nodes 2 --kill-node 1 -- true
expect_rc "run --kill-node out of range" 2 "$CAIRN" run -n 4 --nodes 2 --kill-node 2 --at-checkpoint 1 -- true
expect_rc "run --phase unknown" 2 "$CAIRN" run -n 4 --nodes 2 --kill-node 1 --at-checkpoint 1 --phase lunch -- true
expect_rc "run --fail-at node out of range" 2 "$CAIRN" run -n 4 --nodes 2 --fail-at 1:node:2 -- true
expect_rc "run --fail-at times going back" 2 "$CAIRN" run -n 4 --nodes 2 --fail-at 5:job,1:rank:0 -- true
expect_rc "run --fail-at unknown kind" 2 "$CAIRN" run -n 4 --nodes 2 --fail-at 1:disk:0 -- true
expect_rc "run --fail-at with --kill-node" 2 "$CAIRN" run -n 4 --nodes 2 --fail-at 1:job --kill-node 1 --at-checkpoint 1 -- true
expect_rc "run --fail-at with --no-spare" 2 "$CAIRN" run -n 4 --nodes 2 --fail-at 1:job --no-spare -- true
expect_rc "run command not found" 2 "$CAIRN" run -n 2 -- "$WORK/no-such-command"
expect_in "command not found names it" "$WORK/err" "no-such-command"
expect_rc "run MPI launcher not found" 2 env CAIRN_MPIRUN="$WORK/no-mpirun" "$CAIRN" run -n 2 -- true
expect_rc "run with a bad knob" 2 env CAIRN_CACHE_VERSIONS=0 "$CAIRN" run -n 2 -- true
expect_rc "unknown subcommand" 2 "$CAIRN" frobnicate

# ---- run: the mpirun command line (a fake launcher that prints its arguments) ---------------------
cat >"$WORK/fake-mpirun" <<'EOF'
#!/bin/sh
for a in "$@"; do printf '[%s]' "$a"; done
echo
EOF
chmod +x "$WORK/fake-mpirun"
expect_rc "run builds one app context per node" 0 env CAIRN_MPIRUN="$WORK/fake-mpirun" \
  CAIRN_MPIRUN_ARGS="--oversubscribe  --bind-to none" "$CAIRN" run -n 5 --nodes 2 --config "$WORK/good.toml" \
  -- echo "a b"
expect_in "app contexts: 3 + 2 ranks, CAIRN_CONFIG exported" "$WORK/out" \
  "[--oversubscribe][--bind-to][none][-np][3][env][CAIRN_NODE=node0][CAIRN_CONFIG=$WORK/good.toml][echo][a b][:][-np][2][env][CAIRN_NODE=node1][CAIRN_CONFIG=$WORK/good.toml][echo][a b]"

# ---- run: simulated nodes under the real MPI launcher -----------------------------------------------
expect_rc "run -n 4 --nodes 2 under mpirun" 0 "$CAIRN" run -n 4 --nodes 2 -- sh -c 'echo "$CAIRN_NODE"'
if [ "$(sort "$WORK/out" | tr '\n' ' ')" = "node0 node0 node1 node1 " ]; then
  pass "each node gets two ranks"
else
  fail "each node gets two ranks: got '$(tr '\n' ' ' <"$WORK/out")'"
  sed 's/^/    err: /' "$WORK/err"
fi
expect_rc "the job's exit status is passed through" 7 "$CAIRN" run -n 2 -- sh -c 'exit 7'

# ---- run: failure injection with a fake job ---------------------------------------------------------
# The fake job plays the library's side of the protocol: ranks given CAIRN_INJECT write pid.<rank>,
# then reached.<rank>, then wait to be killed (exec keeps the pid). The other ranks keep computing
# until the MPI launcher ends the job. The relaunched job (after the hook created $WORK/relaunched)
# writes a state file saying it restarted from version 4 at L2.
cat >"$WORK/fake-job" <<'EOF'
#!/bin/sh
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
state=$CAIRN_PREFIX/.cairn/state
if [ -n "${CAIRN_INJECT:-}" ]; then
  echo "$CAIRN_INJECT $CAIRN_NODE" >"$WORK/inject.$rank"
  echo $$ >"$WORK/victim.$rank"
  echo $$ >"$CAIRN_INJECT_DIR/pid.$rank.tmp" && mv "$CAIRN_INJECT_DIR/pid.$rank.tmp" "$CAIRN_INJECT_DIR/pid.$rank"
  [ "${FAKE_NEVER_REACH:-}" = 1 ] && exit 0
  sleep 0.5
  : >"$CAIRN_INJECT_DIR/reached.$rank"
  exec sleep 120
fi
[ "${FAKE_NEVER_REACH:-}" = 1 ] && exit 0
if [ ! -e "$WORK/relaunched" ]; then
  if [ "$rank" = 0 ]; then
    mkdir -p "$(dirname "$state")"
    printf 'version=5\nphase=checkpoint\nl1=4\nl2=4\nl3=0\nrestart_version=0\nrestart_level=none\n' >"$state.tmp"
    mv "$state.tmp" "$state"
  fi
  exec sleep 120
fi
if [ "$rank" = 0 ]; then
  printf 'version=9\nphase=compute\nl1=9\nl2=9\nl3=0\nrestart_version=4\nrestart_level=L2\nnranks=4\nnew_key=1\n' >"$state.tmp"
  mv "$state.tmp" "$state"
fi
echo "rank $rank on $CAIRN_NODE relaunched"
EOF
chmod +x "$WORK/fake-job"
CACHE_JOB=$WORK/cache/cairn-tooltest
mkdir -p "$CACHE_JOB/node0/r0" "$CACHE_JOB/node1/r2"
start=$(date +%s)
expect_rc "injection: kill node1, relaunch, exit 0" 0 "$CAIRN" run -n 4 --nodes 2 --kill-node 1 --at-checkpoint 5 \
  --phase checkpoint \
  --between-attempts 'echo "$CAIRN_ATTEMPT|$CAIRN_PREFIX|$CAIRN_CACHE_JOB|$CAIRN_KILLED_NODES" >"$WORK/hook"; : >"$WORK/relaunched"' \
  -- "$WORK/fake-job"
elapsed=$(($(date +%s) - start))
cp "$WORK/err" "$WORK/inject.err"
expect_in "the kill is reported" "$WORK/inject.err" "cairn run: killed node1 (ranks 2,3) at checkpoint 5, phase checkpoint"
if [ -e "$WORK/inject.2" ] && [ -e "$WORK/inject.3" ] && [ ! -e "$WORK/inject.0" ] && [ ! -e "$WORK/inject.1" ]; then
  pass "only node1's ranks got CAIRN_INJECT"
else
  fail "only node1's ranks got CAIRN_INJECT: $(ls "$WORK" | grep '^inject\.[0-9]' | tr '\n' ' ')"
fi
expect_in "CAIRN_INJECT is <phase>:<checkpoint>" "$WORK/inject.2" "checkpoint:5 node1"
# A killed rank is gone, or at most a zombie waiting for its reaper.
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$s" ] && [ "${s#Z}" = "$s" ]; }
for r in 2 3; do
  if [ ! -e "$WORK/victim.$r" ]; then
    fail "rank $r was killed: it never started"
  elif alive "$(cat "$WORK/victim.$r")"; then
    fail "rank $r was killed: pid $(cat "$WORK/victim.$r") is still running: $(ps -o stat=,cmd= -p "$(cat "$WORK/victim.$r")")"
  else
    pass "rank $r was killed"
  fi
done
[ "$elapsed" -lt 60 ] && pass "the job ended promptly after the kill (${elapsed}s)" || fail "the job took ${elapsed}s"
[ ! -e "$CACHE_JOB/node1" ] && pass "node1's cache was deleted" || fail "node1's cache was deleted"
[ -e "$CACHE_JOB/node0/r0" ] && pass "node0's cache was kept" || fail "node0's cache was kept"
[ ! -e "$WORK/prefix/.cairn/inject" ] && pass "the rendezvous directory was removed" || fail "rendezvous left behind"
expect_in "--between-attempts ran with its variables" "$WORK/hook" "1|$WORK/prefix|$CACHE_JOB|node1"
expect_in "the job was relaunched" "$WORK/out" "rank 3 on node1 relaunched"
expect_in "the summary counts the attempts" "$WORK/inject.err" "cairn run: summary (mpirun): 2 attempts, 1 failed"
expect_in "the summary names the kill" "$WORK/inject.err" "killed node1 (ranks 2,3) at checkpoint 5"
expect_in "the summary gives attempt 1's state" "$WORK/inject.err" "attempt 1: started without a restart"
expect_in "the summary gives the restart" "$WORK/inject.err" "attempt 2: restarted from version 4 at L2"

# --no-relaunch: the node is killed, nothing is started again; the status is the killed attempt's.
rm -f "$WORK/relaunched" "$WORK/hook" "$WORK"/inject.* "$WORK"/victim.*
mkdir -p "$CACHE_JOB/node0/r0" "$CACHE_JOB/node1/r2"
"$CAIRN" run -n 4 --nodes 2 --kill-node 0 --at-checkpoint 5 --no-relaunch \
  --between-attempts ': >"$WORK/hook"' -- "$WORK/fake-job" >"$WORK/out" 2>"$WORK/err"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 2 ] && [ "$rc" -ne 3 ] && pass "--no-relaunch: the killed attempt's status ($rc)" ||
  fail "--no-relaunch: exit status $rc"
expect_in "--no-relaunch: node0 killed" "$WORK/err" "killed node0 (ranks 0,1)"
expect_in "--no-relaunch: one attempt" "$WORK/err" "summary (mpirun): 1 attempt, 1 failed"
[ ! -e "$WORK/hook" ] && pass "--no-relaunch: no hook" || fail "--no-relaunch: the hook ran"
[ ! -e "$CACHE_JOB/node0" ] && [ -e "$CACHE_JOB/node1" ] && pass "--no-relaunch: node0's cache deleted" ||
  fail "--no-relaunch: caches"

# The point is never reached: no kill, a clear message, exit status 3.
expect_rc "injection point never reached: exit 3" 3 env FAKE_NEVER_REACH=1 "$CAIRN" run -n 4 --nodes 2 \
  --kill-node 1 --at-checkpoint 5 --phase flush -- "$WORK/fake-job"
expect_in "never reached is said clearly" "$WORK/err" "checkpoint 5 phase flush was never reached"
expect_in "and no node was killed" "$WORK/err" "no node was killed"

# ---- run: Slurm (the real cluster is tests/integration/slurm_test.sh) ------------------------------------
# Outside an allocation srun is refused; inside one (SLURM_JOB_ID) auto picks srun, here a fake that
# prints its arguments and the --multi-prog file it was given.
expect_rc "run --launcher srun outside an allocation" 2 env -u SLURM_JOB_ID "$CAIRN" run -n 2 --launcher srun -- true
expect_in "srun outside an allocation says what to do" "$WORK/err" \
  "cairn run: --launcher srun: not inside a Slurm allocation (SLURM_JOB_ID is not set); run \`cairn run\` under salloc"
expect_rc "run --launcher bogus" 2 "$CAIRN" run -n 2 --launcher bogus -- true
expect_rc "CAIRN_LAUNCHER=bogus" 2 env CAIRN_LAUNCHER=bogus "$CAIRN" run -n 2 -- true
expect_in "CAIRN_LAUNCHER=bogus is named" "$WORK/err" "CAIRN_LAUNCHER=bogus: unknown launcher; use auto, mpirun or srun"
expect_rc "run --launcher srun without srun" 2 env SLURM_JOB_ID=4242 CAIRN_SRUN="$WORK/no-srun" \
  "$CAIRN" run -n 2 --launcher srun -- true
expect_in "srun not found is said clearly" "$WORK/err" "srun not found (CAIRN_SRUN=$WORK/no-srun is not an executable)"
cat >"$WORK/fake-srun" <<'EOF2'
#!/bin/sh
for a in "$@"; do printf '[%s]' "$a"; done
echo
while [ $# -gt 1 ] && [ "$1" != --multi-prog ]; do shift; done
grep -v '^#' "$2"
EOF2
chmod +x "$WORK/fake-srun"
expect_rc "auto picks srun inside an allocation" 0 env -u CAIRN_LAUNCHER SLURM_JOB_ID=4242 CAIRN_SRUN="$WORK/fake-srun" CAIRN_LOG=info \
  "$CAIRN" run -n 5 --nodes 2 --config "$WORK/good.toml" -- echo "a b" "it's"
expect_in "the srun command line" "$WORK/out" \
  "[--mpi=pmix][--kill-on-bad-exit=1][--quit-on-interrupt][-n][5][--multi-prog][$WORK/prefix/.cairn/srun-multi-prog.conf]"
expect_in "a --multi-prog line per node: node0" "$WORK/out" "0-2 env CAIRN_NODE=node0 CAIRN_CONFIG=$WORK/good.toml echo 'a b' 'it'\\''s'"
expect_in "a --multi-prog line per node: node1" "$WORK/out" "3-4 env CAIRN_NODE=node1 CAIRN_CONFIG=$WORK/good.toml echo 'a b' 'it'\\''s'"
expect_in "the launcher is said at info level" "$WORK/err" "cairn run: launcher: srun (auto: inside Slurm allocation 4242)"
expect_in "the attempt line names srun" "$WORK/err" "cairn run: attempt 1 (srun): $WORK/fake-srun --mpi=pmix"
expect_rc "--launcher mpirun inside an allocation" 0 env SLURM_JOB_ID=4242 CAIRN_SRUN="$WORK/fake-srun" \
  CAIRN_MPIRUN="$WORK/fake-mpirun" CAIRN_MPIRUN_ARGS= "$CAIRN" run -n 2 --launcher mpirun -- true
expect_in "... runs mpirun" "$WORK/out" "[-np][2][env][CAIRN_NODE=node0][true]"

# In a multi-host allocation where Slurm refuses every new step ("already completing or completed": a step
# of the failed attempt left completing on a lost host), the run stops with what to do, not relaunching
# into the refusals until its retries are spent. Fakes: srun refuses all but the first step; sinfo and
# squeue (found beside srun) say the hosts are idle and the allocation runs.
mkdir -p "$WORK/refusing"
cat >"$WORK/refusing/srun" <<'EOF2'
#!/bin/sh
n=$(cat "$(dirname "$0")/steps" 2>/dev/null || echo 0); echo $((n + 1)) >"$(dirname "$0")/steps"
if [ "$n" -eq 0 ]; then echo "fake job step: a host was lost"; exit 1; fi
echo "srun: error: Unable to create step for job 4243: Job/step already completing or completed" >&2
exit 1
EOF2
cat >"$WORK/refusing/sinfo" <<'EOF2'
#!/bin/sh
printf 'h1 idle\nh2 idle\nh3 idle\n'
EOF2
cat >"$WORK/refusing/squeue" <<'EOF2'
#!/bin/sh
case " $* " in *" -s "*) ;; *) echo RUNNING ;; esac
EOF2
chmod +x "$WORK/refusing/srun" "$WORK/refusing/sinfo" "$WORK/refusing/squeue"
expect_rc "steps refused in the allocation: the run stops" 1 env SLURM_JOB_ID=4243 SLURM_JOB_NODELIST='h[1-3]' \
  CAIRN_SRUN="$WORK/refusing/srun" CAIRN_SLURM_COMMAND_TIMEOUT=2 "$CAIRN" run -n 2 --retries 3 --launcher srun -- true
expect_in "... and says why and what to do" "$WORK/err" \
  "cairn run: Slurm refuses every new step of the allocation (job 4243) for 2 s (probe step: exit status 1, srun: error: Unable to create step for job 4243: Job/step already completing or completed)"
expect_in "... keeping the checkpoints" "$WORK/err" "run the job again in a new allocation"
if grep -q "relaunching the job" "$WORK/err"; then fail "... without a relaunch"; else pass "... without a relaunch"; fi

# The probes pass but the relaunch's own step is refused the same way (a failed attempt's step left
# completing): the launch is asked again for CAIRN_SLURM_COMMAND_TIMEOUT seconds, then the run stops with
# the same message, naming the job's step. Fakes: probe steps (cairn-probe) run; of the job's steps the
# first fails, the next ones are refused, and with `ok_after` the one after that many refusals runs.
mkdir -p "$WORK/relaunch-refused"
cat >"$WORK/relaunch-refused/srun" <<'EOF2'
#!/bin/sh
case " $* " in *" cairn-probe "*) exit 0 ;; esac
d=$(dirname "$0")
n=$(cat "$d/steps" 2>/dev/null || echo 0); echo $((n + 1)) >"$d/steps"
if [ "$n" -eq 0 ]; then echo "fake job step: the application failed"; exit 1; fi
if [ -f "$d/ok_after" ] && [ "$n" -gt "$(cat "$d/ok_after")" ]; then echo "fake job step: done"; exit 0; fi
echo "srun: error: Unable to create step for job 4244: Job/step already completing or completed" >&2
exit 1
EOF2
cp "$WORK/refusing/sinfo" "$WORK/refusing/squeue" "$WORK/relaunch-refused/"
chmod +x "$WORK/relaunch-refused/srun"
expect_rc "the relaunch's step refused: the run stops" 1 env SLURM_JOB_ID=4244 SLURM_JOB_NODELIST='h[1-3]' \
  CAIRN_SRUN="$WORK/relaunch-refused/srun" CAIRN_SLURM_COMMAND_TIMEOUT=2 "$CAIRN" run -n 2 --retries 3 --launcher srun -- true
expect_in "... asking again meanwhile" "$WORK/err" \
  "cairn run: Slurm refused the job's step (the job's step: srun: error: Unable to create step for job 4244: Job/step already completing or completed); asking again"
expect_in "... and says why and what to do" "$WORK/err" \
  "cairn run: Slurm refuses every new step of the allocation (job 4244) for 2 s (the job's step: srun: error: Unable to create step for job 4244: Job/step already completing or completed)"
if grep -q "no retry is left" "$WORK/err"; then fail "... not spending the retries"; else pass "... not spending the retries"; fi
rm -f "$WORK/relaunch-refused/steps"
echo 2 >"$WORK/relaunch-refused/ok_after"
expect_rc "the relaunch's step refused twice, then run" 0 env SLURM_JOB_ID=4244 SLURM_JOB_NODELIST='h[1-3]' \
  CAIRN_SRUN="$WORK/relaunch-refused/srun" CAIRN_SLURM_COMMAND_TIMEOUT=10 "$CAIRN" run -n 2 --retries 1 --launcher srun -- true
expect_in "... the job's output passed through" "$WORK/out" "fake job step: done"
if [ "$(grep -c "asking again" "$WORK/err")" -eq 2 ]; then pass "... asked again twice"; else fail "... asked again twice"; fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
