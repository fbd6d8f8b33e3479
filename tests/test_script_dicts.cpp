// script(): dicts with string keys known when lowering (a tuple of values in the graph), `in` over
// lists built at run time, class-level attributes, and returns of different types.
#include <string>

#include "support.h"

using namespace kiln;
using kiln::test::check_error;
using kiln::test::values;

TEST_CASE("script dict: literals, d[k] = v, d[k] += v, in, len, loops over items/keys/values, merges") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Dict, List, Tuple


def make(x: Tensor) -> Dict[str, Tensor]:
    d: Dict[str, Tensor] = {}
    d["a"] = x * 2.0
    d["b"] = x + 1.0
    return d


def f(x: Tensor, n: int, c: bool) -> Tuple[Tensor, int, bool, bool, bool, Tensor]:
    d = make(x)
    d["a"] += 1.0
    total = torch.zeros_like(x)
    for k, v in d.items():
        if k == "b":
            total = total + v * 10.0
        else:
            total = total + v
    keys = 0
    for k in d:
        keys += 1
    for v in d.values():
        keys += 1
    xs: List[int] = []
    for i in range(n):
        xs.append(i * 2)
    e = {"x": x, "y": x}
    if c:
        e["y"] = x * 3.0
    return total, len(d) + keys, "a" in d, "z" not in d, 4 in xs, e["y"]
)";
  Function f = script_source(src, "t.py").function("f");
  auto run = [&](int64_t n, bool c) { return f.call({tensor({1.0, 2.0}), n, c})[0].elements(); };
  auto t = run(3, true);
  CHECK(values(t[0].to_tensor()) == std::vector<double>{23, 35});
  CHECK(t[1].to_int() == 6);
  CHECK(t[2].to_bool());
  CHECK(t[3].to_bool());
  CHECK(t[4].to_bool());
  CHECK(values(t[5].to_tensor()) == std::vector<double>{3, 6});
  t = run(2, false);
  CHECK_FALSE(t[4].to_bool());
  CHECK(values(t[5].to_tensor()) == std::vector<double>{1, 2});
  // A function returning a dict gives its values as a tuple, in insertion order.
  auto d = script_source(src, "t.py").function("make").call({tensor({1.0})})[0].elements();
  REQUIRE(d.size() == 2);
  CHECK(values(d[0].to_tensor()) == std::vector<double>{2});
  CHECK(values(d[1].to_tensor()) == std::vector<double>{2});
}

TEST_CASE("script dict: unknown keys, run-time keys and keys that differ between branches are errors") {
  auto file = [](const char* body) {
    return std::string("import torch\nfrom torch import Tensor\nfrom typing import Dict\n\n\n") + body;
  };
  check_error([&] { script::check_source(file("def f(x: Tensor) -> Tensor:\n    d = {\"a\": x}\n    return d[\"b\"]\n"), "t.py"); },
              "t.py:8:14: error: KeyError: 'b' (the dict has keys ['a'])");
  check_error(
      [&] { script::check_source(file("def f(x: Tensor, k: str) -> Tensor:\n    d = {\"a\": x}\n    return d[k]\n"), "t.py"); },
      "t.py:8:14: error: dict keys must be string constants in kiln script");
  check_error(
      [&] {
        script::check_source(file("def f(x: Tensor, c: bool) -> Tensor:\n    d = {\"a\": x}\n    if c:\n        d = {\"b\": x}\n"
                           "    return x\n"),
                      "t.py");
      },
      "t.py:8:5: error: dict 'd' has keys ['b'] and ['a'] on the two sides of this if");
  check_error([&] { script::check_source(file("def f(x: Tensor) -> Tensor:\n    s = {x, x}\n    return x\n"), "t.py"); },
              "t.py:7:9: error: set literals are not supported in kiln script");
}

