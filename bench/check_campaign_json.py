#!/usr/bin/env python3
"""Smoke check of `cairn-bench --campaign --json` (bench_smoke_campaign): the consistency of a short
campaign's numbers, not their values. One JSON object with every key; every fraction in [0, 1]; each
failure's parts (re-done work, teardown, start-up, restart) summing to its total and every policy's
breakdown to its time lost; the wall time accounted for (failure-free + checkpoints + lost + other); the
failures each policy met being the schedule's, in order, at their times (the same seed gives the same
failures: `--schedule --json` twice, and another seed gives others); every restart's level named; the plot
written when matplotlib is there; nothing left behind (caches; the work directory only where --keep was
asked to keep it, and none by a campaign that fails); and the kept runs analysed again (`--from REPORT
--reanalyse`) give the same figures.
Usage: check_campaign_json.py [--plot-python PYTHON] CAIRN_BENCH [args...] (PYTHON: the interpreter cairn plot
uses; the plot is checked when it has matplotlib)"""
import glob
import json
import os
import subprocess
import sys
import tempfile


def leftovers():
    return set(glob.glob("/tmp/cairn-bench-campaign.*")) | set(glob.glob("/dev/shm/cairn-cbc-*"))


def fail(msg, out=""):
    sys.exit(f"FAIL: {msg}\n{out[-20000:]}")


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def close(a, b, tol=1e-6):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


argv = sys.argv[1:]
plot_python = None
if argv[:1] == ["--plot-python"]:
    plot_python, argv = argv[1], argv[2:]
bench, args = argv[0], argv[1:]
seed_args = [a for i, a in enumerate(args) if a in ("--seed", "--mtbf", "--work", "--mix", "--ranks", "--nodes")
             or (i > 0 and args[i - 1] in ("--seed", "--mtbf", "--work", "--mix", "--ranks", "--nodes"))]


