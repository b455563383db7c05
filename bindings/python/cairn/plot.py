"""cairn.plot: a job's checkpoint timeline, drawn with matplotlib (what `cairn plot --out FILE` runs).

    python3 -m cairn.plot --out job.svg (--prefix PREFIX | --history FILE | --summary FILE.json |
                                         --campaign FILE.json) [--width PIXELS] [--title TEXT]

From the job history (--prefix or --history; cairn.history reads it): every launch as a band labelled
with its restart (a dashed line and a marker at the moment the restart completed), a lane per level
with a bar per version from when the level began to when the version reached it, a red cross where a
level failed, and below the bandwidth per level over time (a line per level, broken between launches).
From --summary (what `cairn plot --json` prints when there is no history: the versions still on disk):
the same lanes, and the bandwidth per version and level (a line per level). The format follows the output's
extension (png, svg, pdf, or any other matplotlib writes). Artists carry ids (gid: "lane-L1",
"versions-L1", "bandwidth-L1", "launch-2", "restart-1", "failure-1"), kept in SVG output as element ids.
From --campaign (the JSON `cairn-bench --campaign --json` prints): the useful fraction per policy, a bar
each, with Daly's prediction beside it (gid "useful", "model"), and below where each policy's time went
beyond the failure-free run (stacked: checkpoints, re-done work, teardown, start-up, restart, other; gid
"spent-<part>").

Exit status: 0 written, 1 the file could not be written, 2 bad options, 3 nothing to plot.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from . import history as hist

LEVELS = ("L1", "L2", "L3")
LEVEL_TITLES = ("L1 cache", "L2 redundancy", "L3 prefix")
LEVEL_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c")
BAND_COLORS = ("#ecf2fa", "#faf3e8")  # alternate launches
RED, MUTED = "#d62728", "#787878"
EXIT_OK, EXIT_WRITE, EXIT_USAGE, EXIT_NOTHING = 0, 1, 2, 3


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def describe(summary: hist.Summary) -> str:
    """The summary line's middle, as `cairn plot` prints it."""
    restarts = summary.restarts()
    versions = list(summary.versions)
    text = _plural(len(summary.launches), "launch", "launches") + ", " + _plural(len(versions), "version", "versions")
    if versions:
        text += f" ({versions[0]}..{versions[-1]})"
    text += ", " + _plural(len(restarts), "restart", "restarts")
    if restarts:
        r = restarts[-1][1]
        text += f" (last: version {r.version} from {hist.LEVEL_NAMES[r.level - 1] if r.level else 'none'})"
    return text + ", " + _plural(len(summary.failures), "failure", "failures")


