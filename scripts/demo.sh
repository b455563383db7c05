#!/usr/bin/env bash
# cairn demo (`make demo`): heat2d on 8 ranks over 4 simulated nodes with XOR redundancy, once
# failure-free and once with node 2 killed (SIGKILL, cache deleted) when the job reaches its 5th
# checkpoint. Prints both `result` lines, the level the restart came from, and IDENTICAL or
# DIFFERENT. Exit status: 0 when both runs succeeded, the second restarted, and the results match.
#
# Usage: scripts/demo.sh BUILD_DIR
# Tunables (environment): DEMO_NP (8), DEMO_NODES (4), DEMO_N (512), DEMO_ITERS (600),
# DEMO_EVERY (50), DEMO_SLEEP_MS (5: per-iteration sleep in the failure run, so the launcher sees
# checkpoint 5 in the compute phase), DEMO_TIMEOUT (300 seconds per run).
set -uo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
cairn="$build/tools/cairn"
heat2d="$build/examples/heat2d/heat2d"
for exe in "$cairn" "$heat2d"; do
  if [ ! -x "$exe" ]; then
    echo "demo: $exe is missing; build first (make build)" >&2
    exit 2
  fi
done

np=${DEMO_NP:-8}
nodes=${DEMO_NODES:-4}
grid=${DEMO_N:-512}
iters=${DEMO_ITERS:-600}
every=${DEMO_EVERY:-50}
sleep_ms=${DEMO_SLEEP_MS:-5}
run_timeout=${DEMO_TIMEOUT:-300}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export CAIRN_MPIRUN_ARGS="${CAIRN_MPIRUN_ARGS:---oversubscribe}"
export CAIRN_REDUNDANCY=xor

work=$(mktemp -d "${TMPDIR:-/tmp}/cairn-demo.XXXXXX")
cache_base=${CAIRN_CACHE_DIR:-/dev/shm}
job_base="demo-$$-$(basename "$work" | sed 's/^cairn-demo\.//')"
jobs=("$job_base-clean" "$job_base-kill")
cleanup() {
  rm -rf "$work"
  for job in "${jobs[@]}"; do rm -rf "${cache_base:?}/cairn-$job"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run NAME JOB [cairn run options...]: heat2d under `cairn run`, output in $work/NAME.log
run() {
  local name=$1 job=$2
  shift 2
  local extra=()
  [ "$name" = kill ] && extra=(--sleep-ms "$sleep_ms")
  echo "== $name: cairn run -n $np --nodes $nodes${*:+ $*} -- heat2d --n $grid --iters $iters" \
       "--checkpoint-every $every${extra[*]:+ ${extra[*]}}"
  CAIRN_PREFIX="$work/$name-prefix" CAIRN_JOB="$job" \
    timeout "$run_timeout" "$cairn" run -n "$np" --nodes "$nodes" "$@" -- \
    "$heat2d" --n "$grid" --iters "$iters" --checkpoint-every "$every" "${extra[@]}" \
    >"$work/$name.log" 2>&1
  local rc=$?
  sed 's/^/   | /' "$work/$name.log"
  if [ $rc -ne 0 ]; then
    echo "demo: the $name run failed (exit status $rc)" >&2
  fi
  return $rc
}

last_result() { grep -E '^result [0-9a-f]{16}$' "$1" | tail -n 1 | cut -d' ' -f2; }

failed=0
run clean "${jobs[0]}" || failed=1
run kill "${jobs[1]}" --kill-node 2 --at-checkpoint 5 --phase compute || failed=1

clean_result=$(last_result "$work/clean.log")
kill_result=$(last_result "$work/kill.log")
restart_line=$(grep -E '^restart: version [0-9]+ from level ' "$work/kill.log" | tail -n 1)

echo
echo "failure-free run:           result ${clean_result:-(none)}"
echo "run with node 2 killed:     result ${kill_result:-(none)}"
if [ -n "$restart_line" ]; then
  echo "restart came from level:    ${restart_line##* } (${restart_line#restart: })"
else
  echo "restart came from level:    (none: heat2d printed no 'restart:' line, so it started over)"
  failed=1
fi
if [ -n "$clean_result" ] && [ "$clean_result" = "$kill_result" ]; then
  echo "IDENTICAL"
else
  echo "DIFFERENT"
  failed=1
fi
exit $failed
