"""Prints the PyTorch 1.13 values pasted into tests/test_conv_padding.cpp (run with /usr/bin/python3).
Inputs are the C++ test's closed forms: seq(shape, a, b)[i] = sin(a * i + b), float64."""
import torch
import torch.nn.functional as F

from torch_values import seq, show


x = seq((1, 2, 3, 4))
show("F.pad(x, (2, 1, 1, 3), 'circular')", F.pad(x, (2, 1, 1, 3), mode="circular"))
w = seq((2, 2, 2, 3), 0.7, 0.2)
b = seq((2,), 0.5, 0.3)
for mode in ["zeros", "reflect", "replicate", "circular"]:
    conv = torch.nn.Conv2d(2, 2, (2, 3), padding="same", padding_mode=mode, dilation=(1, 1)).double()
    with torch.no_grad():
        conv.weight.copy_(w)
        conv.bias.copy_(b)
    show(f"Conv2d(2, 2, (2, 3), padding='same', padding_mode='{mode}')(x)", conv(x))
show("F.conv2d(x, w, b, padding='same', dilation=(2, 1))", F.conv2d(x, w, b, padding="same", dilation=(2, 1)))
show("F.conv2d(x, w, None, padding='valid')", F.conv2d(x, w, None, padding="valid"))
x1 = seq((2, 2, 5))
w1 = seq((3, 2, 4), 0.9, 0.4)
for mode in ["zeros", "reflect"]:
    conv = torch.nn.Conv1d(2, 3, 4, padding="same", padding_mode=mode, bias=False).double()
    with torch.no_grad():
        conv.weight.copy_(w1)
    show(f"Conv1d(2, 3, 4, padding='same', padding_mode='{mode}', bias=False)(x1)", conv(x1))
conv = torch.nn.Conv2d(2, 2, (2, 3), padding=1, padding_mode="circular").double()
with torch.no_grad():
    conv.weight.copy_(w)
    conv.bias.copy_(b)
show("Conv2d(2, 2, (2, 3), padding=1, padding_mode='circular')(x)", conv(x))
