"""A sequence tagger over a bidirectional GRU with zero initial state, a 2-layer ReLU RNN on top and an
LSTMCell run over the last step, time-major inputs."""
import torch
import torch.nn as nn
from torch import Tensor
from typing import Tuple


class Tagger(nn.Module):
    def __init__(self, n_in: int, hidden: int, n_tags: int):
        super().__init__()
        self.gru = nn.GRU(n_in, hidden, bidirectional=True)
        self.rnn = nn.RNN(2 * hidden, hidden, num_layers=2, nonlinearity="relu")
        self.cell = nn.LSTMCell(hidden, hidden)
        self.head = nn.Linear(hidden, n_tags)

    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        y, h = self.gru(x)
        z, hz = self.rnn(y, h)
        hc, cc = self.cell(z[-1])
        return self.head(z), hz + h.sum(0), hc * cc
