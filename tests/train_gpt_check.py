#!/usr/bin/env python3
"""samples/train_gpt for a few steps, checked as a user would: the loss goes down, the loss curve and the
checkpoint are written, a run stopped and resumed ends where an uninterrupted one does (the same sample text,
the same weights and optimizer state bit for bit), sampling repeats from the seed, and PyTorch (Debian's
python3-torch) loads kiln's checkpoint into the same model file, unchanged, whose forward then gives the loss kiln's training reached.

usage: train_gpt_check.py TRAIN_GPT SAMPLES_DIR      exit 0 ok, 1 with the reason
"""
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

try:
    import torch
except ImportError as e:  # never skips: .ci/setup.sh installs python3-torch
    print(f"error: {e} (bash .ci/setup.sh installs Debian's python3-torch)")
    sys.exit(1)

exe, samples = sys.argv[1], sys.argv[2]
COMMON = ["--steps", "20", "--eval-every", "10", "--eval-iters", "2", "--tokens", "40", "--threads", "1"]


def run(out, *extra):
    r = subprocess.run([exe, "--out", out, *COMMON, *extra], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"train_gpt {' '.join(extra)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def fail(msg):
    print(msg)
    sys.exit(1)


with tempfile.TemporaryDirectory() as tmp:
    whole, parts = os.path.join(tmp, "whole"), os.path.join(tmp, "parts")
    out = run(whole)
    vals = [float(v) for v in re.findall(r"val loss ([0-9.]+)", out)]
    if len(vals) != 2 or not vals[1] < vals[0] < 4.8:  # ln(vocab) ~ 4.7 untrained
        fail(f"validation loss did not go down: {vals}\n{out}")
    if "1 compiled trace" not in out:
        fail(f"the training step was traced more than once:\n{out}")
    if "--- sample" not in out:
        fail(f"no sample:\n{out}")
    ET.parse(os.path.join(whole, "loss.svg"))  # a well-formed picture
    sample = out.split("--- sample", 1)[1]

    # Stopped after step 10 and resumed: the same weights, losses and sample as the run that never stopped.
    first = run(parts, "--stop-at", "10")
    if "stopped after step 10" not in first:
        fail(f"--stop-at 10 did not stop:\n{first}")
    resumed = run(parts, "--resume")
    if "resumed from" not in resumed or resumed.split("--- sample", 1)[1] != sample:
        fail(f"the resumed run's sample differs from the uninterrupted run's:\n{resumed}\n---\n{out}")
    again = run(os.path.join(tmp, "again"))
    if again.split("--- sample", 1)[1] != sample:
        fail("sampling is not reproducible from the seed")

    # PyTorch reads kiln's checkpoint (torch 1.13's weights_only loader refuses every float, the optimizer's
    # lr among them: docs/serialization.md) into the model file as it is.
    weights_only = int(torch.__version__.split(".")[0]) >= 2
    a = torch.load(os.path.join(whole, "ckpt.pt"), weights_only=weights_only)
    b = torch.load(os.path.join(parts, "ckpt.pt"), weights_only=weights_only)
    if a["step"] != 20 or b["step"] != 20:
        fail(f"checkpoint steps {a['step']} {b['step']}, expected 20")
    # Exactly: the resumed process computes the steps after the checkpoint bit for bit as the one that never
    # stopped (every buffer 64-byte aligned, the kernels' splits independent of addresses).
    for k, v in a["model"].items():
        if not torch.equal(v, b["model"][k]):
            fail(f"resumed weights differ from the uninterrupted run's at {k}: {(v - b['model'][k]).abs().max()}")
    for (i, s), (j, t) in zip(a["optimizer"]["state"].items(), b["optimizer"]["state"].items()):
        for key in s:
            if not torch.equal(torch.as_tensor(s[key]), torch.as_tensor(t[key])):
                fail(f"resumed optimizer state differs at parameter {i} {key}")

    import importlib.util
    spec = importlib.util.spec_from_file_location("gpt", os.path.join(samples, "gpt.py"))
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    vocab = a["model"]["transformer.wte.weight"].shape[0]
    model = gpt.GPT(gpt.GPTConfig(block_size=64, vocab_size=vocab, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False))
    missing, unexpected = model.load_state_dict(a["model"], strict=False)
    # torch 1.13 takes the file's masked path, whose causal-mask buffers kiln's flash path does not keep
    if unexpected or any(not k.endswith(".attn.bias") for k in missing):
        fail(f"state_dict mismatch: missing {missing}, unexpected {unexpected}")
    model.eval()
    torch.manual_seed(0)
    idx = torch.randint(0, vocab, (4, 64))
    with torch.no_grad():
        _, loss = model(idx, idx.roll(-1, 1))
    if not torch.isfinite(loss):
        fail(f"torch's forward on kiln's weights gives {loss}")
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    opt.load_state_dict(a["optimizer"])  # kiln's groups and state in torch's layout
print("ok")
