// script(): writes through views and in-place tensor ops (x[i] = v, x[:, a:b] += v, x += y, x.add_(y)),
// aliasing as torch shows it; tensor // and % on integer tensors; print. Values are worked out by hand;
// tests/script/inplace.py runs the same kinds of functions against PyTorch (eager and torch.jit.script).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::values;

namespace {
std::vector<IValue> run(const char* src, const std::string& fn, const std::vector<IValue>& args) {
  return script_source(src, "t.py").function(fn).call(args);
}

// What fn writes to the process's stdout (print writes there, as Python's does).
std::string captured_stdout(const std::function<void()>& fn) {
  std::fflush(stdout);
  int saved = dup(1);
  FILE* tmp = std::tmpfile();
  REQUIRE(tmp);
  dup2(fileno(tmp), 1);
  fn();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::rewind(tmp);
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) out.append(buf, n);
  std::fclose(tmp);
  return out;
}
}  // namespace

TEST_CASE("script inplace: a write through a view is seen through the base, and the base's through the view") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Tuple


def f(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    x = x.clone()
    y = x[1]
    y += 1.0
    col = x[:, 1:]
    x[0, 0] = 5.0
    x *= 2.0
    return x, y, col
)";
  auto out = run(src, "f", {tensor({0.0, 1.0, 2.0, 3.0}, {2, 2})});
  auto t = out[0].elements();
  CHECK(values(t[0].to_tensor()) == std::vector<double>{10, 2, 6, 8});
  CHECK(values(t[1].to_tensor()) == std::vector<double>{6, 8});
  CHECK(values(t[2].to_tensor()) == std::vector<double>{2, 8});
}

TEST_CASE("script inplace: element and slice stores broadcast and cast to the tensor's dtype; nested views") {
  const char* src = R"(
import torch
from torch import Tensor


def f(x: Tensor, i: int) -> Tensor:
    x = x.clone()
    x[i] = 7.9
    x[:, 1:3] = torch.ones(2) * 2
    a = x[0]
    b = a[2:]
    b[0] -= 10
    return x
)";
  auto out = run(src, "f", {tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}), int64_t(-1)});
  Tensor y = out[0].to_tensor();
  CHECK(y.dtype() == DType::Int64);
  CHECK(values(y) == std::vector<double>{0, 2, -8, 3, 4, 2, 2, 7, 7, 2, 2, 7});
}

TEST_CASE("script inplace: in-place methods, x += y keeps x's dtype, and loops that fill rows") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Tuple


def f(x: Tensor, n: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    x = x.clone()
    x.sub_(1.0).mul_(2.0)
    x.relu_()
    x[0].zero_()
    n = n.clone()
    n += 2
    n *= 3
    rows = torch.zeros(3, 2)
    for i in range(3):
        rows[i] = x[i + 1, :2] + i
        rows[i, 1] += 100.0
    return x, n, rows
)";
  auto out = run(src, "f", {tensor({0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}, {4, 2}), tensor(std::vector<int64_t>{1, -4})});
  auto t = out[0].elements();
  CHECK(values(t[0].to_tensor()) == std::vector<double>{0, 0, 2, 4, 6, 8, 10, 12});
  CHECK(t[1].to_tensor().dtype() == DType::Int64);
  CHECK(values(t[1].to_tensor()) == std::vector<double>{9, -6});
  CHECK(values(t[2].to_tensor()) == std::vector<double>{2, 104, 7, 109, 12, 114});
  // a float result does not fit an integer tensor, as torch says
  const char* bad = R"(
import torch
from torch import Tensor


def f(n: Tensor) -> Tensor:
    n = n.clone()
    n += 0.5
    return n
)";
  check_error([&] { run(bad, "f", {tensor(std::vector<int64_t>{1})}); },
              "result type float32 can't be cast to the desired output type int64");
}

