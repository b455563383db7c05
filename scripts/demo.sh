#!/usr/bin/env bash
# cairn demo (`make demo`): heat2d on 8 ranks over 4 simulated nodes with XOR redundancy, once
# failure-free and once with node 2 killed (SIGKILL, cache deleted) when the job reaches its 5th
# checkpoint. Then the same failure again with the checkpoint service: a cairnd controller and one
# manager on 127.0.0.1 whose agents move every flushed version to L3 over libfabric (docs/service.md).
# Prints the `result` lines, the level each restart came from, where the agents sat and what they
# drained; then the failure once more on a Slurm cluster of 5 hosts made of namespaces (host n2 lost, the
# spare n5 in its place; skipped without root or namespaces); and IDENTICAL or DIFFERENT. Exit status: 0 when every run succeeded, the failure runs
# restarted, the agents drained versions, and the results match.
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
cairnd="$build/tools/cairnd"
heat2d="$build/examples/heat2d/heat2d"
for exe in "$cairn" "$cairnd" "$heat2d"; do
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
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"  # docs/launcher.md, "Open MPI 4.1 and MPI_Init"
export CAIRN_MPIRUN_ARGS="${CAIRN_MPIRUN_ARGS:---oversubscribe}"
export CAIRN_REDUNDANCY=xor

