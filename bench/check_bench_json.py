#!/usr/bin/env python3
"""bench_smoke: run cairn-bench (the command line given) and check what it prints.

Asserts behaviour, not speed: exit status 0, stdout is exactly one JSON object, every figure is present
and a positive number, every target has a ratio and a pass/fail, the library's own timings (read from
the job history) are in `stages`, rank 0's first checkpoints are split into the copy and the rest
(`targets.l1_checkpoint_first.rank0_split`, one of each per warm-up checkpoint), an incremental version's
bytes at every level follow from the share of the state rewritten (`incremental_version`, the job's own
counts), and the run's work and cache directories are gone afterwards. Every mode but --service says
whether the guest hands free memory back to its host (`run.free_page_reporting`) and, where it uses the
cache, the page size of cache_dir (`run.cache_page_bytes`).

With --snapshot in the command line the object is the copy-against-copy-on-write report: per size in
--size, memcpy, the blocking and completion times of both snapshot modes, the writing loop's slowdowns,
app_lost for copy, cow and auto with both writers (all, 10pct), what auto took, and the eight targets
(each a ratio, a max_ratio and a pass/fail); cow must have protected the state. Every repetition of
app_lost is reported (--reps x --rounds of them) and its median and quartiles are of those; the two auto
targets carry their resampled interval.

With --redistribute in the command line the object is the N -> M report: per level (l1, l2, l3) the
N -> N and N -> M restart figures and the n_to_m_<level> target, and where the new job holds every old
rank's node the bare move of the same bytes beside it (from L1, and from L2 where the lost rank's set
keeps a copy), with the bound it sets and the excuse that follows. `--measured l1,l3` (before the
command) names the levels that must have been measured; the others must be null with a reason in `skipped`.

With --restart-after-loss the object is the relaunched job's restart after a lost node beside the same with
every cache intact: every time present and positive, per rank too, the level L2 after the loss and L1
intact, the target (a ratio, a max_ratio, a pass) and restart_after_loss_target_met agreeing with it.
"""
import glob
import json
import os
import subprocess
import sys

FIGURES = [
    "memcpy_gbps", "l1_checkpoint_gbps", "l2_partner_gbps", "l2_xor_gbps", "l2_rs_gbps",
    "isal_rs_encode_gbps", "rs_encode_gbps", "raw_write_gbps", "l3_flush_gbps", "l3_flush_stage_gbps",
    "restart_l1_gbps", "restart_l2_gbps", "restart_l3_gbps", "l3_flush_back_to_back_gbps",
    "slot_read_gbps", "restart_l1_call_alone_gbps", "l1_checkpoint_first_gbps", "mpi_exchange_gbps",
    "slot_prepare_gbps", "slot_first_write_gbps", "l1_checkpoint_very_first_gbps", "copy_exchange_gbps",
    "slot_prepare_fresh_gbps", "mpi_receive_gbps", "raw_overwrite_gbps",
]
# The library's own timings per measurement, from the job history (docs/performance.md).
STAGES = {"l1": ["copy_ms", "seal_ms"], "l2_xor": ["copy_ms", "seal_ms", "l2_ms"], "l3": ["copy_ms", "seal_ms", "l3_ms"],
          "l3_back_to_back": ["l3_ms"]}
TARGETS = ["l1_checkpoint", "l1_checkpoint_first", "rs_encode", "l3_flush", "l3_flush_back_to_back", "restart_l1",
           "restart_l2", "l2_partner", "l2_xor", "l2_rs"]
LEVELS = ["l1", "l2", "l3"]


def fail(msg, out=""):
    print("bench_smoke: FAIL: " + msg, file=sys.stderr)
    if out:
        print("--- stdout ---\n" + out, file=sys.stderr)
    sys.exit(1)


