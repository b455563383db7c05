"""cairn.history (the job history reader) and cairn.plot (its picture), without MPI.

The history is written here line by line as docs/format.md ("The job history") specifies it; the
picture is checked through matplotlib's own objects (a line per level with a point per version, a bar
per version, a marker per restart and failure), and the command line by its exit statuses and files.
"""
import contextlib
import io
import json
import os
import tempfile
import unittest

from cairn import history, plot

T0 = 1_795_372_310_000_000_000  # nanoseconds: beyond a double's exact integers
MS = 1_000_000


def line(ev, launch, t, **fields):
    return json.dumps({"v": 1, "ev": ev, "launch": launch, "t": T0 + t, **fields})


def level_line(ev, launch, t, version, seconds=2 * MS, **fields):
    return line(ev, launch, t, version=version, start_ns=T0 + t - seconds, end_ns=T0 + t, bytes=4_000_000, **fields)


def sample_history():
    """Launch A writes 1..3 (3 at L3 too) and dies; launch B restarts 2 from L2, writes 4 and 5, one L3
    failure and one discarded version, and finalizes."""
    a, b = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
    out = [line("start", a, 0, ranks=4, nodes=2, groups=["node0", "node1"], redundancy="xor")]
    for v in (1, 2, 3):
        out.append(level_line("l1", a, 10 * v, v, copy_s=0.001))
        out.append(level_line("l2", a, 10 * v + 3, v))
    out.append(level_line("l3", a, 36, 3, seconds=5 * MS, l3_bytes_written=1_000_000))
    out.append(line("start", b, 100, ranks=4, nodes=2, groups=["node0", "node1"]))
    out.append(line("restart", b, 105, version=2, level="L2", start_ns=T0 + 101, end_ns=T0 + 105 * MS))
    for v in (4, 5):
        out.append(level_line("l1", b, 100 + 10 * v, v, copy_s=0.002))
        out.append(level_line("l2", b, 103 + 10 * v, v))
    out.append(line("fail", b, 160, version=5, level="L3", error="no space"))
    out.append(line("discard", b, 170, version=6, error="rank 1 passed valid=0"))
    out.append(line("end", b, 180, status="ok", versions=2, exit_requested=False))
    return [x.encode() for x in out]


class HistoryTest(unittest.TestCase):
    def test_reads_what_the_format_says(self):
        data = b"\n".join(sample_history()) + b"\n"
        lines, warnings = history.parse(data)
        self.assertEqual(warnings, [])
        s = history.summarize(lines)
        self.assertEqual([(L.id[0], L.started, L.finalized, L.versions) for L in s.launches],
                         [("a", True, False, [1, 2, 3]), ("b", True, True, [4, 5])])
        self.assertEqual(list(s.versions), [1, 2, 3, 4, 5, 6])
        self.assertTrue(s.versions[6].discarded)
        self.assertEqual([(i, r.version, r.level) for i, r in s.restarts()], [(1, 2, 2)])
        self.assertEqual([(f.version, f.level) for f in s.failures], [(5, 3), (6, 0)])
        l1 = s.versions[1].levels[0]
        self.assertEqual((l1.end_ns, l1.bytes), (T0 + 10, 4_000_000))  # integers kept exact
        self.assertAlmostEqual(l1.bandwidth, 4e9)
        self.assertAlmostEqual(s.versions[3].levels[2].bandwidth, 4_000_000 / 0.005)
        self.assertEqual(s.versions[3].levels[2].l3_bytes_written, 1_000_000)  # incremental: beside bytes
        self.assertEqual(s.versions[3].levels[0].l3_bytes_written, 0)
        self.assertEqual(s.first_ns, T0 + 36 - 5 * MS)  # the L3 write of version 3 began first

    def test_skips_what_it_cannot_read(self):
        good = sample_history()
        bad = [b"not json", b"[1, 2]", b'{"ev": "l1"}', b'{"v": 2, "ev": "l9"}', b'{"v": 3}', b"\xff\xfe"]
        data = b"\n".join(good[:3] + bad + good[3:]) + b'\n{"v":1,"ev":"l1","launch":"x","t":1,"vers'
        lines, warnings = history.parse(data)
        self.assertEqual(len(lines), len(good))
        self.assertEqual(len(warnings), 4 + 1 + 1, warnings)  # 4 bad lines, the torn one, the newer ones
        self.assertTrue(warnings[0].startswith("line 4: not a history line"), warnings)
        self.assertIn("torn last line", warnings[-2])
        self.assertIn("2 line(s) of a newer format", warnings[-1])
        many = b"\n".join([b"bad"] * 8) + b"\n"
        self.assertEqual(history.parse(many)[1][-1], "3 more line(s) that are not history lines, skipped")

    def test_no_file(self):
        self.assertIsNone(history.read("/nonexistent/.cairn/history"))


