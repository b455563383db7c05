#!/usr/bin/env python3
"""The useful fraction from this machine to many nodes: a model fed by the per-stage times a
`cairn-bench --campaign --json` run measured (docs/performance.md, "From this machine to 10^4 nodes").

    python3 bench/scale_model.py CAMPAIGN.json [MORE.json ...] [--node-mtbf 5y] [--nodes 2,16,128,1024,10000]
        [--state-per-node 64G] [--copy-bandwidth 9G] [--l2-restart-bandwidth 0.8G] [--fs-write 1T]
        [--fs-read 1.5T] [--launch-per-doubling 2] [--allgather-round 20e-6] [--job-share SHARE] [--json]

MORE.json: campaigns at other rank counts on this machine; their measured stage times and fractions are
printed beside the first's, and each one's own fraction beside the model's from its own stages (the
model's shape against runs at 2, 4, 8 ranks).

Per N nodes (one failure group each) it takes from the campaign, measured on this machine:
  delta      the time a checkpoint blocks the application (multilevel auto's mean): its fixed part (the
             measured cost less the campaign's state at --copy-bandwidth, cairn-bench's l1_checkpoint
             figure) plus the state per node at --copy-bandwidth;
  teardown   the launcher noticing the failure and ending the job, measured;
  startup    launching the job again, measured, plus --launch-per-doubling seconds per doubling of the
             nodes beyond the campaign's (a launcher's fan-out tree; srun/PMIx at 10^4 nodes: tens of s);
  restart    L1/L2 restart measured (search + read + rebuild), its fixed part plus the state per node at
             --l2-restart-bandwidth (cairn-bench's restart_l2 figure; an L2 rebuild reads a set's pieces,
             so its time per node does not grow with N for a set size that does not), plus the restart
             search's allgathers of small records: 3 rounds of log2 N at --allgather-round seconds each;
and the file system: a version of N nodes takes N * state / fs-write to flush (each node's share of
the file system is fs-write / N) and N * state / fs-read to read back.

Failures: N / node-MTBF per second; a share (--job-share, default the campaign's mix) lose the whole
job (only L3 serves), the rest one node (L2 serves). Overhead per second of computation, first order
(docs/intervals.md's multilevel model with the restart costs added):
  multilevel: H = delta/tau + l_node (tau/2 + R_node) + l_job (q tau/2 + t_flush + R_job),
              q >= t_flush / tau (the flusher keeps up), minimised over tau and q;
  L3 only:    H = delta/tau + l (tau/2 + t_flush + R_job), tau >= t_flush;
  useful fraction = 1 / (1 + H). At the campaign's own N and MTBF the same formulas give the fraction
  to hold against the measured one (the check of the model's level; the shape is checked against
  campaigns run at 2, 4 and 8 ranks).
"""
import argparse
import json
import math
import sys

UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
YEAR = 365.25 * 86400


def size(text):
    t = text.strip().lower().rstrip("b")
    return float(t[:-1]) * UNITS[t[-1]] if t and t[-1] in UNITS and t[-1].isalpha() else float(t)


