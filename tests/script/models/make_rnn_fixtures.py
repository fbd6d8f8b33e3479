"""Writes the PyTorch reference data of the recurrent model files (rnn_lm.py, rnn_tagger.py) that
tests/test_rnn.cpp compares kiln with: the state_dict (`state.*`), the inputs (`input.*`), the outputs
(`output.*`, checked equal to torch.jit.script of the same module first), the gradient of every parameter
after one backward of the loss below (`grad.*`), and the state after three SGD steps on it (`trained.*`).
Run with /usr/bin/python3 (PyTorch 1.13) from the repository root:
    python3 tests/script/models/make_rnn_fixtures.py tests/script/models/data
"""
import importlib.util
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import save  # noqa: E402  (the hand-written safetensors writer)


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The loss of every output: cross_entropy of the first against `target`, plus small sums of the others, so
# that the gradient reaches the model through the final states too (tests/test_rnn.cpp computes the same).
def loss_of(outs, target):
    return F.cross_entropy(outs[0].flatten(0, -2), target) + 0.1 * outs[1].sum() + 0.05 * outs[2].sum()


def flat(v, out):
    if isinstance(v, tuple):
        for e in v:
            flat(e, out)
    else:
        out.append(v)
    return out


# inputs: the tensors saved as input.K; args: how the model takes them (the LM's state is a tuple)
def case(name, cls, ctor, inputs, target, args=lambda xs: xs):
    torch.manual_seed(0)
    model = getattr(load(name), cls)(*ctor)
    out = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    for i, x in enumerate(inputs):
        out[f"input.{i}"] = x
    out["target.0"] = target
    scripted = torch.jit.script(model)
    with torch.no_grad():
        ys = flat(model(*args(inputs)), [])
        yj = flat(scripted(*args(inputs)), [])
    for i, (y, j) in enumerate(zip(ys, yj)):
        assert torch.allclose(y, j, rtol=1e-5, atol=1e-6), f"{name}: eager and torch.jit.script differ"
        out[f"output.{i}"] = y
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        loss_of(flat(model(*args(inputs)), []), target).backward()
        if step == 0:
            out.update({f"grad.{k}": p.grad.clone() for k, p in model.named_parameters()})
        opt.step()
    out.update({f"trained.{k}": v.clone() for k, v in model.state_dict().items()})
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data")
    os.makedirs(dest, exist_ok=True)
    torch.manual_seed(1)
    tokens = torch.randint(0, 30, (7, 3))
    h0, c0 = torch.randn(2, 3, 12), torch.randn(2, 3, 12)
    target = torch.randint(0, 30, (21,))
    # dropout 0: kiln draws other masks than torch
    save(os.path.join(dest, "rnn_lm.safetensors"),
         case("rnn_lm", "RNNModel", (30, 8, 12, 2, 0.0), [tokens, h0, c0], target, lambda xs: (xs[0], (xs[1], xs[2]))))
    torch.manual_seed(1)
    x = torch.randn(6, 2, 5)
    target = torch.randint(0, 4, (12,))
    save(os.path.join(dest, "rnn_tagger.safetensors"), case("rnn_tagger", "Tagger", (5, 6, 4), [x], target))


if __name__ == "__main__":
    main()
