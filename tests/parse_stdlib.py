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


OPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&",
    ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not", ast.And: "and", ast.Or: "or",
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is",
    ast.IsNot: "isnot", ast.In: "in", ast.NotIn: "notin",
}
WORDS = {
    ast.Expr: "expr", ast.Assign: "assign", ast.If: "if", ast.While: "while", ast.For: "for",
    ast.AsyncFor: "asyncfor", ast.Return: "return", ast.Break: "break", ast.Continue: "continue", ast.Pass: "pass",
    ast.Assert: "assert", ast.Import: "import", ast.ImportFrom: "importfrom", ast.Try: "try", ast.TryStar: "trystar",
    ast.With: "with", ast.AsyncWith: "asyncwith", ast.Raise: "raise", ast.Global: "global",
    ast.Nonlocal: "nonlocal", ast.Delete: "delete", ast.Match: "match", ast.match_case: "case",
    ast.ExceptHandler: "except", ast.AnnAssign: "annassign", ast.Constant: "c", ast.List: "list", ast.Set: "set",
    ast.Call: "call", ast.Subscript: "sub", ast.Slice: "slice", ast.IfExp: "ifexp", ast.Starred: "star",
    ast.Dict: "dict", ast.JoinedStr: "fstr", ast.ListComp: "listcomp", ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp", ast.GeneratorExp: "genexp", ast.Lambda: "lambda", ast.NamedExpr: ":=",
    ast.Yield: "yield", ast.YieldFrom: "yieldfrom", ast.Await: "await",
}
CONVERSIONS = {-1: "", ord("r"): "r", ord("s"): "s", ord("a"): "a"}


def word(node):
    t = type(node)
    if t in WORDS:
        return WORDS[t]
    if t in (ast.FunctionDef, ast.AsyncFunctionDef):
        return "def:" + node.name
    if t is ast.ClassDef:
        return "class:" + node.name
    if t is ast.AugAssign:
        return "augassign:" + OPS[type(node.op)]
    if t is ast.Name:
        return "n:" + node.id
    if t is ast.Attribute:
        return "attr:" + node.attr
    if t is ast.UnaryOp:
        return "u" + OPS[type(node.op)]
    if t is ast.BinOp:
        return "b" + OPS[type(node.op)]
    if t is ast.BoolOp:
        return OPS[type(node.op)]
    if t is ast.Compare:
        return "cmp" + "".join(":" + OPS[type(o)] for o in node.ops)
    if t is ast.FormattedValue:
        return "fv:" + CONVERSIONS[node.conversion]
    if t is ast.comprehension:
        return "asynccomp" if node.is_async else "comp"
    if t is ast.keyword:
        return "kw:" + (node.arg or "**")
    if t is ast.arg:
        return "arg:" + node.arg
    if isinstance(node, ast.pattern):
        return "p:" + t.__name__
    return None  # Module, Tuple, arguments, alias, withitem, operators, contexts


def shape(tree):
    """The nodes in pre-order, children in field order: parse_counts --shape's words."""
    out = []
    stack = [tree]
    while stack:
        node = stack.pop()
        w = word(node)
        if w is not None:
            out.append(w)
        children = []
        for _, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                children.append(value)
            elif isinstance(value, list):
                children.extend(v for v in value if isinstance(v, ast.AST))
        stack.extend(reversed(children))
    return out


def first_difference(a, b):
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"at word {i}: kiln ...{' '.join(a[max(0, i - 8):i + 4])}... python ...{' '.join(b[max(0, i - 8):i + 4])}..."


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
    shapes = {}
    for path in extra:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
        expected[path] = python_counts(tree)
        shapes[path] = shape(tree)
    for path in stdlib_files(root):
        with open(path, "rb") as f:
            data = f.read()
        try:
            tree = ast.parse(data, path)
            expected[path] = python_counts(tree)
            shapes[path] = shape(tree)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
            rejected += 1
    python_s = time.time() - start
    if len(expected) - len(extra) < 100:
        print(f"only {len(expected)} Python files under {root}: is the standard library there?")
        return 1

    start = time.time()
    run = subprocess.run([tool, "--shape", "-"], input="\n".join(expected) + "\n", capture_output=True, text=True,
                         errors="replace", timeout=300)
    kiln_s = time.time() - start
    if run.returncode != 0:
        print(f"{tool} exited with {run.returncode}:\n{run.stderr[-2000:]}")
        return 1
    lines = run.stdout.splitlines()
    header = lines[0].split()[1:]
    seen = set()
    failures = []
    path = None
    for line in lines[1:]:
        if line.startswith("\tshape"):
            got_shape = line.split()[1:]
            if path in shapes and got_shape != shapes[path] and not any(f.startswith(path + ":") for f in failures):
                failures.append(f"{path}: shapes differ {first_difference(got_shape, shapes[path])}")
            continue
        path, _, rest = line.partition("\t")
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
          f"{len(expected) - len(failures)} parsed by kiln with equal counts of {', '.join(header)} and "
          f"equal shapes (every node but tuples in pre-order); "
          f"{len(failures)} failed; python {python_s:.1f} s, kiln {kiln_s:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
