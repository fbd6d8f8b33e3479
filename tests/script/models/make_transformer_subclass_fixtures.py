"""Writes the PyTorch reference data that tests/test_script_transformer_subclass.cpp compares kiln with
(transformer_subclass.safetensors): word_language_model's TransformerModel, a subclass of nn.Transformer
(transformer_subclass.py), and encoder layers given callable activations. Eval mode with gradients on (no
fast path): `lm.state.*`, `lm.input.0` (tokens), `lm.output.0` (masked), `lm.output.1` (no mask), `lm.target`,
`lm.grad.*` (parameter gradients of nll_loss of the masked output); `act.state.*`, `act.input.0`,
`act.output.*`, `act.dinput.0` and `act.grad.*` (of the summed outputs times `act.w.*`). Run with
/usr/bin/python3 from the repository root:
    python3 tests/script/models/make_transformer_subclass_fixtures.py tests/script/models/data
"""
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import load, save  # noqa: E402


def main(outdir):
    mod = load("transformer_subclass")
    out = {}
    torch.manual_seed(0)
    lm = mod.TransformerModel(11, 8, 2, 16, 2)
    for k, v in lm.state_dict().items():
        out[f"lm.state.{k}"] = v.clone()
    lm.eval()
    src = torch.randint(0, 11, (6, 2))
    tgt = torch.randint(0, 11, (6, 2))
    out["lm.input.0"], out["lm.target"] = src, tgt
    y = lm(src)
    out["lm.output.0"] = y.detach().clone()
    out["lm.output.1"] = lm(src, False).detach().clone()
    F.nll_loss(y.view(-1, 11), tgt.view(-1)).backward()
    for k, p in lm.named_parameters():
        out[f"lm.grad.{k}"] = p.grad.clone()

    torch.manual_seed(1)
    act = mod.CallableActivations(8, 2)
    for k, v in act.state_dict().items():
        out[f"act.state.{k}"] = v.clone()
    x = torch.randn(5, 3, 8, requires_grad=True)
    out["act.input.0"] = x.detach().clone()
    ys = act(x)
    loss = 0
    for i, t in enumerate(ys):
        out[f"act.output.{i}"] = t.detach().clone()
        w = torch.randn(t.shape)
        out[f"act.w.{i}"] = w
        loss = loss + (t * w).sum()
    loss.backward()
    out["act.dinput.0"] = x.grad.clone()
    for k, p in act.named_parameters():
        out[f"act.grad.{k}"] = p.grad.clone()
    save(os.path.join(outdir, "transformer_subclass.safetensors"), out)


if __name__ == "__main__":
    main(sys.argv[1])
