#!/usr/bin/env bash
# Migration between two hosts: the node being emptied (node1) and the spare (node4) are each made a host
# of its own -- a network namespace with one veth interface (mig0) between the two and a loopback of its
# own, and a mount namespace in which only that node's directory of the job's cache exists. `cairn run`
# starts cairnd migrate-source and migrate-sink there through CAIRN_MIGRATE_EXEC (on-node.sh {node});
# the reader listens on its veth address (migrate_listen = iface:mig0). So the only way for the bytes to
# reach the spare is the fabric across the veth. Checks: the migration went over the fabric, the veth
# carried at least the bytes moved, each end saw only its own node's cache, and the relaunched job
# restarted from L1 with the failure-free result.
#
# Usage: migrate_hosts_test.sh PATH/TO/cairn PATH/TO/heat2d
# Needs root, ip (iproute2) and unshare (util-linux); exit status 77 (skipped) when they are missing.
set -euo pipefail
cairn=$1 app=$2
if [ "$(id -u)" -ne 0 ]; then echo "skipped: network and mount namespaces need root"; exit 77; fi
for tool in ip unshare mount; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed"; exit 77; }
done
tag=cm$$  # short: interface names have at most 15 characters
work=$(mktemp -d /tmp/cairn-hosts.XXXXXX)
job=hosts-$$
run_pid=
cleanup() {
  [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  ip netns del "$tag-node1" 2>/dev/null || true
  ip netns del "$tag-node4" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- the two hosts ------------------------------------------------------------------------------------
if ! ip netns add "$tag-node1" 2>"$work/netns.err"; then
  echo "skipped: cannot make a network namespace here: $(cat "$work/netns.err")"
  exit 77
fi
ip netns add "$tag-node4"
ip link add "$tag-a" type veth peer name "$tag-b"
ip link set "$tag-a" netns "$tag-node1"
ip link set "$tag-b" netns "$tag-node4"
ip -n "$tag-node1" link set "$tag-a" name mig0
ip -n "$tag-node4" link set "$tag-b" name mig0
ip -n "$tag-node1" addr add 10.213.77.1/24 dev mig0
ip -n "$tag-node4" addr add 10.213.77.2/24 dev mig0
for n in node1 node4; do
  ip -n "$tag-$n" link set lo up
  ip -n "$tag-$n" link set mig0 up
done

export CAIRN_CACHE_DIR=$work/cache CAIRN_REDUNDANCY=xor CAIRN_FLUSH_EVERY=4
cache_job=$CAIRN_CACHE_DIR/cairn-$job
mkdir -p "$cache_job" "$work/hold"
# on-node.sh NODE CMD...: CMD as on host NODE: in its network namespace, and in a mount namespace where the
# job's cache directory holds NODE's directory only.
cat >"$work/on-node.sh" <<EOF
#!/bin/sh
node=\$1; shift
exec ip netns exec "$tag-\$node" unshare --mount --propagation private sh -c '
  set -e
  mkdir -p "$cache_job/\$0" "$work/hold/\$0"
  mount --bind "$cache_job/\$0" "$work/hold/\$0"
  mount -t tmpfs cairn-other-nodes "$cache_job"
  mkdir "$cache_job/\$0"
  mount --move "$work/hold/\$0" "$cache_job/\$0"
  exec "\$@"' "\$node" "\$@"
EOF
chmod +x "$work/on-node.sh"
seen=$("$work/on-node.sh" node4 sh -c "ls $cache_job; ip -brief addr show mig0")
echo "as node4: $seen"
grep -q "^node4$" <<<"$seen" && [ "$(grep -c '^node' <<<"$seen")" -eq 1 ] || fail "node4 sees other caches: $seen"
grep -q "10.213.77.2" <<<"$seen" || fail "node4 has not its own address: $seen"

# ---- the job ------------------------------------------------------------------------------------------
args=(--n 1024 --iters 400 --checkpoint-every 20)
ref=$(CAIRN_PREFIX=$work/ref CAIRN_JOB=$job-ref "$cairn" run -n 8 --nodes 4 -- "$app" "${args[@]}" 2>/dev/null | grep '^result ')
[ -n "$ref" ] || fail "no reference result"
echo "reference: $ref"

export CAIRN_PREFIX=$work/prefix CAIRN_JOB=$job CAIRN_MIGRATE_TRANSPORT=fabric CAIRN_MIGRATE_LISTEN=iface:mig0
export CAIRN_MIGRATE_EXEC="$work/on-node.sh {node}"
"$cairn" run -n 8 --nodes 4 --spares 1 -- "$app" "${args[@]}" --sleep-ms 10 >"$work/job.out" 2>"$work/job.err" &
run_pid=$!
for _ in $(seq 1 600); do
  grep -qs '^l2=[2-9]' "$CAIRN_PREFIX/.cairn/state" && break
  sleep 0.05
done
grep -qs '^l2=' "$CAIRN_PREFIX/.cairn/state" || fail "the job did not reach version 2: $(cat "$work/job.err")"
rx_before=$(ip netns exec "$tag-node4" cat /sys/class/net/mig0/statistics/rx_bytes)

set +e
json=$("$cairn" migrate --node 1 --json "$CAIRN_PREFIX"); rc=$?
set -e
echo "$json"
[ "$rc" -eq 0 ] || fail "cairn migrate exited $rc: $(cat "$work/job.err"; cat "$CAIRN_PREFIX"/.cairn/migrate-*.log)"
rx=$(($(ip netns exec "$tag-node4" cat /sys/class/net/mig0/statistics/rx_bytes) - rx_before))
bytes=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["bytes"])' "$json")
python3 - "$json" <<'PY' || fail "the migration's report is not what it should be"
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "done" and r["transport"] == "fabric", r
assert r["node"] == "node1" and r["spare"] == "node4" and r["restart_level"] == "L1", r
assert r["bytes"] > 2 * 1024 * 1024, r
PY
echo "node4's mig0 received $rx bytes during the migration of $bytes bytes"
[ "$rx" -ge "$bytes" ] || fail "the veth carried $rx bytes, fewer than the $bytes moved: the bytes took another way"
grep -q "waiting for the writer at 10.213.77.1:" "$CAIRN_PREFIX/.cairn/migrate-source.log" ||
  fail "the reader did not listen on its veth address: $(cat "$CAIRN_PREFIX/.cairn/migrate-source.log")"
grep -q "from 10.213.77.1:[0-9]* into node4" "$CAIRN_PREFIX/.cairn/migrate-sink.log" ||
  fail "the writer did not read from node1's address: $(cat "$CAIRN_PREFIX/.cairn/migrate-sink.log")"

wait "$run_pid" || fail "cairn run exited $?: $(cat "$work/job.err")"
run_pid=
got=$(grep '^result ' "$work/job.out")
[ "$got" = "$ref" ] || fail "result after the migration: '$got', failure-free: '$ref'"
grep -q "restart: version .* from level L1" "$work/job.out" || fail "the relaunched job did not restart from L1"
echo "PASS: node1 moved to node4 across the veth ($rx bytes on the wire for $bytes), restarted from L1, $got"
