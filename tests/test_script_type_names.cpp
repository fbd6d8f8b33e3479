// script(): type(), __class__, __name__, __qualname__ and __module__ in __init__ as Python gives them (init loops
// that test `type(m) == nn.Linear`, reprs built from `type(self).__name__`), and torch.tensor / torch.as_tensor in
// lowered code with torch's dtype inference, on the interpreter, through compile() and in a trace. Expected values
// are what Python 3 and PyTorch 1.13 print for the same code.
#include <string>

#include "error_of.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

// typenames.py: what `/usr/bin/python3 -c "import typenames; print(typenames.Net().facts())"` prints is checked below
const char* kTypeNames = R"PY(
import torch
import torch.nn as nn


def make_head(n):
    return nn.Linear(n, 2)


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.conv = nn.Conv2d(n, n, 1)
        self.bn = nn.BatchNorm2d(n)

    def helper(self):
        return 1

    def forward(self, x):
        return self.bn(self.conv(x))


class Net(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.block = Block(n)
        self.seq = nn.Sequential(nn.Linear(n, n), nn.ReLU())
        self.head = make_head(n)
        linears, convs = 0, 0
        for m in self.modules():
            if type(m) == nn.Linear:
                nn.init.zeros_(m.bias)
                linears += 1
            if type(m) is nn.Conv2d:
                convs += 1
        self.counts = (linears, convs, isinstance(self.head, type(self.seq[0])), isinstance(self.block, type(self.head)))
        self.names = " ".join([type(m).__name__ for m in self.modules()])
        self.repr = f"{type(self).__name__}(n={n})"
        self.cls = self.__class__.__name__ + " " + self.block.__class__.__name__ + " " + self.seq.__class__.__name__
        self.builtins = (type(3) is int, type(2.5) is float, type(True) is bool, type("s") == str, type([]) is list,
                         type((1,)) is tuple, type({}) is dict, type(None) is type(None), type(3) is float,
                         type(True) is int, type(Block) is type, (3).__class__ is int, type(torch.ones(1)) is torch.Tensor,
                         isinstance(self.head.weight, torch.Tensor), type(self.head.weight) is torch.Tensor)
        self.type_names = (type(3).__name__, type(None).__name__, type(Net).__name__, type([1]).__qualname__,
                           int.__module__, len.__name__, len.__module__)
        self.modnames = (nn.Linear.__module__, nn.Conv2d.__module__, type(self.seq).__module__, nn.ModuleList.__module__,
                         nn.Parameter.__module__, type(self.head).__qualname__, self.head.__module__, nn.Linear.__name__)
        self.own = (Net.__module__, Block.__name__, Block.__qualname__, make_head.__name__, make_head.__qualname__,
                    make_head.__module__, Block.helper.__qualname__, self.__module__, type(self).__module__)

    @torch.jit.export
    def facts(self):
        return self.counts, self.names, self.repr, self.cls, self.builtins, self.type_names, self.modnames, self.own

    def forward(self, x):
        return self.head(x)
)PY";

std::string joined(const IValue& v) {
  std::string out;
  for (const IValue& e : v.elements()) {
    out += out.empty() ? "" : " ";
    out += e.is_string() ? e.to_string() : e.is_bool() ? (e.to_bool() ? "True" : "False") : std::to_string(e.to_int());
  }
  return out;
}

}  // namespace

TEST_CASE("script types: type(), __class__, __name__, __qualname__ and __module__ in __init__ as Python's") {
  auto net = script_source(kTypeNames, "typenames.py").module("Net", {});
  std::vector<IValue> f = net->call({}, "facts").at(0).elements();
  REQUIRE(f.size() == 8);
  CHECK(joined(f[0]) == "2 1 True False");
  CHECK(f[1].to_string() == "Net Block Conv2d BatchNorm2d Sequential Linear ReLU Linear");
  CHECK(f[2].to_string() == "Net(n=3)");
  CHECK(f[3].to_string() == "Net Block Sequential");
  CHECK(joined(f[4]) == "True True True True True True True True False False True True True True False");
  CHECK(joined(f[5]) == "int NoneType type list builtins len builtins");
  CHECK(joined(f[6]) == "torch.nn.modules.linear torch.nn.modules.conv torch.nn.modules.container "
                        "torch.nn.modules.container torch.nn.parameter Linear torch.nn.modules.linear Linear");
  CHECK(joined(f[7]) == "typenames Block Block make_head make_head typenames Block.helper typenames typenames");
  // the init loop found both Linears: their biases are zero, the convolution's is not
  for (const auto& [name, t] : net->named_parameters())
    if (name == "head.bias" || name == "seq.0.bias") check_close(t, zeros({name == "head.bias" ? 2 : 3}));

  const char* in_forward = R"(
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return type(x)
)";
  check_error([&] { script_source(in_forward, "fwd_type.py").module("Net", {})->call({zeros({1})}); },
              "fwd_type.py:7:16: error: type() is not supported in lowered code (TorchScript refuses it too); __init__ may use it");
  const char* class_in_forward = R"(
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return self.__class__.__name__
)";
  check_error([&] { script_source(class_in_forward, "fwd_class.py").module("Net", {})->call({zeros({1})}); },
              "fwd_class.py:7:21: error: __class__ is not supported in lowered code (TorchScript refuses it too)");
}

