# kiln check without a class: Good and Checkpointed build and lower; Broken's forward has two independent
# errors (the statement reading `y` is not a third); Sized needs arguments (a keyword-only one too) and is skipped.
import torch
import torch.nn as nn


class Good(nn.Module):
    def __init__(self, width: int = 4):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)


class Checkpointed(Good):
    @torch.jit.unused
    def _checkpointed(self, x):
        return torch.utils.checkpoint.checkpoint(self.fc, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            return self._checkpointed(x)
        return self.fc(x)


class Broken(Good):
    def forward(self, x):
        y = self.fc(x).frobnicate()
        z = y + 1
        return x + self.missing


class Sized(nn.Module):
    def __init__(self, width, *, depth):
        super().__init__()

    def forward(self, x):
        return x
