#!/usr/bin/env python3
"""bench_smoke: run cairn-bench (the command line given) and check what it prints.

Asserts behaviour, not speed: exit status 0, stdout is exactly one JSON object, every figure is present
and a positive number (l3_flush_stage_gbps may be null: it comes from the library's log), every target
has a ratio and a pass/fail, and the run's work and cache directories are gone afterwards.
"""
import json
import os
import subprocess
import sys

FIGURES = [
    "memcpy_gbps", "l1_checkpoint_gbps", "l2_partner_gbps", "l2_xor_gbps", "l2_rs_gbps",
    "isal_rs_encode_gbps", "rs_encode_gbps", "raw_write_gbps", "l3_flush_gbps", "l3_flush_stage_gbps",
    "restart_l1_gbps", "restart_l2_gbps", "restart_l3_gbps",
]
OPTIONAL = {"l3_flush_stage_gbps"}
TARGETS = ["l1_checkpoint", "rs_encode", "l3_flush", "restart_l1"]


def fail(msg, out=""):
    print("bench_smoke: FAIL: " + msg, file=sys.stderr)
    if out:
        print("--- stdout ---\n" + out, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) < 2:
        fail("usage: check_bench_json.py CAIRN_BENCH [ARGS...]")
    proc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True, timeout=280)
    if proc.returncode != 0:
        fail("cairn-bench exited with status %d" % proc.returncode, proc.stdout)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        fail("stdout is not one JSON object: %s" % e, proc.stdout)
    if not isinstance(data, dict):
        fail("stdout is JSON but not an object", proc.stdout)
    for key in FIGURES:
        if key not in data:
            fail("missing key %s" % key, proc.stdout)
        v = data[key]
        if v is None and key in OPTIONAL:
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            fail("%s is %r, expected a positive number" % (key, v), proc.stdout)
    targets = data.get("targets")
    if not isinstance(targets, dict):
        fail("missing targets object", proc.stdout)
    for t in TARGETS:
        entry = targets.get(t)
        if not isinstance(entry, dict):
            fail("targets.%s missing" % t, proc.stdout)
        if not isinstance(entry.get("ratio"), (int, float)) or not isinstance(entry.get("pass"), bool):
            fail("targets.%s needs a numeric ratio and a boolean pass: %r" % (t, entry), proc.stdout)
        if not isinstance(entry.get("min_ratio"), (int, float)):
            fail("targets.%s has no min_ratio" % t, proc.stdout)
    run = data.get("run", {})
    if run.get("ranks") != 2:
        fail("run.ranks is %r" % run.get("ranks"), proc.stdout)
    for key in ("work_dir", "cache_job_dir"):
        path = run.get(key)
        if not path:
            fail("run.%s missing" % key, proc.stdout)
        if os.path.exists(path):
            fail("%s was left behind" % path, proc.stdout)
    print("bench_smoke: OK (%d figures, %d targets)" % (len(FIGURES), len(TARGETS)))


if __name__ == "__main__":
    main()
