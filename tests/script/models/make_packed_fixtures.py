"""Writes the PyTorch reference data that tests/test_rnn_packed.cpp compares kiln's torch.nn.utils.rnn with:
packed batches through nn.LSTM, GRU and RNN (packed_sweep.safetensors: per case its configuration, lengths,
parameters, input, packed output, padded output, final states and the gradients of the input, the initial
states and the parameters), pack_sequence and pad_sequence, and for the model file packed_classifier.py its
state_dict (`state.*`), inputs (`input.*`) and eager outputs (`output.*`).
Run with /usr/bin/python3 (PyTorch 1.13) from the repository root:
    python3 tests/script/models/make_packed_fixtures.py tests/script/models/data
"""
import importlib.util
import os
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pack_sequence, pad_sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import save  # noqa: E402  (the hand-written safetensors writer)

# config: kind (0 RNN, 1 LSTM, 2 GRU), input_size, hidden_size, num_layers, bias, batch_first, bidirectional,
# relu, initial state given, enforce_sorted, T; then the lengths (N of them; max < T pads the input further)
SWEEP = [
    ((1, 3, 4, 2, 1, 0, 1, 0, 1, 0, 5), [3, 5, 2, 4]),
    ((2, 3, 4, 2, 1, 1, 1, 0, 0, 1, 4), [4, 3, 3, 1]),
    ((0, 2, 3, 1, 1, 1, 0, 0, 1, 0, 5), [2, 4, 1]),
    ((0, 3, 2, 1, 0, 0, 1, 1, 0, 0, 3), [1, 3, 2]),
    ((1, 2, 3, 1, 1, 1, 0, 0, 0, 1, 3), [3, 2, 2]),
]


def sweep_case(i, cfg, lengths):
    kind, inp, hid, layers, bias, bf, bidir, relu, state, enforce, T = cfg
    N = len(lengths)
    cls = [torch.nn.RNN, torch.nn.LSTM, torch.nn.GRU][kind]
    kw = dict(num_layers=layers, bias=bool(bias), batch_first=bool(bf), bidirectional=bool(bidir))
    if kind == 0:
        kw["nonlinearity"] = "relu" if relu else "tanh"
    m = cls(inp, hid, **kw)
    D = 2 if bidir else 1
    x = torch.randn(N, T, inp) if bf else torch.randn(T, N, inp)
    lstm = kind == 1
    states = [torch.randn(layers * D, N, hid) for _ in range(2 if lstm else 1)] if state else []
    p = f"sweep.{i}."
    out = {p + "config": torch.tensor(cfg, dtype=torch.int64), p + "lengths": torch.tensor(lengths), p + "x": x}
    out.update({p + f"state.{k}": v.detach().clone() for k, v in m.state_dict().items()})
    for k, s in enumerate(states):
        out[p + f"hx.{k}"] = s
    leaves = [x.clone().requires_grad_()] + [s.clone().requires_grad_() for s in states]
    hx = None if not states else (tuple(leaves[1:]) if lstm else leaves[1])
    packed = pack_padded_sequence(leaves[0], torch.tensor(lengths), batch_first=bool(bf), enforce_sorted=bool(enforce))
    y, h = m(packed, hx)
    padded, out_lengths = pad_packed_sequence(y, batch_first=bool(bf))
    finals = list(h) if lstm else [h]
    out[p + "packed_x"] = packed.data.detach().clone()
    out[p + "batch_sizes"] = packed.batch_sizes
    out[p + "out.data"] = y.data.detach().clone()
    out[p + "out.padded"] = padded.detach().clone()
    out[p + "out.lengths"] = out_lengths
    loss = 0
    for k, o in enumerate([padded] + finals):
        w = torch.randn(*o.shape)
        out[p + f"w.{k}"] = w
        if k:
            out[p + f"out.{k}"] = o.detach().clone()
        loss = loss + (o * w).sum()
    loss.backward()
    out[p + "grad.x"] = leaves[0].grad
    for k, s in enumerate(leaves[1:]):
        out[p + f"grad.hx.{k}"] = s.grad
    out.update({p + f"grad.{k}": q.grad for k, q in m.named_parameters()})
    return out


def sequences_case():
    seqs = [torch.randn(3, 2), torch.randn(1, 2), torch.randn(4, 2)]
    out = {f"seq.{i}": s for i, s in enumerate(seqs)}
    packed = pack_sequence(seqs, enforce_sorted=False)
    out["seq.packed.data"] = packed.data
    out["seq.packed.batch_sizes"] = packed.batch_sizes
    out["seq.packed.sorted_indices"] = packed.sorted_indices
    out["seq.packed.unsorted_indices"] = packed.unsorted_indices
    out["seq.padded_bf"] = pad_sequence(seqs, batch_first=True, padding_value=-1.0)
    padded, lengths = pad_packed_sequence(packed, padding_value=2.5, total_length=6)
    out["seq.unpacked"] = padded
    out["seq.unpacked.lengths"] = lengths
    return out


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def classifier_case():
    torch.manual_seed(3)
    model = load("packed_classifier").PackedClassifier(20, 5, 6, 3).eval()
    lengths = torch.tensor([3, 6, 2, 5])
    text = torch.randint(1, 20, (4, 6))
    for n, l in enumerate(lengths.tolist()):
        text[n, l:] = 0
    out = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    out["input.0"], out["input.1"] = text, lengths
    with torch.no_grad():
        for k, y in enumerate(model(text, lengths)):
            out[f"output.{k}"] = y
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data")
    os.makedirs(dest, exist_ok=True)
    torch.manual_seed(4)
    data = {}
    for i, (cfg, lengths) in enumerate(SWEEP):
        data.update(sweep_case(i, cfg, lengths))
    data.update(sequences_case())
    save(os.path.join(dest, "packed_sweep.safetensors"), data)
    save(os.path.join(dest, "packed_classifier.safetensors"), classifier_case())


if __name__ == "__main__":
    main()
