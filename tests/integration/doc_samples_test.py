#!/usr/bin/env python3
"""The whole programs the documentation shows, run as the documentation writes them.

Every fenced code block of README.md and docs/*.md that is a whole program -- C with `int main`, Fortran
with `program`, Python with `cairn.Session(` (doc_blocks.py; doc_fragments_test.py checks every other
block) -- is taken out of the markdown as it stands, built against cairn (the build tree, or an installed
prefix: the compile and link flags are options), and run under `cairn run -n 2 --nodes 2` twice: once
without failure, once with node 1 killed at its 3rd checkpoint and relaunched. `compute` is the test's
(doc_samples_harness.c, or its numpy twin below): each step changes the answer, so a sample whose restart
repeats or skips a step gives another answer. Both runs must print
the same answer on every rank, and the second must have restarted from a checkpoint, without warnings
about taking over its own prefix. The README's C, Fortran and Python samples must be among those found
(a test that finds nothing passes nothing).

Usage: doc_samples_test.py --source SRC --cairn CAIRN [--cc MPICC --cflags F --libs L] [--fc MPIFC
       --fflags F --flibs L] [--python PY --pythonpath DIR] [--only FILE...]
A language without its compiler (or interpreter) is skipped, and says so.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import doc_blocks  # beside this file

PY_PREAMBLE = '''\
# doc_samples_test.py: the solver the sample calls, the numpy twin of doc_samples_harness.c.
import numpy as _np
_sample_sum = [None]
_sample_step = {}


def compute(grid):
    flat = grid.reshape(-1)  # a view: the sample's array, in memory order
    if flat.size not in _sample_step:
        _sample_step[flat.size] = _np.arange(flat.size, dtype=_np.float64) % 7 + 1
    flat += _sample_step[flat.size]
    _sample_sum[0] = float(flat.sum())
# ---- the sample, as the documentation writes it ----
'''
PY_EPILOGUE = '''
# ---- doc_samples_test.py ----
from mpi4py import MPI as _MPI
import sys as _sys
# One write with its newline (print writes the newline apart when Python runs unbuffered, and mpirun
# may then put the other rank's line between the two).
_sys.stdout.write(f"sample answer rank {_MPI.COMM_WORLD.Get_rank()} sum {_sample_sum[0]:.17g}\\n")
_sys.stdout.flush()
'''

def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def samples(source, only):
    """(file, line, kind, code) of every whole-program block (doc_fragments_test.py checks the others)."""
    return [(b.rel, b.line, b.kind, b.code) for b in doc_blocks.blocks(source, only) if b.whole_program()]


def build(args, work, name, kind, code):
    """The sample's command line, or None when its language is not available here."""
    def run(cmd):
        p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            fail(f"{name} does not build:\n$ {' '.join(cmd)}\n{p.stdout}{p.stderr}\n---- the sample ----\n{code}")

    harness = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doc_samples_harness.c")
    if kind == "c":
        if not args.cc:
            return None
        src = os.path.join(work, name + ".c")
        open(src, "w").write(code)
        exe = os.path.join(work, name)
        run([args.cc, "-std=c99", "-Wall", "-Werror=implicit-function-declaration", "-o", exe, src, harness,
             *shlex.split(args.cflags), *shlex.split(args.libs)])
        return [exe]
    if kind == "fortran":
        if not args.fc or not args.cc:
            return None
        src = os.path.join(work, name + ".f90")
        open(src, "w").write(code)
        obj = os.path.join(work, name + "-harness.o")
        run([args.cc, "-c", "-o", obj, harness, *shlex.split(args.cflags)])
        exe = os.path.join(work, name)
        run([args.fc, "-o", exe, src, obj, *shlex.split(args.fflags), *shlex.split(args.flibs)])
        return [exe]
    if not args.python:
        return None
    src = os.path.join(work, name + ".py")
    open(src, "w").write(PY_PREAMBLE + code + PY_EPILOGUE)
    return [args.python, src]


