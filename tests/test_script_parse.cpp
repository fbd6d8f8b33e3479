// The script parser reads all of Python 3.11 into real AST nodes (tests/parse_stdlib.py checks it
// against Python's ast over the standard library); what kiln does not run is named where the code is
// evaluated or lowered, and code that is neither never fails.
#include <string>

#include "error_of.h"
#include "script_frontend/parser.h"
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using namespace kiln::script;
using kiln::test::error_of;

namespace {
FileAst syntax(const std::string& text) { return parse_syntax(Source{"p.py", text}); }
}  // namespace

TEST_CASE("script parse: definitions keep their decorators, parameters, bases and nesting") {
  FileAst m = syntax(R"(
import os.path as osp, sys
from ..models import (resnet as r, vgg,)
from . import *

@dataclass(frozen=True)
class A(Base, metaclass=Meta, **kw):
    x: int
    @staticmethod
    async def f(a, b=1, /, c=2, *args: int, d, e=3, **kwargs) -> "A":
        def inner(): return lambda x, *, y=1, **z: (x, y, z)
        return inner
)");
  REQUIRE(m.body.size() == 4);
  CHECK(m.body[0]->kind == StmtKind::Import);
  CHECK(m.body[0]->names.size() == 2);
  CHECK(m.body[0]->names[0].name == "os.path");
  CHECK(m.body[0]->names[0].asname == "osp");
  CHECK(m.body[1]->kind == StmtKind::ImportFrom);
  CHECK(m.body[1]->level == 2);
  CHECK(m.body[1]->module == "models");
  CHECK(m.body[1]->names.size() == 2);
  CHECK(m.body[2]->level == 1);
  CHECK(m.body[2]->names[0].name == "*");
  REQUIRE(m.body[3]->kind == StmtKind::ClassDef);
  const ClassDef& c = *m.body[3]->cls;
  CHECK(c.decorators.size() == 1);
  CHECK(c.bases.size() == 1);
  REQUIRE(c.keywords.size() == 2);
  CHECK(c.keywords[0].name == "metaclass");
  CHECK(c.keywords[1].name.empty());  // **kw
  REQUIRE(c.body.size() == 2);
  CHECK(c.body[0]->kind == StmtKind::AnnAssign);
  CHECK(!c.body[0]->value);
  const FunctionDef& f = *c.body[1]->fn;
  CHECK(f.is_async);
  CHECK(f.decorators.size() == 1);
  CHECK(f.params.size() == 3);
  CHECK(f.posonly == 2);
  REQUIRE(f.vararg);
  CHECK(f.vararg->name == "args");
  CHECK(f.kwonly.size() == 2);
  REQUIRE(f.kwarg);
  CHECK(f.kwarg->name == "kwargs");
  REQUIRE(f.body.size() == 2);
  REQUIRE(f.body[0]->kind == StmtKind::FunctionDef);
  const Expr& lam = *f.body[0]->fn->body[0]->value;
  REQUIRE(lam.kind == ExprKind::Lambda);
  CHECK(lam.fn->params.size() == 1);
  CHECK(lam.fn->kwonly.size() == 1);
  CHECK(lam.fn->kwarg);
}

