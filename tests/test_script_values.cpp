// script(): what published __init__s pass around as values — classes, functions, partials, torch.nn,
// config objects, dicts — and what they do with the module tree (modules(), isinstance, nn.init), with
// ScriptFile::value() / build() giving such values from C++. torchvision's own files are compared with
// PyTorch by tests/script/torchvision.
#include <cmath>
#include <string>
#include <tuple>

#include "error_of.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const char* kBlocks = R"(
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn as nn


@dataclass
class Config:
    width: int
    depth: int = 2


class Plain(nn.Module):
    expansion = 1

    def __init__(self, n, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self.conv = nn.Conv2d(n, n, 1, bias=False)
        self.bn = norm_layer(n)

    def forward(self, x):
        return self.bn(self.conv(x))


class Wide(Plain):
    expansion = 2


class Stack(nn.Sequential):
    def __init__(self, n, **kwargs):
        layers = OrderedDict([("first", nn.Conv2d(n, n, 1, **kwargs)), ("act", nn.ReLU())])
        super().__init__(layers)
        self.add_module("last", nn.Identity())


class Net(nn.Module):
    def __init__(self, block, cfg, act=partial(nn.LeakyReLU, negative_slope=0.5)):
        super().__init__()
        self.body = nn.Sequential(*[block(cfg.width) for _ in range(cfg.depth)])
        self.expand = nn.Conv2d(cfg.width, cfg.width * block.expansion, 1)
        self.stack = Stack(cfg.width * block.expansion, bias=False)
        self.act = act()
        params = {"in_features": cfg.width * block.expansion, "out_features": 3}
        self.head = getattr(nn, "Linear")(**params)
        self.n_convs = sum(1 for m in self.modules() if isinstance(m, nn.Conv2d))
        self.n_children = len([name for name, _ in self.named_children()])
        for m in self.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.Linear)):
                nn.init.constant_(m.weight, 0.5)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        self.tag = "%s x%d" % (block.__name__, cfg.depth)
        del params

    @torch.jit.export
    def counts(self):
        return self.n_convs, self.n_children, self.tag

    def forward(self, x):
        x = self.stack(self.expand(self.body(x)))
        return self.head(self.act(x).mean((2, 3)))
)";

}  // namespace

TEST_CASE("script values: classes, partials and config objects as constructor arguments, from C++") {
  ScriptFile file = script_source(kBlocks, "blocks.py");
  auto net = file.build("Net", {file.value("Wide"), file.value("Config(4)")});
  std::vector<std::string> names;
  for (auto& [n, t] : net->state_dict()) names.push_back(n);
  // torch's state_dict keys: Sequential items by index, an OrderedDict's by key, add_module's by name
  CHECK(std::count(names.begin(), names.end(), "body.1.conv.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "stack.first.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "stack.first.bias") == 0);  // bias=False through **kwargs
  CHECK(net->state_dict().at("expand.weight").sizes() == Shape{8, 4, 1, 1});  // Wide.expansion == 2
  CHECK(net->state_dict().at("head.weight").sizes() == Shape{3, 8});
  check_close(net->state_dict().at("head.weight"), full({3, 8}, 0.5));
  check_close(net->state_dict().at("body.1.bn.bias"), zeros({4}));
  std::vector<IValue> counts = net->call({}, "counts").at(0).elements();  // one tuple
  REQUIRE(counts.size() == 3);
  CHECK(counts[0].to_int() == 4);  // the convs among self.modules()
  CHECK(counts[1].to_int() == 5);  // the children when __init__ counted: body, expand, stack, act, head
  CHECK(counts[2].to_string() == "Wide x2");
  // forward: x through the blocks, the Sequential subclass, LeakyReLU(0.5) from the partial, the head
  net->eval();
  Tensor x = randn({2, 4, 3, 3});
  Tensor y = (*net)(x);
  CHECK(y.sizes() == Shape{2, 3});
  check_close(compile(net->method())({x})[0], y, 1e-5, 1e-6);
}

TEST_CASE("script values: bad values name the construct, the file and the facts") {
  ScriptFile file = script_source(kBlocks, "blocks.py");
  check_error([&] { file.build("Net", {file.value("Plain"), file.value("Config()")}); },
              "error: Config() is missing required argument 'width'");
  check_error([&] { file.build("Net", {file.value("Plain"), file.value("Config(4)")}, {{"act", file.value("nn.Linaer")}}); },
              "module 'torch.nn' has no attribute 'Linaer'; did you mean Linear?");
  check_error([&] { file.build("Config", {int64_t(4)}); }, "class 'Config' is a @dataclass, not an nn.Module");
  check_error([&] { file.value("Plain("); }, "<value Plain(>:");
  check_error([&] { file.build("Net", {file.value("isinstance(1, Plain) + Undefined"), file.value("Config(4)")}); },
              "<value isinstance(1, Plain) + Undefined>:1:25: error: undefined name 'Undefined'");
}

