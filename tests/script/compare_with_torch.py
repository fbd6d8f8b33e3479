#!/usr/bin/env python3
"""Runs one kiln script file two ways and compares: `kiln run` and PyTorch (eager and torch.jit.script)
on the same inputs.

Each `# CASE: FUNC ARG...` line of the file is one call. ARG is randn(2,3) / rand(2,3) (float32),
randint(LO,HI,2,3) (int64), an int, a float (has a '.' or 'e'), True, False or None. Inputs are drawn
with a seed per case, saved as .npy for kiln, and handed to torch as the same arrays.

usage: compare_with_torch.py KILN FILE.py      exit 0 ok, 1 mismatch or no torch (.ci/setup.sh installs it)
"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:  # a comparison that cannot run fails: it never skips
    print(f"error: {e} (bash .ci/setup.sh installs Debian's python3-torch)")
    sys.exit(1)

RTOL, ATOL = 1e-4, 1e-5


def make_arg(tok, rng):
    m = re.fullmatch(r"(randn|rand|randint)\(([-0-9, ]*)\)", tok)
    if m:
        nums = [int(v) for v in m.group(2).split(",") if v.strip()]
        if m.group(1) == "randint":
            return rng.integers(nums[0], nums[1], size=nums[2:]).astype(np.int64)
        if m.group(1) == "randn":
            return rng.standard_normal(nums).astype(np.float32)
        return rng.random(nums).astype(np.float32)
    if tok in ("True", "False"):
        return tok == "True"
    if tok == "None":
        return None
    if re.fullmatch(r"-?\d+", tok):
        return int(tok)
    return float(tok)


def flatten(v, out):
    if isinstance(v, (tuple, list)):
        for e in v:
            flatten(e, out)
    else:
        out.append(v)


def close(a, b):
    if isinstance(b, torch.Tensor):
        b = b.detach().numpy()
        if a.shape != b.shape:
            return f"shape {a.shape} vs torch {b.shape}"
        if a.dtype != b.dtype:
            return f"dtype {a.dtype} vs torch {b.dtype}"
        if not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True):
            return f"values differ, max |diff| {np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))}"
        return None
    if b is None:  # an Optional result (kiln prints None)
        return None if a == "None" else f"{a} vs torch None"
    if isinstance(b, bool):
        return None if a == str(b) else f"{a} vs torch {b}"
    if isinstance(b, int):
        return None if a == str(b) else f"{a} vs torch {b}"
    try:
        return None if abs(float(a) - b) <= ATOL + RTOL * abs(b) else f"{a} vs torch {b}"
    except ValueError:
        return f"{a} vs torch {b}"


BACKENDS = ["interp"] + (["x86"] if " avx2" in open("/proc/cpuinfo").read() else [])


def main():
    kiln, path = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location("kiln_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cases = [l.split()[2:] for l in open(path) if l.startswith("# CASE:")]
    if not cases:
        print(f"{path}: no '# CASE:' lines")
        return 1
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for ci, case in enumerate(cases):
            fn_name, toks = case[0], case[1:]
            rng = np.random.default_rng(1000 + ci)
            args = [make_arg(t, rng) for t in toks]
            cli = []
            for ai, a in enumerate(args):
                if isinstance(a, np.ndarray):
                    p = os.path.join(tmp, f"in{ci}_{ai}.npy")
                    np.save(p, a)
                    cli.append(p)
                else:
                    cli.append(str(a))
            targs = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
            fn = getattr(mod, fn_name)
            expected = []
            flatten(fn(*targs), expected)
            # The file must also be TorchScript: the promise kiln script makes.
            scripted = []
            flatten(torch.jit.script(fn)(*targs), scripted)
            # Each case runs on the reference interpreter and, where the CPU has AVX2, through the JIT.
            for backend in BACKENDS:
                outs = []
                for k, v in enumerate(expected):
                    if isinstance(v, torch.Tensor):
                        outs += ["-o", os.path.join(tmp, f"out{ci}_{k}.npy")]
                r = subprocess.run([kiln, "run", path, fn_name] + cli + outs + ["--backend", backend], capture_output=True, text=True)
                label = f"{os.path.basename(path)}: {fn_name}({' '.join(toks)}) [{backend}]"
                if r.returncode != 0:
                    print(f"FAIL {label}: kiln run exited {r.returncode}\n{r.stderr}")
                    failures += 1
                    continue
                printed = r.stdout.split()
                got = []
                oi = 0
                pi = 0
                for v in expected:
                    if isinstance(v, torch.Tensor):
                        got.append(np.load(outs[2 * oi + 1]))
                        oi += 1
                    else:
                        got.append(printed[pi] if pi < len(printed) else "<missing>")
                        pi += 1
                bad = [close(g, e) for g, e in zip(got, expected)]
                bad += [close(g, e) for g, e in zip(got, scripted)]
                msgs = [b for b in bad if b]
                if msgs:
                    print(f"FAIL {label}: " + "; ".join(msgs))
                    failures += 1
                else:
                    print(f"ok   {label}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