TEST_CASE("script parse: f-strings, comprehensions, literals") {
  FileAst m = syntax(
      "x = f'a{b!r:>{w}}c' 'd' f\"{e=}\"\n"
      "y = [i for i in r if i for j in s], {k: v for k, v in d}, {*a, 1}, (g for g in h), {**d, 'k': 1}\n"
      "z = 0x_ff, 1_000.5e-3, 2j, b'\\x00' rb'\\d', 99999999999999999999, ...\n");
  const Expr& f = *m.body[0]->value;
  REQUIRE(f.kind == ExprKind::FString);
  REQUIRE(f.args.size() == 4);  // 'a', {b...}, 'cde=', {e}
  CHECK(f.args[0]->name == "a");
  CHECK(f.args[1]->kind == ExprKind::FormattedValue);
  CHECK(f.args[1]->conversion == "r");
  REQUIRE(f.args[1]->args.size() == 2);
  CHECK(f.args[1]->args[1]->kind == ExprKind::FString);  // the spec
  CHECK(f.args[2]->name == "cde=");
  CHECK(f.args[3]->conversion == "r");  // {e=} shows the repr
  const Expr& y = *m.body[1]->value;
  REQUIRE(y.args.size() == 5);
  CHECK(y.args[0]->kind == ExprKind::ListComp);
  CHECK(y.args[0]->generators.size() == 2);
  CHECK(y.args[0]->generators[0].ifs.size() == 1);
  CHECK(y.args[1]->kind == ExprKind::DictComp);
  CHECK(y.args[2]->kind == ExprKind::Set);
  CHECK(y.args[2]->args[0]->kind == ExprKind::Starred);
  CHECK(y.args[3]->kind == ExprKind::GeneratorExp);
  CHECK(y.args[4]->kind == ExprKind::Dict);
  CHECK(!y.args[4]->args[0]);  // **d
  const Expr& z = *m.body[2]->value;
  CHECK(z.args[0]->int_value == 255);
  CHECK(z.args[1]->float_value == doctest::Approx(1.0005));
  CHECK(z.args[2]->kind == ExprKind::Imaginary);
  CHECK(z.args[3]->kind == ExprKind::Bytes);
  CHECK(z.args[3]->name == std::string("\0\\d", 3));
  CHECK(z.args[4]->kind == ExprKind::BigInt);
  CHECK(z.args[5]->kind == ExprKind::Ellipsis);
}

TEST_CASE("script parse: statements; match and case are names except where a match statement is") {
  FileAst m = syntax(R"(
match = case = 1
match(x)
match [a, b]:
    case [Point(x=0), *rest] | {"k": _, **kw} if rest:
        pass
    case _:
        pass
try:
    pass
except* (A, B) as e:
    raise X from e
finally:
    del a[0], b
with (open(a) as f, b):
    global g; nonlocal h
while (n := n - 1): yield from g
else: pass
if __name__ == "__main__":
    assert x, "m"
)");
  REQUIRE(m.body.size() == 7);
  CHECK(m.body[0]->kind == StmtKind::Assign);
  CHECK(m.body[1]->kind == StmtKind::Expr);
  REQUIRE(m.body[2]->kind == StmtKind::Match);
  REQUIRE(m.body[2]->cases.size() == 2);
  CHECK(m.body[2]->cases[0].pattern.kind == Pattern::Kind::Or);
  CHECK(m.body[2]->cases[0].guard);
  CHECK(m.body[3]->kind == StmtKind::TryStar);
  CHECK(m.body[3]->handlers[0].name == "e");
  CHECK(m.body[3]->finalbody[0]->kind == StmtKind::Delete);
  REQUIRE(m.body[4]->kind == StmtKind::With);
  CHECK(m.body[4]->items.size() == 2);
  CHECK(m.body[4]->body[0]->kind == StmtKind::Global);
  CHECK(m.body[4]->body[1]->kind == StmtKind::Nonlocal);
  CHECK(m.body[5]->kind == StmtKind::While);
  CHECK(m.body[5]->test->kind == ExprKind::NamedExpr);
  CHECK(m.body[5]->orelse.size() == 1);
  CHECK(m.body[6]->kind == StmtKind::If);
}