TEST_CASE("script values: torch.nn and F as values in __init__ (hasattr, getattr, calculate_gain)") {
  const char* src = R"(
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, act="ReLU"):
        super().__init__()
        self.ok = hasattr(torch.nn.functional, "gelu") and F is not None and not hasattr(nn, "Nope")
        self.gain = nn.init.calculate_gain("leaky_relu", 0.2) if self.ok else 0.0
        self.act = getattr(nn, act)()

    def forward(self, x):
        return self.act(x) * self.gain
)";
  ScriptFile file = script_source(src, "m7.py");
  auto net = file.module("Net");
  Tensor x = tensor({-1.0, 2.0}, {2});
  // torch: nn.init.calculate_gain("leaky_relu", 0.2) == sqrt(2 / (1 + 0.2 ** 2))
  check_close((*net)(x), tensor({0.0, 2.0 * std::sqrt(2.0 / 1.04)}, {2}), 1e-6, 1e-6);
  check_error([&] { file.module("Net", {"Relu"}); }, "m7.py:12:20: error: module 'torch.nn' has no attribute 'Relu'");
  // a registered layer found by name: nn.PReLU() with its one slope 0.25
  check_close((*file.module("Net", {"PReLU"}))(x), tensor({-0.25 * std::sqrt(2.0 / 1.04), 2.0 * std::sqrt(2.0 / 1.04)}, {2}),
              1e-6, 1e-6);
  // a class torch.nn has and kiln lacks fails where it is built, naming it
  check_error([&] { file.module("Net", {"RReLU"}); }, "m7.py:12:20: error: nn.RReLU is not supported in kiln script");
}

TEST_CASE("script values: try / except / else / finally in __init__ as Python runs them") {
  // each path appends to a log that the last assert compares with Python's (run under python3, this file's
  // __init__ leaves the same log)
  const char* src = R"(
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, key):
        super().__init__()
        log = []
        try:
            v = {'a': 1}[key]
        except (IndexError, KeyError) as e:
            log.append('missing ' + str(e))
            v = -1
        else:
            log.append('found')
        finally:
            log.append('finally')
        try:
            try:
                [1, 2].index(3)
            except LookupError:
                log.append('lookup')
            except ValueError:
                log.append('value')
                raise
        except Exception:
            log.append('reraised')
        try:
            w = 1 // 0
        except:
            log.append('bare')
        if key == 'a':
            assert log == ['found', 'finally', 'value', 'reraised', 'bare'], log
        else:
            assert log == ["missing '" + key + "'", 'finally', 'value', 'reraised', 'bare'], log
        if key == 'c':
            try:
                raise ValueError('from the try')
            finally:
                log.append('still runs')
        self.v = v

    def forward(self, x):
        return x * self.v
)";
  ScriptFile file = script_source(src, "tries.py");
  check_close((*file.module("Net", {std::string("a")}))(ones({2})), ones({2}), 0, 0);
  check_close((*file.module("Net", {std::string("b")}))(ones({2})), -ones({2}), 0, 0);
  // an exception no except catches is the error, at its raise, after finally ran
  check_error([&] { file.module("Net", {std::string("c")}); }, "tries.py:38:17: error: ValueError: from the try");
  // except names a builtin class
  std::string bad = std::string(src).replace(std::string(src).find("except LookupError"), 18, "except LookupErr");
  check_error([&] { script_source(bad, "bad.py").module("Net", {std::string("a")}); },
              "bad.py:21:20: error: 'LookupErr' is not a builtin exception class (except in __init__ catches those)");
}

