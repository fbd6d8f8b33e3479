#!/usr/bin/env python3
"""Checks one bad script file: `kiln check FILE` must fail with exactly the error its first
`# error: LINE:COL: MESSAGE` line names, in the source error format (location line, the source line,
a caret under the column) and with no further errors after it.

usage: check_error.py KILN FILE.py
"""
import subprocess
import sys


def main():
    kiln, path = sys.argv[1], sys.argv[2]
    lines = open(path).read().split("\n")
    want = next((l[len("# error: "):] for l in lines if l.startswith("# error: ")), None)
    if want is None:
        print(f"{path}: no '# error:' line")
        return 1
    loc, msg = want.split(": ", 1)
    line, col = (int(v) for v in loc.split(":"))
    r = subprocess.run([kiln, "check", path], capture_output=True, text=True)
    if r.returncode == 0:
        print(f"{path}: kiln check succeeded, expected: {want}")
        return 1
    got = r.stderr.rstrip("\n").split("\n")
    expected = [f"{path}:{line}:{col}: error: {msg}", lines[line - 1], " " * (col - 1) + "^"]
    if got != expected:
        print(f"{path}: expected\n" + "\n".join(expected) + "\ngot\n" + r.stderr)
        return 1
    print(got[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
