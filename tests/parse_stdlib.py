#!/usr/bin/python3
"""Parses every file of Python's standard library that Python's own ast.parse accepts with kiln's
parser (tests/parse_counts, one process for all files) and compares per-file counts of node kinds with
ast.walk's. Fails naming each file kiln cannot parse or counts differently. Files named after the
directory (tests/script/syntax/python311.py: every construct of the grammar) must parse too.

    parse_stdlib.py PARSE_COUNTS [STDLIB_DIR [FILE...]]
"""
import ast
import os
import subprocess
import sys
import time
import warnings

KINDS = {
    "functions": (ast.FunctionDef, ast.AsyncFunctionDef),
    "lambdas": (ast.Lambda,),
    "classes": (ast.ClassDef,),
    "calls": (ast.Call,),
    "listcomps": (ast.ListComp,),
    "setcomps": (ast.SetComp,),
    "dictcomps": (ast.DictComp,),
    "genexps": (ast.GeneratorExp,),
    "comprehensions": (ast.comprehension,),
    "fstrings": (ast.JoinedStr,),
    "formatted": (ast.FormattedValue,),
    "names": (ast.Name,),
    "attributes": (ast.Attribute,),
    "constants": (ast.Constant,),
    "subscripts": (ast.Subscript,),
    "slices": (ast.Slice,),
    "starred": (ast.Starred,),
    "yields": (ast.Yield, ast.YieldFrom),
    "awaits": (ast.Await,),
    "namedexprs": (ast.NamedExpr,),
    "keywords": (ast.keyword,),
    "args": (ast.arg,),
    "imports": (ast.Import, ast.ImportFrom),
    "tries": (ast.Try, ast.TryStar),
    "withs": (ast.With, ast.AsyncWith),
    "matches": (ast.Match,),
    "statements": (ast.stmt,),
    "patterns": (ast.pattern,),
}


def python_counts(tree):
    counts = dict.fromkeys(list(KINDS) + ["decorators"], 0)
    for node in ast.walk(tree):
        for name, types in KINDS.items():
            if isinstance(node, types):
                counts[name] += 1
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts["decorators"] += len(node.decorator_list)
    return counts


def stdlib_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__"))
        for f in sorted(filenames):
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def main():
    tool = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else "/usr/lib/python3.11"
    extra = sys.argv[3:]
    start = time.time()
    expected = {}
    rejected = 0
    warnings.simplefilter("ignore")
    for path in extra:
        with open(path, "rb") as f:
            expected[path] = python_counts(ast.parse(f.read(), path))
    for path in stdlib_files(root):
        with open(path, "rb") as f:
            data = f.read()
        try:
            expected[path] = python_counts(ast.parse(data, path))
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
            rejected += 1
    python_s = time.time() - start
    if len(expected) - len(extra) < 100:
        print(f"only {len(expected)} Python files under {root}: is the standard library there?")
        return 1

    start = time.time()
    run = subprocess.run([tool, "-"], input="\n".join(expected) + "\n", capture_output=True, text=True,
                         errors="replace", timeout=300)
    kiln_s = time.time() - start
    if run.returncode != 0:
        print(f"{tool} exited with {run.returncode}:\n{run.stderr[-2000:]}")
        return 1
    lines = run.stdout.splitlines()
    header = lines[0].split()[1:]
    seen = set()
    failures = []
    for line in lines[1:]:
        path, _, rest = line.partition(" ")
        seen.add(path)
        if rest.startswith("ERROR "):
            failures.append(f"{path}: kiln cannot parse it: {rest[6:]}")
            continue
        got = dict(zip(header, map(int, rest.split())))
        want = expected[path]
        diff = [f"{k} kiln {got.get(k)} python {want[k]}" for k in want if got.get(k) != want[k]]
        if diff:
            failures.append(f"{path}: counts differ: " + ", ".join(diff))
    for path in expected:
        if path not in seen:
            failures.append(f"{path}: no result (the tool stopped early?)")
    for f in failures:
        print(f)
    print(f"{len(expected) - len(extra)} files of {root} that Python parses ({rejected} it rejects skipped) "
          f"and {len(extra)} more: "
          f"{len(expected) - len(failures)} parsed by kiln with equal counts of {', '.join(header)}; "
          f"{len(failures)} failed; python {python_s:.1f} s, kiln {kiln_s:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
