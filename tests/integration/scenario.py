#!/usr/bin/env python3
"""One failure scenario of heat2d under `cairn run`, checked against a failure-free run.

The job runs on simulated nodes; the launcher kills node(s) at a given checkpoint and phase, optionally
damages files before the relaunch, and relaunches. The test passes when the relaunched job prints the
same `result` as a failure-free run (bit for bit) and restarted from the expected version and level,
or, for unrecoverable cases, when the job fails with a clear message.

Usage: scenario.py --build BUILD --name NAME [options]   (see --help)
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HEAT_ARGS = ["--n", "256", "--iters", "400", "--checkpoint-every", "20"]
# rewrite_app (tests/integration/rewrite_app.c) rewrites its whole state right after each checkpoint:
# the same 19 checkpoints as heat2d's arguments, so the same kills and expectations apply.
REWRITE_ARGS = ["--mib", "2", "--iters", "100", "--checkpoint-every", "5"]
# synthetic (examples/synthetic) sweeping a tenth of its state: 90 % of every version is as in the one
# before (l1_incremental's case); 19 checkpoints as well.
SYNTHETIC_ARGS = ["--size", "2M", "--iters", "95", "--checkpoint-every", "5", "--touch", "10"]
OWN_REFERENCE = ("rewrite", "synthetic")  # apps that are not heat2d: compared with their own failure-free run


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def base_env(args, work):
    env = dict(os.environ)
    env.update({
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "CAIRN_MPIRUN_ARGS": os.environ.get("CAIRN_MPIRUN_ARGS", "--oversubscribe"),
        "CAIRN_PREFIX": os.path.join(work, "prefix"),
        "CAIRN_CACHE_DIR": os.path.join(work, "cache"),
        "CAIRN_JOB": args.name,
        "CAIRN_REDUNDANCY": args.scheme,
        "CAIRN_FLUSH_EVERY": str(args.flush_every),
        "CAIRN_LOG": "info",
    })
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v.replace("{work}", work)  # {work}: this scenario's scratch directory
    if "python" in (args.app, args.app2):
        pkg = os.path.join(args.build, "bindings", "python")
        env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def heat2d(build):
    return os.path.join(build, "examples", "heat2d", "heat2d")


def app_command(args, app):
    """The heat2d of a language: heat2d (C), heat2d_f (Fortran) or heat2d.py (Python, numpy + mpi4py, with
    the build tree's package). All print the same `result` for the same grid, and restart each other's
    checkpoints, so every scenario compares with the C reference. Or rewrite_app, which rewrites its
    whole state right after every checkpoint (its own reference)."""
    if app == "rewrite":
        return [os.path.join(args.build, "tests", "integration", "rewrite_app")]
    if app == "synthetic":
        return [os.path.join(args.build, "examples", "synthetic", "synthetic")]
    if app == "fortran":
        return [os.path.join(args.build, "examples", "heat2d_f", "heat2d_f")]
    if app == "python":
        source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        return [sys.executable, os.path.join(source, "examples", "heat2d.py")]
    return [heat2d(args.build)]


def app_args(args):
    """The application's arguments: --app-args, else rewrite_app's or heat2d's defaults."""
    if args.app_args:
        return args.app_args.split()
    return {"rewrite": REWRITE_ARGS, "synthetic": SYNTHETIC_ARGS}.get(args.app, HEAT_ARGS)


def reference_result(args):
    """The failure-free answer, computed once per build and shared by the scenarios."""
    app = app_command(args, args.app if args.app in OWN_REFERENCE else "c")
    # heat2d --device computes the host run's grid bit for bit: its reference is the host run
    ref_args = [a for a in app_args(args) if a != "--device"]
    # keyed by the arguments and the binary's time, so a rebuilt application gets a fresh reference
    path = os.path.join(args.build, "tests", "integration",
                        f"{os.path.basename(app[0])}-reference-" + "-".join(ref_args[1::2]) +
                        f"-{int(os.path.getmtime(app[0]))}.txt")
    if os.path.exists(path):
        return open(path).read().strip()
    work = os.path.join(args.build, "tests", "integration", "work", f"reference-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = base_env(args, work)
    env["CAIRN_JOB"] = f"reference-{os.getpid()}"
    env["CAIRN_REDUNDANCY"] = "single"
    cmd = [env.get("CAIRN_MPIRUN") or "mpirun", *env["CAIRN_MPIRUN_ARGS"].split(), "-np", str(args.np),
           *app, *ref_args, "--checkpoint-every", "0", "--no-restart"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    shutil.rmtree(work, ignore_errors=True)
    m = re.findall(r"^result ([0-9a-f]{16})$", out.stdout, re.M)
    if out.returncode != 0 or not m:
        fail(f"failure-free reference run failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(m[-1] + "\n")
    os.replace(tmp, path)
    return m[-1]


# ---- damage done between the attempts (run by the launcher's --between-attempts hook) ----------

def newest_l1(cache_job, node, rank, prefix):
    """The slot file of the newest version complete at L1 (the job state file's l1): the one the restart
    would read. Not simply the newest record: a rank may have begun the next version when the node was
    killed, and damaging that one would test nothing."""
    d = os.path.join(cache_job, node, f"r{rank}")
    versions = sorted(int(n[1:-3]) for n in os.listdir(d) if re.fullmatch(r"v\d+\.l1", n))
    if not versions:
        fail(f"no L1 record in {d}")
    state = dict(l.split("=", 1) for l in open(os.path.join(prefix, ".cairn", "state")).read().splitlines() if "=" in l)
    v = int(state.get("l1", "0"))
    if v not in versions:
        fail(f"the state file's newest L1 version {v} has no record in {d} (records: {versions})")
    with open(os.path.join(d, f"v{v}.l1"), "rb") as f:
        slot = int.from_bytes(f.read(4), "little")
    return v, os.path.join(d, f"slot-{slot}.data")


def newest_l3(prefix):
    versions = sorted(int(n[1:]) for n in os.listdir(prefix)
                      if re.fullmatch(r"v\d{8,}", n) and os.path.exists(os.path.join(prefix, n, "COMMIT")))
    if not versions:
        fail(f"no committed version in {prefix}")
    return versions[-1], os.path.join(prefix, f"v{versions[-1]:08d}", "rank-0.data")


def flip_byte(path, offset=100):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def chunk_holders(vdir):
    """The versions that the chunk records (rank-<r>.chunks) of a version directory name, besides itself."""
    own = int(os.path.basename(vdir)[1:])
    holders = set()
    for n in sorted(os.listdir(vdir)):
        if re.fullmatch(r"rank-\d+\.chunks", n):
            for line in open(os.path.join(vdir, n)):
                if line.startswith("run "):
                    holders.add(int(line.split()[3]))
    holders.discard(own)
    return holders


def written_as_recorded(prefix):
    """The job history's l3 lines count what went into L3 files: for every incremental version in the
    prefix that has a line, l3_bytes_written is the size of its own data files, well below its bytes."""
    lines = {}
    with open(os.path.join(prefix, ".cairn", "history")) as f:
        for text in f:
            try:
                j = json.loads(text)
            except ValueError:
                continue
            if j.get("ev") == "l3":
                lines[j["version"]] = j  # the last line about each version
    checked = []
    for v, j in sorted(lines.items()):
        vdir = os.path.join(prefix, f"v{v:08d}")
        if not os.path.exists(os.path.join(vdir, "COMMIT")) or not chunk_holders(vdir):
            continue
        own = sum(os.path.getsize(os.path.join(vdir, n)) for n in os.listdir(vdir) if re.fullmatch(r"rank-\d+\.data", n))
        if j.get("l3_bytes_written") != own or not own < j["bytes"] // 2:
            fail(f"history line of incremental version {v}: l3_bytes_written {j.get('l3_bytes_written')}, bytes "
                 f"{j['bytes']}; its data files hold {own} bytes")
        checked.append(f"{v}: {own} of {j['bytes']} bytes")
    if not checked:
        fail("no l3 line of the history is about an incremental version still in the prefix")
    print(f"scenario: the history counts the incremental versions' written bytes ({'; '.join(checked)})")


def incremental(what, prefix):
    """l3-incremental: the newest committed version must be incremental (name chunks of older ones), and
    the history count what it wrote; l3-drop-base: the same, then the data files of the versions it names
    are removed."""
    v, _ = newest_l3(prefix)
    vdir = os.path.join(prefix, f"v{v:08d}")
    holders = chunk_holders(vdir)
    if not holders:
        fail(f"version {v} in L3 is not incremental: no chunk record names an older version ({sorted(os.listdir(vdir))})")
    print(f"scenario: version {v} in L3 is incremental, its chunk records name versions {sorted(holders)}")
    if what == "l3-incremental":
        written_as_recorded(prefix)
    if what == "l3-drop-base":
        for h in sorted(holders):
            hdir = os.path.join(prefix, f"v{h:08d}")
            for n in sorted(os.listdir(hdir)):
                if n.endswith(".data"):
                    os.remove(os.path.join(hdir, n))
            print(f"scenario: removed the data files of version {h} ({hdir})")


def damage(what):
    cache_job = os.environ["CAIRN_CACHE_JOB"]
    prefix = os.environ["CAIRN_PREFIX"]
    if what in ("l3-incremental", "l3-drop-base"):
        return incremental(what, prefix)
    if what.startswith("l1"):
        v, path = newest_l1(cache_job, "node0", 0, prefix)
    else:
        v, path = newest_l3(prefix)
    if what.endswith("flip"):
        flip_byte(path)
    else:
        os.truncate(path, os.path.getsize(path) // 2)
    print(f"scenario: {what} on {path} (version {v})")


# ---- the scenario ---------------------------------------------------------------------------------

def check_result(args, ref, out):
    results = re.findall(r"^result ([0-9a-f]{16})$", out, re.M)
    if not results:
        fail("no result line")
    if results[-1] != ref:
        fail(f"recovered result {results[-1]} differs from the failure-free {ref}")
    restarts = re.findall(r"^restart: version (\d+) from level (L\d)$", out, re.M)
    if args.expect:
        if not restarts:
            fail(f"expected a restart from {args.expect}, saw none")
        got_version, got_level = restarts[-1]
        # Alternatives (A|B) where the timing of the kill legitimately decides between two versions.
        ok = False
        for alt in args.expect.split("|"):
            want_level, _, want_version = alt.partition(":")
            ok = ok or (got_level == want_level and (not want_version or got_version == want_version))
        if not ok:
            fail(f"restarted from version {got_version} at {got_level}, expected {args.expect}")
        # The launcher's summary names the same restart, in whichever attempt it came (the first, too,
        # when a fresh `cairn run` restarts a previous job's version).
        said = re.findall(r"^cairn run: attempt \d+: restarted from version (\d+) at (L\d)", out, re.M)
        if not said or said[-1] != (got_version, got_level):
            fail(f"the summary says {said[-1:] or 'no restart'}, the job restarted from {got_version} at {got_level}")
    for pattern in args.expect_log:
        if not re.search(pattern, out, re.M):
            fail(f"the job's output has no line matching /{pattern}/")
    print(f"PASS: result {ref} identical; restarts {restarts}")


def run_scenario(args):
    ref = reference_result(args)
    if args.reshape:
        out = run_reshape(args)
        check_result(args, ref, out)
        shutil.rmtree(os.path.join(args.build, "tests", "integration", "work", args.name), ignore_errors=True)
        return
    work = os.path.join(args.build, "tests", "integration", "work", args.name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = base_env(args, work)
    cairn = os.path.join(args.build, "tools", "cairn")
    cmd = [cairn, "run", "-n", str(args.np), "--nodes", str(args.nodes)]
    if args.kill:
        cmd += ["--kill-node", args.kill, "--at-checkpoint", str(args.at), "--phase", args.phase]
    if args.no_spare:
        cmd += ["--no-spare" if args.no_spare == "shrink" else f"--no-spare={args.no_spare}"]
    if args.retries is not None:
        cmd += ["--retries", str(args.retries)]
    if args.spares:
        cmd += ["--spares", str(args.spares)]
    if args.no_relaunch:
        cmd += ["--no-relaunch"]
    if args.scavenge:
        cmd += ["--scavenge"]
    if args.damage:
        hook = f"{sys.executable} {os.path.abspath(__file__)} --damage {args.damage}"
        cmd += ["--between-attempts", hook]
    if args.stall:
        cmd += ["--stall", str(args.stall)]
    cmd += ["--"]
    if args.hang_once:  # the first attempt's rank R stops after C checkpoints (hang_once.sh)
        rank, _, after = args.hang_once.partition(":")
        hang = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hang_once.sh")
        cmd += ["sh", hang, os.path.join(work, "hung"), rank, after]
    cmd += [*app_command(args, args.app), *app_args(args)]
    if args.sleep_ms:
        cmd += ["--sleep-ms", str(args.sleep_ms)]
    print("scenario:", " ".join(cmd), flush=True)

    if args.interrupt:
        out = interrupted_runs(args, cmd, env, work)
    else:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        out = proc.stdout + proc.stderr
        print(out)
        if args.expect_fail:
            if proc.returncode == 0:
                fail("the job succeeded, but it should have failed (nothing recoverable)")
            if not re.search(args.expect_fail, out):
                fail(f"the failure message does not match /{args.expect_fail}/")
            check_launcher(args, env, out)  # e.g. no relaunch after an unrecoverable attempt
            print(f"PASS: failed as expected (exit {proc.returncode})")
            shutil.rmtree(work, ignore_errors=True)
            return
        if proc.returncode != 0 and not args.no_relaunch:
            fail(f"cairn run exited {proc.returncode}")
    check_launcher(args, env, out)
    if args.no_relaunch and args.restart_from_l3:
        out = restart_from_l3(args, env, cairn, work)
        check_result(args, ref, out)
    elif args.no_relaunch:
        print(f"PASS: launcher checks (exit {proc.returncode})")
    else:
        check_result(args, ref, out)
    shutil.rmtree(work, ignore_errors=True)


def check_launcher(args, env, out):
    """The launcher's own promises: failures seen, spares used, caches rebuilt, versions committed."""
    if args.expect_failures is not None:
        m = re.search(r"cairn run: summary \(\w+\): (\d+) attempts?, (\d+) failed", out)
        if not m or int(m.group(2)) != args.expect_failures:
            fail(f"expected {args.expect_failures} failed attempts in the summary, saw {m and m.group(0)}")
    for spec in args.expect_spare:  # SPARE:OLD:RANK - the spare replaced OLD and holds RANK's cache
        spare, old, rank = spec.split(":")
        if not re.search(rf"^cairn run: spare {spare} replaces {old} ", out, re.M):
            fail(f"no line saying spare {spare} replaces {old}")
        found = glob.glob(os.path.join(env["CAIRN_CACHE_DIR"], "*", spare, f"r{rank}"))
        d = found[0] if found else os.path.join(env["CAIRN_CACHE_DIR"], "<job>", spare, f"r{rank}")
        if not found or not [n for n in os.listdir(d) if re.fullmatch(r"v\d+\.l1", n)]:
            fail(f"the spare's cache {d} holds no L1 record of rank {rank}")
        print(f"scenario: {d} holds {sorted(os.listdir(d))}")
    if args.no_spare == "oversubscribe":  # every rank relaunched, the lost ones on the surviving nodes
        if not re.search(r"^cairn run: no spare: the ranks of node\d+ go on the surviving nodes, oversubscribed: ", out, re.M):
            fail("the launcher did not say where the lost node's ranks went")
        sizes = re.findall(r"^heat2d: n=\d+ ranks=(\d+) ", out, re.M)
        if len(sizes) < 2 or sizes[-1] != str(args.np):
            fail(f"the relaunch ran on {sizes[-1:]} ranks, not {args.np}")
        killed = [n for n in os.listdir(os.path.join(glob.glob(os.path.join(env["CAIRN_CACHE_DIR"], "*"))[0]))]
        if f"node{args.kill}" in killed:
            fail(f"node{args.kill} has a cache again: its ranks ran there")
    if args.stall and args.hang_once:
        if not re.search(rf"^cairn run: attempt 1: .*; stalled: no checkpoint/progress for {args.stall:g} s", out, re.M):
            fail("the summary does not say that attempt 1 stalled")
        if not os.path.isdir(os.path.join(env["CAIRN_PREFIX"], "..", "hung")):
            fail("the hang was never injected")
    if args.expect_commit:
        c = os.path.join(env["CAIRN_PREFIX"], f"v{args.expect_commit:08d}", "COMMIT")
        if not os.path.exists(c):
            fail(f"{c} does not exist")
        if not re.search(rf"scavenge: flushed version {args.expect_commit} to L3", out):
            fail(f"the launcher did not report scavenging version {args.expect_commit}")
        print(f"scenario: {c} exists")


def restart_from_l3(args, env, cairn, work):
    """After a run that stopped: `cairn verify` finds the committed versions good, then, without the
    caches, a fresh `cairn run` restarts from L3."""
    v = subprocess.run([cairn, "verify", "--level", "all"], env=env, capture_output=True, text=True, timeout=120)
    print("scenario: cairn verify ->", v.returncode, v.stdout, v.stderr)
    if v.returncode != 0:
        fail(f"cairn verify exited {v.returncode}")
    if args.expect_commit and not re.search(rf"^version {args.expect_commit} +L3 +good", v.stdout, re.M):
        fail(f"cairn verify does not find version {args.expect_commit} good in L3")
    shutil.rmtree(env["CAIRN_CACHE_DIR"])
    cmd = [cairn, "run", "-n", str(args.np), "--nodes", str(args.nodes), "--", *app_command(args, args.app), *app_args(args)]
    return run_checked(args, cmd, env, "the restart from L3")


def run_checked(args, cmd, env, what):
    """Runs one `cairn run`, prints what it said, fails the scenario unless it exited 0."""
    print("scenario:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    out = p.stdout + p.stderr
    print(out)
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}")
    return out


def run_reshape(args):
    """Write on --np ranks over --nodes, then restart on M ranks over K nodes (--reshape M:K), from L1
    (caches kept) or L3 (--from l3: caches removed); with --app2 the restart is another language's heat2d."""
    ref = reference_result(args)
    work = os.path.join(args.build, "tests", "integration", "work", args.name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = base_env(args, work)
    if args.app2:  # heat2d in another language is the same application: the user says so (one job per prefix)
        env["CAIRN_APP_NAME"] = "heat2d"
    cairn = os.path.join(args.build, "tools", "cairn")
    first = [cairn, "run", "-n", str(args.np), "--nodes", str(args.nodes), "--", *app_command(args, args.app),
             *app_args(args), "--iters", "170"]
    run_checked(args, first, env, "the writing run")
    if args.from_level == "l3":
        shutil.rmtree(env["CAIRN_CACHE_DIR"])
    m, _, k = args.reshape.partition(":")
    second = [cairn, "run", "-n", m, "--nodes", k, "--", *app_command(args, args.app2 or args.app), *app_args(args)]
    return run_checked(args, second, env, f"the restart on {m} ranks")


class StateWatch(threading.Thread):
    """Polls <prefix>/.cairn/state every 2 ms while the job runs: the latest key=value map, and when each
    version number was first seen (the state's `version` is set as a checkpoint starts)."""

    def __init__(self, prefix):
        super().__init__(daemon=True)
        self.path = os.path.join(prefix, ".cairn", "state")
        self.latest = {}
        self.first_seen = {}  # version -> time.time() when first seen
        self.stop = False
        self.proc = None  # the job, once started: wait() gives up when it has exited

    def run(self):
        while not self.stop:
            try:
                kv = dict(l.split("=", 1) for l in open(self.path).read().splitlines() if "=" in l)
                self.latest = kv
                v = int(kv.get("version", "0"))
                self.first_seen.setdefault(v, time.time())
            except (OSError, ValueError):
                pass
            time.sleep(0.002)

    def wait(self, pred, what, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            kv = self.latest
            try:
                if kv and pred(kv):
                    return kv
            except (KeyError, ValueError):
                pass
            if self.proc is not None and self.proc.poll() is not None:
                fail(f"the job exited ({self.proc.returncode}) before {what}; state {self.latest}")
            time.sleep(0.002)
        fail(f"timed out waiting for {what}; state {self.latest}")

    def right_after_a_checkpoint(self):
        """Waits until a new checkpoint has been taken (its blocking part done); returns (version, time)."""
        seen = int(self.wait(lambda kv: int(kv["l1"]) >= 2, "two checkpoints")["version"])
        kv = self.wait(lambda kv: int(kv["version"]) > seen and kv.get("phase") != "checkpoint",
                       "the end of the next checkpoint")
        return int(kv["version"]), time.time()


def cairn_halt(args, prefix, *options):
    cmd = [os.path.join(args.build, "tools", "cairn"), "halt", prefix, *options]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    print("scenario:", " ".join(cmd), "->", p.returncode, p.stdout.strip(), p.stderr.strip(), flush=True)
    if p.returncode != 0:
        fail(f"cairn halt {' '.join(options)} exited {p.returncode}")
    return p.stdout


def interrupted_runs(args, cmd, env, work):
    """The first run must exit on request (halt file, end time, signal); the second resumes from L1.

    halt-file        an empty <prefix>/.cairn/halt (the old meaning: checkpoint, then exit)
    end-time         CAIRN_END_TIME 4 s ahead with CAIRN_HALT_SECONDS=1
    signal           SIGUSR1 to rank 0; signal-usr2: SIGUSR2 with CAIRN_EXIT_SIGNAL=USR2
    halt-checkpoints `cairn halt --checkpoints 2`: the job exits after exactly the version the halt
                     names (checkpoints_from + 2), at one of its own checkpoints
    halt-before      `cairn halt --before T` with CAIRN_HALT_SECONDS=2: a new checkpoint and the exit
                     fall between T-2 and T
    halt-after       `cairn halt --after T`, T just after a checkpoint and before the next: the job exits
                     after that next one (run with --sleep-ms 60: checkpoints >= 1.2 s apart)
    halt-seconds     CAIRN_END_TIME 8 s ahead and `cairn halt --seconds 4`: checkpoint and exit between
                     end-4 and end
    halt-immediate   `cairn halt --immediate` right after a checkpoint: the job exits without another
                     (run with --sleep-ms 60 too: the halt must land before the next checkpoint, and
                     starting `cairn halt` on a loaded machine took over 0.2 s)
    Every halt-* mode removes the halt with `cairn halt --unset` before the second run, which must
    restart from the first run's newest version and give the failure-free result.
    """
    prefix = env["CAIRN_PREFIX"]
    mode = args.interrupt
    first_env = dict(env)
    if mode == "end-time":
        end_time = int(time.time()) + 4
        first_env["CAIRN_END_TIME"] = str(end_time)
        first_env["CAIRN_HALT_SECONDS"] = "1"
    elif mode == "halt-before":
        first_env["CAIRN_HALT_SECONDS"] = "2"
    elif mode == "halt-seconds":
        end_time = int(time.time()) + 8
        first_env["CAIRN_END_TIME"] = str(end_time)
    elif mode == "signal-usr2":
        first_env["CAIRN_EXIT_SIGNAL"] = "USR2"
    watch = StateWatch(prefix)
    watch.start()
    proc = subprocess.Popen(cmd, env=first_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watch.proc = proc
    lines = []  # (time, line) as the job prints them

    def read_output():
        for line in proc.stdout:
            lines.append((time.time(), line))

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    expect = {}  # what the poke decided the outcome must be

    def poke():
        # end-time has nothing to poke: its end time is in the job's environment, and on a loaded
        # machine the job may reach it before its second checkpoint.
        if mode in ("halt-file", "signal", "signal-usr2", "halt-checkpoints", "halt-before", "halt-seconds"):
            kv = watch.wait(lambda kv: int(kv["l1"]) >= 2, "two checkpoints")
        if mode == "halt-file":
            open(os.path.join(prefix, ".cairn", "halt"), "w").close()
        elif mode in ("signal", "signal-usr2"):
            os.kill(int(kv["pid"]), signal.SIGUSR1 if mode == "signal" else signal.SIGUSR2)
        elif mode == "halt-checkpoints":
            cairn_halt(args, prefix, "--checkpoints", "2")
            listed = json.loads(cairn_halt(args, prefix, "--list", "--json"))
            expect["version"] = listed["conditions"]["checkpoints_from"] + 2
        elif mode == "halt-before":
            expect["before"] = int(time.time()) + 3
            cairn_halt(args, prefix, "--before", str(expect["before"]))
        elif mode == "halt-seconds":
            cairn_halt(args, prefix, "--seconds", "4")
        elif mode == "halt-after":
            v, done = watch.right_after_a_checkpoint()
            expect["after"] = int(math.ceil(done + 0.1))
            expect["version"] = v + 1
            cairn_halt(args, prefix, "--after", str(expect["after"]))
        elif mode == "halt-immediate":
            v, _ = watch.right_after_a_checkpoint()
            expect["version"] = v
            cairn_halt(args, prefix, "--immediate")

    poke_failed = []

    def poke_checked():
        try:
            poke()
        except SystemExit:  # fail() in this thread: stop the job, report after
            poke_failed.append(True)
            proc.kill()

    t = threading.Thread(target=poke_checked)
    t.start()
    proc.wait(timeout=args.timeout)
    reader.join(timeout=10)
    t.join()
    watch.stop = True
    watch.join()
    if poke_failed:
        fail("could not interrupt the first run (see above)")
    out1 = "".join(line for _, line in lines)
    print(out1)
    if proc.returncode != 0:
        fail(f"the interrupted run exited {proc.returncode}")
    exits = [(when, line) for when, line in lines if re.search(r"exiting on request at iteration \d+", line)]
    if not exits:
        fail("the first run did not exit on request")
    exit_time, exit_line = exits[-1]
    iteration = int(re.search(r"iteration (\d+)", exit_line).group(1))
    if re.search(r"^result ", out1, re.M):
        fail("the first run ran to the end despite the request")
    state = dict(l.split("=", 1) for l in open(os.path.join(prefix, ".cairn", "state")).read().splitlines() if "=" in l)
    final = int(state["version"])
    print(f"scenario: exited at iteration {iteration}, {exit_time:.3f}; newest version {final}; expected {expect}")
    arguments = app_args(args)
    checkpoint_every = int(arguments[arguments.index("--checkpoint-every") + 1])
    if "version" in expect and final != expect["version"]:
        fail(f"the job's newest version is {final}, expected {expect['version']}")
    if mode in ("halt-checkpoints", "halt-after") and iteration % checkpoint_every != 0:
        fail(f"exited at iteration {iteration}, not right after one of the job's own checkpoints")
    if mode == "halt-before" and not expect["before"] - 2 <= exit_time < expect["before"]:
        fail(f"exited at {exit_time:.3f}, outside [before - 2, before) = [{expect['before'] - 2}, {expect['before']})")
    # Not before the end time less CAIRN_HALT_SECONDS (on a loaded machine the last checkpoint may end
    # after the end time itself).
    if mode == "end-time" and exit_time < end_time - 1:
        fail(f"exited at {exit_time:.3f}, before end - 1 = {end_time - 1}")
    if mode == "halt-seconds" and not end_time - 4 <= exit_time < end_time:
        fail(f"exited at {exit_time:.3f}, outside [end - 4, end) = [{end_time - 4}, {end_time})")
    if mode in ("halt-before", "halt-seconds"):
        start = expect["before"] - 2 if mode == "halt-before" else end_time - 4
        if watch.first_seen.get(final, 0) < start:
            fail(f"version {final} was started before the halt's time {start}: no checkpoint was taken for it")
    if mode == "halt-after" and exit_time < expect["after"]:
        fail(f"exited at {exit_time:.3f}, before after={expect['after']}")

    if mode == "halt-file":
        os.remove(os.path.join(prefix, ".cairn", "halt"))
    elif mode.startswith("halt-"):
        cairn_halt(args, prefix, "--unset")
    # The resumed run needs no slowing down.
    resumed = list(cmd)
    if "--sleep-ms" in resumed:
        i = resumed.index("--sleep-ms")
        del resumed[i:i + 2]
    proc2 = subprocess.run(resumed, env=env, capture_output=True, text=True, timeout=args.timeout)
    out2 = proc2.stdout + proc2.stderr
    print(out2)
    if proc2.returncode != 0:
        fail(f"the resumed run exited {proc2.returncode}")
    if not re.search(rf"^restart: version {final} from level L1$", out2, re.M):
        fail(f"the resumed run did not restart from version {final} at L1")
    return out2


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build")
    p.add_argument("--name")
    p.add_argument("--scheme", default="xor", choices=["single", "partner", "xor", "rs"])
    p.add_argument("--np", type=int, default=8)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--kill", help="node(s) to kill, e.g. 2 or 1,2")
    p.add_argument("--at", default="8", help="checkpoint at which to kill; C1,C2,...: attempt k at Ck")
    p.add_argument("--retries", type=int, help="cairn run --retries")
    p.add_argument("--spares", type=int, default=0, help="cairn run --spares")
    p.add_argument("--no-relaunch", action="store_true", help="cairn run --no-relaunch (no result expected)")
    p.add_argument("--scavenge", action="store_true", help="cairn run --scavenge")
    p.add_argument("--expect-failures", type=int, help="failed attempts the summary must count")
    p.add_argument("--expect-spare", action="append", default=[],
                   help="SPARE:OLD:RANK - spare node SPARE replaced OLD and its cache holds RANK's record")
    p.add_argument("--expect-commit", type=int, help="version the scavenge must commit in L3")
    p.add_argument("--restart-from-l3", action="store_true",
                   help="with --no-relaunch: cairn verify, remove the caches, and restart from L3 (--expect)")
    p.add_argument("--phase", default="compute", choices=["compute", "checkpoint", "flush"])
    p.add_argument("--flush-every", type=int, default=4)
    p.add_argument("--damage", choices=["l1-flip", "l1-truncate", "l3-flip", "l3-truncate", "l3-incremental",
                                        "l3-drop-base"],
                   help="damage a file before the relaunch (also the hook's own mode)")
    p.add_argument("--expect", help="LEVEL[:VERSION] the relaunch must restart from, e.g. L2:8")
    p.add_argument("--expect-fail", help="regex: the job must fail with a message matching it")
    p.add_argument("--interrupt", choices=["halt-file", "end-time", "signal", "signal-usr2", "halt-checkpoints",
                                           "halt-before", "halt-after", "halt-seconds", "halt-immediate"],
                   help="ask the first run to exit (see interrupted_runs), then resume")
    p.add_argument("--env", action="append", default=[], help="extra VAR=VALUE for the job")
    p.add_argument("--no-spare", nargs="?", const="shrink", choices=["shrink", "oversubscribe"],
                   help="relaunch on the surviving nodes only (shrink), or every rank on them (oversubscribe)")
    p.add_argument("--stall", type=float, help="cairn run --stall SECONDS")
    p.add_argument("--hang-once", help="RANK:C - in the first attempt, stop rank RANK once C versions are at L1")
    p.add_argument("--reshape", help="M:K - after a run on --np ranks, restart on M ranks over K nodes")
    p.add_argument("--from", dest="from_level", choices=["l1", "l3"], default="l1",
                   help="with --reshape: keep the caches (l1) or remove them (l3)")
    p.add_argument("--sleep-ms", type=int, default=0, help="heat2d's sleep per iteration")
    p.add_argument("--app", choices=["c", "fortran", "python", "rewrite", "synthetic"], default="c",
                   help="the job: heat2d, heat2d_f or heat2d.py (the reference is always heat2d's), or "
                        "rewrite_app (rewrites its whole state after each checkpoint; its own reference), or "
                        "synthetic sweeping a tenth of its state (its own reference)")
    p.add_argument("--app-args", help="the application's arguments instead of its defaults (one string)")
    p.add_argument("--expect-log", action="append", default=[], help="regex the job's output must match")
    p.add_argument("--app2", choices=["c", "fortran", "python"],
                   help="with --reshape: the job that restarts (default: --app)")
    p.add_argument("--timeout", type=int, default=240)
    args = p.parse_args()
    if args.damage and not args.build:  # running as the launcher's hook
        damage(args.damage)
        return
    if not args.build or not args.name:
        p.error("--build and --name are required")
    run_scenario(args)


if __name__ == "__main__":
    main()
