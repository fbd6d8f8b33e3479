// What script() compiles is TorchScript's rule: forward, what it calls and @torch.jit.export methods of a
// module; a function when asked for. Everything else of a real model file (imports kiln cannot read,
// module-level code, config classes, generate / configure_optimizers / from_pretrained, builders with
// **kwargs) is read and never fails the file; lowered or evaluated code that uses such a name fails naming
// why (docs/script.md, "What parses and what runs").
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

// Written the way published GPT files are: their extra methods use Python kiln does not lower.
const char* kGptLike = R"(import math
import inspect
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

__all__ = ["Net", "NetConfig"]
SCALE = 2.0
try:
    from fancy import thing
except ImportError:
    thing = None


@dataclass
class NetConfig:
    n_embd: int = 8
    bias: bool = True


class Net(nn.Module):
    """A two-layer model."""

    def __init__(self, d: int):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        return self.head(F.gelu(self.fc(x)))

    @torch.jit.export
    def features(self, x):
        return self.fc(x)

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = {pn: p for pn, p in self.named_parameters()}
        decay = [p for n, p in params.items() if p.dim() >= 2]
        print(f"num decayed parameter tensors: {len(decay)}, with {sum(p.numel() for p in decay):,} parameters")
        use_fused = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        return torch.optim.AdamW(decay, lr=learning_rate, betas=betas, **dict(fused=True) if use_fused else {})

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            logits = self(idx) / temperature
            idx = torch.cat((idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)), dim=1)
        return idx

    @classmethod
    def from_pretrained(cls, model_type, override_args=None):
        override_args = override_args or {}
        assert all(k == 'dropout' for k in override_args)
        return cls(**override_args)

    @torch.jit.ignore
    def debug(self, x):
        return np.asarray(x)


def builder(*, weights=None, progress: bool = True, **kwargs) -> Net:
    return Net(**kwargs)


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


if __name__ == "__main__":
    Net(4).generate(None, 3)
)";

