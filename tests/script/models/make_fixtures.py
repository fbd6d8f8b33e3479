"""Writes the PyTorch reference data the model-file tests (tests/test_script_modules.cpp) compare kiln with.

For each model file here: the model's state_dict (`state.*`), inputs (`input.*`), its outputs in eval mode
(`output.*`, checked equal to torch.jit.script of the same module first), and for the models without dropout
the first training-mode output (`train_output.0`) and the state after three SGD steps on cross_entropy
(`trained.*`, targets `target.0`). One safetensors file per model, written by hand (no safetensors package).
Run with /usr/bin/python3 (PyTorch 1.13) from the repository root:
    python3 tests/script/models/make_fixtures.py tests/script/models/data
"""
import importlib.util
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8")}


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def save(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        code, np_dtype = DTYPES[t.dtype]
        b = t.detach().contiguous().numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def randomize_batch_norm(model):
    # Fresh running statistics are 0 and 1: make them (and the affine parameters) something to get wrong.
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def case(name, cls, ctor, inputs, train_classes=None):
    torch.manual_seed(0)
    model = getattr(load(name), cls)(*ctor)
    randomize_batch_norm(model)
    out = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    for i, x in enumerate(inputs[0]):
        out[f"input.{i}"] = x
    model.eval()
    scripted = torch.jit.script(model)
    with torch.no_grad():
        for k, args in enumerate(inputs[1]):
            y = model(*args)
            ys = scripted(*args)
            if isinstance(y, dict):  # named outputs: output.K.NAME, in the dict's order (kiln returns them as a tuple)
                assert list(y) == list(ys), f"{name}: eager and torch.jit.script keys differ"
                for i, key in enumerate(y):
                    assert torch.allclose(y[key], ys[key], rtol=1e-5, atol=1e-6), f"{name}: eager and torch.jit.script differ"
                    out[f"output.{k}.{i}.{key}"] = y[key]
                continue
            assert torch.allclose(y, ys, rtol=1e-5, atol=1e-6), f"{name}: eager and torch.jit.script differ"
            out[f"output.{k}"] = y
    if train_classes:
        model.train()
        x = inputs[0][0]
        target = torch.arange(x.shape[0]) % train_classes
        out["target.0"] = target
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            y = model(x)
            if isinstance(y, dict):
                y = y["logits"]
            if step == 0:
                out["train_output.0"] = y.detach().clone()
            loss = F.cross_entropy(y, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        out.update({f"trained.{k}": v.clone() for k, v in model.state_dict().items()})
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data")
    os.makedirs(dest, exist_ok=True)
    torch.manual_seed(1)
    x = torch.randn(4, 12)
    save(os.path.join(dest, "mlp.safetensors"), case("mlp", "MLP", (12, 16, 3), ([x], [(x,)]), train_classes=3))
    torch.manual_seed(1)
    x = torch.randn(2, 1, 28, 28)
    save(os.path.join(dest, "lenet.safetensors"), case("lenet", "LeNet", (), ([x], [(x,)])))
    torch.manual_seed(1)
    x = torch.randn(4, 3, 8, 8)
    save(os.path.join(dest, "resnet.safetensors"), case("resnet", "ResNet", (), ([x], [(x,)]), train_classes=10))
    torch.manual_seed(1)
    x = torch.randn(2, 5, 16)
    mask = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    save(os.path.join(dest, "transformer.safetensors"),
         case("transformer", "EncoderLayer", (16, 4, 32), ([x, mask], [(x,), (x, mask)])))
    torch.manual_seed(1)
    tokens = torch.randint(1, 20, (4, 7))
    tokens[0, 5:] = 0  # padding
    tokens[2, 3:] = 0
    save(os.path.join(dest, "token_cnn.safetensors"),
         case("token_cnn", "TokenCNN", (20, 8, 3), ([tokens], [(tokens,)]), train_classes=3))


if __name__ == "__main__":
    main()
