import torch
import torch.nn as nn


class MLP(nn.Module):
    """A multilayer perceptron: depth hidden layers with ReLU, then a linear head."""

    def __init__(self, in_features, hidden, out_features, depth=2):
        super().__init__()
        layers = []
        width = in_features
        for _ in range(depth):
            layers.append(nn.Linear(width, hidden))
            layers.append(nn.ReLU())
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(hidden, out_features)

    def forward(self, x):
        return self.head(self.body(x))