TEST_CASE("script types: torch.tensor and torch.as_tensor in forward infer torch's dtypes, interpreted and compiled") {
  const char* src = R"(
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x, n: int, s: float):
        a = torch.tensor([n, s]) + x
        b = torch.tensor([[True, 2], [n, 0]])
        c = torch.tensor([[1, 2.75]], dtype=torch.int32)
        d = torch.tensor([]) + 1
        e = torch.tensor([[n], [x.size(0)]], dtype=torch.float64)
        return a, b, c, d, e
)";
  auto net = script_source(src, "tensors.py").module("Net", {});
  Tensor x = tensor({0.5, -1.0}, {2});
  // torch: [3., 1.25] + x (float32); [[1, 2], [3, 0]] int64; [[1, 2]] int32; shape (0,) float32; [[3.], [2.]] float64
  Function compiled = compile(net->method());
  for (bool jit : {false, true}) {
    CAPTURE(jit);
    std::vector<IValue> in{x, int64_t(3), 1.25};
    std::vector<IValue> r = jit ? compiled.call(in) : net->call(in);
    if (r.size() == 1 && r[0].is_tuple()) r = r[0].elements();
    REQUIRE(r.size() == 5);
    check_close(r[0].to_tensor(), tensor({3.5, 0.25}, {2}));
    CHECK(r[1].to_tensor().dtype() == DType::Int64);
    check_close(r[1].to_tensor(), tensor(std::vector<int64_t>{1, 2, 3, 0}, {2, 2}));
    CHECK(r[2].to_tensor().dtype() == DType::Int32);
    CHECK(r[2].to_tensor().sizes() == Shape{1, 2});
    check_close(r[2].to_tensor().to(DType::Int64), tensor(std::vector<int64_t>{1, 2}, {1, 2}));
    CHECK(r[3].to_tensor().dtype() == DType::Float32);
    CHECK(r[3].to_tensor().sizes() == Shape{0});
    CHECK(r[4].to_tensor().dtype() == DType::Float64);
    check_close(r[4].to_tensor(), tensor({3.0, 2.0}, {2, 1}, DType::Float64));
  }
  // a trace records a tensor built from numbers as a constant
  Function traced = trace([](const Tensors& in) { return Tensors{in[0] * tensor(std::vector<int64_t>{2, 3}, {2})}; },
                          {tensor({1.5, 2.0}, {2})});
  check_close(traced.call({tensor({1.0, -1.0}, {2})})[0].to_tensor(), tensor({2.0, -3.0}, {2}));


  // what torch.tensor cannot take raises, naming the call and the facts
  auto error = [](const std::string& expr) {
    std::string text = "import torch\nimport torch.nn as nn\nfrom typing import List\n\n\nclass Net(nn.Module):\n"
                       "    def forward(self, x, xs: List[int]):\n        return " + expr + "\n";
    return test::error_of([&] { script_source(text, "bad.py").module("Net", {})->call({zeros({2}), IValue::list({1, 2})}); });
  };
  CHECK(error("torch.tensor([[1, 2], [3]])").find("bad.py:8:38: error: torch.tensor(): expected sequence of length 2 at dim 1 (got 1)") == 0);
  CHECK(error("torch.tensor([x, x])").find("bad.py:8:30: error: torch.tensor() takes numbers or (nested) lists of them, got Tensor (torch.stack joins tensors)") == 0);
  CHECK(error("torch.tensor([1.0], requires_grad=True)").find("bad.py:8:50: error: torch.tensor(..., requires_grad=True) is not supported") == 0);
  CHECK(error("torch.tensor(xs)").find("bad.py:8:29: error: torch.tensor() takes a list whose length is known when lowering") == 0);
}
