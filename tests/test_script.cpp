// script(): source text to Functions that run on the interpreter. Each case checks a construct
// end to end against values worked out by hand (tests/script/*.py check the same against PyTorch).
#include "script_frontend/lexer.h"
#include "script_frontend/parser.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {
IValue call1(const std::string& src, const std::string& fn, std::vector<IValue> args) {
  std::vector<IValue> out = script_source(src, "t.py").function(fn).call(args);
  REQUIRE(out.size() == 1);
  return out[0];
}
}  // namespace

TEST_CASE("script lexer: indentation becomes INDENT/DEDENT; brackets join lines") {
  script::Source src{"t.py", "def f(a,\n      b):\n    if a:\n        x = (1 +\n  2)\n    return x\n"};
  std::vector<script::Token> toks = script::lex(src);
  int indents = 0, dedents = 0, newlines = 0;
  for (const auto& t : toks) {
    indents += t.kind == script::Tok::Indent;
    dedents += t.kind == script::Tok::Dedent;
    newlines += t.kind == script::Tok::Newline;
  }
  CHECK(indents == 2);
  CHECK(dedents == 2);
  CHECK(newlines == 4);  // the def line, `if a:`, the joined assignment, the return
  CHECK(toks.back().kind == script::Tok::End);
}

TEST_CASE("script parser: Python precedence and associativity") {
  const char* src = "def f(a: int) -> int:\n    return 2 + 3 * a ** 2 ** 1 - 7 // 2 % 3 - -a\n";
  // a=4: 2 + 3*16 - (3 % 3) + 4 = 54
  CHECK(call1(src, "f", {int64_t(4)}).to_int() == 54);
  const char* logic = "def g(a: int, b: int) -> bool:\n    return not a > b and b != 3 or a == b\n";
  CHECK(call1(logic, "g", {int64_t(1), int64_t(2)}).to_bool() == true);
  CHECK(call1(logic, "g", {int64_t(1), int64_t(3)}).to_bool() == false);
  CHECK(call1(logic, "g", {int64_t(3), int64_t(3)}).to_bool() == true);
  const char* chained = "def h(a: int) -> bool:\n    return 0 <= a < 10\n";
  CHECK(call1(chained, "h", {int64_t(5)}).to_bool());
  CHECK_FALSE(call1(chained, "h", {int64_t(10)}).to_bool());
  CHECK_FALSE(call1(chained, "h", {int64_t(-1)}).to_bool());
}

TEST_CASE("script: if/elif/else and the conditional expression") {
  const char* src = R"(
def f(n: int) -> int:
    if n < 0:
        r = -1
    elif n == 0:
        r = 0
    else:
        r = 1
    return r * 10 + (1 if n % 2 == 0 else 2)
)";
  CHECK(call1(src, "f", {int64_t(-3)}).to_int() == -8);
  CHECK(call1(src, "f", {int64_t(0)}).to_int() == 1);
  CHECK(call1(src, "f", {int64_t(4)}).to_int() == 11);
}

TEST_CASE("script: while with a data-dependent condition carries tensors and ints") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Tuple

def f(x: Tensor) -> Tuple[Tensor, int]:
    n = 0
    while x.sum() > 1:
        x = x / 2
        n += 1
    return x, n
)";
  IValue r = call1(src, "f", {tensor({4.0, 4.0})});
  REQUIRE(r.is_tuple());
  check_close(r.elements()[0].to_tensor(), tensor({0.5, 0.5}));
  CHECK(r.elements()[1].to_int() == 3);
}

TEST_CASE("script: for range with break, continue and early return") {
  const char* src = R"(
def f(n: int) -> int:
    total = 0
    for i in range(1, n, 1):
        if i % 3 == 0:
            continue
        if i > 7:
            break
        total += i
    return total

def g(n: int) -> int:
    for i in range(n):
        for j in range(n):
            if i * j == 6:
                return i * 100 + j
    return -1
)";
  CHECK(call1(src, "f", {int64_t(20)}).to_int() == 1 + 2 + 4 + 5 + 7);
  CHECK(call1(src, "f", {int64_t(4)}).to_int() == 1 + 2);
  CHECK(call1(src, "g", {int64_t(5)}).to_int() == 203);
  CHECK(call1(src, "g", {int64_t(3)}).to_int() == -1);
}

