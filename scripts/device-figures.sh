#!/usr/bin/env bash
# scripts/device-figures.sh -- one session on a machine with an NVIDIA GPU and many cores, in one call of a
# few minutes, on a build packed elsewhere (../shared/tools/device/pack.sh of a Release build: `.dev/`):
#   1. cairn-bench --device (DSIZES, default "1G 8G") with this build's library, and, when OLD_LIB names
#      another libcairn.so.0's directory, the same bench with that library (an A/B on the same machine);
#   2. every correctness check of tests/device/run.sh (its bench is step 1);
#   3. cairn-bench's levels and restarts at LRANKS ranks (default "8 16") of LSIZE (256M) each.
# Results under $OUT (at most 6 files: env.txt, run_sh.txt, bench_device_{new,old}.json,
# bench_levels_N.json); a deadline keeps the whole under LIMIT seconds (540). Used for the figures of
# docs/performance.md ("Device memory", "At 8 and 16 ranks").
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-540}
DSIZES=${DSIZES:-"1G 8G"}
LRANKS=${LRANKS:-"8 16"}
LSIZE=${LSIZE:-256M}
OUT=${OUT:?set OUT to the directory for the results}
DRV=${CAIRN_CUDA_DRIVER:+--cuda-driver $CAIRN_CUDA_DRIVER}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
. .dev/env.sh
export CAIRN_MPIRUN_ARGS="--oversubscribe --bind-to none"
ENV=$OUT/env.txt
{
  date -u; nproc; free -g | head -2; df -h /dev/shm /tmp | tail -2; uptime
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total --format=csv 2>&1
  lscpu | grep -E "Model name|L3|NUMA node\(s\)|Thread|Socket"; cat /sys/kernel/mm/transparent_hugepage/enabled
} > "$ENV" 2>&1
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$ENV"; }
device_bench() {  # NAME [LIBDIR]
  log "device bench ($1): start; $(LD_LIBRARY_PATH=${2:+$2:}$LD_LIBRARY_PATH ldd .dev/bin/cairn-bench | grep libcairn.so)"
  LD_LIBRARY_PATH=${2:+$2:}$LD_LIBRARY_PATH timeout 100 mpirun --bind-to none -np 1 cairn-bench --device \
    --size "${DSIZES// /,}" --reps 3 --cache-dir /dev/shm --prefix /tmp $DRV --json > "$OUT/bench_device_$1.json" 2>> "$ENV"
  log "device bench ($1): rc $?"
}

device_bench new
[ -n "${OLD_LIB:-}" ] && device_bench old "$OLD_LIB"

log "run.sh: start ($(left)s left)"
mkdir -p /tmp/device-figures
OUT=/tmp/device-figures DEVICE_SIZES=none timeout $(( $(left) - 200 )) bash tests/device/run.sh > "$OUT/run_sh.txt" 2>&1
log "run.sh: rc $? ($(left)s left)"

for n in $LRANKS; do
  t=$(( $(left) - 15 ))
  [ "$n" = "${LRANKS%% *}" ] && [ "$n" != "$LRANKS" ] && t=$(( t / 2 ))
  [ "$t" -lt 60 ] && { log "cairn-bench $n ranks: skipped, ${t}s left"; continue; }
  log "cairn-bench $n ranks: start (limit ${t}s)"
  timeout "$t" cairn-bench --ranks "$n" --size "$LSIZE" --reps 3 --only l1,l2,l3,restart --cache-dir /dev/shm \
    --prefix /tmp --json > "$OUT/bench_levels_$n.json" 2>> "$ENV"
  log "cairn-bench $n ranks: rc $?"
done
log "done ($(left)s left)"
