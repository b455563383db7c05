#!/usr/bin/env python3
"""Smoke check of `cairn-bench --migrate --json` (bench_smoke_migrate): one JSON object in which each of the
three ways of emptying a node was measured in every repetition -- the migration between the caches and over
the fabric (done, restarted from L1, the transport named; wind-down, transfer, moving and restart times) and
the halt + restart from L3 --, each path beside its limit measured in the same run, and nothing left behind
(work directory, caches). Behaviour, not speed. Usage: check_migrate_json.py CAIRN_BENCH [args...]"""
import glob
import json
import subprocess
import sys


def leftovers():
    return set(glob.glob("/tmp/cairn-bench-migrate.*")) | set(glob.glob("/dev/shm/cairn-cbm-*"))


def fail(msg, out=""):
    sys.exit(f"FAIL: {msg}\n{out}")


def positive(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


before = leftovers()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=900)
if p.returncode != 0:
    fail(f"exit {p.returncode}", p.stdout + p.stderr)
try:
    r = json.loads(p.stdout)
except json.JSONDecodeError as e:
    fail(f"not one JSON object ({e})", p.stdout)
reps = r["run"]["reps"]
if r.get("mode") != "migrate" or not positive(r.get("bytes_moved")) or not positive(r.get("state_bytes")):
    fail("mode, bytes_moved or state_bytes", p.stdout)
for path, limit in (("local", "copy_gbps"), ("fabric", "tcp_to_cache_gbps")):
    j = r[path]
    for k in ("wind_down_seconds", "transfer_seconds", "move_seconds", "restart_seconds", "total_seconds", "move_gbps",
              limit, "of_limit"):
        if not positive(j.get(k)):
            fail(f"{path}.{k} missing or not positive: {j.get(k)}", p.stdout)
    if len(j["runs"]) != reps:
        fail(f"{path}: {len(j['runs'])} runs for {reps} repetitions", p.stdout)
    for run in j["runs"]:
        if run["status"] != "done" or run["transport"] != path or run["restart_level"] != "L1" or run["node"] != "node1":
            fail(f"{path}: a run that is not a migration of node1 over {path} restarting from L1: {run}", p.stdout)
        if run["bytes"] != r["bytes_moved"]:
            fail(f"{path}: {run['bytes']} bytes moved, {r['bytes_moved']} in the other path", p.stdout)
    if path == "fabric" and not positive(j.get("tcp_loopback_gbps")):
        fail("fabric.tcp_loopback_gbps missing", p.stdout)
    if j["transfer_seconds"] < j["move_seconds"]:
        fail(f"{path}: the transfer is shorter than moving its bytes", p.stdout)
for k in ("halt_flush_exit_seconds", "restart_seconds", "total_seconds", "raw_write_gbps", "raw_read_gbps"):
    if not positive(r["l3"].get(k)):
        fail(f"l3.{k} missing or not positive", p.stdout)
if len(r["l3"]["runs"]) != reps:
    fail("l3: a run missing", p.stdout)
for k in ("local", "fabric"):
    if not positive(r["speedup_vs_l3"].get(k)):
        fail(f"speedup_vs_l3.{k}", p.stdout)
left = leftovers() - before
if left:
    fail(f"left behind: {sorted(left)}")
print(f"PASS: moved {r['bytes_moved']} bytes; totals local {r['local']['total_seconds']} s, fabric "
      f"{r['fabric']['total_seconds']} s, halt + L3 {r['l3']['total_seconds']} s")