def schedule(extra):
    p = subprocess.run([bench, "--campaign", "--schedule", "--json"] + extra, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        fail(f"--schedule exited {p.returncode}", p.stdout + p.stderr)
    return json.loads(p.stdout)["schedule"]


first, again = schedule(seed_args), schedule(seed_args)
if first != again or not first:
    fail("the same seed gave different (or no) failure schedules", json.dumps([first, again]))
other_seed = [a for a in seed_args]
if "--seed" in other_seed:
    other_seed[other_seed.index("--seed") + 1] = str(int(other_seed[other_seed.index("--seed") + 1]) + 1)
else:
    other_seed += ["--seed", "2"]
if schedule(other_seed) == first:
    fail("another seed gave the same schedule")

plot = None
if plot_python and subprocess.run([plot_python, "-c", "import matplotlib"], capture_output=True).returncode == 0:
    import atexit
    import shutil
    plot = os.path.join(tempfile.mkdtemp(prefix="cairn-campaign-plot."), "campaign.svg")
    atexit.register(shutil.rmtree, os.path.dirname(plot), True)  # on every way out, a failure's too

import atexit
import shutil
keep_base = tempfile.mkdtemp(prefix="cairn-campaign-keep.")  # --keep keeps the work directory here
atexit.register(shutil.rmtree, keep_base, True)
before = leftovers()
cmd = [bench] + args + (["--plot", plot] if plot else []) + ["--keep", "--prefix", keep_base]
p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
if p.returncode != 0:
    fail(f"exit {p.returncode}", p.stdout + p.stderr)
try:
    r = json.loads(p.stdout)
except json.JSONDecodeError as e:
    fail(f"not one JSON object ({e})", p.stdout + p.stderr)
out = p.stdout

for k in ("mode", "run", "campaign", "failure_free", "optimum", "policies", "targets"):
    if k not in r:
        fail(f"key {k} missing", out)
if r["mode"] != "campaign":
    fail("mode", out)
c = r["campaign"]
for k in ("ranks", "nodes", "spares", "size_bytes", "step_s", "iterations", "work_s", "mtbf_s", "l3_mtbf_s", "mix",
          "seed", "flush_every", "schedule"):
    if k not in c:
        fail(f"campaign.{k} missing", out)
if c["schedule"] != first:
    fail("the campaign's schedule is not the one --schedule gives for the same seed", out)
free = r["failure_free"]["wall_s"]
if not (number(free) and free > 0):
    fail("failure_free.wall_s", out)
free_step = r["failure_free"].get("step_s")
if not (number(free_step) and c["step_s"] <= free_step < free / c["iterations"] + 1e-9):
    fail(f"failure_free.step_s {free_step}: a step as the application had it, at least --step-ms, within the wall", out)
if not (r["optimum"]["daly_interval_s"] > 0 and r["optimum"]["checkpoint_cost_s"] > 0):
    fail("optimum", out)

names = [x["name"] for x in r["policies"]]
if "auto" not in names or "L3 only" not in names or not any(n.startswith("fixed") for n in names):
    fail(f"policies {names}: auto, a fixed interval and L3 only expected", out)
keys = ("name", "interval", "levels", "wall_s", "attempts", "result", "checkpoints", "checkpoint_time_s",
        "checkpoint_cost_s", "mean_interval_s", "failures", "useful_fraction", "lost_s", "lost_breakdown_s",
        "largest_part", "lost_per_failure_s", "restart_levels", "other_s", "model", "step_s")
parts = ("redone_s", "teardown_s", "startup_s", "restart_s")
met = 0
for pol in r["policies"]:
    name = pol.get("name")
    for k in keys:
        if k not in pol:
            fail(f"{name}: key {k} missing", out)
    if pol["result"] != r["failure_free"]["result"]:
        fail(f"{name}: result {pol['result']} differs from the failure-free run's", out)
    if not 0 <= pol["useful_fraction"] <= 1:
        fail(f"{name}: useful fraction {pol['useful_fraction']} outside [0, 1]", out)
    m = pol["model"]
    for k in ("fraction", "fraction_at_set_mtbf"):
        if m.get(k) is not None and not 0 <= m[k] <= 1:
            fail(f"{name}: model.{k} {m[k]} outside [0, 1]", out)
    if m.get("fraction") is not None:
        if not close(m["difference_points"], (pol["useful_fraction"] - m["fraction"]) * 100, 1e-9):
            fail(f"{name}: model.difference_points", out)
        if m["within_2_points"] != (abs(m["difference_points"]) <= 2) or (not m["within_2_points"] and not m.get("misses")):
            fail(f"{name}: within_2_points / misses", out)
    ml = m.get("multilevel")
    if not isinstance(ml, dict) or "classes" not in ml:
        fail(f"{name}: model.multilevel missing", out)
    elif ml.get("fraction") is not None:
        if not 0 <= ml["fraction"] <= 1:
            fail(f"{name}: model.multilevel.fraction {ml['fraction']} outside [0, 1]", out)
        if not close(ml["difference_points"], (pol["useful_fraction"] - ml["fraction"]) * 100, 1e-9):
            fail(f"{name}: model.multilevel.difference_points", out)
        if ml["within_2_points"] != (abs(ml["difference_points"]) <= 2):
            fail(f"{name}: model.multilevel.within_2_points", out)
        if sum(c["failures"] for c in ml["classes"].values()) != len(pol["failures"]):
            fail(f"{name}: model.multilevel.classes do not count every failure", out)
        if pol["step_s"] > 0 and not close(ml["steps_slower"], pol["step_s"] / free_step - 1, 1e-9):
            fail(f"{name}: model.multilevel.steps_slower is not its step over the failure-free run's", out)
        if not close(ml["slowed_steps_points"] + ml["outside_model_points"], pol["other_s"] / pol["wall_s"] * 100, 1e-6):
            fail(f"{name}: the slowed steps and the rest outside the model do not add up to other_s", out)
    if not close(pol["useful_fraction"], free / pol["wall_s"], 1e-9):
        fail(f"{name}: useful fraction is not failure-free / wall", out)
    fs = pol["failures"]
    met += len(fs)
    if len(fs) + 1 > pol["attempts"]:
        fail(f"{name}: {len(fs)} failures in {pol['attempts']} attempts", out)
    sums = {k: 0.0 for k in parts}
    for i, f in enumerate(fs):
        if any(f[k] < 0 for k in parts):
            fail(f"{name}: failure {i}: a negative part", out)
        if not close(sum(f[k] for k in parts), f["total_s"], 1e-9):
            fail(f"{name}: failure {i}: the parts do not sum to its total", out)
        for k in parts:
            sums[k] += f[k]
        # the schedule's failures, in order, each struck no earlier than due
        want = first[i]
        if not close(f["due_s"], want["at_s"], 1e-9) or f["at_s"] < f["due_s"] - 0.05:
            fail(f"{name}: failure {i} due {f['due_s']} at {f['at_s']}, the schedule says {want['at_s']}", out)
        kind = "job" if pol["levels"] == "L3 only" else want["kind"]
        if f["kind"] != kind:
            fail(f"{name}: failure {i} is {f['kind']}, the schedule says {kind}", out)
        if not f["cut_short"] and f["level"] not in ("L1", "L2", "L3", "none"):
            fail(f"{name}: failure {i}: restart level {f['level']!r}", out)
        if pol["levels"] == "L3 only" and f["level"] in ("L1", "L2"):
            fail(f"{name}: a one-level run restarted from {f['level']}", out)
    for k in parts:
        if not close(sums[k], pol["lost_breakdown_s"][k], 1e-9):
            fail(f"{name}: lost_breakdown_s.{k} is not the sum over its failures", out)
    if not close(sum(pol["lost_breakdown_s"].values()), pol["lost_s"], 1e-9):
        fail(f"{name}: the breakdown does not sum to the time lost", out)
    if fs and pol["largest_part"] + "_s" != max(parts, key=lambda k: pol["lost_breakdown_s"][k]):
        fail(f"{name}: largest_part", out)
    if not close(free + pol["checkpoint_time_s"] + pol["lost_s"] + pol["other_s"], pol["wall_s"], 1e-9):
        fail(f"{name}: wall != failure-free + checkpoints + lost + other", out)
    if sum(pol["restart_levels"].values()) != sum(1 for f in fs if f["level"]):
        fail(f"{name}: restart_levels do not count the restarts", out)
    if pol["checkpoints"] > 0 and not close(pol["checkpoint_cost_s"] * pol["checkpoints"], pol["checkpoint_time_s"], 1e-6):
        fail(f"{name}: checkpoint cost x count != checkpoint time", out)
if met == 0:
    fail("no policy met a failure: the campaign measured nothing", out)
t = r["targets"]
a = t.get("auto_against_best_fixed")
if not a or not close(a["ratio"], a["auto"] / a["best_fixed_fraction"], 1e-9) or a["within_5_percent"] != (a["ratio"] >= 0.95):
    fail("targets.auto_against_best_fixed", out)
g = t.get("multilevel_against_l3_only")
if not g or not close(g["gain_points"], (g["multilevel"] - g["l3_only"]) * 100, 1e-9) or "causes" not in g:
    fail("targets.multilevel_against_l3_only", out)
if (t["model_within_2_points"]["within"] > t["model_within_2_points"]["policies"]
        or t["model_within_2_points"].get("multilevel_within", -1) > t["model_within_2_points"]["policies"]
        or t["model_within_2_points"].get("multilevel_within", -1) < 0):
    fail("targets.model_within_2_points", out)
if plot:
    if r.get("plot") != plot or not os.path.getsize(plot) or "useful" not in open(plot).read():
        fail(f"the plot {plot} was not drawn", out + p.stderr)
left = leftovers() - before
if left:
    fail(f"left behind: {sorted(left)}", out)
kept = r.get("kept", "")
if os.path.dirname(kept) != keep_base or os.listdir(keep_base) != [os.path.basename(kept)]:
    fail(f"--keep --prefix {keep_base}: kept {kept!r}, and {keep_base} holds {os.listdir(keep_base)}", out)

# The kept runs analysed again: the same figures (the analysis reads only what the runs left).
saved = os.path.join(keep_base, "report.json")
with open(saved, "w") as f:
    json.dump(r, f)
p = subprocess.run([bench, "--campaign", "--from", saved, "--reanalyse", "--json"], capture_output=True, text=True,
                   timeout=120)
if p.returncode != 0:
    fail(f"--from {saved} --reanalyse exited {p.returncode}", p.stdout + p.stderr)
again = json.loads(p.stdout)
for a, b in zip(r["policies"], again["policies"]):
    for k in ("wall_s", "attempts", "checkpoints", "checkpoint_time_s", "step_s", "failures", "useful_fraction"):
        if a[k] != b[k]:
            fail(f"--reanalyse: {a['name']}.{k} {b[k]!r}, the run's report says {a[k]!r}", p.stdout)
if again["failure_free"]["wall_s"] != r["failure_free"]["wall_s"]:
    fail("--reanalyse: the failure-free run's wall time differs", p.stdout)
del r["kept"]
with open(saved, "w") as f:
    json.dump(r, f)
p = subprocess.run([bench, "--campaign", "--from", saved, "--reanalyse"], capture_output=True, text=True, timeout=60)
if p.returncode != 2 or "run the campaign with --keep" not in p.stderr:
    fail(f"--reanalyse of a report without a kept work directory: exit {p.returncode}", p.stdout + p.stderr)

# A campaign that fails (its application cannot run) stops with exit 1 and, not asked to keep it, leaves
# neither its work directory nor a cache behind.
bad = list(args)
bad[bad.index("--app") + 1] = "/bin/false"
if "--factors" in bad:
    bad[bad.index("--factors") + 1] = ""
else:
    bad += ["--factors", ""]
before = leftovers()
p = subprocess.run([bench] + bad + ["--no-l3-only"], capture_output=True, text=True, timeout=300)
if p.returncode != 1 or "cairn run failed" not in p.stderr:
    fail(f"a campaign whose application fails: exit {p.returncode}", p.stdout + p.stderr)
left = leftovers() - before
if left:
    fail(f"a failed campaign left behind: {sorted(left)}", p.stderr)
print(f"ok: {len(r['policies'])} policies, {met} failures met, useful fractions "
      + ", ".join(f"{x['name']} {x['useful_fraction']:.3f}" for x in r["policies"]))
