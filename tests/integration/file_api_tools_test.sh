#!/usr/bin/env bash
# The tools on versions of the file API, whose routed files lie in <rank dir>/v<N>.files/ beside the slot:
# file_api_app writes versions 1..4 (4 ranks on 4 simulated nodes, xor, nothing flushed by the job).
#   1. every cache kept: `cairn verify --level l1` finds version 4 good, `cairn flush` commits it, and
#      `cairn verify --level l3` finds it good;
#   2. node 1 killed after version 4 was protected, no relaunch: the scavenge rebuilds rank 1 (its file
#      included) from L2 and commits version 4, `cairn verify` finds it good in L3, and a run without the
#      caches reads every file of version 4 back from L3 byte for byte (file_api_app --phase read).
# (cairn migrate's transfer of such versions: tests/unit/tool/migration_test.cpp.)
set -euo pipefail
cairn=$1 app=$2
work=$(mktemp -d /tmp/cairn-file-api-tools.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=0 CAIRN_FLUSH_ON_FINALIZE=false CAIRN_CACHE_DIR=$work/cache

export CAIRN_PREFIX=$work/kept CAIRN_JOB=file-api-kept-$$
"$cairn" run -n 4 --nodes 4 --no-scavenge -- "$app" --phase write >"$work/out" 2>&1 || { cat "$work/out"; fail "write"; }
"$cairn" verify --level l1 4 || fail "version 4 is not good in L1"
"$cairn" flush 4 || fail "cairn flush 4"
"$cairn" verify --level l3 4 || fail "version 4 is not good in L3 after cairn flush"

export CAIRN_PREFIX=$work/lost CAIRN_JOB=file-api-lost-$$
set +e
"$cairn" run -n 4 --nodes 4 --kill-node 1 --at-checkpoint 4 --phase compute --no-relaunch -- "$app" --phase write \
  >"$work/out" 2>&1
set -e
cat "$work/out" | grep "cairn run:"
grep -q "scavenge: flushed version 4 to L3 (ranks 1 rebuilt from L2)" "$work/out" || fail "no scavenge from L2"
"$cairn" verify --level l3 4 || fail "version 4 is not good in L3 after the scavenge"
rm -rf "$CAIRN_CACHE_DIR/cairn-$CAIRN_JOB"
"$cairn" run -n 4 --nodes 4 -- "$app" --phase read >"$work/out" 2>&1 || { cat "$work/out"; fail "read"; }
grep -q "file_api: OK version 4" "$work/out" || { cat "$work/out"; fail "version 4 not read back"; }
grep -q "attempt 1: restarted from version 4 at L3" "$work/out" || fail "the read did not restart from L3"
echo "PASS: file-API versions verified, flushed, scavenged from L2 and read back from L3"
