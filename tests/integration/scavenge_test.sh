#!/usr/bin/env bash
# The launcher's scavenge is on by default and runs after a failure too: heat2d writes versions to the
# node caches only (no periodic flush, no flush at finalize); one rank is killed from outside (a crash,
# not a node loss, so every cache survives); `cairn run` passes the failure on, then flushes the newest
# version complete in the caches to L3, and `cairn verify` finds it good there. --no-scavenge leaves L3 empty.
set -euo pipefail
cairn=$1 app=$2
work=$(mktemp -d /tmp/cairn-scavenge.XXXXXX)
job=scavenge-$$
run_pid=
cleanup() {
  [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null || true
  rm -rf "$work" "/dev/shm/cairn-$job" "/dev/shm/cairn-$job-no"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export CAIRN_CACHE_DIR=/dev/shm CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=0 CAIRN_FLUSH_ON_FINALIZE=false

crash_one_rank() {  # $1: extra cairn run options; the job's exit status is in $rc, its stderr in $err
  "$cairn" run -n 4 --nodes 2 $1 -- "$app" --n 128 --iters 100000 --checkpoint-every 20 --sleep-ms 2 \
    >"$work/out" 2>"$work/err" &
  run_pid=$!
  for _ in $(seq 1 600); do
    grep -qs '^l1=[3-9]' "$CAIRN_PREFIX/.cairn/state" && break
    sleep 0.05
  done
  grep -qs '^l1=[3-9]' "$CAIRN_PREFIX/.cairn/state" || fail "the job did not take 3 versions"
  victim=  # a rank of this job (other tests may run heat2d at the same time)
  for p in $(pgrep -x heat2d); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "CAIRN_JOB=$CAIRN_JOB" && victim=$p
  done
  [ -n "$victim" ] || fail "no heat2d process found"
  kill -9 "$victim"
  set +e
  wait "$run_pid"; rc=$?
  set -e
  run_pid=
  err=$(cat "$work/err")
}

export CAIRN_PREFIX=$work/prefix CAIRN_JOB=$job
crash_one_rank ""
echo "$err" | tail -6
[ "$rc" -ne 0 ] || fail "the crashed job's failure was not passed on (exit 0)"
grep -q "scavenge: flushed version [0-9]* to L3" <<<"$err" || fail "no scavenge after the failure"
v=$(sed -n 's/.*scavenge: flushed version \([0-9]*\) to L3.*/\1/p' <<<"$err")
"$cairn" verify --level l3 "$v" "$CAIRN_PREFIX" || fail "version $v is not good in L3"

export CAIRN_PREFIX=$work/prefix-no CAIRN_JOB=$job-no
crash_one_rank "--no-scavenge"
[ "$rc" -ne 0 ] || fail "exit 0 after the crash"
# (the launcher's scavenge lines are "cairn run: scavenge: ..."; the work directory's name has the word too)
grep -q "cairn run: scavenge" <<<"$err" && fail "--no-scavenge scavenged"
# The crashed job's rank 0 left its hold on the prefix; cairn run gave it back, so the next job starts at once.
grep -q "cairn run: released $CAIRN_PREFIX: the job's rank 0 ended without cairn_finalize" <<<"$err" ||
  fail "the crashed job's hold on the prefix was not released"
[ ! -e "$CAIRN_PREFIX/.cairn/owner" ] || fail "the crashed job's owner record is still there"
[ -z "$(ls "$CAIRN_PREFIX" | grep '^v' || true)" ] || fail "--no-scavenge: L3 is not empty"
echo "PASS: version $v scavenged to L3 after the failure (exit $rc passed on); --no-scavenge left L3 empty"