TEST_CASE("script values: except E as e binds the exception: str(e), e.args, repr(e) and raise e as Python's") {
  // the assert holds under python3 too, and Net('b') raises the same ValueError there
  const char* src = R"py(
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, key):
        super().__init__()
        log = []
        try:
            v = {'a': 1}[key]
        except KeyError as e:
            log.append(str(e))
            log.append(e.args)
            log.append(repr(e))
            v = -1
        try:
            raise ValueError(f"bad key {key}")
        except ValueError as e:
            log.append(e.args[0])
            log.append(f"{e}")
            log.append(len(e.args))
        try:
            raise RuntimeError()
        except RuntimeError as e:
            log.append(str(e))
            log.append(e.args)
        expected = ['bad key ' + key, 'bad key ' + key, 1, '', ()]
        if key != 'a':
            expected = ["'" + key + "'", (key,), "KeyError('" + key + "')"] + expected
        assert log == expected, log
        if v < 0:
            try:
                [1].index(2)
            except ValueError as e:
                raise e
        self.v = v

    def forward(self, x):
        return x * self.v
)py";
  ScriptFile file = script_source(src, "excs.py");
  check_close((*file.module("Net", {std::string("a")}))(ones({2})), ones({2}), 0, 0);
  check_error([&] { file.module("Net", {std::string("b")}); }, "excs.py:35:17: error: ValueError: 2 is not in list");
  std::string bad = std::string(src).replace(std::string(src).find("e.args[0]"), 9, "e.message");
  check_error([&] { script_source(bad, "bad.py").module("Net", {std::string("a")}); },
              "'ValueError' object has no attribute 'message' in __init__");
}

TEST_CASE("script values: word_language_model's PositionalEncoding and torch's elementwise math in __init__") {
  // pytorch/examples word_language_model/model.py, as published
  const char* src = R"(
import math
import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)

        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class Math(nn.Module):
    def __init__(self):
        super().__init__()
        x = torch.arange(6).view(2, 3)
        self.register_buffer("sig", x.sigmoid() + torch.tanh(x))
        self.register_buffer("ints", torch.sin(x))
        self.register_buffer("kept", x.ceil() + x.sign() + x.square())
        self.register_buffer("tt", x.t().contiguous() + torch.t(x).pow(2))
        self.register_buffer("lower", torch.tril(torch.ones(2, 3, 4), diagonal=-1) + torch.ones(2, 3, 4).triu(2))

    def forward(self, x):
        return x
)";
  ScriptModule file = script_source(src, "pe.py");
  auto net = file.module("PositionalEncoding", {int64_t(6)}, {{"max_len", int64_t(5)}});
  Tensor pe = net->state_dict().at("pe");
  REQUIRE(pe.sizes() == Shape{5, 1, 6});
  std::vector<double> want;
  for (int p = 0; p < 5; ++p)
    for (int i = 0; i < 6; ++i) {
      double div = std::exp(double(i - i % 2) * (-std::log(10000.0) / 6));
      want.push_back(i % 2 == 0 ? std::sin(p * div) : std::cos(p * div));
    }
  check_close(pe, tensor(want, {5, 1, 6}), 1e-5, 1e-6);
  net->eval();
  Tensor x = zeros({3, 2, 6});
  check_close((*net)(x), tensor(want, {5, 1, 6}).slice(0, 0, 3).expand({3, 2, 6}).contiguous(), 1e-5, 1e-6);

  // the published defaults (max_len 5000) at d_model 200, at points PyTorch 1.13 printed: float32 products as torch's
  Tensor big = file.module("PositionalEncoding", {int64_t(200)})->state_dict().at("pe");
  REQUIRE(big.sizes() == Shape{5000, 1, 200});
  const std::tuple<int64_t, int64_t, double> torch_values[] = {{4999, 0, -0.6639495491981506}, {4999, 1, -0.7477774024009705},
                                                               {1234, 57, 0.802510678768158},  {3000, 199, 0.9463842511177063},
                                                               {2500, 10, 0.30867382884025574}, {777, 3, 0.20190531015396118}};
  for (auto [p, i, v] : torch_values) CHECK(big.select(0, p).select(0, 0).select(0, i).item<float>() == doctest::Approx(v).epsilon(1e-6));

  auto m = file.module("Math");
  auto sd = m->state_dict();
  std::vector<double> sig, ints, kept, tt, lower;
  for (int v = 0; v < 6; ++v) {
    sig.push_back(1 / (1 + std::exp(-v)) + std::tanh(v));
    ints.push_back(std::sin(v));
    kept.push_back(v + (v > 0) + v * v);
  }
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i) tt.push_back((i * 3 + j) * (1 + i * 3 + j));
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) lower.push_back((j - i <= -1) + (j - i >= 2));
  check_close(sd.at("sig"), tensor(sig, {2, 3}), 1e-6, 1e-6);
  // torch.sin of an int64 tensor is float32; ceil, sign and square keep int64
  CHECK(sd.at("ints").dtype() == DType::Float32);
  check_close(sd.at("ints"), tensor(ints, {2, 3}), 1e-6, 1e-6);
  CHECK(sd.at("kept").dtype() == DType::Int64);
  check_close(sd.at("kept").to(DType::Float64), tensor(kept, {2, 3}, DType::Float64), 0, 0);
  check_close(sd.at("tt").to(DType::Float64), tensor(tt, {3, 2}, DType::Float64), 0, 0);
  check_close(sd.at("lower"), tensor(lower, {2, 3, 4}), 0, 0);

  const char* bad = R"(
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, which):
        super().__init__()
        if which == 0:
            self.register_buffer("b", torch.tril(torch.ones(3)))
        else:
            self.register_buffer("b", torch.ones(2, 2, 2).t())

    def forward(self, x):
        return x
)";
  ScriptModule bad_file = script_source(bad, "bad_tri.py");
  // torch 2's words (1.13 says "Dimension out of range" for tril); "t() expects a tensor with <= 2 dimensions, but self is 3D"
  check_error([&] { bad_file.module("Net", {int64_t(0)}); }, "bad_tri.py:10:45: error: tril: input tensor must have at least 2 dimensions");
  check_error([&] { bad_file.module("Net", {int64_t(1)}); }, "t() expects a tensor with <= 2 dimensions, but self is 3D");
}