work=$(mktemp -d "${TMPDIR:-/tmp}/cairn-demo.XXXXXX")
cache_base=${CAIRN_CACHE_DIR:-/dev/shm}
job_base="demo-$$-$(basename "$work" | sed 's/^cairn-demo\.//')"
jobs=("$job_base-clean" "$job_base-kill" "$job_base-service")
service_pids=()
cleanup() {
  for pid in "${service_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${service_pids[@]}"; do wait "$pid" 2>/dev/null; done
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
  [ "$name" != clean ] && extra=(--sleep-ms "$sleep_ms")
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

# Part 2: the checkpoint service. A controller on a port the system picks, one manager (a checkpoint
# node) running up to 4 agents; the job registers with it (CAIRN_SERVICE) and its agents pull every
# flushed version out of the ranks' L1 slots.
echo
echo "== the checkpoint service: cairnd controller and manager on 127.0.0.1 (logs in the work directory)"
svc="$work/service"
mkdir -p "$svc"
"$cairnd" controller --listen 127.0.0.1:0 --address-file "$svc/address" --log "$svc/controller.log" &
service_pids+=($!)
for _ in $(seq 200); do [ -s "$svc/address" ] && break; sleep 0.05; done
address=$(cat "$svc/address" 2>/dev/null)
if [ -z "$address" ]; then
  echo "demo: the controller did not start" >&2
  failed=1
else
  "$cairnd" manager --controller "$address" --name ckpt0 --agents 4 --work-dir "$svc/ckpt0" &
  service_pids+=($!)
  echo "   controller at $address, manager ckpt0"
  CAIRN_SERVICE="$address" CAIRN_FLUSH_EVERY=2 \
    run service "${jobs[2]}" --kill-node 2 --at-checkpoint 5 --phase compute || failed=1
  echo "   cairn status --service $address, after the job (its agents left with it):"
  "$cairn" status --service "$address" | sed 's/^/   | /'
  echo "   where the agents sat (stacking, the controller's log):"
  grep -h " for application .* slot .* on manager " "$svc/controller.log" | sed 's/^.*info: /     /'
  echo "   what they drained (their logs):"
  drained=0
  for log in "$svc"/ckpt0/agent-*.log; do
    [ -f "$log" ] || continue
    line=$(awk '/bytes verified and written/ {n++; b += $(NF-9)} END {printf "%d transfers (one rank'"'"'s part of a version each), %.1f MiB", n, b/1048576}' "$log")
    echo "     agent $(basename "$log" .log | sed 's/agent-//'): $line"
    count=$(grep -c "bytes verified and written" "$log")
    drained=$((drained + count))
  done
  if [ "$drained" -eq 0 ]; then
    echo "demo: the agents drained nothing" >&2
    failed=1
  fi
fi

# Part 3: the same failure on a cluster of hosts made of namespaces (scripts/slurm-cluster.sh --hosts 5:
# n1..n5, each its own network, hostname, /dev/shm and slurmd). cairn run inside a Slurm allocation of the
# five hosts puts the ranks on n1-n4 and keeps n5 as a spare; at checkpoint 5 host n2 is lost (every
# process in it killed, its /dev/shm gone); cairn run finds it down, puts n5 in its place, and the job
# restarts from L2. Needs root and network namespaces; says so and skips otherwise.
echo
cluster_sh="$(cd "$(dirname "$0")" && pwd)/slurm-cluster.sh"
cluster="$work/c"
cluster_result="" cluster_restart=""
if [ "$(id -u)" -ne 0 ] || ! ip netns add "cairn-demo-$$" 2>/dev/null; then
  echo "== cluster: skipped: a cluster of hosts needs root and network namespaces"
else
  ip netns del "cairn-demo-$$"
  echo "== cluster: 5 hosts made of namespaces (scripts/slurm-cluster.sh start --hosts 5)"
  cleanup_cluster() { bash "$cluster_sh" stop "$cluster" >/dev/null 2>&1; }
  trap 'cleanup_cluster; cleanup' EXIT
  chmod 755 "$work"
  # Each host has a /tmp of its own: a build under /tmp is shared with the hosts, the library heat2d loads
  # (src/core) as well as the programs.
  if bash "$cluster_sh" start "$cluster" --hosts 5 --share "$build/tools" --share "$build/examples/heat2d" \
      --share "$build/src/core" >"$work/cluster-start.log" 2>&1; then
    sed 's/^/   | /' "$work/cluster-start.log" | grep 'up:'
    # --stall: a relaunched rank that blocks in PMIx_Get at its start (docs/launcher.md, Limits) is ended and relaunched.
    echo "== cluster: salloc --no-kill -N5: cairn run -n $np --spares 1 --kill-node 1 --at-checkpoint 5 --phase compute --stall 60 --retries 3" \
         "-- heat2d --n $grid --iters $iters --checkpoint-every $every --sleep-ms $sleep_ms"
    SLURM_CONF="$cluster/etc/slurm.conf" OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader,tcp \
      OMPI_MCA_pml=ob1 \
      CAIRN_KILL_HOST_EXEC="bash $cluster_sh kill-host $cluster {host}" \
      timeout "$run_timeout" bash "$cluster_sh" exec "$cluster" salloc --no-kill --exclusive -N5 \
      env CAIRN_PREFIX="$cluster/pfs/heat" CAIRN_JOB="$job_base-cluster" \
      "$cairn" run -n "$np" --spares 1 --kill-node 1 --at-checkpoint 5 --phase compute --stall 60 --retries 3 -- \
      "$heat2d" --n "$grid" --iters "$iters" --checkpoint-every "$every" --sleep-ms "$sleep_ms" \
      >"$work/cluster.log" 2>&1 || { echo "demo: the cluster run failed" >&2; failed=1; }
    grep -v '^cairn\[' "$work/cluster.log" | sed 's/^/   | /'
    cluster_result=$(last_result "$work/cluster.log")
    cluster_restart=$(grep -E '^restart: version [0-9]+ from level ' "$work/cluster.log" | tail -n 1)
  else
    sed 's/^/   | /' "$work/cluster-start.log"
    echo "demo: the namespace cluster did not start" >&2
    failed=1
  fi
  cleanup_cluster
fi

clean_result=$(last_result "$work/clean.log")
kill_result=$(last_result "$work/kill.log")
service_result=$(last_result "$work/service.log")
restart_line=$(grep -E '^restart: version [0-9]+ from level ' "$work/kill.log" | tail -n 1)
service_restart=$(grep -E '^restart: version [0-9]+ from level ' "$work/service.log" | tail -n 1)

echo
echo "failure-free run:                   result ${clean_result:-(none)}"
echo "run with node 2 killed:             result ${kill_result:-(none)}"
echo "node 2 killed, with the service:    result ${service_result:-(none)}"
[ -d "$cluster" ] && echo "host n2 lost, spare n5 in its place: result ${cluster_result:-(none)}"
[ -d "$cluster" ] || cluster_restart=skip
for line in "$restart_line" "$service_restart" "$cluster_restart"; do
  [ "$line" = skip ] && continue
  if [ -n "$line" ]; then
    echo "restart came from level:            ${line##* } (${line#restart: })"
  else
    echo "restart came from level:            (none: heat2d printed no 'restart:' line, so it started over)"
    failed=1
  fi
done
if [ -n "$clean_result" ] && [ "$clean_result" = "$kill_result" ] && [ "$clean_result" = "$service_result" ] &&
  { [ ! -d "$cluster" ] || [ "$clean_result" = "$cluster_result" ]; }; then
  # Equal results do not make a run that failed a success (e.g. ranks that ran as singletons).
  if [ "$failed" -eq 0 ]; then echo "IDENTICAL"; else echo "IDENTICAL results, but a part of the demo failed (above)"; fi
else
  echo "DIFFERENT"
  failed=1
fi
exit $failed
