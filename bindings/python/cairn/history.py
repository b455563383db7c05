"""The job history, <prefix>/.cairn/history: read and summarised for cairn.plot.

The file is JSON lines written by the job's rank 0, one event per line (docs/format.md, "The job
history"). This reader follows that section's rules: a line that is not one JSON object with an
integer "v" >= 1 is skipped with a warning, lines of a newer format are skipped (one warning with their
count), the bytes after the last newline (a line torn by a crash) are skipped with a warning, unknown
events and fields are ignored. Python's json keeps integers exact (nanosecond times need 61 bits).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

FORMAT = 1  # the newest line format this reader knows
LEVEL_NAMES = ("L1", "L2", "L3")
_MAX_WARNINGS = 5


def history_path(prefix: str) -> str:
    return os.path.join(prefix, ".cairn", "history")


def level_number(name: Any) -> int:
    """"L2" -> 2; 0 for anything else."""
    return LEVEL_NAMES.index(name) + 1 if name in LEVEL_NAMES else 0


def parse(data: bytes, first_line: int = 1) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The history lines of a whole file's bytes (in file order, only formats this reader knows) and
    the warnings about what was skipped."""
    lines: List[Dict[str, Any]] = []
    warnings: List[str] = []
    bad = newer = 0
    *complete, rest = data.split(b"\n")
    for number, raw in enumerate(complete, start=first_line):
        if not raw.strip(b" \t\r"):
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            v = obj.get("v")
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError('no integer "v" >= 1')
        except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            bad += 1
            if bad <= _MAX_WARNINGS:
                warnings.append(f"line {number}: not a history line ({e}); skipped")
            continue
        if v > FORMAT:
            newer += 1
            continue
        lines.append(obj)
    if rest:
        warnings.append(f"line {first_line + len(complete)}: torn last line ({len(rest)} bytes without a newline: "
                        "a write cut short), skipped")
    if bad > _MAX_WARNINGS:
        warnings.append(f"{bad - _MAX_WARNINGS} more line(s) that are not history lines, skipped")
    if newer:
        warnings.append(f"{newer} line(s) of a newer format (v > {FORMAT}, written by a newer cairn), skipped")
    return lines, warnings


def read(path: str) -> Optional[Tuple[List[Dict[str, Any]], List[str]]]:
    """(lines, warnings) of the history file at `path`; None when there is none. OSError when it
    cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return parse(data)


# ---- the summary ----------------------------------------------------------------------------------------

@dataclass
class LevelRecord:
    """A version's passage through one level (times in Unix ns)."""

    start_ns: int
    end_ns: int
    seconds: float      # what the bandwidth is computed over: L1 the blocking copy, L2 and L3 end - start
    bytes: int          # snapshot bytes over every rank (0: unknown)
    launch: int         # index into Summary.launches
    at_finalize: bool = False
    l3_bytes_written: int = 0  # L3: bytes put into L3 files over every rank (incremental: the changed
                               # chunks; compressed: after compression); 0: unknown

    @property
    def bandwidth(self) -> float:
        """Aggregate bytes per second; 0 when unknown."""
        return self.bytes / self.seconds if self.bytes and self.seconds > 0 else 0.0


@dataclass
class VersionRecord:
    version: int
    launch: int
    levels: List[Optional[LevelRecord]] = field(default_factory=lambda: [None, None, None])
    discarded: bool = False


@dataclass
class Failure:
    version: int
    level: int  # 1..3; 0 for a version the application discarded
    t_ns: int
    error: str
    launch: int


@dataclass
class Restart:
    version: int
    level: int
    start_ns: int
    end_ns: int
    rejected: bool = False


@dataclass
class Launch:
    id: str
    start_ns: int
    last_ns: int
    started: bool = False
    finalized: bool = False
    end_status: str = ""
    ranks: int = 0
    nodes: int = 0
    restarts: List[Restart] = field(default_factory=list)
    versions: List[int] = field(default_factory=list)


@dataclass
class Summary:
    launches: List[Launch] = field(default_factory=list)
    versions: Dict[int, VersionRecord] = field(default_factory=dict)  # by version, in increasing order
    failures: List[Failure] = field(default_factory=list)
    first_ns: int = 0
    last_ns: int = 0

    def restarts(self) -> List[Tuple[int, Restart]]:
        """Every restart with the index of its launch, in file order."""
        return [(i, r) for i, launch in enumerate(self.launches) for r in launch.restarts]


def _int(line: Dict[str, Any], key: str, fallback: int = 0) -> int:
    value = line.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


def _num(line: Dict[str, Any], key: str) -> float:
    value = line.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def summarize(lines: List[Dict[str, Any]]) -> Summary:
    """Every launch, version at every level, restart and failure the lines tell of."""
    s = Summary()
    index: Dict[str, int] = {}
    for line in lines:
        ev = line.get("ev")
        t = _int(line, "t")
        for x in (t, _int(line, "start_ns"), _int(line, "end_ns")):
            if x > 0:
                s.first_ns = min(s.first_ns, x) if s.first_ns else x
                s.last_ns = max(s.last_ns, x)
        launch_id = str(line.get("launch", ""))
        if launch_id not in index:
            index[launch_id] = len(s.launches)
            s.launches.append(Launch(launch_id, _int(line, "start_ns", t), 0))
        li = index[launch_id]
        launch = s.launches[li]
        launch.last_ns = max(launch.last_ns, t, _int(line, "end_ns"))
        if ev == "start":
            launch.started, launch.start_ns = True, t
            launch.ranks = _int(line, "ranks")
            groups = line.get("groups")
            launch.nodes = _int(line, "nodes", len(groups) if isinstance(groups, list) else 0)
        elif ev == "restart":
            launch.restarts.append(Restart(_int(line, "version"), level_number(line.get("level")),
                                           _int(line, "start_ns", t), _int(line, "end_ns", t)))
        elif ev == "restart_rejected":
            for r in reversed(launch.restarts):
                if r.version == _int(line, "version"):
                    r.rejected = True
                    break
        elif ev in ("l1", "l2", "l3"):
            lv = int(ev[1])
            v = _int(line, "version")
            record = s.versions.setdefault(v, VersionRecord(v, li))
            start, end = _int(line, "start_ns", t), _int(line, "end_ns", t)
            seconds = _num(line, "copy_s") if lv == 1 else (end - start) / 1e9 if end > start else 0.0
            record.levels[lv - 1] = LevelRecord(start, end, seconds, _int(line, "bytes"), li,
                                                line.get("at_finalize") is True, _int(line, "l3_bytes_written"))
            if lv == 1:
                launch.versions.append(v)
        elif ev in ("fail", "discard"):
            v = _int(line, "version")
            level = level_number(line.get("level")) if ev == "fail" else 0
            s.failures.append(Failure(v, level, t, str(line.get("error", "")), li))
            if ev == "discard" and v:
                s.versions.setdefault(v, VersionRecord(v, li)).discarded = True
        elif ev == "end":
            launch.finalized = True
            launch.end_status = str(line.get("status", ""))
        # other events: a newer writer's, ignored
    s.versions = dict(sorted(s.versions.items()))
    return s
