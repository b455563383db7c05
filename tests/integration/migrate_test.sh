#!/usr/bin/env bash
# Process migration: heat2d on 8 ranks / 4 simulated nodes under `cairn run --spares 2`; `cairn migrate
# --node 2` while it runs moves node 2's ranks to the first spare (node4) through a small buffer pool,
# between the two caches (no service: auto is local); then `cairn migrate --node 1 --transport fabric`
# moves node 1's to node5 over libfabric (cairnd migrate-source on node1, migrate-sink on node5, tcp on
# 127.0.0.1). Each time the job restarts from L1 everywhere; it ends with the failure-free result. Also
# the refusals: no launcher, a node that is not in the job, no spare left.
set -euo pipefail
cairn=$1 app=$2
work=$(mktemp -d /tmp/cairn-migrate.XXXXXX)
job=migrate-$$
cleanup() {
  [ -n "${run_pid:-}" ] && kill "$run_pid" 2>/dev/null || true
  rm -rf "$work" "/dev/shm/cairn-$job" "/dev/shm/cairn-$job-ref"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
args=(--n 256 --iters 400 --checkpoint-every 20)
export CAIRN_CACHE_DIR=/dev/shm CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=4

# The failure-free result.
ref=$(CAIRN_PREFIX=$work/ref CAIRN_JOB=$job-ref "$cairn" run -n 8 --nodes 4 -- "$app" "${args[@]}" 2>/dev/null | grep '^result ')
[ -n "$ref" ] || fail "no reference result"
echo "reference: $ref"

export CAIRN_PREFIX=$work/prefix CAIRN_JOB=$job
mkdir -p "$CAIRN_PREFIX"
set +e
out=$("$cairn" migrate --node 1 "$CAIRN_PREFIX" 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "no cairn run manages" <<<"$out" || fail "migrate without a launcher: exit $rc: $out"

"$cairn" run -n 8 --nodes 4 --spares 2 -- "$app" "${args[@]}" --sleep-ms 10 >"$work/job.out" 2>"$work/job.err" &
run_pid=$!
# Wait until version 2 is protected, so the job is well under way.
for _ in $(seq 1 600); do
  grep -qs '^l2=[2-9]' "$CAIRN_PREFIX/.cairn/state" && break
  sleep 0.05
done
grep -qs '^l2=' "$CAIRN_PREFIX/.cairn/state" || fail "the job did not reach version 2"

set +e
out=$("$cairn" migrate --node 7 "$CAIRN_PREFIX" 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "numbered 0..3" <<<"$out" || fail "--node 7: exit $rc: $out"

set +e
json=$("$cairn" migrate --node 2 --buffers 2 --buffer-size 64K --json "$CAIRN_PREFIX"); rc=$?
set -e
echo "$json"
[ "$rc" -eq 0 ] || fail "cairn migrate exited $rc"
python3 - "$json" <<'PY' || fail "the migration's report is not what it should be"
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "done", r
assert r["node"] == "node2" and r["spare"] == "node4", r
assert r["restart_level"] == "L1", r
assert r["bytes"] > 2 * 64 * 1024 and r["version"] >= 2, r
assert r["transfer_seconds"] > 0 and r["total_seconds"] >= r["transfer_seconds"], r
assert r["transport"] == "local", r
PY
# The second spare, over the fabric.
set +e
json=$("$cairn" migrate --node 1 --transport fabric --buffers 4 --buffer-size 128K --json "$CAIRN_PREFIX"); rc=$?
set -e
echo "$json"
[ "$rc" -eq 0 ] || fail "cairn migrate --transport fabric exited $rc"
python3 - "$json" <<'PY' || fail "the fabric migration's report is not what it should be"
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "done" and r["transport"] == "fabric", r
assert r["node"] == "node1" and r["spare"] == "node5", r
assert r["restart_level"] == "L1", r
assert r["bytes"] > 2 * 64 * 1024 and r["transfer_seconds"] > 0, r
PY
grep -q "taken by the writer: .*keys revoked" "$CAIRN_PREFIX/.cairn/migrate-source.log" ||
  fail "the reader on node1 did not log the hand-over: $(cat "$CAIRN_PREFIX/.cairn/migrate-source.log")"
grep -q "is in node5's cache" "$CAIRN_PREFIX/.cairn/migrate-sink.log" ||
  fail "the writer on node5 did not log the version: $(cat "$CAIRN_PREFIX/.cairn/migrate-sink.log")"
# The spare is used up: a second migration is refused while the job goes on.
set +e
out=$("$cairn" migrate --node 0 "$CAIRN_PREFIX" 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "no spare node left" <<<"$out" || fail "third migration: exit $rc: $out"

set +e
wait "$run_pid"; rc=$?
set -e
run_pid=
cat "$work/job.err"
[ "$rc" -eq 0 ] || fail "cairn run exited $rc"
got=$(grep '^result ' "$work/job.out")
[ "$got" = "$ref" ] || fail "result after the migration: '$got', failure-free: '$ref'"
grep -q "restart: version .* from level L1" "$work/job.out" || fail "the relaunched job did not restart from L1"
grep -q "exited to migrate: node2 to node4" "$work/job.err" || fail "the summary does not show the migration"
grep -q "exited to migrate: node1 to node5" "$work/job.err" || fail "the summary does not show the fabric migration"
grep -q "moving node1 to node5 over the fabric (--transport fabric)" "$work/job.err" || fail "cairn run did not say how node1 moved"
grep -q "0 failed" "$work/job.err" || fail "the migration counted as a failure"
[ "$(grep -c "restart: version .* from level L1" "$work/job.out")" -ge 2 ] || fail "a relaunch did not restart from L1"
for n in node1 node2; do [ ! -e "/dev/shm/cairn-$job/$n" ] || fail "$n's cache is still there"; done
for n in node4 node5; do [ -d "/dev/shm/cairn-$job/$n" ] || fail "$n has no cache"; done
[ ! -e "$CAIRN_PREFIX/.cairn/launcher" ] || fail "the launcher file outlived cairn run"
[ ! -e "$CAIRN_PREFIX/.cairn/migrate" ] || fail "the request outlived the migration"
echo "PASS: migrated node2 to node4 between the caches and node1 to node5 over the fabric, restarted from L1, $got"
