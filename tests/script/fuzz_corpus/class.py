# error: 5:1: class is not supported in kiln script
import torch


class Model:
    pass
