// script(): named tuples as torchvision's GoogLeNet and Inception3 return them — collections.namedtuple
// with field types from `__annotations__`, typing.NamedTuple classes — built in lowered code, read by
// field name and index, and torch.jit.is_scripting() taking the scripted branch.
#include <string>

#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const char* kOutputs = R"(
import warnings
from collections import namedtuple
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

Outputs = namedtuple("Outputs", ["logits", "aux"])
Outputs.__annotations__ = {"logits": Tensor, "aux": Optional[Tensor]}
_Outputs = Outputs
Pair = namedtuple("Pair", "first second")


class Stats(NamedTuple):
    mean: Tensor
    count: int


def stats(x: Tensor) -> Stats:
    return Stats(count=x.numel(), mean=x.mean())


def swap(p: Pair) -> Pair:
    return Pair(p.second, p[0])


def summary(x: Tensor) -> Tuple[Tensor, int, Tensor]:
    s = stats(x)
    p = swap(Pair(x, x * 2))
    return s.mean, s[1], p.first


class Net(nn.Module):
    def __init__(self, aux: bool):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.aux_fc = nn.Linear(4, 2) if aux else None

    @torch.jit.unused
    def eager_outputs(self, x: Tensor, aux: Optional[Tensor]) -> Outputs:
        return x

    def forward(self, x: Tensor) -> Outputs:
        aux: Optional[Tensor] = None
        if self.aux_fc is not None:
            aux = self.aux_fc(x)
        y = self.fc(x)
        if torch.jit.is_scripting():
            if aux is None:
                warnings.warn("the scripted Net always returns Outputs")
            return _Outputs(y, aux)
        else:
            return self.eager_outputs(y, aux)

    @torch.jit.export
    def logits(self, x: Tensor) -> Tensor:
        out = self.forward(x)
        return out.logits + out[0]
)";

}  // namespace

TEST_CASE("script namedtuple: namedtuple and NamedTuple built, passed and read by field name and index") {
  ScriptFile m = script_source(kOutputs, "outputs.py");
  Tensor x = tensor({1.0, 2.0, 6.0});
  std::vector<IValue> out = m.function("summary").call({x});
  REQUIRE(out.size() == 1);
  std::vector<IValue> e = out[0].elements();
  REQUIRE(e.size() == 3);
  check_close(e[0].to_tensor(), scalar_tensor(3.0));  // Stats.mean, given by keyword out of order
  CHECK(e[1].to_int() == 3);                     // Stats.count by index
  check_close(e[2].to_tensor(), tensor({2.0, 4.0, 12.0}));  // the swapped pair's first field
}

TEST_CASE("script namedtuple: a forward returning one takes the torch.jit.is_scripting() branch, with and without its optional field") {
  ScriptFile file = script_source(kOutputs, "outputs.py");
  Tensor x = randn({2, 4});
  for (bool aux : {false, true}) {
    auto net = file.build("Net", {IValue(aux)});
    net->eval();
    std::vector<IValue> out = net->call({x});
    REQUIRE(out.size() == 1);
    std::vector<IValue> fields = out[0].elements();  // a tuple, as torch.jit.script gives Outputs
    REQUIRE(fields.size() == 2);
    Tensor want = matmul(x, net->state_dict().at("fc.weight").t()) + net->state_dict().at("fc.bias");
    check_close(fields[0].to_tensor(), want, 1e-5, 1e-6);
    CHECK(fields[1].is_none() == !aux);
    if (aux) CHECK(fields[1].to_tensor().sizes() == Shape{2, 2});
    check_close(net->call({x}, "logits").at(0).to_tensor(), want * 2.0, 1e-5, 1e-6);
    std::vector<IValue> compiled = compile(net->method()).call({x});
    check_close(compiled.at(0).elements().at(0).to_tensor(), want, 1e-5, 1e-6);
  }
}

TEST_CASE("script namedtuple: wrong fields, arguments and definitions name the namedtuple") {
  auto lowered = [](const std::string& body) {
    std::string src = std::string(R"(
from collections import namedtuple
from torch import Tensor
Pair = namedtuple("Pair", ["first", "second"])

def f(x: Tensor) -> Tensor:
)") + body;
    script_source(src, "pair.py").function("f");
  };
  check_error([&] { lowered("    return Pair(x, x).secnd\n"); }, "'Pair' object has no attribute 'secnd'; did you mean second?");
  check_error([&] { lowered("    return Pair(x, x, x)[0]\n"); }, "Pair() takes 2 arguments, got 3");
  check_error([&] { lowered("    return Pair(x)[0]\n"); }, "Pair() is missing the argument 'second'");
  check_error([&] { lowered("    return Pair(x, secnd=x)[0]\n"); }, "unexpected keyword argument 'secnd'; did you mean second?");
  check_error([&] { lowered("    return Pair(x, 1)[0]\n"); }, "Pair.second expects Tensor, got int");
  check_error([&] { script_source("from collections import namedtuple\nP = namedtuple('P', ['a', 'a'])\n", "p.py"); },
              "p.py:2:27: error: namedtuple field 'a' is given twice");
  check_error([&] {
    script_source("from collections import namedtuple\nfrom torch import Tensor\nP = namedtuple('Q', ['a'])\n"
                  "def f(x: Tensor) -> Tensor:\n    return P(x)[0]\n", "q.py").function("f");
  }, "'P' is a namedtuple (line 3) whose type name is not the string 'P'");
  check_error([&] {
    script_source("from typing import NamedTuple\nfrom torch import Tensor\nclass P(NamedTuple):\n    a: Tensor = None\n"
                  "def f(x: Tensor) -> Tensor:\n    return P(x)[0]\n", "d.py").function("f");
  }, "d.py:6:12: error: NamedTuple class 'P' (line 3) has a default for field 'a' (line 4), which kiln script does not support");
}