TEST_CASE("script values: int operators in __init__ as Python's, a shift or bitwise op by 0 included") {
  const char* src = R"(
import torch
import torch.nn as nn


class Ints(nn.Module):
    def __init__(self, n):
        super().__init__()
        v = [n << 0, n >> 0, n & 0, n | 0, n ^ 0, n << 3, -n >> 1, -7 // 2, -7 % 2, 7 % -2, 3 ** 5, 2 ** 40, True + True]
        self.register_buffer("v", torch.tensor(v))

    def forward(self, x):
        return x
)";
  ScriptModule file = script_source(src, "ints.py");
  Tensor v = file.module("Ints", {int64_t(5)})->state_dict().at("v");
  CHECK(v.dtype() == DType::Int64);
  // what Python 3 prints for the list with n = 5
  const std::vector<int64_t> want = {5, 5, 0, 5, 5, 40, -3, -4, 1, -1, 243, 1099511627776, 2};
  REQUIRE(v.numel() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) CHECK(v.select(0, int64_t(i)).item<int64_t>() == want[i]);
}

TEST_CASE("script values: Python's math module in __init__ and folded in forward, its errors Python's") {
  const char* src = R"(
import math
import torch
import torch.nn as nn

SCALE = math.log(100, 10)


class Maths(nn.Module):
    def __init__(self, n):
        super().__init__()
        v = [math.cos(1.0), math.log2(8), math.log(8, 2), math.atan2(1, 2), math.hypot(3, 4), math.gamma(4.5),
             math.degrees(1.0), math.isqrt(17), math.prod([2, 3, 4]), math.floor(2.5), math.fsum([0.1] * 10),
             math.factorial(n), math.gcd(12, 18)]
        self.register_buffer("v", torch.tensor(v, dtype=torch.float64))

    def forward(self, x):
        return x * math.cos(math.pi) + math.floor(2.5) * SCALE + math.sqrt(2.0) * math.exp(1.0)


class Bad(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = math.sqrt(-1.0)

    def forward(self, x):
        return x


class BadForward(nn.Module):
    def forward(self, x):
        return x * math.acos(2.0)
)";
  ScriptFile file = script_source(src, "maths.py");
  auto net = file.module("Maths", {int64_t(5)});
  // what Python 3.11 gives for the list with n = 5
  const std::vector<double> want = {0.5403023058681398, 3.0, 3.0, 0.4636476090008061, 5.0, 11.631728396567446,
                                    57.29577951308232, 4.0, 24.0, 2.0, 1.0, 120.0, 6.0};
  Tensor v = net->state_dict().at("v");
  REQUIRE(v.numel() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) CHECK(v.select(0, int64_t(i)).item<double>() == doctest::Approx(want[i]).epsilon(1e-7));
  // -x + 2.0 * 2.0 + 3.844231028159117, folded to constants while lowering
  Tensor x = tensor({1.0, -2.0}, {2});
  kiln::test::check_close(net->forward(x), tensor({-1.0 + 4.0 + 3.844231028159117, 2.0 + 4.0 + 3.844231028159117}, {2}), 1e-6, 1e-6);
  std::string bad = test::error_of([&] { file.module("Bad", {}); });
  CHECK(bad.find("maths.py:") != std::string::npos);
  CHECK(bad.find("error: ValueError: math domain error") != std::string::npos);
  CHECK(test::error_of([&] { file.module("BadForward", {})->forward(x); }).find("ValueError: math domain error") != std::string::npos);
}