TEST_CASE("script: calls between functions are inlined, in any order; keyword arguments bind by name") {
  const char* src = R"(
import torch
from torch import Tensor

def outer(x: Tensor, k: int) -> Tensor:
    return inner(scale=k, x=x) + 1

def inner(x: Tensor, scale: int) -> Tensor:
    return x * scale
)";
  ScriptFile m = script_source(src, "t.py");
  check_close(m.function("outer").call({tensor({1.0, 2.0}), int64_t(3)})[0].to_tensor(), tensor({4.0, 7.0}));
}

TEST_CASE("script: tensor form, torch ops, methods and composites") {
  const char* src = R"(
import torch
from torch import Tensor

def f(x: Tensor) -> Tensor:
    y = torch.softmax(x, dim=1) + x.mean(dim=0, keepdim=True)
    return torch.relu(y[:, 1:]) * x.shape[0]
)";
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  std::vector<Tensor> out = script_source(src, "t.py").function("f")({x});
  REQUIRE(out.size() == 1);
  Tensor want = relu((softmax(x, 1) + mean(x, {0}, true)).slice(1, 1, std::nullopt)) * 2;
  check_close(out[0], want);
}

TEST_CASE("script: Optional parameters refine under `is not None`; asserts raise at run time") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Optional

def f(x: Tensor, b: Optional[Tensor] = None) -> Tensor:
    if b is not None:
        x = x + b
    return x

def g(n: int) -> int:
    assert n > 0, "n must be positive"
    return n
)";
  ScriptFile m = script_source(src, "t.py");
  check_close(m.function("f").call({tensor({1.0}), IValue()})[0].to_tensor(), tensor({1.0}));
  check_close(m.function("f").call({tensor({1.0}), tensor({2.0})})[0].to_tensor(), tensor({3.0}));
  CHECK(m.function("g").call({int64_t(2)})[0].to_int() == 2);
  check_error([&] { m.function("g").call({int64_t(0)}); }, "n must be positive");
}

TEST_CASE("script: module lookups name what exists") {
  ScriptFile m = script_source("def forward(n: int) -> int:\n    return n\n", "t.py");
  CHECK(m.has_function("forward"));
  check_error([&] { m.function("froward"); }, "did you mean forward?");
}

TEST_CASE("script: List and Tuple parameters, len, indexing and loops over them") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import List, Tuple

def total(xs: List[int], pair: Tuple[int, float]) -> float:
    s = 0
    for x in xs:
        s += x
    return s * pair[1] + pair[0] + len(xs) + xs[-1]

def stack_rows(ts: List[Tensor]) -> Tensor:
    acc = ts[0]
    for i in range(1, len(ts)):
        acc = acc + ts[i]
    return acc
)";
  ScriptFile m = script_source(src, "t.py");
  IValue r = m.function("total").call({IValue::list({int64_t(1), int64_t(2), int64_t(3)}), IValue::tuple({int64_t(10), 0.5})})[0];
  CHECK(r.to_double() == doctest::Approx(6 * 0.5 + 10 + 3 + 3));
  IValue t = m.function("stack_rows").call({IValue::list({tensor({1.0}), tensor({2.0}), tensor({4.0})})})[0];
  check_close(t.to_tensor(), tensor({7.0}));
}

TEST_CASE("script: break and continue inside a for over a tuple (unrolled; TorchScript rejects these)") {
  const char* src = R"(
def f(a: int, b: int, c: int) -> int:
    total = 0
    for v in (a, b, c):
        if v < 0:
            continue
        if v > 100:
            break
        total += v
    return total
)";
  ScriptFile m = script_source(src, "t.py");
  CHECK(m.function("f").call({int64_t(1), int64_t(-5), int64_t(3)})[0].to_int() == 4);
  CHECK(m.function("f").call({int64_t(1), int64_t(500), int64_t(3)})[0].to_int() == 1);
}

