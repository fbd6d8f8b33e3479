"""Writes the PyTorch reference data that tests/test_attention.cpp compares kiln's attention with
(attention.safetensors). PyTorch 1.13 has no F.scaled_dot_product_attention, so its cases are checked against
softmax(q @ k^T * scale + mask) @ v written out; nn.MultiheadAttention and the Transformer layers are torch's
modules, in training mode with dropout 0 (their fast paths need no_grad and eval). Per case: `NAME.state.*`,
`NAME.input.*` (a bool mask saved as int64 under `NAME.bool.*`), `NAME.output.*`, and the gradients of the
inputs (`NAME.dinput.*`) and parameters (`NAME.grad.*`) of sum(output.0 * NAME.w). Run with /usr/bin/python3
from the repository root:
    python3 tests/script/models/make_attention_fixtures.py tests/script/models/data
"""
import math
import os
import sys

import torch
import torch.nn.functional as F
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import load, save  # noqa: E402

out = {}


def put(name, kind, i, t):
    if t.dtype == torch.bool:
        out[f"{name}.bool.{i}"] = t.long()
    else:
        out[f"{name}.{kind}.{i}"] = t.detach().clone()


def record(name, model, inputs, call):
    if model is not None:
        for k, v in model.state_dict().items():
            out[f"{name}.state.{k}"] = v.clone()
    inputs = [None if x is None else x.clone() for x in inputs]  # a tensor shared by cases gets its own gradient
    for i, x in enumerate(inputs):
        if x is not None:
            put(name, "input", i, x)
            if x.is_floating_point():
                x.requires_grad_()
    ys = call(*inputs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    for i, y in enumerate(ys):
        if y is not None:
            out[f"{name}.output.{i}"] = y.detach().clone()
    w = torch.randn(ys[0].shape)
    out[f"{name}.w"] = w
    (ys[0] * w).sum().backward()
    for i, x in enumerate(inputs):
        if x is not None and x.grad is not None:
            out[f"{name}.dinput.{i}"] = x.grad.clone()
    if model is not None:
        for k, p in model.named_parameters():
            out[f"{name}.grad.{k}"] = p.grad.clone()


def sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)
    if causal:
        mask = torch.ones(q.size(-2), k.size(-2)).tril().bool()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


def main(outdir):
    torch.manual_seed(0)
    r = torch.randn
    record("sdpa0", None, [r(2, 3, 4, 8), r(2, 3, 5, 8), r(2, 3, 5, 6)], sdpa)
    record("sdpa1", None, [r(2, 4, 8), r(2, 5, 8), r(2, 5, 6), torch.rand(4, 5) > 0.3], sdpa)
    record("sdpa2", None, [r(2, 3, 4, 8), r(2, 3, 5, 8), r(2, 3, 5, 6), r(2, 1, 4, 5)], sdpa)
    record("sdpa3", None, [r(3, 4, 8), r(3, 6, 8), r(3, 6, 5)], lambda q, k, v: sdpa(q, k, v, causal=True))
    record("sdpa4", None, [r(4, 8), r(5, 8), r(5, 3)], lambda q, k, v: sdpa(q, k, v, scale=0.5))

    L, S, N = 4, 5, 3
    m = nn.MultiheadAttention(8, 2)
    record("mha0", m, [r(L, N, 8)], lambda x: m(x, x, x))
    m = nn.MultiheadAttention(8, 2, kdim=6, vdim=5)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[1, 3:] = True
    record("mha1", m, [r(L, N, 8), r(S, N, 6), r(S, N, 5), r(L, S), pad],
           lambda q, k, v, am, kpm: m(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False))
    m = nn.MultiheadAttention(8, 2, bias=False, batch_first=True)
    am = torch.rand(N * 2, L, S) > 0.4
    am[:, :, 0] = False
    record("mha2", m, [r(N, L, 8), r(N, S, 8), r(N, S, 8), am], lambda q, k, v, a: m(q, k, v, attn_mask=a))

    sq = nn.Transformer.generate_square_subsequent_mask(L)
    out["square_mask"] = sq
    e = nn.TransformerEncoderLayer(8, 2, 16, 0.0)
    record("enc0", e, [r(L, N, 8), sq, pad[:, :L].clone()], lambda x, a, p: e(x, src_mask=a, src_key_padding_mask=p))
    e = nn.TransformerEncoderLayer(8, 2, 16, 0.0, activation="gelu", batch_first=True, norm_first=True)
    record("enc1", e, [r(N, L, 8)], lambda x: e(x))
    e = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2, norm=nn.LayerNorm(8))
    record("enc2", e, [r(L, N, 8), sq], lambda x, a: e(x, mask=a))
    d = nn.TransformerDecoderLayer(8, 2, 16, 0.0)
    record("dec0", d, [r(L, N, 8), r(S, N, 8), sq], lambda t, mem, a: d(t, mem, tgt_mask=a))
    t = nn.Transformer(8, 2, 1, 2, 16, 0.0)
    record("tr0", t, [r(S, N, 8), r(L, N, 8), sq], lambda s, tg, a: t(s, tg, tgt_mask=a))

    # the model file: word_language_model's encoder, and MultiheadAttention called as ViT and DETR call it
    lm = load("attention_lm")
    net = lm.TransformerModel(11, 8, 2, 16, 2, 0.0)
    record("lm", net, [torch.randint(0, 11, (6, 2)), nn.Transformer.generate_square_subsequent_mask(6)], lambda s, a: net(s, a))
    # three SGD steps of the encoder LM on nll_loss (word_language_model's criterion on log_softmax), from its
    # saved state
    src, src_mask = out["lm.input.0"], out["lm.input.1"]
    tgt = torch.randint(0, 11, (6, 2))
    out["lm_sgd.target"] = tgt
    net.zero_grad()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for i in range(3):
        opt.zero_grad()
        loss = F.nll_loss(net(src, src_mask).view(-1, 11), tgt.view(-1))
        loss.backward()
        opt.step()
        out[f"lm_sgd.loss.{i}"] = loss.detach().clone()
    for k, v in net.state_dict().items():
        out[f"lm_sgd.trained.{k}"] = v.clone()
    att = lm.Attend(8, 2)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[0, 4] = True
    record("attend", att, [r(N, L, 8), r(S, N, 6), r(S, N, 5), pad], lambda *xs: att(*xs))
    save(os.path.join(outdir, "attention.safetensors"), out)


if __name__ == "__main__":
    main(sys.argv[1])
