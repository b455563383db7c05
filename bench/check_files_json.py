#!/usr/bin/env python3
"""Smoke check of `cairn-bench --scr --file-api --interpose --json`: one JSON object with every figure measured
(> 0 s), the four targets with their value, limit and verdict, and no file left behind. Behaviour, not
speed. Usage: check_files_json.py CAIRN_BENCH [args...]"""
import glob
import json
import subprocess
import sys

before = set(glob.glob("/tmp/cairn-bench-files.*")) | set(glob.glob("/dev/shm/cairn-bench-files-*"))
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=600)
if out.returncode != 0:
    sys.exit(f"FAIL: exit {out.returncode}\n{out.stdout}\n{out.stderr}")
try:
    r = json.loads(out.stdout)
except json.JSONDecodeError as e:
    sys.exit(f"FAIL: not one JSON object ({e}):\n{out.stdout}")
figures = ["local_write_s", "pfs_write_fsync_s", "memory_api_s", "file_api_write_s", "file_api_complete_s", "scr_s",
           "interpose_s", "interpose_first_s"]
for f in figures:
    if not isinstance(r["figures"].get(f), (int, float)) or r["figures"][f] <= 0:
        sys.exit(f"FAIL: figure {f} missing or not positive: {r['figures']}")
names = [t["name"] for t in r["targets"]]
if names != ["scr_vs_local_write", "pfs_fsync_vs_scr", "file_api_complete_vs_write", "interpose_vs_memory_api",
             "pfs_fsync_vs_interpose"]:
    sys.exit(f"FAIL: targets {names}")
for t in r["targets"]:
    if not (t["value"] > 0 and isinstance(t["met"], bool) and t["limit"]):
        sys.exit(f"FAIL: target {t}")
for k in ("loadavg_1m_start", "loadavg_1m_end", "file_system", "ranks", "size_per_rank_bytes"):
    if k not in r:
        sys.exit(f"FAIL: {k} missing")
after = set(glob.glob("/tmp/cairn-bench-files.*")) | set(glob.glob("/dev/shm/cairn-bench-files-*"))
if after - before:
    sys.exit(f"FAIL: left behind: {sorted(after - before)}")
print("PASS:", json.dumps(r["targets"]))