TEST_CASE("script: // and % on float tensors floor like Python and torch, the remainder taking the divisor's sign") {
  const char* src =
      "import torch\n"
      "def fd(x: torch.Tensor) -> torch.Tensor:\n    return x // 1.5\n"
      "def md(x: torch.Tensor) -> torch.Tensor:\n    return x % -1.5\n"
      "def both(x: torch.Tensor) -> torch.Tensor:\n    return x // 2.0 + 7.0 % x\n";
  Tensor x = tensor({-4.0, -1.5, -0.25, 0.0, 0.25, 2.9, 3.0}).to(DType::Float32);
  check_close(call1(src, "fd", {x}).to_tensor(), tensor({-3.0, -1.0, -1.0, 0.0, 0.0, 1.0, 2.0}).to(DType::Float32));
  check_close(call1(src, "md", {x}).to_tensor(), tensor({-1.0, 0.0, -0.25, 0.0, -1.25, -0.1, 0.0}).to(DType::Float32),
              1e-5, 1e-6);
  Tensor y = tensor({1.0, 2.5, -3.0}).to(DType::Float32);
  check_close(call1(src, "both", {y}).to_tensor(), add(floor_divide(y, full({}, 2.0)), remainder(full({3}, 7.0), y)));
  // torch's values for the same inputs: torch.remainder(x, -1.5), torch.floor_divide(x, 1.5)
  check_close(remainder(x, full({}, -1.5)), call1(src, "md", {x}).to_tensor(), 1e-5, 1e-6);
  // integer tensors: exact, and in their own dtype
  Tensor i = tensor(std::vector<int64_t>{-7, -1, 0, 5, 7}, {5});
  Tensor q = floor_divide(i, tensor(std::vector<int64_t>{2, 2, 3, -2, 7}, {5}));
  CHECK(q.dtype() == DType::Int64);
  CHECK(values(q) == std::vector<double>{-4, -1, 0, -3, 1});
  CHECK(values(remainder(i, tensor(std::vector<int64_t>{2, 2, 3, -2, 7}, {5}))) == std::vector<double>{1, 1, 0, -1, 0});
}

TEST_CASE("script: F.pad's run-time amounts and advanced indexing raise torch's errors with the facts") {
  const char* src =
      "import torch\nimport torch.nn.functional as F\n"
      "def reflect(x: torch.Tensor, n: int) -> torch.Tensor:\n    return F.pad(x, (n, 0), mode='reflect')\n"
      "def apart(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:\n    return x[i, :, i]\n";
  ScriptFile m = script_source(src, "t.py");
  CHECK(m.function("reflect").call({randn({2, 4}), int64_t(3)})[0].to_tensor().sizes() == Shape{2, 7});
  check_error([&] { m.function("reflect").call({randn({2, 4}), int64_t(4)}); },
              "pad: reflect padding must be less than the size of the dim it pads, at dim -1 of the input");
  // apart, the broadcast index dim comes first (torch's rule)
  Tensor x = randn({3, 4, 5});
  Tensor got = m.function("apart").call({x, tensor(std::vector<int64_t>{2, 0}, {2})})[0].to_tensor();
  REQUIRE(got.sizes() == Shape{2, 4});
  check_close(got.select(0, 0), x.select(0, 2).select(1, 2));
}

TEST_CASE("script: ScriptModule, the name before ScriptFile, still names the parsed file") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ScriptModule m = script_source("def f(n: int) -> int:\n    return n + 1\n", "t.py");
  static_assert(std::is_same_v<ScriptModule, ScriptFile>);
#pragma GCC diagnostic pop
  CHECK(m.function("f").call(std::vector<IValue>{int64_t(2)}).at(0).to_int() == 3);
}
