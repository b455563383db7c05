#!/usr/bin/env bash
# Measures a process migration beside a full restart from L3 of the same job (docs/migration.md).
#
#   scripts/migrate-timing.sh [BUILD_DIR] [--ranks R] [--nodes K] [--n N] [--json]
#
# heat2d runs on R ranks over K simulated nodes (xor across nodes) under `cairn run`. Both runs start
# the same way and wait until version 2 is protected; then:
#   migration:  `cairn migrate --node 1` with one spare: checkpoint and exit, node 1's snapshots piped
#               into the spare's cache, relaunch, every rank restarting from L1;
#   L3 restart: `cairn halt`: checkpoint, flush to L3 at finalize and exit; every cache deleted and the
#               L3 files dropped from the page cache (posix_fadvise DONTNEED); relaunch, restart from L3.
# Each time is from the request to the moment the relaunched job has restarted (cairn run sees it in the
# state file). Both jobs finish and their results are compared with each other.
set -euo pipefail
build=build
ranks=4 nodes=2 n=8192 json=0
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    -*) echo "migrate-timing: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
cairn=$build/tools/cairn app=$build/examples/heat2d/heat2d
[ -x "$cairn" ] && [ -x "$app" ] || { echo "migrate-timing: build first (no $cairn or $app)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export CAIRN_MPIRUN_ARGS=${CAIRN_MPIRUN_ARGS:---oversubscribe}
export CAIRN_CACHE_DIR=${CAIRN_CACHE_DIR:-/dev/shm} CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=0 CAIRN_SET_SIZE=$nodes
work=$(mktemp -d /tmp/cairn-migrate-timing.XXXXXX)
job=mt-$$
run_pid=
cleanup() {
  [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null || true
  rm -rf "$work" "$CAIRN_CACHE_DIR/cairn-$job-m" "$CAIRN_CACHE_DIR/cairn-$job-h"
}
trap cleanup EXIT
args=(--n "$n" --iters 1000000 --checkpoint-every 5)

wait_protected() {  # until version 2 is protected
  for _ in $(seq 1 2400); do
    grep -qs '^l2=[2-9]' "$CAIRN_PREFIX/.cairn/state" && return 0
    kill -0 "$run_pid" 2>/dev/null || { cat "$work/$1.err" >&2; echo "migrate-timing: the job ended early" >&2; exit 1; }
    sleep 0.05
  done
  echo "migrate-timing: the job did not protect version 2 in 2 minutes" >&2; exit 1
}

# ---- migration ----
export CAIRN_PREFIX=$work/m CAIRN_JOB=$job-m
"$cairn" run -n "$ranks" --nodes "$nodes" --spares 1 --no-scavenge -- "$app" "${args[@]}" >"$work/m.out" 2>"$work/m.err" &
run_pid=$!
wait_protected m
mig=$("$cairn" migrate --node 1 --json "$CAIRN_PREFIX")
"$cairn" halt "$CAIRN_PREFIX" --immediate >/dev/null
wait "$run_pid" || true
run_pid=

# ---- halt, full restart from L3 ----
export CAIRN_PREFIX=$work/h CAIRN_JOB=$job-h CAIRN_FLUSH_ON_FINALIZE=true
"$cairn" run -n "$ranks" --nodes "$nodes" --no-scavenge -- "$app" "${args[@]}" >"$work/h1.out" 2>"$work/h1.err" &
run_pid=$!
wait_protected h1
t0=$(date +%s.%N)
"$cairn" halt "$CAIRN_PREFIX" >/dev/null
wait "$run_pid" || { cat "$work/h1.err" >&2; exit 1; }
run_pid=
t1=$(date +%s.%N)
"$cairn" halt "$CAIRN_PREFIX" --unset >/dev/null
rm -rf "${CAIRN_CACHE_DIR:?}/cairn-$job-h"
python3 - "$CAIRN_PREFIX" <<'PY'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
"$cairn" run -n "$ranks" --nodes "$nodes" --no-scavenge -- "$app" "${args[@]}" >"$work/h2.out" 2>"$work/h2.err" &
run_pid=$!
for _ in $(seq 1 2400); do
  grep -qs '^restart_level=' "$CAIRN_PREFIX/.cairn/state" && break
  sleep 0.05
done
"$cairn" halt "$CAIRN_PREFIX" --immediate >/dev/null
wait "$run_pid" || true
run_pid=
after=$(grep -o 'at L3 ([^)]* after the launch)' "$work/h2.err" | head -1 || true)
python3 - "$mig" "$t0" "$t1" "$after" "$json" "$ranks" "$nodes" "$n" <<'PY'
import json, re, sys
mig = json.loads(sys.argv[1]); t0, t1 = float(sys.argv[2]), float(sys.argv[3])
after, as_json = sys.argv[4], sys.argv[5] == "1"
ranks, nodes, n = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
m = re.search(r"\(([\d.]+) (ms|s|min) after", after)
if not m or mig.get("status") != "done":
    sys.exit(f"migrate-timing: incomplete measurement: migration {mig.get('status')} ({mig.get('message')}), L3 restart '{after}'")
scale = {"ms": 1e-3, "s": 1, "min": 60}[m.group(2)]
l3_restart = float(m.group(1)) * scale
out = {"ranks": ranks, "nodes": nodes, "n": n, "state_bytes": n * n * 8,
       "migration": {k: mig[k] for k in ("bytes", "wind_down_seconds", "transfer_seconds", "restart_seconds", "total_seconds")},
       "l3": {"halt_flush_exit_seconds": t1 - t0, "restart_seconds": l3_restart, "total_seconds": t1 - t0 + l3_restart}}
out["speedup"] = out["l3"]["total_seconds"] / mig["total_seconds"]
if as_json:
    print(json.dumps(out, indent=2))
else:
    mm, l3 = out["migration"], out["l3"]
    print(f"heat2d n={n} ({n*n*8/2**20:.0f} MiB of grid) on {ranks} ranks / {nodes} nodes, xor")
    print(f"migration of node 1 ({mm['bytes']/2**20:.0f} MiB moved): checkpoint+exit {mm['wind_down_seconds']:.2f} s, "
          f"transfer {mm['transfer_seconds']:.2f} s, relaunch+restart L1 {mm['restart_seconds']:.2f} s: {mm['total_seconds']:.2f} s")
    print(f"full restart from L3: checkpoint+flush+exit {l3['halt_flush_exit_seconds']:.2f} s, "
          f"relaunch+restart L3 {l3['restart_seconds']:.2f} s: {l3['total_seconds']:.2f} s")
    print(f"migration is {out['speedup']:.1f}x faster")
PY