TEST_CASE("script inplace: compiled graphs with scatters match the interpreter, and gradients flow through them") {
  const char* src = R"(
import torch
from torch import Tensor


def f(x: Tensor, v: Tensor) -> Tensor:
    y = x * 1.0
    y[1:] = v * 3.0
    y[0] += v[0]
    return (y * y).sum()
)";
  Function f = script_source(src, "t.py").function("f");
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_(true);
  Tensor v = tensor({0.5, -1.0}).requires_grad_(true);
  Tensor s = f.call({x, v})[0].to_tensor();
  // y = [1 + 0.5, 1.5, -3] -> sum of squares 2.25 + 2.25 + 9
  CHECK(s.item<double>() == doctest::Approx(13.5));
  s.backward();
  // dy/dx: only x[0] survives the store; ds/dx0 = 2 * y0
  CHECK(values(x.grad()) == std::vector<double>{3, 0, 0});
  // v[0] feeds y[1] (x3) and y[0]: 2*1.5*3 + 2*1.5; v[1] feeds y[2] (x3): 2*-3*3
  CHECK(values(v.grad()) == std::vector<double>{12, -18});
  NoGradGuard no_grad;
  Function c = compile(f);
  CHECK(c.call({x, v})[0].to_tensor().item<double>() == doctest::Approx(13.5));
}

TEST_CASE("script inplace: aliasing kiln cannot follow is refused with file:line:col") {
  auto err = [](const char* body) { return std::string("import torch\nfrom torch import Tensor\n\n\n") + body; };
  check_error([&] { script::check_source(err("def f(x: Tensor) -> Tensor:\n    x += 1.0\n    return x\n"), "t.py"); },
              "t.py:6:5: error: cannot write in place to 'x': it is parameter 'x' of 'f', and the caller would see the "
              "change");
  check_error([&] { script::check_source(err("def f(x: Tensor) -> Tensor:\n    y = x[0]\n    y[0] = 1.0\n    return x\n"), "t.py"); },
              "t.py:7:5: error: cannot write in place to 'y': it is parameter 'x' of 'f'");
  check_error(
      [&] {
        script::check_source(err("def g(t: Tensor) -> Tensor:\n    t.relu_()\n    return t\n\n\n"
                          "def f(x: Tensor) -> Tensor:\n    y = x * 2.0\n    return g(y)\n"),
                      "t.py");
      },
      "cannot write in place to 't': it is parameter 't' of 'g'");
  check_error(
      [&] {
        script::check_source(err("def f(x: Tensor) -> Tensor:\n    x = x.clone()\n    v = x.view(4)\n    v += 1.0\n    return x\n"),
                      "t.py");
      },
      "t.py:8:5: error: cannot write in place to 'v': it shares memory with 'x' through");
  check_error(
      [&] {
        script::check_source(err("def f(x: Tensor, c: bool) -> Tensor:\n    x = x.clone()\n    y = x[0]\n    if c:\n"
                          "        y = y * 2.0\n    y += 1.0\n    return x\n"),
                      "t.py");
      },
      "t.py:10:5: error: cannot write in place to 'y': it shared memory with 'x' in the code before the if at line 8");
  check_error(
      [&] {
        script::check_source(err("def f(x: Tensor) -> Tensor:\n    x = x.clone()\n    t = (x, 1)\n    x += 1.0\n    return x\n"),
                      "t.py");
      },
      "t.py:8:5: error: cannot write in place to 'x': 't' holds it in a Tuple[Tensor, int]");
  check_error(
      [&] {
        script::check_source(err("def f(x: Tensor) -> Tensor:\n    y = x * 1.0\n    for r in y:\n        r += 1.0\n    return y\n"),
                      "t.py");
      },
      "t.py:8:9: error: cannot write in place to 'r': it is a row of the tensor the for loop iterates over");
  check_error(
      [&] {
        script::check_source(err("def f(x: Tensor) -> Tensor:\n    xs = [x * 1.0, x]\n    t = xs[0]\n    t.relu_()\n    return x\n"),
                      "t.py");
      },
      "t.py:8:7: error: cannot write in place to 't': 'xs' holds it in a List[Tensor]");
  check_error([&] { script::check_source(err("def f(x: Tensor) -> Tensor:\n    y = x * 1.0\n    y[0], y[1] = 1.0, 2.0\n    return y\n"), "t.py"); },
              "supported only as a statement of its own");
}

TEST_CASE("script: tensor // and % on integer tensors are exact with Python's signs, as torch") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import Tuple


def f(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    return a // b, a % b
)";
  auto out = run(src, "f", {tensor(std::vector<int64_t>{-7, 7, -7, 7}), tensor(std::vector<int64_t>{2, 2, -2, -2})});
  auto t = out[0].elements();
  CHECK(t[0].to_tensor().dtype() == DType::Int64);
  CHECK(values(t[0].to_tensor()) == std::vector<double>{-4, 3, 3, -4});
  CHECK(values(t[1].to_tensor()) == std::vector<double>{1, 1, -1, -1});
}

