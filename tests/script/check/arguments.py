# kiln check FILE Probe WANT VALUE: how the command line reads VALUE (tests/script/run_check_args.sh); Probe's
# __init__ asserts that VALUE is what WANT names.
import torch.nn as nn

SCALE = "from the file"


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)


def make_block(width):
    return Block(width)


class Probe(nn.Module):
    def __init__(self, want, value=None):
        super().__init__()
        if want == "gelu":
            assert isinstance(value, str) and value == "GELU", "not the string 'GELU'"
        elif want == "quoted":
            assert isinstance(value, str) and value == "Block", "not the string 'Block'"
        elif want == "block":
            assert isinstance(value(2), Block), "not Block or what makes one"
        elif want == "constant":
            assert value == SCALE, "not SCALE"
        elif want == "int":
            assert isinstance(value, int) and not isinstance(value, bool) and value == 3, "not the int 3"
        elif want == "float":
            assert isinstance(value, float) and value == 0.5, "not the float 0.5"
        elif want == "bool":
            assert value is True, "not True"
        elif want == "none":
            assert value is None, "not None"
        elif want == "list":
            assert value == [2, 2], "not [2, 2]"
        else:
            assert False, "unknown want"
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)