TEST_CASE("script values: dict and set comprehensions, set literals, :=, sorted and lambdas in __init__") {
  // the tags are what Python 3 prints for this file's Net([8, 16, 32, 12]).tags()
  const char* src = R"(
import torch
import torch.nn as nn


def apply_all(fns, x):
    return [f(x) for f in fns]


class Net(nn.Module):
    def __init__(self, widths, scale=2):
        super().__init__()
        stages = {f"stage{i}": w for i, w in enumerate(widths) if w > 8}
        seen = {w % 3 for w in widths}
        kinds = {"conv", "pool", "conv"}
        double = lambda w: w * scale
        by_len = sorted(stages.items(), key=lambda kv: (-kv[1], kv[0]))
        names = sorted(stages, reverse=True)
        if (n := len(widths)) > 2:
            self.n = n
        self.tag = str(stages) + " " + str(sorted(seen)) + " " + str(len(kinds)) + " " + str("pool" in kinds)
        self.tag2 = str(by_len) + " " + str(names) + " " + str(apply_all([double, lambda w: w - scale, abs], -3))
        self.tag3 = str(sorted([3, 1, 2], key=lambda v: v % 2)) + " " + str(sorted([(1, "b"), (1, "a"), (0, "z")]))
        doubled = [y for x in widths if (y := x * 2) > 20]
        self.tag4 = str(doubled) + " " + str({k: v for k, v in zip("ab", (1, 2))}) + " " + str(y)
        self.tag5 = str([(z := scale + 3)]) + str(z)  # the left operand first: it binds z
        self.head = nn.Linear(widths[-1], 2)

    @torch.jit.export
    def tags(self):
        return self.n, self.tag, self.tag2, self.tag3, self.tag4, self.tag5

    def forward(self, x):
        return self.head(x)

)";
  ScriptModule file = script_source(src, "comps.py");
  auto net = file.build("Net", {file.value("[8, 16, 32, 12]")});
  std::vector<IValue> tags = net->call({}, "tags").at(0).elements();
  REQUIRE(tags.size() == 6);
  CHECK(tags[0].to_int() == 4);
  CHECK(tags[1].to_string() == "{'stage1': 16, 'stage2': 32, 'stage3': 12} [0, 1, 2] 2 True");
  CHECK(tags[2].to_string() == "[('stage2', 32), ('stage1', 16), ('stage3', 12)] ['stage3', 'stage2', 'stage1'] [-6, -5, 3]");
  CHECK(tags[3].to_string() == "[2, 3, 1] [(0, 'z'), (1, 'a'), (1, 'b')]");
  CHECK(tags[4].to_string() == "[32, 64, 24] {'a': 1, 'b': 2} 24");  // := in a comprehension binds y in __init__
  CHECK(tags[5].to_string() == "[5]5");

  const char* bad = R"(
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, which):
        super().__init__()
        if which == 0:
            order = sorted([1, "a"])
        self.act = lambda x: x * 2

    def forward(self, x):
        return self.act(x)
)";
  ScriptModule bad_file = script_source(bad, "bad_lambda.py");
  check_error([&] { bad_file.module("Net", {int64_t(0)}); },
              "bad_lambda.py:9:21: error: TypeError: '<' not supported between instances of");
  // self.act = lambda ...: built, and inlined where forward calls it
  auto lam = bad_file.module("Net", {int64_t(1)});
  check_close((*lam)(tensor({1.0, -2.0}, {2})), tensor({2.0, -4.0}, {2}));
}

