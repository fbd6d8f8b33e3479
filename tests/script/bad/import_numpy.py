# error: 3:1: import of 'numpy' is not supported in kiln script (only torch, torch.nn, torch.nn.functional, math and typing)
import torch
import numpy