TEST_CASE("script class: class-level attributes are constants of every instance; ClassName.attr too") {
  const char* src = R"(
import torch
import torch.nn as nn


class Block(nn.Module):
    expansion = 4
    scale: float = 0.5

    def __init__(self, n: int):
        super().__init__()
        self.wide = n * self.expansion
        self.fc = nn.Linear(n, n * Block.expansion, bias=False)
        nn.init.ones_(self.fc.weight)

    def forward(self, x):
        return self.fc(x) * self.scale + Block.expansion + self.wide
)";
  auto m = script_source(src, "t.py").module("Block", {int64_t(2)});
  Tensor y = (*m)(tensor({1.0f, 2.0f}, {1, 2}));
  // fc: each output is 1 + 2 = 3; 3 * 0.5 + 4 + 8
  CHECK(values(y) == std::vector<double>(8, 13.5));
}

TEST_CASE("script: returns of different types are refused naming both types") {
  auto file = [](const char* body) {
    return std::string("import torch\nfrom torch import Tensor\nfrom typing import Optional\n\n\n") + body;
  };
  check_error(
      [&] { script::check_source(file("def f(x: Tensor, c: bool) -> Tensor:\n    if c:\n        return x\n    return 1\n"), "t.py"); },
      "t.py:9:12: error: function 'f' is declared to return Tensor but returns int");
  check_error(
      [&] {
        script::check_source(file("def f(x: Tensor, c: bool) -> Optional[Tensor]:\n    if c:\n        return 1\n    return x\n"),
                      "t.py");
      },
      "t.py:8:16: error: function 'f' is declared to return Optional[Tensor] but returns int");
}

TEST_CASE("script: an Optional[Tensor] function returns None on some paths and a Tensor on others") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Optional


def f(x: Tensor, c: bool) -> Optional[Tensor]:
    if c:
        return None
    return x


def g(x: Tensor, n: int) -> Optional[Tensor]:
    for i in range(n):
        if i == 2:
            return x * i
    return None


def h(x: Tensor, c: bool) -> Tensor:
    y = f(x, c)
    if y is not None:
        return y + 1.0
    return x * 0.0
)";
  auto m = script_source(src, "t.py");
  Tensor x = tensor({1.0, 2.0});
  CHECK(m.function("f").call({x, true})[0].is_none());
  CHECK(values(m.function("f").call({x, false})[0].to_tensor()) == std::vector<double>{1, 2});
  CHECK(values(m.function("g").call({x, int64_t(3)})[0].to_tensor()) == std::vector<double>{2, 4});
  CHECK(m.function("g").call({x, int64_t(1)})[0].is_none());
  CHECK(values(m.function("h").call({x, false})[0].to_tensor()) == std::vector<double>{2, 3});
  CHECK(values(m.function("h").call({x, true})[0].to_tensor()) == std::vector<double>{0, 0});
}

TEST_CASE("script dict: a Dict[str, T] parameter of a function the file calls; writes to it are refused") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Dict


def total(d: Dict[str, Tensor], scale: float) -> Tensor:
    s = d["a"] * scale
    for k, v in d.items():
        if k != "a":
            s = s + v
    return s


def f(x: Tensor) -> Tensor:
    return total({"a": x, "b": x * 3.0}, 2.0)
)";
  ScriptFile m = script_source(src, "t.py");
  CHECK(values(m.function("f").call({tensor({1.0, 2.0})})[0].to_tensor()) == std::vector<double>{5, 10});
  check_error([&] { m.function("total"); },
              "script: function 'total' takes the dict parameter 'd', so it can only be called by the file's functions");
  auto with = [](const char* body, const char* call) {
    return std::string("import torch\nfrom torch import Tensor\nfrom typing import Dict\n\n\n"
                       "def g(d: Dict[str, Tensor]) -> Tensor:\n") + body +
           "\n\n\ndef f(x: Tensor) -> Tensor:\n    return " + call + "\n";
  };
  check_error([&] { script::check_source(with("    d[\"a\"] = d[\"a\"] * 2.0\n    return d[\"a\"]", "g({\"a\": x})"), "t.py"); },
              "t.py:7:5: error: cannot assign to an entry of 'd': it is parameter 'd' of 'g', and the caller would see "
              "the change");
  check_error([&] { script::check_source(with("    return d[\"a\"]", "g({\"a\": 1})"), "t.py"); },
              "argument 'd' of g() expects Dict[str, Tensor], but its entry 'a' is int");
  check_error([&] { script::check_source(with("    return d[\"a\"]", "g(x)"), "t.py"); },
              "argument 'd' of g() expects Dict[str, Tensor], got Tensor");
}