TEST_CASE("script values: nn.init.orthogonal_, eye_, dirac_ and sparse_ in __init__") {
  const char* src = R"(
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, bad=""):
        super().__init__()
        self.tall = nn.Parameter(torch.empty(6, 3))
        self.wide = nn.Parameter(torch.empty(2, 3, 2))
        self.eye = nn.Parameter(torch.empty(3, 4))
        self.conv = nn.Conv2d(4, 2, 3, groups=2, bias=False)
        self.sp = nn.Parameter(torch.empty(10, 4))
        nn.init.orthogonal_(self.tall)
        nn.init.orthogonal_(self.wide, gain=2.0)
        nn.init.eye_(self.eye)
        nn.init.dirac_(self.conv.weight, 2)
        nn.init.sparse_(self.sp, sparsity=0.25, std=0.5)
        if bad == "orthogonal":
            nn.init.orthogonal_(torch.empty(3))
        if bad == "dirac":
            nn.init.dirac_(torch.empty(3, 3, 3), groups=2)
        if bad == "caught":
            try:
                nn.init.eye_(torch.empty(2, 2, 2))
            except ValueError as e:
                self.msg = str(e)
                raise

    def forward(self, x):
        return x
)";
  ScriptModule file = script_source(src, "inits.py");
  auto net = file.module("Net");
  auto sd = net->state_dict();
  // orthogonal: the fewer side is orthonormal (times gain)
  Tensor tall = sd.at("tall");
  check_close(matmul(tall.t(), tall), eye(3), 1e-5, 1e-5);
  Tensor wide = sd.at("wide").reshape({2, 6});
  check_close(matmul(wide, wide.t()), tensor({4.0, 0.0, 0.0, 4.0}, {2, 2}), 1e-5, 1e-5);
  check_close(sd.at("eye"), eye(3, 4), 0, 0);
  // dirac with 2 groups of one output channel (of 2 inputs each): each sees its group's first input at the centre
  Tensor w = sd.at("conv.weight");
  REQUIRE(w.sizes() == Shape{2, 2, 3, 3});
  std::vector<double> want(36, 0.0);
  want[(0 * 2 + 0) * 9 + 4] = 1;
  want[(1 * 2 + 0) * 9 + 4] = 1;
  check_close(w, tensor(want, {2, 2, 3, 3}), 0, 0);
  // sparse: ceil(0.25 * 10) = 3 zeros in every column, the rest N(0, 0.5) (none zero)
  Tensor sp = sd.at("sp");
  for (int64_t c = 0; c < 4; ++c) {
    Tensor col = sp.select(1, c).contiguous();
    int zeros_in_col = 0;
    for (int64_t r = 0; r < 10; ++r) zeros_in_col += col.select(0, r).item<float>() == 0.0f;
    CHECK(zeros_in_col == 3);
  }
  check_error([&] { file.module("Net", {"orthogonal"}); },
              "inits.py:20:21: error: ValueError: Only tensors with 2 or more dimensions are supported");
  check_error([&] { file.module("Net", {"dirac"}); }, "inits.py:22:21: error: ValueError: dim 0 must be divisible by groups");
  check_error([&] { file.module("Net", {"caught"}); }, "ValueError: Only tensors with 2 dimensions are supported");
}

TEST_CASE("script values: nn.ParameterList and nn.ParameterDict under torch's state_dict names") {
  const char* src = R"(
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.params = nn.ParameterList([nn.Parameter(torch.full((3,), float(i))) for i in range(n)])
        self.params.append(torch.ones(3))
        extra = nn.ParameterList()
        extra.append(nn.Parameter(torch.zeros(2)))
        self.extra = extra
        pd = nn.ParameterDict({"scale": nn.Parameter(torch.ones(3))})
        pd["shift"] = torch.zeros(3)
        self.pd = pd
        self.count = len(self.params) + len(self.pd)

    def forward(self, x):
        for p in self.params:
            x = x + p
        return x * self.params[1]
)";
  ScriptModule file = script_source(src, "plist.py");
  auto net = file.module("Net", {int64_t(2)});
  std::vector<std::string> names;
  for (auto& [n, t] : net->state_dict()) names.push_back(n);
  // torch 1.13: params.0 params.1 params.2 extra.0 pd.scale pd.shift (a plain Tensor becomes a Parameter)
  CHECK(names == std::vector<std::string>{"extra.0", "params.0", "params.1", "params.2", "pd.scale", "pd.shift"});
  CHECK(net->parameters().size() == 6);
  check_close(net->state_dict().at("params.1"), full({3}, 1.0));
  // forward: x + 0 + 1 + 1, times params[1] (torch: [2, 3, 4] for arange(3))
  Tensor y = (*net)(tensor({0.0, 1.0, 2.0}, {3}));
  check_close(y, tensor({2.0, 3.0, 4.0}, {3}));
  check_error([&] { script_source("import torch.nn as nn\n\n\nclass N(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                  "        self.p = nn.ParameterList([1])\n\n    def forward(self, x):\n        return x\n", "bad_pl.py")
                        .module("N"); },
              "bad_pl.py:7:21: error: nn.ParameterList holds Tensors in kiln script, got int");
}