def _figure(width: int):
    from matplotlib.figure import Figure  # no pyplot: no display, no global state
    height = max(width * 16 // 25, 400)
    fig = Figure(figsize=(width / 100, height / 100), dpi=100)
    grid = fig.add_gridspec(2, 1, height_ratios=(3, 2), hspace=0.35, left=0.09, right=0.97, top=0.88, bottom=0.12)
    return fig, fig.add_subplot(grid[0]), fig.add_subplot(grid[1])


def _lanes(ax) -> None:
    """A lane per level, L1 on top."""
    ax.set_ylim(0.4, 3.6)
    ax.set_yticks([3, 2, 1], LEVELS)
    for i, tick in enumerate(ax.get_yticklabels()):
        tick.set_color(LEVEL_COLORS[i])
        tick.set_fontweight("bold")
    for lane, level in zip((3, 2, 1), LEVELS):
        ax.axhline(lane - 0.5, color="#e1e1e1", linewidth=0.8, gid=f"lane-{level}")
    ax.grid(axis="x", color="#e1e1e1", linewidth=0.8)


def _version_bars(ax, bars: List[List[tuple]], span: float) -> None:
    """bars[level]: (start_s, end_s, version); a bar per version, its number above where it fits."""
    min_width = span * 0.002
    for i, level in enumerate(LEVELS):
        lane = 3 - i
        items = bars[i]
        ax.broken_barh([(a, max(b - a, min_width)) for a, b, _ in items], (lane - 0.3, 0.45),
                       facecolors=LEVEL_COLORS[i], gid=f"versions-{level}", label=LEVEL_TITLES[i])
        last_end = -math.inf
        for a, b, v in items:
            x = (a + b) / 2
            if x - last_end > span * 0.025:
                ax.text(x, lane + 0.2, str(v), ha="center", va="bottom", fontsize=7)
                last_end = x


def _legend_and_titles(fig, ax, title: str, footer: str) -> None:
    room = int(fig.get_size_inches()[0] * 100 * 0.6 / 8)  # characters of 13 pt beside the legend
    if len(title) > room:
        title = title[:title.find(":") + 2] + "..." + title[len(title) - max(room - 25, 10):]
    fig.suptitle(title, x=0.02, ha="left", fontsize=13)
    fig.legend(*ax.get_legend_handles_labels(), loc="upper right", bbox_to_anchor=(0.99, 0.995), ncol=3,
               frameon=False, fontsize=9)
    fig.text(0.02, 0.015, footer, color=MUTED, fontsize=8)


def history_figure(summary: hist.Summary, title: str, footer: str, width: int = 1000):
    """The figure of a job history: the timeline on top, the bandwidth per level below."""
    fig, top, bottom = _figure(width)
    t0 = summary.first_ns
    span = max((summary.last_ns - t0) / 1e9, 1e-3)

    def sec(ns: int) -> float:
        return (ns - t0) / 1e9

    top.set_title("timeline (time since the first launch began): launches, restarts, versions per level",
                  loc="left", fontsize=9, color=MUTED)
    _lanes(top)
    for i, launch in enumerate(summary.launches):
        a, b = sec(launch.start_ns), max(sec(launch.last_ns), sec(launch.start_ns) + span * 0.002)
        top.axvspan(a, b, color=BAND_COLORS[i % 2], zorder=0, gid=f"launch-{i + 1}")
        label = f"launch {i + 1}" + "".join(
            f": restart {r.version} {hist.LEVEL_NAMES[r.level - 1] if r.level else 'none'}"
            + (" rejected" if r.rejected else "") for r in launch.restarts)
        if not launch.finalized:
            label += " (no finalize)"
            top.axvline(b, color=RED, linewidth=2, gid=f"unfinished-{i + 1}")
        # left-aligned in the band, or ending at its right edge where the axes end first
        fits = (span * 1.03 - a) / (span * 1.04) * width * 0.88 > 5.5 * len(label)
        top.text(a + span * 0.003 if fits else b - span * 0.003, 3.55, label, va="top", ha="left" if fits else "right",
                 fontsize=8, color=MUTED if launch.finalized else RED, clip_on=True)
    bars: List[List[tuple]] = [[], [], []]
    for v, record in summary.versions.items():
        for i, r in enumerate(record.levels):
            if r is not None:
                start = r.start_ns if 0 < r.start_ns <= r.end_ns else r.end_ns
                bars[i].append((sec(start), sec(r.end_ns), v))
    _version_bars(top, bars, span)
    for n, (_, r) in enumerate(summary.restarts(), start=1):
        x = sec(r.end_ns)
        top.axvline(x, color="#282828", linestyle="--", linewidth=1)
        top.plot([x], [3.45], marker="v", markersize=9, color="#282828", linestyle="none", gid=f"restart-{n}")
    for n, f in enumerate(summary.failures, start=1):
        lane = 3 - (f.level - 1 if 1 <= f.level <= 3 else 0)
        top.plot([sec(f.t_ns)], [lane], marker="x", markersize=9, markeredgewidth=2, color=RED, linestyle="none",
                 gid=f"failure-{n}")
    top.set_xlim(-span * 0.01, span * 1.03)

    bottom.set_title("bandwidth per level over time (bytes of all ranks / time at the level)", loc="left",
                     fontsize=9, color=MUTED)
    values = []
    for i, level in enumerate(LEVELS):
        xs: List[float] = []
        ys: List[float] = []
        previous_launch = None
        for record in summary.versions.values():
            r = record.levels[i]
            if r is None or r.bandwidth <= 0:
                continue
            if previous_launch is not None and r.launch != previous_launch:
                xs.append(math.nan)  # a break between launches
                ys.append(math.nan)
            xs.append(sec(r.end_ns))
            ys.append(r.bandwidth)
            values.append(r.bandwidth)
            previous_launch = r.launch
        bottom.plot(xs, ys, marker="o", markersize=3, color=LEVEL_COLORS[i], gid=f"bandwidth-{level}")
    _bandwidth_axis(bottom, values)
    bottom.set_xlim(top.get_xlim())
    bottom.set_xlabel("seconds since the first launch began")
    _legend_and_titles(fig, top, title, footer)
    return fig


def _bandwidth_axis(ax, values: Sequence[float]) -> None:
    from matplotlib.ticker import EngFormatter
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
    ax.yaxis.set_major_formatter(EngFormatter(unit="B/s"))
    ax.grid(color="#e1e1e1", linewidth=0.8)
    if not values:
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no level durations known", transform=ax.transAxes, ha="center", color=MUTED)


def disk_figure(summary: Dict[str, Any], title: str, footer: str, width: int = 1000):
    """The figure of the versions on disk (`cairn plot --json`'s "disk" data): lanes and bars per version."""
    fig, top, bottom = _figure(width)
    versions = summary.get("versions", [])
    times = [lv[k] for v in versions for lv in v["levels"].values() if lv for k in ("start_unix_ns", "end_unix_ns")]
    t0 = min(times) if times else 0
    span = max(((max(times) - t0) / 1e9) if times else 1.0, 1e-3)
    top.set_title("timeline (time since the first checkpoint still on disk)", loc="left", fontsize=9, color=MUTED)
    _lanes(top)
    bars: List[List[tuple]] = [[], [], []]
    for v in versions:
        for i, key in enumerate(("l1", "l2", "l3")):
            lv = v["levels"].get(key)
            if lv:
                bars[i].append(((lv["start_unix_ns"] - t0) / 1e9, (lv["end_unix_ns"] - t0) / 1e9, v["version"]))
    _version_bars(top, bars, span)
    top.set_xlim(-span * 0.02, span * 1.04)
    top.set_xlabel("seconds")

    bottom.set_title("bandwidth per level (snapshot bytes of all ranks / time to reach the level)", loc="left",
                     fontsize=9, color=MUTED)
    values = []
    positions = range(len(versions))
    for i, (key, level) in enumerate(zip(("l1", "l2", "l3"), LEVELS)):
        xs, ys = [], []
        for p, v in zip(positions, versions):
            lv = v["levels"].get(key)
            bw = lv.get("bandwidth_bytes_per_s") if lv else None
            if bw:
                xs.append(p)
                ys.append(bw)
        values += ys
        bottom.plot(xs, ys, marker="o", markersize=4, color=LEVEL_COLORS[i], gid=f"bandwidth-{level}")
    bottom.set_xticks(list(positions), [str(v["version"]) for v in versions])
    bottom.set_xlim(-0.5, len(versions) - 0.5)
    bottom.set_xlabel("version")
    _bandwidth_axis(bottom, values)
    _legend_and_titles(fig, top, title, footer)
    return fig


CAMPAIGN_PARTS = (("checkpoint_time_s", "checkpoints", "#1f77b4"), ("redone_s", "re-done work", "#d62728"),
                  ("teardown_s", "teardown", "#9467bd"), ("startup_s", "start-up", "#ff7f0e"),
                  ("restart_s", "restart", "#2ca02c"), ("other_s", "other", "#c7c7c7"))


def campaign_figure(report: Dict[str, Any], title: str, footer: str, width: int = 1000):
    """The useful fraction per policy beside Daly's model; below, where the time beyond the failure-free
    run went (seconds, stacked per policy)."""
    fig, top, bottom = _figure(width)
    policies = report.get("policies", [])
    names = [p.get("name", "?") for p in policies]
    xs = list(range(len(policies)))
    measured = [p.get("useful_fraction") or 0 for p in policies]
    model = [(p.get("model") or {}).get("fraction") for p in policies]
    top.bar([x - 0.2 for x in xs], measured, width=0.4, color=LEVEL_COLORS[0], label="measured", gid="useful")
    top.bar([x + 0.2 for x in xs], [m or 0 for m in model], width=0.4, color="#aec7e8", label="Daly's model",
            gid="model")
    for x, v in zip(xs, measured):
        top.text(x - 0.2, v + 0.01, f"{v:.3f}", ha="center", va="bottom", fontsize=7)
    top.set_xticks(xs, names, fontsize=8)
    low = min([v for v in measured + [m for m in model if m] if v > 0] or [0.5])
    top.set_ylim(max(0.0, low - 0.1), 1.0)
    top.set_ylabel("useful fraction")
    top.grid(axis="y", color="#e1e1e1", linewidth=0.8)
    base = [0.0] * len(policies)
    for key, label, color in CAMPAIGN_PARTS:
        if key == "checkpoint_time_s" or key == "other_s":
            values = [max(p.get(key) or 0, 0) for p in policies]
        else:
            values = [(p.get("lost_breakdown_s") or {}).get(key) or 0 for p in policies]
        bottom.bar(xs, values, bottom=base, width=0.6, color=color, label=label, gid=f"spent-{key[:-2]}")
        base = [b + v for b, v in zip(base, values)]
    bottom.set_xticks(xs, names, fontsize=8)
    bottom.set_ylabel("seconds beyond the failure-free run")
    bottom.grid(axis="y", color="#e1e1e1", linewidth=0.8)
    _legend_and_titles(fig, top, title, footer)
    bottom.legend(loc="upper left", fontsize=8, frameon=False, ncol=3)
    return fig


def campaign_footer(report: Dict[str, Any]) -> str:
    c = report.get("campaign", {})
    return (f"{c.get('ranks')} ranks on {c.get('nodes')} nodes, {c.get('work_s')} s of work; failures at MTBF "
            f"{c.get('mtbf_s')} s ({c.get('mix')}), seed {c.get('seed')}; failure-free run "
            f"{(report.get('failure_free') or {}).get('wall_s', 0):.1f} s; cairn-bench --campaign")


def save(fig, path: str) -> str:
    """Writes the figure to path (to path.tmp, then renamed over it) in the format of its extension."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    tmp = f"{path}.tmp"
    try:
        fig.savefig(tmp, format=ext)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return ext


def supported_formats() -> Dict[str, str]:
    from matplotlib.figure import Figure
    return Figure().canvas.get_supported_filetypes()


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m cairn.plot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="the file to write: .png, .svg, .pdf, ...")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prefix", help="the job's L3 prefix: its history is PREFIX/.cairn/history")
    source.add_argument("--history", help="a job history file")
    source.add_argument("--summary", help="the JSON `cairn plot --json` prints (the versions on disk); - for stdin")
    source.add_argument("--campaign", help="the JSON `cairn-bench --campaign --json` prints; - for stdin")
    p.add_argument("--width", type=int, default=1000, help="width in pixels at 100 dpi (default 1000)")
    p.add_argument("--title", help="the title (default: cairn checkpoints: PREFIX)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors (no warnings, no summary line)")
    args = p.parse_args(argv)
    formats = supported_formats()
    ext = os.path.splitext(args.out)[1].lower().lstrip(".")
    if ext not in formats:
        print(f"cairn plot: cannot write '{args.out}': the extension names no format matplotlib writes "
              f"({', '.join(sorted(formats))})", file=sys.stderr)
        return EXIT_USAGE
    if not 400 <= args.width <= 8000:
        print("cairn plot: --width must be 400..8000 pixels", file=sys.stderr)
        return EXIT_USAGE

    if args.campaign:
        try:
            with (sys.stdin if args.campaign == "-" else open(args.campaign)) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"cairn plot: cannot read the campaign {args.campaign}: {e}", file=sys.stderr)
            return EXIT_WRITE
        if not isinstance(data, dict) or not data.get("policies"):
            print("cairn plot: nothing to plot: the campaign holds no policy", file=sys.stderr)
            return EXIT_NOTHING
        what = f"from the campaign {args.campaign}: {len(data['policies'])} policies"
        fig = campaign_figure(data, args.title or "cairn campaign: useful fraction per policy", campaign_footer(data),
                              args.width)
    elif args.summary:
        with (sys.stdin if args.summary == "-" else open(args.summary)) as f:
            data = json.load(f)
        versions = data.get("versions", [])
        if not versions:
            print("cairn plot: nothing to plot: the summary holds no version", file=sys.stderr)
            return EXIT_NOTHING
        prefix = data.get("prefix", "")
        numbers = [v["version"] for v in versions]
        what = f"from the {len(versions)} version(s) on disk, {min(numbers)}..{max(numbers)}"
        footer = f"{len(versions)} version(s) on disk; no history: times from manifests and file mtimes (approximate)"
        fig = disk_figure(data, args.title or f"cairn checkpoints: {prefix}", footer, args.width)
    else:
        path = args.history or hist.history_path(args.prefix)
        prefix = args.prefix or os.path.dirname(os.path.dirname(os.path.abspath(path)))
        try:
            found = hist.read(path)
        except OSError as e:
            print(f"cairn plot: cannot read the history {path}: {e.strerror}", file=sys.stderr)
            return EXIT_WRITE
        if found is None:
            print(f"cairn plot: nothing to plot: no history at {path}", file=sys.stderr)
            return EXIT_NOTHING
        lines, warnings = found
        for w in warnings if not args.quiet else []:
            print(f"cairn plot: history {path}: {w}", file=sys.stderr)
        if not lines:
            print(f"cairn plot: nothing to plot: the history {path} holds no events", file=sys.stderr)
            return EXIT_NOTHING
        summary = hist.summarize(lines)
        what = f"from the history {path}: {describe(summary)}"
        footer = describe(summary) + "; times from the job history"
        fig = history_figure(summary, args.title or f"cairn checkpoints: {prefix}", footer, args.width)
    try:
        save(fig, args.out)
    except OSError as e:
        print(f"cairn plot: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        return EXIT_WRITE
    w, h = (int(round(x)) for x in fig.get_size_inches() * fig.dpi)
    if not args.quiet:
        print(f"cairn plot: wrote {args.out} ({w}x{h}) {what}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