def duration(text):
    t = text.strip().lower()
    for suffix, scale in (("y", YEAR), ("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * scale
    return float(t)


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def measured(report):
    """The per-stage times of the campaign's multilevel auto run (and of L3 only, for its restart)."""
    pols = {p["name"]: p for p in report["policies"]}
    auto = pols.get("auto") or report["policies"][0]
    one = pols.get("L3 only")
    whole = [f for f in auto["failures"] if not f["cut_short"]]
    low = [f for f in whole if f["level"] in ("L1", "L2")] or whole
    c = report["campaign"]
    return {
        "nodes": c["nodes"],
        "state_per_node": c["size_bytes"] * c["ranks"] / c["nodes"],
        "mtbf": c["mtbf_s"],
        "delta": auto["checkpoint_cost_s"],
        "teardown": mean(f["teardown_s"] for f in whole),
        "startup": mean(f["startup_s"] for f in whole),
        "restart_l12": mean(f["restart_s"] for f in low),
        "restart_l3": mean(f["restart_s"] for f in (one or auto)["failures"] if f["level"] == "L3") if one else None,
        "fraction_auto": auto["useful_fraction"],
        "fraction_l3": one["useful_fraction"] if one else None,
        "job_share": _job_share(c["mix"]),
        "flush_every": c["flush_every"],
    }


def _job_share(mix):
    w = dict((k, float(v)) for k, v in (item.split(":") for item in mix.split(",")))
    total = sum(w.values())
    return w.get("job", 0) / total if total else 0


def stages(m, n, a, state=None):
    """The model's costs at n nodes with `state` bytes per node (None: the campaign's own, as measured)."""
    doublings = max(0.0, math.log2(n / m["nodes"]))
    search = 3 * math.ceil(math.log2(max(n, 2))) * a.allgather_round
    here = m["state_per_node"]
    delta_fixed = max(m["delta"] - here / a.copy_bandwidth, 0.0)
    restart_fixed = max(m["restart_l12"] - here / a.l2_restart_bandwidth, 0.0)
    if state is None:
        delta, restart = m["delta"], m["restart_l12"]
        state = here
    else:
        delta = delta_fixed + state / a.copy_bandwidth
        restart = restart_fixed + state / a.l2_restart_bandwidth
    relaunch = m["teardown"] + m["startup"] + a.launch_per_doubling * doublings
    return {
        "delta": delta,
        "relaunch": relaunch,
        "search": search,
        "r_node": relaunch + restart + search,
        "t_flush": n * state / a.fs_write,
        "r_job": relaunch + search + restart_fixed + n * state / a.fs_read,
    }


def best_multilevel(s, l_node, l_job):
    best = None
    for q in range(1, 200):
        # H(tau) = A/tau + B tau + C: the best tau is sqrt(A/B), within the flusher's bound
        a_ = s["delta"]
        b_ = l_node / 2 + l_job * q / 2
        c_ = l_node * s["r_node"] + l_job * (s["t_flush"] + s["r_job"])
        tau = max(math.sqrt(a_ / b_) if b_ > 0 else 1e9, s["t_flush"] / q)
        h = a_ / tau + b_ * tau + c_
        if best is None or h < best[0]:
            best = (h, tau, q)
    return best


def best_one_level(s, lam):
    a_, b_ = s["delta"], lam / 2
    c_ = lam * (s["t_flush"] + s["r_job"])
    tau = max(math.sqrt(a_ / b_) if b_ > 0 else 1e9, s["t_flush"])
    return a_ / tau + b_ * tau + c_, tau


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("campaign", nargs="+", help="the JSON of cairn-bench --campaign --json (more: other rank counts)")
    p.add_argument("--node-mtbf", default="5y", help="MTBF of one node (default 5y)")
    p.add_argument("--nodes", default="2,16,128,1024,10000")
    p.add_argument("--state-per-node", default="64G", help="checkpointed bytes per node (0: the campaign's)")
    p.add_argument("--copy-bandwidth", default="9G", help="a checkpoint's copy into L1, bytes/s per node")
    p.add_argument("--l2-restart-bandwidth", default="0.8G", help="a restart's rebuild from L2, bytes/s per node")
    p.add_argument("--fs-write", default="1T", help="the parallel file system's write bandwidth, bytes/s, shared")
    p.add_argument("--fs-read", default="1.5T", help="its read bandwidth, bytes/s")
    p.add_argument("--launch-per-doubling", type=float, default=2.0, help="seconds of launch per doubling of nodes")
    p.add_argument("--allgather-round", type=float, default=20e-6, help="seconds per round of a small allgather")
    p.add_argument("--job-share", type=float, help="the share of failures that lose the whole job (default: the campaign's)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    a.state_per_node = size(a.state_per_node)
    a.fs_write, a.fs_read = size(a.fs_write), size(a.fs_read)
    a.copy_bandwidth, a.l2_restart_bandwidth = size(a.copy_bandwidth), size(a.l2_restart_bandwidth)
    reports = [json.load(open(path)) for path in a.campaign]
    m = measured(reports[0])
    share = m["job_share"] if a.job_share is None else a.job_share

    rows = []
    # The campaign's own point: its nodes, state and scaled-down MTBF, this machine's file system as measured
    # (the L3 restart it timed), to hold against what it measured.
    s = stages(m, m["nodes"], a)
    s["r_job"] = s["relaunch"] + (m["restart_l3"] or m["restart_l12"])
    s["t_flush"] = 0.0  # here the flush is measured inside the checkpoint cost and re-done work
    lam = 1 / m["mtbf"]
    h, tau, q = best_multilevel(s, lam * (1 - share), lam * share)
    rows.append({"point": "this campaign", "nodes": m["nodes"], "mtbf_s": m["mtbf"], **s, "tau_s": tau, "q": q,
                 "multilevel": 1 / (1 + h), "measured_auto": m["fraction_auto"], "measured_l3_only": m["fraction_l3"]})
    h1, tau1 = best_one_level(s, lam)
    rows[-1]["l3_only"] = 1 / (1 + h1)

    mtbf_node = duration(a.node_mtbf)
    for n in (int(x) for x in a.nodes.split(",")):
        s = stages(m, n, a, a.state_per_node or m["state_per_node"])
        lam = n / mtbf_node
        h, tau, q = best_multilevel(s, lam * (1 - share), lam * share)
        h1, tau1 = best_one_level(s, lam)
        rows.append({"point": "model", "nodes": n, "mtbf_s": 1 / lam, **s, "tau_s": tau, "q": q,
                     "multilevel": 1 / (1 + h), "l3_only": 1 / (1 + h1), "tau_l3_s": tau1})
    others = []
    for r in reports[1:]:
        o = measured(r)
        so = stages(o, o["nodes"], a)
        so["r_job"] = so["relaunch"] + (o["restart_l3"] or o["restart_l12"])
        so["t_flush"] = 0.0
        lo = 1 / o["mtbf"]
        ho, _, _ = best_multilevel(so, lo * (1 - share), lo * share)
        others.append({"measured": o, "model_multilevel": 1 / (1 + ho)})
    if a.json:
        print(json.dumps({"measured": m, "job_share": share, "rows": rows, "other_rank_counts": others}, indent=1))
        return 0
    print(f"measured ({m['nodes']} nodes, {m['state_per_node'] / 2**20:.0f} MiB per node): checkpoint {m['delta']:.4f} s, "
          f"teardown {m['teardown']:.2f} s, start-up {m['startup']:.2f} s, L1/L2 restart {m['restart_l12']:.3f} s, "
          f"L3 restart {m['restart_l3'] or 0:.3f} s; job failures {share:.0%}")
    print(f"{'nodes':>6} {'MTBF':>9} {'ckpt':>7} {'R node':>7} {'R job':>7} {'flush':>7} {'tau':>7} {'q':>3} "
          f"{'multilevel':>10} {'L3 only':>8}  measured")
    for r in rows:
        meas = ""
        if r["point"] == "this campaign":
            meas = f"auto {r['measured_auto']:.3f}" + (f", L3 only {r['measured_l3_only']:.3f}" if r["measured_l3_only"] else "")
        mt = r["mtbf_s"]
        mt_text = f"{mt / 3600:.2f} h" if mt >= 3600 else f"{mt:.1f} s"
        print(f"{r['nodes']:>6} {mt_text:>9} {r['delta']:>6.3f}s {r['r_node']:>6.1f}s {r['r_job']:>6.1f}s "
              f"{r['t_flush']:>6.1f}s {r['tau_s']:>6.1f}s {r['q']:>3} {r['multilevel']:>10.3f} {r['l3_only']:>8.3f}  {meas}")
    if others:
        print("\nmeasured here per rank count (one node per rank): the stages, and auto's fraction beside the model's")
        print(f"{'nodes':>6} {'ckpt':>8} {'teardown':>8} {'startup':>8} {'restart':>8} {'L3 rst':>7} {'measured':>8} {'model':>6}")
        for o in [{"measured": m, "model_multilevel": rows[0]["multilevel"]}] + others:
            x = o["measured"]
            print(f"{x['nodes']:>6} {x['delta']:>7.4f}s {x['teardown']:>7.2f}s {x['startup']:>7.2f}s "
                  f"{x['restart_l12']:>7.3f}s {x['restart_l3'] or 0:>6.3f}s {x['fraction_auto']:>8.3f} {o['model_multilevel']:>6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
