#!/usr/bin/env bash
# A job whose state is private (per-rank) cannot go on with fewer ranks: `cairn run --no-spare` stops
# after the node loss with a message naming the region, instead of relaunching into a failure.
set -euo pipefail
cairn=$1 app=$2
work=$(mktemp -d /tmp/cairn-no-spare.XXXXXX)
trap 'rm -rf "$work"' EXIT
export CAIRN_PREFIX=$work/prefix CAIRN_CACHE_DIR=$work/cache CAIRN_JOB=no-spare-$$ CAIRN_REDUNDANCY=xor
set +e
out=$(cd "$work" && "$cairn" run -n 4 --nodes 2 --kill-node 1 --at-checkpoint 2 --phase compute --no-spare -- "$app" 2>&1)
rc=$?
set -e
echo "$out"
[ "$rc" -ne 0 ] || { echo "FAIL: the launcher relaunched a job with private state on fewer ranks"; exit 1; }
grep -q "region '.*' of version 2 is private" <<<"$out" || { echo "FAIL: the message does not name the private region"; exit 1; }
grep -q "relaunching" <<<"$out" && { echo "FAIL: it relaunched"; exit 1; }
echo "PASS: refused with a clear message (exit $rc)"
