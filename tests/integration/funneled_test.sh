#!/usr/bin/env bash
# Without MPI_THREAD_MULTIPLE: a failure-free run, then node 1 killed after checkpoint 5; the recovered
# run must restart from L2 and print the same sum.
set -euo pipefail
cairn=$1 app=$2
work=$(mktemp -d /tmp/cairn-funneled.XXXXXX)
trap 'rm -rf "$work" /dev/shm/cairn-funneled-$$-*' EXIT
run() {  # run NAME [cairn run options...]
  local name=$1; shift
  CAIRN_PREFIX=$work/$name CAIRN_JOB=funneled-$$-$name CAIRN_FLUSH_EVERY=3 CAIRN_REDUNDANCY=xor \
    "$cairn" run -n 4 --nodes 2 "$@" -- "$app" 2>&1
}
clean=$(run clean); echo "$clean"
killed=$(run killed --kill-node 1 --at-checkpoint 5 --phase compute); echo "$killed"
grep -q "^thread level [012]$" <<<"$clean" || { echo "FAIL: MPI gave MPI_THREAD_MULTIPLE: not the case under test"; exit 1; }
want=$(grep "^sum " <<<"$clean"); got=$(grep "^sum " <<<"$killed" | tail -1)
grep -q "^restart: version 5 from level L2$" <<<"$killed" || { echo "FAIL: no restart from L2"; exit 1; }
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "FAIL: '$got' differs from the failure-free '$want'"; exit 1; }
echo "PASS: $got after a restart from L2 without MPI_THREAD_MULTIPLE"