TEST_CASE("script errors: constructs kiln does not run are named where the code is lowered or evaluated") {
  auto err = [](const std::string& src) { return error_of([&] { script::check_source(src, "m.py"); }); };
  CHECK(err("def f(x: int) -> int:\n    g = f'{x}'\n    return x\n") ==
        "m.py:2:9: error: f-strings are not supported in kiln script (TorchScript accepts this)\n    g = f'{x}'\n        ^");
  CHECK(err("def f(x: int) -> int:\n    try:\n        pass\n    finally:\n        pass\n    return x\n")
            .find("m.py:2:5: error: try is not supported in kiln script\n") == 0);  // TorchScript rejects try too
  CHECK(err("def f(x: int) -> int:\n    return x if (y := x) else y\n").find("assignment expressions (:=) are not supported") !=
        std::string::npos);
  // a def that is not written as a script function is lowered only when asked for, and then fails
  auto asked = [](const std::string& src) { return error_of([&] { script_source(src, "m.py").function("f"); }); };
  CHECK(err("def f(x: int, *, k: int) -> int:\n    return x\n").find("m.py:1:18: error: keyword-only parameters") == 0);
  CHECK(err("@decorate\ndef f(x: int) -> int:\n    return x\n").empty());
  CHECK(asked("@decorate\ndef f(x: int) -> int:\n    return x\n").find("m.py:1:2: error: decorators other than @torch.jit.export are not supported") == 0);
  CHECK(asked("async def f(x: int) -> int:\n    return x\n").find("async def is not supported") != std::string::npos);
  CHECK(err("def f(x: int) -> int:\n    def g(): pass\n    return x\n").find("nested functions are not supported") !=
        std::string::npos);
  CHECK(err("def f(x: int) -> int:\n    return max(x, **{})\n").find("**kwargs are not supported") != std::string::npos);
  // module-level code is not run: what it binds is named where compiled code uses it
  CHECK(err("x = 1\n").empty());
  CHECK(err("for x in (1, 2): pass\n\n\ndef f(n: int) -> int:\n    return n + x\n")
            .find("m.py:5:16: error: 'x' is bound by module-level code (line 1), which kiln does not run") == 0);
  CHECK(err("x, y = 1, 2\n\n\ndef f(n: int) -> int:\n    return n + x\n").empty());  // an unpacking of names is constants
  CHECK(err("x, *y = 1, 2\n\n\ndef f(n: int) -> int:\n    return n + x\n").empty());  // a starred one too
  CHECK(err("x = 1\n\n\ndef f(n: int) -> int:\n    return n + x\n").empty());  // a module-level constant is one of the graph
  CHECK(err("def f(x: int) -> int:\n    return x\n\nif __name__ == '__main__':\n    print(f(1))\n").empty());

  const char* init = R"(
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        with open("w") as f:
            pass

    def forward(self, x):
        return x
)";
  std::string e = error_of([&] { script_source(init, "n.py").module("Net", {}); });
  CHECK(e.find("n.py:7:9: error: with is not supported in __init__") == 0);
}

TEST_CASE("script: methods that are neither lowered nor evaluated may hold any Python") {
  const char* src = R"(
import torch
import torch.nn as nn


class Net(nn.Module):
    """Docstring."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    @torch.jit.unused
    def describe(self, *args, **kwargs) -> str:
        try:
            return f"{self.n=} {[a for a in args]!r}" + str({k: v for k, v in kwargs.items()})
        except* ValueError:
            raise
        finally:
            del args

    def forward(self, x):
        return x * self.n


if __name__ == "__main__":
    print(Net(2).describe(lambda: 1))
)";
  auto m = script_source(src, "net.py").module("Net", {int64_t(3)});
  CHECK(test::values((*m)(tensor({1.0, 2.0})))[1] == 6);
}

TEST_CASE("script parse: operators are PyOp from the parser on, each with its spelling and dunder") {
  FileAst m = syntax("x = -a - +b ** c\ny = not a and b is not c or d not in e\nz += a // b\n");
  const Expr& x = *m.body[0]->value;
  REQUIRE(x.kind == ExprKind::Binary);
  CHECK(x.op == PyOp::Sub);
  CHECK(x.args[0]->op == PyOp::Neg);
  CHECK(x.args[1]->op == PyOp::Pos);
  CHECK(x.args[1]->args[0]->op == PyOp::Pow);
  const Expr& y = *m.body[1]->value;
  CHECK(y.op == PyOp::Or);
  CHECK(y.args[0]->op == PyOp::And);
  CHECK(y.args[0]->args[0]->op == PyOp::Not);
  CHECK(y.args[0]->args[1]->ops == std::vector<PyOp>{PyOp::IsNot});
  CHECK(y.args[1]->ops == std::vector<PyOp>{PyOp::NotIn});
  CHECK(m.body[2]->op == PyOp::Add);  // z += ...
  CHECK(m.body[2]->value->op == PyOp::FloorDiv);
  CHECK(spelling(PyOp::NotIn) == "not in");
  CHECK(spelling(PyOp::Neg) == "-");
  CHECK(dunder(PyOp::FloorDiv) == "__floordiv__");
  CHECK(dunder(PyOp::Is).empty());
  CHECK(binary_op("-") == PyOp::Sub);
  CHECK(unary_op("-") == PyOp::Neg);
  CHECK(!binary_op("not"));
}