class FigureTest(unittest.TestCase):
    def setUp(self):
        lines, _ = history.parse(b"\n".join(sample_history()) + b"\n")
        self.summary = history.summarize(lines)

    def by_gid(self, fig):
        found = {}
        for ax in fig.axes:
            for artist in ax.get_children():
                if artist.get_gid():
                    found[artist.get_gid()] = artist
        return found

    def test_history_figure(self):
        fig = plot.history_figure(self.summary, "cairn checkpoints: /p", "footer", width=800)
        self.assertEqual(tuple(fig.get_size_inches() * fig.dpi), (800, 512))
        g = self.by_gid(fig)
        # a line per level, a point per version that reached it with a known bandwidth, broken by NaN
        # between the launches
        points = {lv: [x for x in g[f"bandwidth-{lv}"].get_xdata() if x == x] for lv in plot.LEVELS}
        self.assertEqual({lv: len(p) for lv, p in points.items()}, {"L1": 5, "L2": 5, "L3": 1})
        self.assertEqual(len(g["bandwidth-L1"].get_xdata()), 6)  # 3 + NaN + 2
        # a bar per version in each lane
        self.assertEqual([len(g[f"versions-{lv}"].get_paths()) for lv in plot.LEVELS], [5, 5, 1])
        # a marker per restart, a cross per failure, a band per launch, the killed one marked
        self.assertIn("restart-1", g)
        self.assertNotIn("restart-2", g)
        self.assertEqual(sorted(k for k in g if k.startswith("failure-")), ["failure-1", "failure-2"])
        self.assertEqual(g["failure-1"].get_ydata()[0], 1)  # L3's lane
        self.assertEqual(g["failure-2"].get_ydata()[0], 3)  # a discard: L1's lane
        self.assertIn("launch-2", g)
        self.assertIn("unfinished-1", g)
        self.assertNotIn("unfinished-2", g)
        self.assertEqual(plot.describe(self.summary),
                         "2 launches, 6 versions (1..6), 1 restart (last: version 2 from L2), 2 failures")

    def test_disk_figure(self):
        level = {"start_unix_ns": T0, "end_unix_ns": T0 + 50 * MS, "seconds": 0.05, "bytes": 8,
                 "bandwidth_bytes_per_s": 160.0}
        data = {"prefix": "/p", "source": "disk",
                "versions": [{"version": 8, "levels": {"l1": level, "l2": None, "l3": level}},
                             {"version": 9, "levels": {"l1": level, "l2": level, "l3": None}}]}
        g = self.by_gid(plot.disk_figure(data, "t", "f"))
        self.assertEqual([len(g[f"versions-{lv}"].get_paths()) for lv in plot.LEVELS], [2, 1, 1])
        self.assertEqual([len(g[f"bandwidth-{lv}"].get_xdata()) for lv in plot.LEVELS], [2, 1, 1])

    def test_campaign_figure(self):
        def policy(name, useful, model, redone):
            return {"name": name, "useful_fraction": useful, "model": {"fraction": model}, "checkpoint_time_s": 1.0,
                    "other_s": -0.5, "lost_breakdown_s": {"redone_s": redone, "teardown_s": 1, "startup_s": 2,
                                                          "restart_s": 0.5}}
        report = {"campaign": {"ranks": 4, "nodes": 4, "work_s": 60, "mtbf_s": 10, "mix": "node:1", "seed": 1},
                  "failure_free": {"wall_s": 61.0},
                  "policies": [policy("auto", 0.8, 0.82, 3), policy("fixed 1x", 0.79, None, 4),
                               policy("L3 only", 0.6, 0.65, 9)]}
        fig = plot.campaign_figure(report, "t", plot.campaign_footer(report), width=800)
        top, bottom = fig.axes[0], fig.axes[1]
        useful = [a for a in top.get_children() if a.get_gid() == "useful"]
        model = [a for a in top.get_children() if a.get_gid() == "model"]
        self.assertEqual([round(b.get_height(), 3) for b in useful], [0.8, 0.79, 0.6])
        self.assertEqual([round(b.get_height(), 3) for b in model], [0.82, 0, 0.65])  # no model: an empty bar
        redone = [a for a in bottom.get_children() if a.get_gid() == "spent-redone"]
        self.assertEqual([b.get_height() for b in redone], [3, 4, 9])
        other = [a for a in bottom.get_children() if a.get_gid() == "spent-other"]
        self.assertEqual([b.get_height() for b in other], [0, 0, 0])  # a negative remainder is not drawn


class CommandTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.prefix = self.dir.name
        os.makedirs(os.path.join(self.prefix, ".cairn"))
        self.history = history.history_path(self.prefix)

    def tearDown(self):
        self.dir.cleanup()

    def run_main(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = plot.main(list(args))
            except SystemExit as e:
                rc = e.code
        return rc, out.getvalue(), err.getvalue()

    def test_exit_statuses_and_formats(self):
        svg = os.path.join(self.prefix, "a.svg")
        self.assertEqual(self.run_main("--prefix", self.prefix, "--out", svg)[0], plot.EXIT_NOTHING)
        open(self.history, "w").close()
        rc, _, err = self.run_main("--prefix", self.prefix, "--out", svg)
        self.assertEqual(rc, plot.EXIT_NOTHING)
        self.assertIn("holds no events", err)
        with open(self.history, "wb") as f:
            f.write(b"\n".join(sample_history()) + b"\n")
        for ext, magic in (("svg", b"<?xml"), ("pdf", b"%PDF-"), ("png", b"\x89PNG")):
            path = os.path.join(self.prefix, "a." + ext)
            rc, out, _ = self.run_main("--history", self.history, "--out", path, "--width", "640")
            self.assertEqual(rc, plot.EXIT_OK)
            self.assertIn(f"wrote {path} (640x409) from the history {self.history}: 2 launches", out)
            with open(path, "rb") as f:
                self.assertEqual(f.read(len(magic)), magic)
            self.assertFalse(os.path.exists(path + ".tmp"))
        self.assertEqual(self.run_main("--prefix", self.prefix, "--out", "x.nope")[0], plot.EXIT_USAGE)
        self.assertEqual(self.run_main("--prefix", self.prefix, "--out", svg, "--width", "10")[0], plot.EXIT_USAGE)
        rc, out, err = self.run_main("--prefix", self.prefix, "--out", "/nonexistent/dir/a.svg")
        self.assertEqual(rc, plot.EXIT_WRITE)
        self.assertIn("cannot write", err)
        rc, out, err = self.run_main("--prefix", self.prefix, "--out", svg, "--quiet")
        self.assertEqual((rc, out, err), (plot.EXIT_OK, "", ""))

    def test_summary_input(self):
        path = os.path.join(self.prefix, "s.json")
        with open(path, "w") as f:
            json.dump({"prefix": self.prefix, "versions": []}, f)
        self.assertEqual(self.run_main("--summary", path, "--out", "a.svg")[0], plot.EXIT_NOTHING)

    def test_campaign_input(self):
        path = os.path.join(self.prefix, "c.json")
        with open(path, "w") as f:
            json.dump({"policies": []}, f)
        self.assertEqual(self.run_main("--campaign", path, "--out", "a.svg")[0], plot.EXIT_NOTHING)
        with open(path, "w") as f:
            f.write("{not json")
        self.assertEqual(self.run_main("--campaign", path, "--out", "a.svg")[0], plot.EXIT_WRITE)


if __name__ == "__main__":
    unittest.main()