TEST_CASE("script: print writes Python's text for numbers and strings, kiln's for tensors, and survives compile") {
  const char* src = R"(
import torch
from torch import Tensor


def f(x: Tensor, n: int) -> Tensor:
    print("n is", n, 2.5, 1.0, True, None, (n, "a"))
    print(x)
    return x * n
)";
  Function f = script_source(src, "t.py").function("f");
  std::string text = captured_stdout([&] { f.call({tensor({1.0, 2.0}), int64_t(3)}); });
  CHECK(text.rfind("n is 3 2.5 1.0 True None (3, 'a')\n", 0) == 0);
  CHECK(text.find(tensor({1.0, 2.0}).str()) != std::string::npos);
  NoGradGuard no_grad;
  Function c = compile(f);
  std::string again = captured_stdout([&] { c.call({tensor({1.0, 2.0}), int64_t(3)}); });
  CHECK(again == text);
}

TEST_CASE("script: prints keep program order when inter-op threads could run them at once") {
  const char* src = R"(
import torch
from torch import Tensor


def f(n: int) -> int:
    print("a", n)
    print("b")
    print("c", n + 1)
    return n
)";
  Function f = script_source(src, "t.py").function("f");
  kiln::test::NumInteropThreads two(2);
  for (int rep = 0; rep < 20; ++rep) CHECK(captured_stdout([&] { f.call({int64_t(3)}); }) == "a 3\nb\nc 4\n");
}

TEST_CASE("script: print's sep and end are Python's; other keywords are refused") {
  const char* src = R"(
import torch
from torch import Tensor


def f(n: int) -> int:
    print("n is", n, 2.5, sep="-", end="|\n")
    print("a", "b", sep="")
    print(n, end="")
    print()
    return n
)";
  Function f = script_source(src, "t.py").function("f");
  // what python3 prints for the same calls
  CHECK(captured_stdout([&] { f.call({int64_t(3)}); }) == "n is-3-2.5|\nab\n3\n");
  NoGradGuard no_grad;
  Function c = compile(f);
  CHECK(captured_stdout([&] { c.call({int64_t(3)}); }) == "n is-3-2.5|\nab\n3\n");
  auto err = [](const char* line) {
    return std::string("import torch\nfrom torch import Tensor\n\n\ndef f(n: int) -> int:\n    ") + line +
           "\n    return n\n";
  };
  check_error([&] { script::check_source(err("print(n, flush=True)"), "t.py"); },
              "t.py:6:14: error: print() keyword 'flush' is not supported in kiln script (sep and end are)");
  check_error([&] { script::check_source(err("print(n, sep=n)"), "t.py"); },
              "print() sep must be a string constant in kiln script");
}

TEST_CASE("script: list element assignment rebinds every name of the list; Python's index rules") {
  const char* src = R"(
import torch
from torch import Tensor
from typing import List


def f(x: Tensor, i: int) -> List[Tensor]:
    xs = [x, x * 2.0]
    ys = xs
    xs[i] = x * 10.0
    ns = [1, 2]
    ns[-1] += 5
    xs.append(x * float(ns[1]))
    return ys
)";
  Function f = script_source(src, "t.py").function("f");
  auto out = f.call({tensor({1.0}), int64_t(-2)})[0].elements();
  REQUIRE(out.size() == 3);
  CHECK(values(out[0].to_tensor()) == std::vector<double>{10});
  CHECK(values(out[1].to_tensor()) == std::vector<double>{2});
  CHECK(values(out[2].to_tensor()) == std::vector<double>{7});
  check_error([&] { f.call({tensor({1.0}), int64_t(2)}); }, "list assignment index 2 is out of range for a list of 2 elements");
  check_error(
      [&] {
        script::check_source("import torch\nfrom torch import Tensor\n\n\ndef f(x: Tensor) -> Tensor:\n    xs = [x * 1.0]\n"
                      "    xs[0] += 1.0\n    return xs[0]\n",
                      "t.py");
      },
      "t.py:7:5: error: 'xs[i] += v' writes the tensor in place, which kiln script does not track inside a list");
}
