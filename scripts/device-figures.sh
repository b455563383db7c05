#!/usr/bin/env bash
# scripts/device-figures.sh -- one session on a machine with an NVIDIA GPU and many cores, in one call of a
# few minutes, on a build packed elsewhere (../shared/tools/device/pack.sh of a Release build: `.dev/`).
# In order of priority, each step only while the deadline leaves it time:
#   1. every correctness check of tests/device/run.sh (its bench is step 2), the logs of failed checks
#      appended to run_sh.txt;
#   2. cairn-bench --device (DSIZES, default "1G 8G") with this build's library, and, when OLD_LIB names
#      another libcairn.so.0's directory, the same bench at OLD_DSIZES ("1G") with that library (an A/B
#      on the same machine);
#   3. cairn-bench's levels and restarts at the largest of LRANKS (default "8 16") of LSIZE (256M) each;
#   4. cairn-bench --snapshot --ranks 1 at SSIZES ("256M,2G"): copy-on-write with cores to spare;
#   5. cairn-bench --campaign at CRANKS (16) ranks, a core each (--work 10 --mtbf 6 --seed 2, auto and L3
#      only, as the 2-core shape runs of docs/performance.md);
#   6. the levels at the other counts of LRANKS.
# Results under $OUT (at most 8 files: env.txt, run_sh.txt, bench_device_{new,old}.json, bench_levels_N.json,
# bench_snapshot.json, campaign_N.json); a deadline keeps the whole under LIMIT seconds (560). Used for the
# figures of docs/performance.md ("Device memory", "At 8 and 16 ranks", the 16-core checks of issues 24, 26).
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
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
  lscpu | grep -E "Model name|L3|NUMA node\(s\)|Thread|Socket|Hypervisor"; cat /sys/kernel/mm/transparent_hugepage/enabled
  cat /proc/cmdline; command -v systemd-detect-virt >/dev/null && systemd-detect-virt
} > "$ENV" 2>&1
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$ENV"; }
device_bench() {  # NAME [LIBDIR]
  log "device bench ($1): start; $(LD_LIBRARY_PATH=${2:+$2:}$LD_LIBRARY_PATH ldd .dev/bin/cairn-bench | grep libcairn.so)"
  LD_LIBRARY_PATH=${2:+$2:}$LD_LIBRARY_PATH timeout 120 mpirun --bind-to none -np 1 cairn-bench --device \
    --size "${DSIZES// /,}" --reps 3 --cache-dir /dev/shm --prefix /tmp $DRV --json > "$OUT/bench_device_$1.json" 2>> "$ENV"
  log "device bench ($1): rc $?"
}

run_step() {  # NEED_SECONDS NAME COMMAND...: run COMMAND with what is left of the deadline, if NEED is left
  local need=$1 name=$2
  shift 2
  local t=$(( $(left) - 10 ))
  if [ "$t" -lt "$need" ]; then log "$name: skipped, ${t}s left"; return; fi
  log "$name: start (limit ${t}s)"
  timeout "$t" "$@"
  log "$name: rc $?"
}

log "run.sh: start ($(left)s left)"
mkdir -p /tmp/device-figures
OUT=/tmp/device-figures DEVICE_SIZES=none timeout 270 bash tests/device/run.sh > "$OUT/run_sh.txt" 2>&1
log "run.sh: rc $? ($(left)s left)"
for f in /tmp/device-figures/*.out; do
  [ -e "$f" ] && { echo "=== $f (last 60 lines)"; tail -60 "$f"; } >> "$OUT/run_sh.txt"
done

device_bench new
[ -n "${OLD_LIB:-}" ] && DSIZES=${OLD_DSIZES:-1G} device_bench old "$OLD_LIB"

first=${LRANKS##* }
levels() { echo "cairn-bench --ranks $1 --size $LSIZE --reps 3 --only l1,l2,l3,restart --cache-dir /dev/shm --prefix /tmp \
  --json > '$OUT/bench_levels_$1.json' 2>> '$ENV'"; }
run_step 90 "cairn-bench $first ranks" sh -c "$(levels "$first")"
run_step 60 "cairn-bench --snapshot" sh -c "cairn-bench --snapshot --ranks 1 --size '${SSIZES:-256M,2G}' --cache-dir /dev/shm \
  --prefix /tmp --json > '$OUT/bench_snapshot.json' 2>> '$ENV'"
CR=${CRANKS:-16}
run_step 60 "cairn-bench --campaign $CR ranks" sh -c "mkdir -p /tmp/campaign && cairn-bench --campaign --ranks $CR --nodes $CR --work 10 --mtbf 6 --seed 2 \
  --factors '' --prefix /tmp/campaign --json > '$OUT/campaign_$CR.json' 2>> '$ENV'"
for n in $LRANKS; do
  [ "$n" = "$first" ] || run_step 60 "cairn-bench $n ranks" sh -c "$(levels "$n")"
done
log "done ($(left)s left)"