std::string file_error(const std::string& src, const std::function<void(ScriptFile&)>& use) {
  try {
    ScriptFile m = script_source(src, "m.py");
    use(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("script: a file written like a published model scripts; only forward, what it calls and exports are compiled") {
  ScriptFile file = script_source(kGptLike, "gpt_like.py");
  CHECK(file.function_names() == std::vector<std::string>{"builder", "double"});
  CHECK(file.class_names() == std::vector<std::string>{"NetConfig", "Net"});
  auto net = file.module("Net", {int64_t(4)});
  Tensor x = randn({3, 4});
  auto* fc = dynamic_cast<nn::Linear*>(net->named_children().at(0).second.get());
  REQUIRE(fc);
  check_close((*net)(x), net->method("forward").call({x})[0].to_tensor());
  check_close(net->call({x}, "features")[0].to_tensor(), linear(x, fc->weight, fc->bias), 1e-6, 1e-6);
  check_close(file.function("double").call({x})[0].to_tensor(), x * 2.0);
  // asked for by name, the builder's **kwargs is an error of what is compiled
  check_error([&] { file.function("builder"); }, "gpt_like.py:64:");
  check_error([&] { file.function("builder"); }, "*args and **kwargs are not supported in kiln script");
  check_error([&] { net->method("debug"); }, "script: Net.debug is marked @torch.jit.ignore, so it is not compiled (kiln runs no Python)");
  check_error([&] { file.module("NetConfig"); },
              "gpt_like.py:19:7: error: class 'NetConfig' is a @dataclass, not an nn.Module: a config object that a module's "
              "constructor takes (value(\"NetConfig(...)\"))");
}

TEST_CASE("script: names kiln cannot give a value fail where compiled code uses them, naming why") {
  std::string head = "import torch\nimport numpy as np\nfrom functools import partial\nfrom ..ops.misc import Conv\nfor LIMIT in (3, 1): pass\n\n\n";
  auto fn_error = [&](const std::string& body) {
    return file_error(head + "def f(x: torch.Tensor) -> torch.Tensor:\n" + body, [](ScriptFile& m) { m.function("f"); });
  };
  // numpy is read in __init__ only (np.linspace, maxvit's)
  CHECK(fn_error("    return np.tanh(x)\n").find("m.py:9:12: error: 'np' comes from `import numpy as np` (line 2), which kiln script reads in __init__ only") == 0);
  CHECK(fn_error("    return x * LIMIT\n").find("m.py:9:16: error: 'LIMIT' is bound by module-level code (line 5), which kiln does not run") == 0);
  CHECK(fn_error("    g = partial(torch.relu)\n    return x\n").find("'partial' comes from `from functools import partial` (line 3), which kiln script reads in __init__ only") != std::string::npos);
  // __init__ too
  std::string init_error = file_error(head + "class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                             "        self.c = Conv(3)\n\n    def forward(self, x):\n        return x\n",
                                      [](ScriptFile& m) { m.module("Net"); });
  CHECK(init_error.find("m.py:11:18: error: 'Conv' comes from `from ..ops.misc import Conv`, which kiln cannot read (the source has no "
                        "file path to resolve it from)") == 0);
  // forward calling an unused method builds (tests/test_script_checking.cpp), and raises when the call runs
  std::string ignored = file_error("import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return self.skip(x)\n\n"
                                   "    @torch.jit.unused\n    def skip(self, x):\n        return x\n",
                                   [](ScriptFile& m) { m.module("Net")->call({randn({2})}); });
  CHECK(ignored.find("m.py:6: RuntimeError: 'skip' was marked @torch.jit.unused") != std::string::npos);
  // an export with an error fails when the module is built
  std::string exported = file_error("import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n"
                                    "    @torch.jit.export\n    def bad(self, x):\n        return [i for i in x]\n",
                                    [](ScriptFile& m) { m.module("Net"); });
  CHECK(exported.find("list comprehensions are not supported in kiln script") != std::string::npos);
}

TEST_CASE("script: __init__ raises with Python's message, formats f-strings, and torch's API-usage logging does nothing") {
  const char* src = R"py(import torch
import torch.nn as nn
from ..utils import _log_api_usage_once


class Net(nn.Module):
    def __init__(self, version: str, width: float = 1.5):
        super().__init__()
        _log_api_usage_once(self)
        torch._C._log_api_usage_once("net")
        if version not in ("a", "b"):
            raise ValueError(f"Unsupported Net version {version}: 'a' or 'b' expected, width {width:.2f} ({width!r}, {[1, 'x']})")
        self.name = f"net_{version}{str(width)}"
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)
)py";
  ScriptFile file = script_source(src, "net.py");
  auto net = file.module("Net", {IValue("a")});
  CHECK(net->named_parameters().size() == 2);
  check_error([&] { file.module("Net", {IValue("c")}); },
              "net.py:12:13: error: ValueError: Unsupported Net version c: 'a' or 'b' expected, width 1.50 (1.5, [1, 'x'])");
  check_error([&] { file.module("Net", {IValue("c"), IValue(int64_t(2))}); }, "width 2.00 (2, [1, 'x'])");
}

TEST_CASE("script: __init__ evaluates list comprehensions and generators (with any, all, sum) in their own scope") {
  const char* src = R"py(import torch.nn as nn


class Net(nn.Module):
    def __init__(self, widths):
        super().__init__()
        i = 7
        depths = [w * 2 for w in widths if w > 1]
        pairs = [(a, b) for a in range(2) for b in range(a, 2)]
        assert all(d % 2 == 0 for d in depths) and not any(w < 0 for w in widths)
        assert sum(w for w in widths) == 6 and sum([0.5, 1]) == 1.5 and i == 7
        assert pairs == [(0, 0), (0, 1), (1, 1)]
        self.layers = nn.ModuleList([nn.Linear(d, d) for d in depths])

    def forward(self, x):
        return x
)py";
  auto net = script_source(src, "net.py").module("Net", {IValue::list({IValue(int64_t(1)), IValue(int64_t(2)), IValue(int64_t(3))})});
  CHECK(net->named_parameters().size() == 4);  // widths 2 and 3 kept, doubled: Linear(4, 4) and Linear(6, 6)
  CHECK(net->state_dict().at("layers.1.weight").sizes() == Shape{6, 6});
}

TEST_CASE("script: __init__ reads module-level constants, computed when first read; lowered code does not") {
  const char* src = R"py(import torch
import torch.nn as nn

_BN_MOMENTUM = 1 - 0.9997
WIDTHS = [_BN_MOMENTUM, 2 * 3]
LOOP = LOOP + 1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(WIDTHS[1], momentum=_BN_MOMENTUM)

    def forward(self, x):
        return self.bn(x)


class Loop(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = LOOP

    def forward(self, x):
        return x * WIDTHS[1]
)py";
  ScriptFile file = script_source(src, "net.py");
  auto net = file.module("Net");
  CHECK(net->state_dict().at("bn.running_mean").sizes() == Shape{6});
  check_error([&] { file.module("Loop"); }, "net.py:6:8: error: module-level 'LOOP' is defined in terms of itself");
}
