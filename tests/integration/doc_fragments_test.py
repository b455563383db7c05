#!/usr/bin/env python3
"""Every code block of the documentation is checked: the ones that are not whole programs, here.

doc_samples_test.py runs the whole programs of README.md and docs/*.md. This test goes through every
other fenced block (doc_blocks.py) and checks it as what its marker or its language says it is:

  fragment c        compiled (-std=c99 -Wall -Werror -fsyntax-only, against include/) inside its
                    wrapper, tests/integration/doc_fragments/WRAPPER.c, which includes it where
                    `#include DOC_FRAGMENT` stands and declares what the page leaves to the application
  fragment fortran  likewise with WRAPPER.F90 and the Fortran compiler, against the cairn module
                    (a wrapper says `implicit none (type, external)`, so that a misspelt call fails)
  fragment python   byte-compiled; every attribute it uses on the session variable (session=NAME) is
                    one that cairn.Session defines (bindings/python/cairn/session.py)
  header            a declaration copied from include/cairn/*.h: the same tokens there, comments aside
  toml              a config file that `cairn config --config FILE` accepts
  json              parsed as JSON
  sh                parsed by `bash -n`; the commands themselves are the tools' and their tests'
  cmake             exempt: tests/install/fortran is that project, built against an install
  (no language)     text (output, synopses, diagrams); exempt, unless it looks like C, Fortran or
                    Python, which must say so in its fence

A C, Fortran or Python block that is neither a whole program nor marked fails the test, as does a fence
language not listed above, a marker without a block, and a whole program marked as a fragment.

Usage: doc_fragments_test.py --source SRC [--cairn CAIRN] [--cc MPICC --cflags F] [--fc MPIFC --fflags F]
       [--only FILE...]
"""
import argparse
import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import doc_blocks  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
EXEMPT = {  # fence language -> why it is not checked here
    "cmake": "the project tests/install/fortran builds against an installed prefix",
    "": "text: output, synopses, diagrams",
}
LOOKS_LIKE_CODE = re.compile(r"^\s*(#include\s*<|int\s+main\s*\(|program\s+\w+\s*$|use\s+cairn\b|"
                             r"import\s+cairn\b|from\s+cairn\b|\w+\s*=\s*cairn\.Session\()", re.M | re.I)


def compile_fragment(args, work, block, errors):
    """Compiles a C or Fortran fragment inside its wrapper; appends what went wrong to errors."""
    wrapper_name = block.marker.get("wrapper", "")
    kind = block.kind
    compiler, flags, ext = (args.cc, args.cflags, ".c") if kind == "c" else (args.fc, args.fflags, ".F90")
    if not compiler:
        print(f"skipped: {block.where}: no {kind} compiler given", flush=True)
        return False
    wrapper = os.path.join(HERE, "doc_fragments", wrapper_name + ext)
    if not wrapper_name or not os.path.isfile(wrapper):
        errors.append(f"{block.where}: fragment {kind}: no wrapper {wrapper} (wrapper=NAME in its marker)")
        return False
    name = re.sub(r"[^A-Za-z0-9]+", "_", block.where)
    fragment = os.path.join(work, name + ".inc")
    with open(fragment, "w") as f:  # a compiler's message names the markdown's file and line
        f.write(f'#line {block.line} "{block.rel}"\n' if kind == "c" else f'# {block.line} "{block.rel}"\n')
        f.write(block.code)
    cmd = [compiler, f'-DDOC_FRAGMENT="{fragment}"', "-Wall", "-Werror", "-fsyntax-only"]
    cmd += ["-std=c99"] if kind == "c" else ["-cpp", "-J", work]
    cmd += [*shlex.split(flags), wrapper]
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        errors.append(f"{block.where}: the fragment does not compile in {os.path.relpath(wrapper, HERE)}:\n"
                      f"$ {' '.join(shlex.quote(c) for c in cmd)}\n{p.stdout}{p.stderr}")
        return False
    return True


