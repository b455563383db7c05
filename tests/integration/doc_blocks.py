"""The fenced code blocks of cairn's documentation (README.md, docs/*.md), shared by doc_samples_test.py
(which runs the whole programs) and doc_fragments_test.py (which checks every other block).

A block may be preceded, on the line just above its fence, by a marker that readers do not see:

    <!-- sample: fragment c, wrapper=halt_loop -->      compiled inside tests/integration/doc_fragments/halt_loop.c
    <!-- sample: fragment fortran, wrapper=NAME -->     likewise, doc_fragments/NAME.F90, against the module
    <!-- sample: fragment python, session=c -->         byte-compiled; what it calls on `c` is cairn.Session's
    <!-- sample: header -->                             a declaration copied from include/cairn/*.h, as it is there

A whole program (C with `int main`, Fortran with `program`, Python with `cairn.Session(`) needs no marker.
"""
import os
import re

LANGUAGE = {"c": "c", "fortran": "fortran", "f90": "fortran", "python": "python", "py": "python"}
WHOLE_PROGRAM = {
    "c": re.compile(r"\bint\s+main\s*\("),
    "fortran": re.compile(r"^\s*program\s+\w+", re.M | re.I),
    "python": re.compile(r"cairn\.Session\("),
}
MARKER = re.compile(r"^<!--\s*sample:\s*(.*?)\s*-->\s*$")


class Block:
    """One fenced block: where it is, its fence's language (lower case, "" when none), its code, and the
    marker above it ({} when none; else {"what": "fragment c" | "header", key: value...})."""

    def __init__(self, rel, line, lang, code, marker):
        self.rel, self.line, self.lang, self.code, self.marker = rel, line, lang, code, marker

    @property
    def where(self):
        return f"{self.rel}:{self.line}"

    @property
    def kind(self):
        """c, fortran or python for those languages; else the fence's own language."""
        return LANGUAGE.get(self.lang, self.lang)

    def whole_program(self):
        return self.kind in WHOLE_PROGRAM and bool(WHOLE_PROGRAM[self.kind].search(self.code))


def parse_marker(text):
    """'fragment c, wrapper=halt_loop' -> {'what': 'fragment c', 'wrapper': 'halt_loop'}."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    marker = {"what": parts[0] if parts else ""}
    for p in parts[1:]:
        key, _, value = p.partition("=")
        marker[key.strip()] = value.strip()
    return marker


def doc_files(source):
    return ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(source, "docs"))
                                  if f.endswith(".md"))


def blocks(source, files=None):
    """Every fenced block of `files` (default: README.md and docs/*.md), in order. `line` is the first
    line of the code (1-based). A marker that no fence follows is reported as a block of language
    "<marker>" so that a checker can refuse it."""
    found = []
    for rel in files or doc_files(source):
        lines = open(os.path.join(source, rel)).read().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"^```\s*([\w+-]*)\s*$", lines[i])
            marker = MARKER.match(lines[i])
            if marker and not (i + 1 < len(lines) and lines[i + 1].startswith("```")):
                found.append(Block(rel, i + 1, "<marker>", lines[i] + "\n", parse_marker(marker.group(1))))
            if not m:
                i += 1
                continue
            above = MARKER.match(lines[i - 1]) if i > 0 else None
            start, lang = i + 1, m.group(1).lower()
            i += 1
            while i < len(lines) and lines[i].rstrip() != "```":
                i += 1
            found.append(Block(rel, start + 1, lang, "\n".join(lines[start:i]) + "\n",
                               parse_marker(above.group(1)) if above else {}))
            i += 1
    return found
