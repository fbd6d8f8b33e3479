"""Writes the PyTorch reference data that tests/test_rnn.cpp compares kiln's recurrent layers with: a sweep of
layer and cell configurations (rnn_sweep.safetensors: per case its configuration, parameters, inputs, outputs
and the gradients of the inputs and parameters), and for the model files (rnn_lm.py, rnn_tagger.py) the state_dict (`state.*`), the inputs (`input.*`), the outputs
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


# config: kind (0 RNN, 1 LSTM, 2 GRU, 3 RNNCell, 4 LSTMCell, 5 GRUCell), input_size, hidden_size, num_layers,
# bias, batch_first, bidirectional, relu, initial state given, unbatched; then T and N
SWEEP = [
    (1, 3, 4, 2, 1, 0, 1, 0, 1, 0, 5, 2),
    (1, 3, 4, 1, 0, 1, 0, 0, 0, 0, 4, 3),
    (1, 2, 3, 1, 1, 0, 0, 0, 1, 1, 3, 1),
    (2, 3, 4, 2, 1, 1, 1, 0, 1, 0, 4, 2),
    (2, 3, 4, 1, 0, 0, 0, 0, 0, 0, 1, 2),
    (0, 3, 4, 2, 1, 0, 1, 1, 1, 0, 5, 2),
    (0, 3, 4, 1, 1, 1, 0, 0, 0, 0, 3, 1),
    (3, 3, 4, 1, 1, 0, 0, 1, 1, 0, 1, 2),
    (4, 3, 4, 1, 1, 0, 0, 0, 1, 0, 1, 3),
    (4, 3, 4, 1, 0, 0, 0, 0, 0, 1, 1, 1),
    (5, 3, 4, 1, 1, 0, 0, 0, 1, 1, 1, 1),
    (5, 3, 4, 1, 0, 0, 0, 0, 1, 0, 1, 2),
]


def sweep_case(i, cfg):
    kind, inp, hid, layers, bias, bf, bidir, relu, state, unbatched, T, N = cfg
    nl = "relu" if relu else "tanh"
    nn = torch.nn
    if kind < 3:
        cls = [nn.RNN, nn.LSTM, nn.GRU][kind]
        kw = dict(num_layers=layers, bias=bool(bias), batch_first=bool(bf), bidirectional=bool(bidir))
        if kind == 0:
            kw["nonlinearity"] = nl
        m = cls(inp, hid, **kw)
        D = 2 if bidir else 1
        x = torch.randn(T, inp) if unbatched else (torch.randn(N, T, inp) if bf else torch.randn(T, N, inp))
        hs = (layers * D, hid) if unbatched else (layers * D, N, hid)
    else:
        m = [nn.RNNCell(inp, hid, bool(bias), nl), nn.LSTMCell(inp, hid, bool(bias)), nn.GRUCell(inp, hid, bool(bias))][kind - 3]
        x = torch.randn(inp) if unbatched else torch.randn(N, inp)
        hs = (hid,) if unbatched else (N, hid)
    lstm = kind in (1, 4)
    states = [torch.randn(*hs) for _ in range(2 if lstm else 1)] if state else []
    out = {f"sweep.{i}.config": torch.tensor(cfg, dtype=torch.int64), f"sweep.{i}.x": x}
    out.update({f"sweep.{i}.state.{k}": v.detach().clone() for k, v in m.state_dict().items()})
    for k, s in enumerate(states):
        out[f"sweep.{i}.hx.{k}"] = s
    leaves = [x.clone().requires_grad_()] + [s.clone().requires_grad_() for s in states]
    hx = None if not states else (tuple(leaves[1:]) if lstm else leaves[1])
    r = m(leaves[0], hx)
    outs = flat(r, [])
    loss = 0
    for k, o in enumerate(outs):
        w = torch.randn(*o.shape)
        out[f"sweep.{i}.w.{k}"] = w
        out[f"sweep.{i}.out.{k}"] = o.detach().clone()
        loss = loss + (o * w).sum()
    loss.backward()
    out[f"sweep.{i}.grad.x"] = leaves[0].grad
    for k, s in enumerate(leaves[1:]):
        out[f"sweep.{i}.grad.hx.{k}"] = s.grad
    out.update({f"sweep.{i}.grad.{k}": p.grad for k, p in m.named_parameters()})
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data")
    os.makedirs(dest, exist_ok=True)
    torch.manual_seed(2)
    sweep = {}
    for i, cfg in enumerate(SWEEP):
        sweep.update(sweep_case(i, cfg))
    save(os.path.join(dest, "rnn_sweep.safetensors"), sweep)
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
