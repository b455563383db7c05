#!/usr/bin/env bash
# A job whose state is private (per-rank) cannot go on with fewer ranks: `cairn run --no-spare` stops
# after the node loss with a message naming the region, instead of relaunching into a failure.
# `--no-spare=oversubscribe` keeps every rank: the same job goes on, the lost node's ranks on the
# survivor, rebuilt from L2 by the launcher, and restarts from version 2 at L1 with the same answer as a
# failure-free run.
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

ref=$(cd "$work" && CAIRN_PREFIX=$work/ref CAIRN_JOB=no-spare-ref-$$ "$cairn" run -n 4 --nodes 2 -- "$app" 2>&1 |
      grep '^quickstart: step') || { echo "FAIL: the failure-free run"; exit 1; }
export CAIRN_PREFIX=$work/prefix-over CAIRN_JOB=no-spare-over-$$
out=$(cd "$work" && "$cairn" run -n 4 --nodes 2 --kill-node 1 --at-checkpoint 2 --phase compute \
        --no-spare=oversubscribe -- "$app" 2>&1) || { echo "$out"; echo "FAIL: oversubscribe did not finish"; exit 1; }
echo "$out" | grep "cairn run"
grep -q "rebuilt version 2 of the moved ranks from L2" <<<"$out" || { echo "FAIL: no rebuild from L2"; exit 1; }
grep -q "attempt 2: restarted from version 2 at L1" <<<"$out" || { echo "FAIL: not restarted from L1"; exit 1; }
[ "$(grep '^quickstart: step' <<<"$out")" = "$ref" ] || { echo "FAIL: the answer differs from '$ref'"; exit 1; }
echo "PASS: --no-spare=oversubscribe went on with every rank, from version 2 at L1, same answer ($ref)"