def session_attributes(source):
    """The names cairn.Session defines, read from its source (no import: no build needed)."""
    tree = ast.parse(open(os.path.join(source, "bindings", "python", "cairn", "session.py")).read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Session":
            return {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))} | \
                   {t.id for n in node.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    raise SystemExit("FAIL: no class Session in bindings/python/cairn/session.py")


def check_python(source, block, errors):
    try:
        tree = ast.parse(block.code, filename=block.where)
        compile(tree, block.where, "exec")
    except SyntaxError as e:
        errors.append(f"{block.rel}:{block.line + (e.lineno or 1) - 1}: the fragment is not Python: {e.msg}")
        return False
    session = block.marker.get("session")
    if not session:
        errors.append(f"{block.where}: fragment python: name the session variable (session=NAME in its marker)")
        return False
    known = session_attributes(source)
    used = {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == session}
    unknown = sorted(used - known)
    if not used:
        errors.append(f"{block.where}: fragment python: it uses nothing of the session `{session}`")
        return False
    if unknown:
        errors.append(f"{block.where}: cairn.Session has no {', '.join(unknown)} (the fragment calls "
                      f"{session}.{unknown[0]})")
        return False
    return True


def tokens(c_text):
    """C text without comments and export macros, its whitespace collapsed around punctuation."""
    text = re.sub(r"/\*.*?\*/", " ", c_text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\bCAIRN_EXPORT\b", " ", text)
    text = re.sub(r"\s*([^\w\s])\s*", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def check_header(source, block, errors):
    folder = os.path.join(source, "include", "cairn")
    headers = {h: tokens(open(os.path.join(folder, h)).read()) for h in sorted(os.listdir(folder)) if h.endswith(".h")}
    for decl in re.split(r"(?<=;)\s*\n", block.code.strip()):  # each declaration by itself, in any header
        if decl.strip() and not any(tokens(decl) in text for text in headers.values()):
            errors.append(f"{block.where}: not as include/cairn/*.h declares it: {tokens(decl)}")
            return False
    return True


def check_toml(args, work, block, errors):
    if not args.cairn:
        print(f"skipped: {block.where}: toml: no cairn tool given", flush=True)
        return False
    path = os.path.join(work, re.sub(r"[^A-Za-z0-9]+", "_", block.where) + ".toml")
    open(path, "w").write(block.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "SCR_"))}
    p = subprocess.run([args.cairn, "config", "--config", path], capture_output=True, text=True, env=env, timeout=60)
    if p.returncode != 0:
        errors.append(f"{block.where}: `cairn config --config` refuses it (exit {p.returncode}):\n{p.stdout}{p.stderr}")
        return False
    return True


def check(args, work, block, errors):
    """True when the block was checked, False when it was skipped or failed (failures go to errors)."""
    what = block.marker.get("what", "")
    if block.lang == "<marker>":
        errors.append(f"{block.where}: a sample marker with no fenced block on the next line")
        return False
    if block.whole_program():
        if what:
            errors.append(f"{block.where}: a whole program (doc_samples runs it) marked `{what}`")
        return False
    if what == "header":
        return check_header(args.source, block, errors)
    if what.startswith("fragment"):
        kind = what.split()[1] if len(what.split()) > 1 else ""
        if kind != block.kind:
            errors.append(f"{block.where}: marked `{what}` over a ```{block.lang} block")
            return False
        if kind == "python":
            return check_python(args.source, block, errors)
        if kind in ("c", "fortran"):
            return compile_fragment(args, work, block, errors)
        errors.append(f"{block.where}: no fragment kind `{kind}` (c, fortran, python)")
        return False
    if what:
        errors.append(f"{block.where}: unknown marker `{what}` (fragment c|fortran|python, header)")
        return False
    if block.kind in ("c", "fortran", "python"):
        errors.append(f"{block.where}: a {block.kind} block that is neither a whole program nor marked as a checked "
                      f"fragment: add <!-- sample: fragment {block.kind}, ... --> above it (doc_blocks.py)")
        return False
    if block.lang == "toml":
        return check_toml(args, work, block, errors)
    if block.lang == "json":
        try:
            json.loads(block.code)
            return True
        except ValueError as e:
            errors.append(f"{block.where}: not JSON: {e}")
            return False
    if block.lang == "sh":
        p = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            errors.append(f"{block.where}: `bash -n` refuses it:\n{p.stderr}")
        return p.returncode == 0
    if block.lang in EXEMPT:
        if LOOKS_LIKE_CODE.search(block.code):
            errors.append(f"{block.where}: code in a block whose fence names no language: name it (```c, "
                          f"```fortran, ```python) so that it is checked")
        return False
    errors.append(f"{block.where}: a ```{block.lang} block, a language this test does not know: check it here, "
                  f"or exempt it in EXEMPT with the reason")
    return False


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", required=True)
    p.add_argument("--cairn", default="")
    p.add_argument("--cc", default="")
    p.add_argument("--cflags", default="")
    p.add_argument("--fc", default="")
    p.add_argument("--fflags", default="")
    p.add_argument("--only", nargs="*", help="markdown files relative to --source (default: README.md, docs/*.md)")
    args = p.parse_args()

    errors, checked, by_kind = [], 0, {}
    work = tempfile.mkdtemp(prefix="cairn-doc-fragments.")
    try:
        for block in doc_blocks.blocks(args.source, args.only):
            if check(args, work, block, errors):
                checked += 1
                label = block.marker.get("what") or block.lang
                by_kind[label] = by_kind.get(label, 0) + 1
    finally:
        subprocess.run(["rm", "-rf", work])
    for e in errors:
        print(f"FAIL: {e}", flush=True)
    if errors:
        sys.exit(1)
    if not by_kind.get("fragment c") and not args.only:
        print("FAIL: no C fragment compiled (a test that checks nothing passes nothing)")
        sys.exit(1)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items()))
    print(f"PASS: {checked} documentation blocks checked ({summary}); whole programs: doc_samples", flush=True)


if __name__ == "__main__":
    main()