def launch(args, work, name, cmd, kill):
    """`cairn run` of cmd on 2 ranks over 2 simulated nodes with a fresh prefix and cache; its output."""
    prefix, cache = os.path.join(work, name + "-prefix"), os.path.join(work, name + "-cache")
    for d in (prefix, cache):
        shutil.rmtree(d, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "SCR_"))}
    env.update({"CAIRN_PREFIX": prefix, "CAIRN_CACHE_DIR": cache, "CAIRN_JOB": f"doc-{name}-{os.getpid()}",
                "CAIRN_REDUNDANCY": "partner", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    for k in ("CAIRN_MPIRUN", "CAIRN_MPIRUN_ARGS", "CAIRN_LAUNCHER"):
        if k in os.environ:
            env[k] = os.environ[k]
    env.setdefault("CAIRN_MPIRUN_ARGS", "--oversubscribe")
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    run = [args.cairn, "run", "-n", "2", "--nodes", "2"]
    if kill:
        run += ["--kill-node", "1", "--at-checkpoint", "3", "--phase", "compute"]
    p = subprocess.run(run + ["--", *cmd], env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        fail(f"{name}: `{' '.join(run)} -- ...` exited {p.returncode}:\n{out}")
    shutil.rmtree(prefix, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    return out


def answers(out):
    return sorted(re.findall(r"^sample answer rank (\d+) sum (\S+)$", out, re.M))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", required=True)
    p.add_argument("--cairn", required=True)
    p.add_argument("--cc", default="")
    p.add_argument("--cflags", default="")
    p.add_argument("--libs", default="")
    p.add_argument("--fc", default="")
    p.add_argument("--fflags", default="")
    p.add_argument("--flibs", default="")
    p.add_argument("--python", default="")
    p.add_argument("--pythonpath", default="")
    p.add_argument("--only", nargs="*", help="markdown files relative to --source (default: README.md, docs/*.md)")
    args = p.parse_args()

    found = samples(args.source, args.only)
    readme = {kind for rel, _, kind, _ in found if rel == "README.md"}
    if (not args.only or "README.md" in args.only) and readme != {"c", "fortran", "python"}:
        fail(f"README.md should show a whole program in C, Fortran and Python; found {sorted(readme)}")
    work = tempfile.mkdtemp(prefix="cairn-doc-samples.")
    ran = 0
    try:
        for rel, line, kind, code in found:
            name = re.sub(r"[^A-Za-z0-9]+", "_", f"{rel}_{line}").strip("_")
            where = f"{rel}:{line} ({kind})"
            cmd = build(args, work, name, kind, code)
            if cmd is None:
                print(f"skipped: {where}: no {kind} compiler or interpreter given", flush=True)
                continue
            plain = answers(launch(args, work, name, cmd, kill=False))
            if len(plain) != 2:
                fail(f"{where}: the failure-free run printed {len(plain)} answer lines, expected one per rank")
            out = launch(args, work, name, cmd, kill=True)
            if not re.search(r"^cairn run: attempt 2: restarted from version \d+ at L\d", out, re.M):
                fail(f"{where}: the relaunch after node 1 was killed did not restart from a checkpoint:\n{out}")
            if "takes over" in out:
                fail(f"{where}: the relaunch warned about taking over its own prefix:\n{out}")
            recovered = answers(out)
            if recovered != plain:
                fail(f"{where}: killed at checkpoint 3 and restarted, it answers {recovered}; without failure "
                     f"{plain}\n{out}")
            restart = re.search(r"restarted from version \d+ at L\d", out).group(0)
            print(f"ok: {where}: {restart}, the failure-free answer {plain[0][1]} on every rank", flush=True)
            ran += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if ran == 0:
        fail("no sample ran")
    print(f"PASS: {ran} documented programs restart to their failure-free answer", flush=True)


if __name__ == "__main__":
    main()