def positive(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def check_machine(run, has_cache, out):
    """What every report says of the machine: whether the guest hands free memory back to its host, and,
    where the mode uses the cache, the page size a slot-sized file in cache_dir gets (4 KiB or more, a
    power of two)."""
    fpr = run.get("free_page_reporting")
    if not isinstance(fpr, dict) or not isinstance(fpr.get("enabled"), bool) or \
            ("order" in fpr and not isinstance(fpr["order"], int)):
        fail("run.free_page_reporting is %r" % fpr, out)
    if has_cache:
        page = run.get("cache_page_bytes")
        if not isinstance(page, int) or page < 4096 or page & (page - 1):
            fail("run.cache_page_bytes is %r" % page, out)


def check_target(targets, t, out):
    entry = targets.get(t)
    if not isinstance(entry, dict):
        fail("targets.%s missing" % t, out)
    if not isinstance(entry.get("ratio"), (int, float)) or not isinstance(entry.get("pass"), bool):
        fail("targets.%s needs a numeric ratio and a boolean pass: %r" % (t, entry), out)
    if not isinstance(entry.get("min_ratio"), (int, float)):
        fail("targets.%s has no min_ratio" % t, out)


def check_default(data, out):
    for key in FIGURES:
        if key not in data:
            fail("missing key %s" % key, out)
        v = data[key]
        if not positive(v):
            fail("%s is %r, expected a positive number" % (key, v), out)
    targets = data.get("targets")
    if not isinstance(targets, dict):
        fail("missing targets object", out)
    for t in TARGETS:
        check_target(targets, t, out)
    for t in ("l2_partner", "l2_xor", "l2_rs"):
        if not positive(targets[t].get("copy_exchange_bound")) or not positive(targets[t].get("ratio_vs_copy_exchange")):
            fail("targets.%s: copy_exchange_bound / ratio_vs_copy_exchange missing: %r" % (t, targets[t]), out)
    if not positive(targets["restart_l1"].get("ratio_vs_slot_read_first_pass")):
        fail("targets.restart_l1.ratio_vs_slot_read_first_pass is %r" % targets["restart_l1"].get("ratio_vs_slot_read_first_pass"), out)
    for key in ("receive_then_read_bound", "ratio_vs_receive_then_read"):
        if not positive(targets["restart_l2"].get(key)):
            fail("targets.restart_l2.%s is %r" % (key, targets["restart_l2"].get(key)), out)
    for key in ("restart_l3_vs_raw_read", "l3_flush_back_to_back_vs_raw_overwrite"):
        if not positive(data.get("ratios", {}).get(key)):
            fail("ratios.%s is %r" % (key, data.get("ratios")), out)
    for key in ("ratio_vs_slot_first_write", "ratio_vs_slot_prepare_fresh"):
        if not positive(targets["l1_checkpoint_first"].get(key)):
            fail("targets.l1_checkpoint_first.%s is %r" % (key, targets["l1_checkpoint_first"].get(key)), out)
    split = targets["l1_checkpoint_first"].get("rank0_split")
    cache_versions = data.get("run", {}).get("cache_versions")
    if not isinstance(split, dict) or not isinstance(cache_versions, int):
        fail("targets.l1_checkpoint_first.rank0_split %r (run.cache_versions %r)" % (split, cache_versions), out)
    for key in ("copy_ms", "after_copy_ms"):
        if not isinstance(split.get(key), list) or len(split[key]) != cache_versions or \
                not all(isinstance(x, (int, float)) and x >= -0.05 for x in split[key]):
            fail("rank0_split.%s %r: one time per warm-up checkpoint (%d)" % (key, split.get(key), cache_versions), out)
    if not all(positive(x) for x in split["copy_ms"]) or not positive(split.get("later_copy_ms")) or \
            not isinstance(split.get("later_after_copy_ms"), (int, float)) or split["later_after_copy_ms"] < -0.05:
        fail("rank0_split: copies must be positive, the rest not below -0.05 ms (the two clocks): %r" % split, out)
    stages = data.get("stages", {})
    for stage, keys in STAGES.items():
        for key in keys + ["blocking_ms", "until_wait_ms"]:
            if not positive(stages.get(stage, {}).get(key)):
                fail("stages.%s.%s is %r, expected a positive number" % (stage, key, stages.get(stage, {}).get(key)), out)
    check_incremental_version(data, out)
    return "%d figures, %d targets, %d stages, incremental version bytes" % (len(FIGURES), len(TARGETS), len(STAGES))


def check_incremental_version(data, out):
    """The phase "incremental": per scheme, the bytes of the full version and of the incremental ones at
    each level (the job's own counts, over every rank), ratios that follow from them, and the target. The
    state's rewritten share is known, and L1 (the changed chunks copied), L2 partner (only the changed
    chunks sent) and L3 (only the changed chunks written) move exactly that share of a full version."""
    iv = data.get("incremental_version")
    if not isinstance(iv, dict) or not positive(iv.get("changed_fraction")):
        fail("incremental_version missing or without changed_fraction: %r" % iv, out)
    share = iv["changed_fraction"]
    for scheme in ("partner", "xor", "rs"):
        m = iv.get(scheme, {})
        full, inc = m.get("full", {}), m.get("incremental", {})
        keys = ("l1_copied_bytes", "l2_sent_bytes", "l3_written_bytes")
        if not all(positive(full.get(k)) for k in keys) or not all(positive(inc.get(k)) for k in keys):
            fail("incremental_version.%s: the bytes of every level must be known and positive: %r" % (scheme, m), out)
        if not positive(m.get("versions")):
            fail("incremental_version.%s.versions %r" % (scheme, m.get("versions")), out)
        # The median of the versions' sums lies among the levels' ratios (exactly their weighted mean where
        # every measured version moved the same bytes, as with copy).
        level_ratios = [m.get(k) for k in ("l1_ratio", "l2_ratio", "l3_ratio")]
        if not all(positive(r) for r in level_ratios) or not positive(m.get("ratio")) or \
                not min(level_ratios) - 0.002 <= m["ratio"] <= max(level_ratios) + 0.002:
            fail("incremental_version.%s: ratio %r outside its levels' %r" % (scheme, m.get("ratio"), level_ratios), out)
        # With copy (the bench's default) every level moves exactly the share rewritten (partner's L2
        # too); copy-on-write tracks writes in whole huge pages, and xor's L2 moves the k sources' spans.
        snapshot = data.get("run", {}).get("snapshot", "copy")
        levels = ("l1_ratio", "l3_ratio") + (("l2_ratio",) if scheme == "partner" and snapshot == "copy" else ())
        if snapshot != "copy":
            levels = ("l3_ratio",)
        for k in levels:
            if abs(m.get(k, -1) - share) > 0.01:
                fail("incremental_version.%s.%s %r: expected the rewritten share %r" % (scheme, k, m.get(k), share), out)
        if scheme == "partner":  # the restarts of the newest version from each level, beside a full version's
            r = m.get("restart", {})
            for level in LEVELS:
                a, b = r.get("incremental_ms", {}).get(level), r.get("full_ms", {}).get(level)
                if not positive(a) or not positive(b):
                    fail("incremental_version.partner.restart %s: %r, %r" % (level, a, b), out)
                check_target(data.get("targets", {}), "restart_incremental_" + level, out)
        t = data.get("targets", {}).get("incremental_version_bytes_" + scheme, {})
        if t.get("max_ratio") != 0.15 or t.get("ratio") != m["ratio"] or t.get("pass") != (m["ratio"] <= 0.15):
            fail("targets.incremental_version_bytes_%s %r does not agree with %r" % (scheme, t, m["ratio"]), out)


def set_sizes(nranks, set_size):
    """The bench's sets of consecutive ranks (bench_common.cpp's set_sizes): a last set of one joins the one before."""
    sets, left = [], nranks
    while left > 0:
        sets.append(min(left, set_size))
        left -= set_size
    if len(sets) >= 2 and sets[-1] < 2:
        sets[-2] += sets.pop()
    return sets


def check_move(data, level, n, m, target, out):
    """The bare move beside the N -> M restart: measured from L1 whenever the new job holds every old
    rank's node (M > N), and from L2 where the lost rank's set keeps a copy (its last set, which holds the
    lost old rank N - 1, is an xor pair); its bound, the restart's ratio to it, and the excuse that follows
    from both."""
    move = data.get("move_n_to_m_%s_gbps" % level)
    set_size = data.get("run", {}).get("set_size")
    if not isinstance(set_size, int) or set_size < 2:
        fail("run.set_size %r" % set_size, out)
    expected = m > n and (level == "l1" or (level == "l2" and n >= 2 and set_sizes(n, set_size)[-1] == 2))
    if level == "l3" or not expected:
        if move is not None:
            fail("%s: a bare move where none is measured: %r" % (level, move), out)
        return
    if not positive(move):
        fail("%s: move_n_to_m_%s_gbps %r, expected a positive number" % (level, level, move), out)
    ms = data.get("restart_ms", {}).get("move_n_to_m_" + level)
    if not isinstance(ms, list) or not ms or not all(positive(x) for x in ms):
        fail("%s: restart_ms.move_n_to_m_%s %r" % (level, level, ms), out)
    bound, vs_move, excused = target.get("move_bound"), target.get("ratio_vs_move"), target.get("excused_by_move")
    if not positive(bound) or not positive(vs_move) or target.get("min_ratio_vs_move") != 0.8 or not isinstance(excused, bool):
        fail("targets.n_to_m_%s: move_bound %r, ratio_vs_move %r, min_ratio_vs_move %r, excused_by_move %r" %
             (level, bound, vs_move, target.get("min_ratio_vs_move"), excused), out)
    if excused != (not target["pass"] and bound < 0.7 and vs_move >= 0.8):
        fail("targets.n_to_m_%s: excused_by_move %r does not follow from pass %r, bound %r, ratio_vs_move %r" %
             (level, excused, target["pass"], bound, vs_move), out)


def check_redistribute(data, measured, out):
    if data.get("mode") != "redistribute":
        fail("mode is %r, expected redistribute" % data.get("mode"), out)
    n, m = data.get("from_ranks"), data.get("to_ranks")
    if not isinstance(n, int) or not isinstance(m, int) or n == m:
        fail("from_ranks %r, to_ranks %r" % (n, m), out)
    if data.get("global_bytes") != n * data.get("bytes_per_old_rank", -1):
        fail("global_bytes is not from_ranks x bytes_per_old_rank", out)
    targets = data.get("targets", {})
    skipped = data.get("skipped", {})
    for level in LEVELS:
        same, moved = data.get("restart_n_to_n_%s_gbps" % level), data.get("restart_n_to_m_%s_gbps" % level)
        target = targets.get("n_to_m_" + level, {})
        if target.get("min_ratio") != 0.7:
            fail("targets.n_to_m_%s: min_ratio %r, expected 0.7" % (level, target.get("min_ratio")), out)
        if level in measured:
            if not positive(same) or not positive(moved):
                fail("%s: N -> N %r, N -> M %r, expected positive numbers" % (level, same, moved), out)
            check_target(targets, "n_to_m_" + level, out)
            check_move(data, level, n, m, target, out)
        elif moved is not None or target.get("ratio") is not None:
            fail("%s: expected not measured, got %r" % (level, moved), out)
        elif not any(level in k and isinstance(v, str) and v for k, v in skipped.items()):
            fail("%s: not measured and no reason in skipped: %r" % (level, skipped), out)
    run = data.get("run", {})
    if run.get("ranks") != n or run.get("to_ranks") != m:
        fail("run.ranks / run.to_ranks are %r / %r" % (run.get("ranks"), run.get("to_ranks")), out)
    return "%d -> %d, measured %s" % (n, m, ",".join(sorted(measured)))


SNAPSHOT_FIGURES = [
    "memcpy_ms", "l1_blocking_copy_ms", "l1_blocking_cow_ms", "l1_snapshot_copy_ms", "l1_snapshot_cow_ms",
    "snapshot_complete_copy_ms",
    "snapshot_complete_cow_ms", "loop_copy_ms", "loop_cow_ms", "loop_during_copy_x", "loop_after_copy_x", "loop_during_cow_x",
    "loop_after_cow_x", "cow_protected_pct", "cow_protected_10pct_pct",
] + ["%s_%s_%s_ms" % (what, mode, writer) for what in ("app_lost", "blocking") for mode in ("copy", "cow", "auto")
     for writer in ("all", "10pct")] + ["pass_all_ms", "pass_10pct_ms", "app_lost_cow_full_10pct_ms",
                                        "blocking_cow_full_10pct_ms", "cow_protected_full_10pct_pct",
                                        "two_thread_copy_10pct_ms"]
# app_lost_*: a difference of two timed windows, which noise can make negative on a tiny state.
SNAPSHOT_SIGNED = ["app_lost_%s_%s_ms" % (mode, writer) for mode in ("copy", "cow", "auto") for writer in ("all", "10pct")] + [
    "app_lost_cow_full_10pct_ms"]
# (mode, writer) of every session kind: the tenth writer's has cow with full versions (l1_incremental = off) too.
SNAPSHOT_KINDS = [(m, w) for m in ("copy", "cow", "auto") for w in ("all", "10pct")] + [("cow_full", "10pct")]
SNAPSHOT_TARGETS = ["l1_blocking_cow", "snapshot_complete_cow", "loop_during_cow", "loop_after_cow", "app_lost_cow_10pct",
                    "app_lost_cow_all", "app_lost_auto_10pct", "app_lost_auto_all", "app_lost_incremental_10pct"]


def check_snapshot(data, nsizes, reps, rounds, out):
    if data.get("mode") != "snapshot":
        fail("mode is %r, expected snapshot" % data.get("mode"), out)
    sizes = data.get("sizes")
    if not isinstance(sizes, list) or len(sizes) != nsizes:
        fail("sizes: expected a list of %d measurements" % nsizes, out)
    for s in sizes:
        for key in SNAPSHOT_FIGURES:
            if key in SNAPSHOT_SIGNED:
                if not isinstance(s.get(key), (int, float)):
                    fail("%s is %r for size %r, expected a number" % (key, s.get(key), s.get("size_bytes")), out)
            elif not positive(s.get(key)):
                fail("%s is %r for size %r, expected a positive number" % (key, s.get(key), s.get("size_bytes")), out)
        for key in ("cow_writes_waited", "state_huge_pages_copy_pct", "state_huge_pages_cow_pct") + tuple(
                "window_wait_%s_%s_ms" % (m, w) for m, w in SNAPSHOT_KINDS):
            if not isinstance(s.get(key), (int, float)):
                fail("%s missing" % key, out)
        for w in ("all", "10pct"):
            if not isinstance(s.get("window_%s_passes" % w), int) or s["window_%s_passes" % w] < 2:
                fail("window_%s_passes is %r, expected at least 2" % (w, s.get("window_%s_passes" % w)), out)
            if s.get("auto_took_" + w) not in ("copy", "cow", "cow, copy"):
                fail("auto_took_%s is %r" % (w, s.get("auto_took_" + w)), out)
        # Every repetition of every session of a mode and writer is reported, and the median and
        # quartiles are of those.
        for m, w in SNAPSHOT_KINDS:
            key = "app_lost_%s_%s" % (m, w)
            samples, quart = s.get(key + "_reps_ms"), s.get(key + "_quartiles_ms")
            if not isinstance(samples, list) or len(samples) != reps * rounds:
                fail("%s_reps_ms is %r, expected %d values (reps x rounds)" % (key, samples, reps * rounds), out)
            if not isinstance(quart, list) or len(quart) != 2 or not min(samples) <= quart[0] <= quart[1] <= max(samples):
                fail("%s_quartiles_ms is %r for the repetitions %r" % (key, quart, samples), out)
            if not isinstance(s.get(key + "_first_pass_ms"), (int, float)):
                fail("%s_first_pass_ms missing" % key, out)
            ordered = sorted(samples)
            mid = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2
            if abs(mid - s[key + "_ms"]) > 0.002 + 1e-9 * abs(mid):
                fail("%s_ms is %r, the median of its repetitions %r" % (key, s[key + "_ms"], mid), out)
        # The same bytes' memory traffic on another thread, beside cow's figures.
        for w, t in (("all", "app_lost_cow_all"), ("10pct", "app_lost_cow_10pct")):
            key = "other_core_%s" % w
            if not isinstance(s.get(key + "_ms"), (int, float)) or not positive(s.get(key + "_helper_ms")):
                fail("%s_ms / %s_helper_ms are %r / %r" % (key, key, s.get(key + "_ms"), s.get(key + "_helper_ms")), out)
            if not isinstance(s.get(key + "_bytes"), int) or not 0 < s[key + "_bytes"] <= s["size_bytes"]:
                fail("%s_bytes is %r for a state of %r" % (key, s.get(key + "_bytes"), s["size_bytes"]), out)
            if not isinstance(s.get("targets", {}).get(t, {}).get("other_core_ratio"), (int, float)):
                fail("targets.%s.other_core_ratio missing" % t, out)
        if s["other_core_all_bytes"] != s["size_bytes"]:
            fail("the full rewriter's version copies the whole state, not %r bytes" % s["other_core_all_bytes"], out)
        # A full version protects the whole state.
        if s["cow_protected_full_10pct_pct"] < 99:
            fail("cow_protected_full_10pct_pct is %r: the full versions did not protect the state" % s["cow_protected_full_10pct_pct"], out)
        inc = s.get("targets", {}).get("app_lost_incremental_10pct", {})
        for key in ("against_copy_ratio", "two_thread_copy_ratio"):  # null where the denominator was not above zero
            if key not in inc or not (inc[key] is None or isinstance(inc[key], (int, float))):
                fail("targets.app_lost_incremental_10pct.%s is %r" % (key, inc.get(key)), out)
        # Beside it, the tenth's blocks copied as fast as the rank can, and that copy's share of the loss.
        bound = inc.get("copy_bound", {})
        if not isinstance(inc.get("copy_bound_ms"), (int, float)) or inc["copy_bound_ms"] <= 0:
            fail("targets.app_lost_incremental_10pct.copy_bound_ms is %r" % inc.get("copy_bound_ms"), out)
        if bound.get("method") not in ("memcpy", "process_vm_readv") or not isinstance(bound.get("threads"), int) \
                or bound["threads"] < 1 or not 0 < bound.get("bytes", 0) <= s["other_core_10pct_bytes"]:
            fail("targets.app_lost_incremental_10pct.copy_bound is %r" % bound, out)
        share = inc.get("copy_share_of_loss", "missing")
        if not (share is None or isinstance(share, (int, float)) and share > 0):
            fail("targets.app_lost_incremental_10pct.copy_share_of_loss is %r" % share, out)
        for t in ("app_lost_auto_10pct", "app_lost_auto_all", "app_lost_incremental_10pct"):
            interval = s.get("targets", {}).get(t, {}).get("interval_95")
            if not isinstance(interval, list) or len(interval) != 2 or not interval[0] <= interval[1]:
                fail("targets.%s.interval_95 is %r, expected [low, high]" % (t, interval), out)
        for t in SNAPSHOT_TARGETS:
            entry = s.get("targets", {}).get(t, {})
            if entry.get("ratio", 0) is None and entry.get("why") and entry.get("pass") is False:
                continue  # no ratio of a denominator that the noise took to zero or below, and why
            if not isinstance(entry.get("ratio"), (int, float)) or not isinstance(entry.get("pass"), bool) \
                    or not isinstance(entry.get("max_ratio"), (int, float)):
                fail("targets.%s needs a ratio, a max_ratio and a boolean pass: %r" % (t, entry), out)
    run = data.get("run", {})
    for key in ("loadavg_1m_start", "loadavg_1m_end", "kernel", "ranks"):
        if key not in run:
            fail("run.%s missing" % key, out)
    if run.get("reps") != reps or run.get("rounds") != rounds:
        fail("run.reps / run.rounds are %r / %r, expected %d / %d" % (run.get("reps"), run.get("rounds"), reps, rounds), out)
    return "%d sizes, %d targets each, %d x %d repetitions" % (nsizes, len(SNAPSHOT_TARGETS), reps, rounds)


LOSS_FIGURES = [
    "init_restart_s", "init_restart_rank_median_s", "init_restart_intact_s", "init_restart_intact_rank_median_s",
    "init_restart_pretouched_s", "init_restart_intact_pretouched_s", "first_touch_s", "bare_read_s",
]
LOSS_PER_RANK = ["init_restart_s", "init_restart_intact_s", "init_restart_pretouched_s",
                 "init_restart_intact_pretouched_s", "first_touch_s"]


def check_restart_after_loss(data, out):
    if data.get("mode") != "restart-after-loss":
        fail("mode is %r, expected restart-after-loss" % data.get("mode"), out)
    for key in LOSS_FIGURES:
        if not positive(data.get(key)):
            fail("%s is %r, expected a positive number" % (key, data.get(key)), out)
    if data.get("restart_level_after_loss") != "L2" or data.get("restart_level_intact") != "L1":
        fail("restarted from %r after the loss and %r intact, expected L2 and L1"
             % (data.get("restart_level_after_loss"), data.get("restart_level_intact")), out)
    n = data.get("ranks")
    for key in LOSS_PER_RANK:
        v = data.get("per_rank", {}).get(key)
        if not isinstance(v, list) or len(v) != n or not all(positive(x) for x in v):
            fail("per_rank.%s is %r, expected %r positive numbers" % (key, v, n), out)
    if max(data["per_rank"]["init_restart_s"]) > data["init_restart_s"] * 1.000001 + 1e-6 and data["run"]["reps"] == 1:
        fail("init_restart_s is not the slowest rank's", out)
    for phase in ("after_loss", "intact"):
        for key in ("init", "restart_calls"):
            if not positive(data.get("phases_s", {}).get(phase, {}).get(key)):
                fail("phases_s.%s.%s is %r" % (phase, key, data.get("phases_s", {}).get(phase)), out)
    t = data.get("targets", {}).get("restart_after_loss", {})
    if t.get("max_ratio") != 2 or not isinstance(t.get("ratio"), (int, float)) or not isinstance(t.get("pass"), bool):
        fail("targets.restart_after_loss needs a ratio, max_ratio 2 and a boolean pass: %r" % t, out)
    if data.get("restart_after_loss_target_met") is not t["pass"]:
        fail("restart_after_loss_target_met %r, the target says %r" % (data.get("restart_after_loss_target_met"), t["pass"]), out)
    if len(data.get("reps_s", {}).get("init_restart_s", [])) != data.get("run", {}).get("reps"):
        fail("reps_s.init_restart_s: expected one figure per relaunch", out)
    return "restart after loss: %d ranks, ratio %.3f" % (n, t["ratio"])


SERVICE_TARGETS = ["service_blocking", "drain_1_agents", "drain_2_agents", "drain_4_agents", "compute_slowdown"]


def check_service(data, out):
    if data.get("mode") != "service":
        fail("mode is %r, expected service" % data.get("mode"), out)
    for key in ("raw_write_gbps", "raw_write_all_gbps"):
        if not positive(data.get(key)):
            fail("%s is %r" % (key, data.get(key)), out)
    for group, keys in (("checkpoint_blocking_ms", ("service", "embedded", "sync_write")),
                        ("drain_gbps", ("1", "2", "4")),
                        ("iteration_ms", ("no_checkpoints", "service", "embedded"))):
        for k in keys:
            if not positive(data.get(group, {}).get(k)):
                fail("%s.%s is %r" % (group, k, data.get(group, {}).get(k)), out)
    via = data.get("versions_via", {})
    for session in ("drain_1", "drain_2", "drain_4", "loop_service"):
        v = via.get(session, {})
        if not v.get("service") or v.get("embedded"):
            fail("%s: versions via the service %r, via the embedded flusher %r: the service did not move them all"
                 % (session, v.get("service"), v.get("embedded")), out)
    if via.get("loop_embedded", {}).get("service"):
        fail("the embedded session's versions went through the service", out)
    for t in SERVICE_TARGETS:
        check_target(data.get("targets", {}), t, out)
    return "service: %d targets" % len(SERVICE_TARGETS)


def check_placement_app(run, a, versions, out):
    """One application of one run: where its agents sat and why, how many, and its drain figures."""
    name = "%s/%s app %r" % (run.get("policy"), run.get("agents"), a.get("app"))
    agents = a.get("agents")
    if not isinstance(agents, list) or len(agents) != a.get("agent_count") or not agents:
        fail("%s: agent_count %r, agents %r" % (name, a.get("agent_count"), agents), out)
    for g in agents:
        if g.get("manager") not in ("m0", "m1") or not str(g.get("why", "")).startswith(run["policy"] + ":"):
            fail("%s: an agent placed on %r for %r" % (name, g.get("manager"), g.get("why")), out)
    if a.get("manager") != agents[0]["manager"]:
        fail("%s: manager %r is not its first agent's" % (name, a.get("manager")), out)
    if not isinstance(a.get("scaling_why"), str) or not a["scaling_why"]:
        fail("%s: scaling_why %r" % (name, a.get("scaling_why")), out)
    drains = a.get("drains_s")
    if not isinstance(drains, list) or len(drains) != versions or not all(positive(d) for d in drains):
        fail("%s: drains_s %r, expected %d positive numbers" % (name, drains, versions), out)
    if a.get("versions_measured") != versions - max(1, versions // 2):
        fail("%s: %r versions measured, expected the second half of %d" % (name, a.get("versions_measured"), versions), out)
    for key in ("drain_median_s", "drain_max_s", "blocking_median_s", "blocking_max_s", "interval_s"):
        if not isinstance(a.get(key), (int, float)) or isinstance(a.get(key), bool) or a[key] < 0:
            fail("%s: %s is %r" % (name, key, a.get(key)), out)
    if not positive(a["drain_median_s"]) or a["drain_max_s"] < a["drain_median_s"]:
        fail("%s: drain median %r, max %r" % (name, a["drain_median_s"], a["drain_max_s"]), out)
    # The JSON rounds to milliseconds and the bench decides on unrounded times: within half a
    # millisecond of the interval either answer is consistent.
    near = abs(a["drain_max_s"] - a["interval_s"]) <= 0.0005
    if not near and a.get("within_interval") is not (a["drain_max_s"] <= a["interval_s"]):
        fail("%s: within_interval %r for a drain max of %r s and an interval of %r s"
             % (name, a.get("within_interval"), a["drain_max_s"], a["interval_s"]), out)
    if not isinstance(a.get("agents_changed_before"), list):
        fail("%s: agents_changed_before %r" % (name, a.get("agents_changed_before")), out)
    if sum(a.get("via", {}).values()) != versions or not a["via"].get("service"):
        fail("%s: the versions' L3 copies by %r, expected %d, some by the service" % (name, a.get("via"), versions), out)


def check_placement(data, out):
    """--service --placement: every policy ran the three applications with one agent each, placed each agent
    with a reason of its own policy, measured every drain; stacking fills m0 (2 agents) first; interval keeps
    the small application away from the large one. Then the dynamic run (interval, --scale-agents): the large
    application, whose one agent cannot keep up (agents at --agent-bandwidth), was scaled up to 2 agents,
    and the comparison puts both allotments side by side."""
    if data.get("mode") != "service-placement":
        fail("mode is %r, expected service-placement" % data.get("mode"), out)
    versions = data.get("versions")
    policies = {p.get("policy"): p for p in data.get("policies", [])}
    if sorted(policies) != ["bandwidth", "interval", "stacking"]:
        fail("policies %r" % sorted(policies), out)
    dynamic = data.get("dynamic", {})
    if dynamic.get("policy") != "interval" or dynamic.get("agents") != "dynamic":
        fail("dynamic run: policy %r, agents %r" % (dynamic.get("policy"), dynamic.get("agents")), out)
    for p in list(policies.values()) + [dynamic]:
        apps = p.get("applications", [])
        if len(apps) != 3:
            fail("%s: %d applications" % (p.get("policy"), len(apps)), out)
        for a in apps:
            check_placement_app(p, a, versions, out)
        if sorted(n.get("name") for n in p.get("nodes", [])) != ["m0", "m1"]:
            fail("%s: nodes %r" % (p.get("policy"), p.get("nodes")), out)
    for name, p in policies.items():
        if p.get("agents") != "fixed" or any(a["agent_count"] != 1 or not a["scaling_why"].startswith("fixed:")
                                             for a in p["applications"]):
            fail("%s: the fixed allotment is one agent each: %r" % (name, p["applications"]), out)
    managers = lambda p: [a["manager"] for a in sorted(p["applications"], key=lambda a: a["app"])]
    if managers(policies["stacking"]) != ["m0", "m0", "m1"]:
        fail("stacking placed %r, expected m0, m0, m1" % managers(policies["stacking"]), out)
    if managers(policies["interval"])[1] == managers(policies["interval"])[0]:
        fail("interval put the small application beside the large one: %r" % managers(policies["interval"]), out)
    # The large application's one agent cannot drain a version per interval at the limit: the scenario.
    large_fixed = policies["interval"]["applications"][0]
    if large_fixed["within_interval"]:
        fail("the large application drained within its interval on one agent (%r s): the agents' limit did not hold"
             % large_fixed["drain_max_s"], out)
    large = dynamic["applications"][0]
    if large["agent_count"] != 2 or large.get("scaling_changes", 0) < 1 or " 2: " not in large["scaling_why"]:
        fail("dynamic agents: the large application has %r agents after %r changes (%r), expected 2"
             % (large["agent_count"], large.get("scaling_changes"), large["scaling_why"]), out)
    c = data.get("comparison", {})
    if c.get("policy") != "interval" or len(c.get("applications", [])) != 3:
        fail("comparison: %r" % c, out)
    for i, a in enumerate(c["applications"]):
        for side, run in (("fixed", policies["interval"]), ("dynamic", dynamic)):
            got, want = a.get(side, {}), run["applications"][i]
            for key in ("agent_count", "drain_median_s", "drain_max_s", "within_interval", "scaling_why", "via"):
                if got.get(key) != want[key]:
                    fail("comparison: app %d %s %s is %r, the run says %r" % (i, side, key, got.get(key), want[key]), out)
    for side in ("fixed", "dynamic"):  # within, and every version moved by the service
        kept = all(a[side]["within_interval"] and list(a[side]["via"]) == ["service"] for a in c["applications"])
        if c.get(side + "_all_within") is not kept:
            fail("comparison: %s_all_within is %r" % (side, c.get(side + "_all_within")), out)
    return "service placement: 3 policies fixed, dynamic: %s" % large["scaling_why"]


def main():
    args = sys.argv[1:]
    measured = set(LEVELS)
    if len(args) >= 2 and args[0] == "--measured":
        measured = set(x for x in args[1].split(",") if x)
        args = args[2:]
    if not args:
        fail("usage: check_bench_json.py [--measured l1,l2,l3] CAIRN_BENCH [ARGS...]")
    placement_caches_before = set(glob.glob("/dev/shm/cairn-cairn-bench-placement.*"))
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True, timeout=280)
    out = proc.stdout
    if proc.returncode != 0:
        fail("cairn-bench exited with status %d" % proc.returncode, out)
    try:
        data = json.loads(out)
    except json.JSONDecodeError as e:
        fail("stdout is not one JSON object: %s" % e, out)
    if not isinstance(data, dict):
        fail("stdout is JSON but not an object", out)
    if "--placement" in args:
        what = check_placement(data, out)
        left = set(glob.glob("/dev/shm/cairn-cairn-bench-placement.*")) - placement_caches_before
        if left:
            fail("the applications' caches were left behind: %s" % sorted(left), out)
        print("bench_smoke: OK (%s)" % what)
        return
    if "--snapshot" in args:
        def given(flag, default):
            return int(args[args.index(flag) + 1]) if flag in args else default
        what = check_snapshot(data, len(args[args.index("--size") + 1].split(",")), given("--reps", 5),
                              given("--rounds", 1), out)
    elif "--redistribute" in args:
        what = check_redistribute(data, measured, out)
    elif "--service" in args:
        what = check_service(data, out)
    elif "--restart-after-loss" in args:
        what = check_restart_after_loss(data, out)
    else:
        what = check_default(data, out)
        if data.get("run", {}).get("ranks") != 2:
            fail("run.ranks is %r" % data.get("run", {}).get("ranks"), out)
        # the default mode measures the copy path unless CAIRN_SNAPSHOT says otherwise
        if data.get("run", {}).get("snapshot") != os.environ.get("CAIRN_SNAPSHOT", "copy"):
            fail("run.snapshot is %r" % data.get("run", {}).get("snapshot"), out)
    run = data.get("run", {})
    if "--service" not in args:  # the service's report carries its own, shorter run object
        check_machine(run, "cache_fs" in run, out)
    for key in ("work_dir",) if "--service" in args else ("work_dir", "cache_job_dir"):
        path = run.get(key)
        if not path:
            fail("run.%s missing" % key, out)
        if os.path.exists(path):
            fail("%s was left behind" % path, out)
    print("bench_smoke: OK (%s)" % what)


if __name__ == "__main__":
    main()
