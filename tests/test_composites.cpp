// The composites of eager/composites.h are written once and run two ways: eagerly (EagerBuilder) and
// lowered by the script frontend (its GraphBuilder). For each one, the scripted function equals eager in
// values, gradients, the op rows it records (eager's under trace(), the script's graph) and, lowered inside
// an AutocastGuard, the dtypes autocast gives.
#include "script_frontend/script.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

const char* kSource = R"(import torch
import torch.nn.functional as F
from torch import Tensor


def softmax(x: Tensor) -> Tensor:
    return torch.softmax(x, 1)


def log_softmax(x: Tensor) -> Tensor:
    return F.log_softmax(x, dim=-1)


def layer_norm(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.layer_norm(x, [4], w, b, 1e-5)


def linear(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.linear(x, w, b)


def dropout(x: Tensor) -> Tensor:
    return F.dropout(x, 0.3, True)


def floor_divide(a: Tensor, b: Tensor) -> Tensor:
    return a // b


def remainder(a: Tensor, b: Tensor) -> Tensor:
    return a % b
)";

struct Composite {
  const char* name;
  std::function<Tensor(const Tensors&)> eager;
  std::function<Tensors()> inputs;  // fresh float32 inputs; the first ones are differentiated
};

std::vector<Composite> composites() {
  return {
      {"softmax", [](const Tensors& x) { return softmax(x[0], 1); }, [] { return Tensors{randn({3, 5})}; }},
      {"log_softmax", [](const Tensors& x) { return log_softmax(x[0], -1); }, [] { return Tensors{randn({2, 3, 4})}; }},
      {"layer_norm", [](const Tensors& x) { return layer_norm(x[0], {4}, x[1], x[2], 1e-5); },
       [] { return Tensors{randn({3, 4}), randn({4}), randn({4})}; }},
      {"linear", [](const Tensors& x) { return linear(x[0], x[1], x[2]); },
       [] { return Tensors{randn({3, 6}), randn({4, 6}), randn({4})}; }},
      {"dropout", [](const Tensors& x) { return dropout(x[0], 0.3, true); }, [] { return Tensors{randn({6, 7})}; }},
      {"floor_divide", [](const Tensors& x) { return floor_divide(x[0], x[1]); },
       [] { return Tensors{mul(randn({3, 4}), 5.0), add(rand({4}), 0.5)}; }},
      {"remainder", [](const Tensors& x) { return remainder(x[0], x[1]); },
       [] { return Tensors{mul(randn({3, 4}), 5.0), sub(rand({4}), 2.0)}; }},
  };
}

std::vector<IValue> ivalues(const Tensors& xs) { return std::vector<IValue>(xs.begin(), xs.end()); }

// The op-table rows of a graph's top block, in order (prims such as constants and shape reads differ by
// construction: eager knows shapes, the script reads them at run time).
std::vector<OpId> op_rows(const ir::Graph& g) {
  std::vector<OpId> ops;
  for (const ir::Node* n : g.block()->nodes())
    if (n->is_op()) ops.push_back(n->op());
  return ops;
}

std::string names(const std::vector<OpId>& ops) {
  std::string s;
  for (OpId op : ops) s += std::string(s.empty() ? "" : " ") + std::string(op_name(op));
  return s;
}

Tensors leaves(const Tensors& xs) {
  Tensors r;
  for (const Tensor& x : xs) r.push_back(x.detach().clone().requires_grad_());
  return r;
}

}  // namespace

TEST_CASE("composites: scripted equals eager in values, gradients and the op rows recorded") {
  ScriptFile m = script_source(kSource, "composites.py");
  for (const Composite& c : composites()) {
    CAPTURE(c.name);
    manual_seed(7);
    Tensors in = c.inputs();
    Tensors a = leaves(in), b = leaves(in);
    manual_seed(11);
    Tensor y_eager = c.eager(a);
    manual_seed(11);
    Tensor y_script = m.function(c.name).call(ivalues(b))[0].to_tensor();
    check_close(y_script, y_eager, 1e-6, 1e-6);
    CHECK(y_script.dtype() == y_eager.dtype());

    Tensor w = randn(y_eager.sizes());
    sum(mul(y_eager, w)).backward();
    sum(mul(y_script, w)).backward();
    for (size_t i = 0; i < in.size(); ++i) {
      CAPTURE(i);
      REQUIRE(a[i].grad().defined());
      REQUIRE(b[i].grad().defined());
      check_close(b[i].grad(), a[i].grad(), 1e-5, 1e-6);
    }

    Function traced = trace([&](const Tensors& x) { return Tensors{c.eager(x)}; }, in);
    CHECK(names(op_rows(m.function(c.name).graph())) == names(op_rows(traced.graph())));
  }
}

TEST_CASE("composites: softmax's max is detached when scripted, as in eager") {
  ScriptFile m = script_source(kSource, "composites.py");
  int detached = 0;
  for (const ir::Node* n : m.function("softmax").graph().block()->nodes())
    if (n->prim() == ir::Prim::Detach) {
      ++detached;
      REQUIRE(n->output()->uses().size() == 1);
      CHECK(n->output()->uses()[0].user->is_op(OpId::Amax));
    }
  CHECK(detached == 1);
}

TEST_CASE("composites: lowered inside an AutocastGuard, a script gets eager's autocast dtypes") {
  std::optional<ScriptFile> m = script_source(kSource, "composites.py");
  // a function is lowered for the autocast state it is asked for in
  auto in_autocast = [&](const char* name) {
    AutocastGuard autocast;
    return m->function(name);
  };
  for (const Composite& c : composites()) {
    CAPTURE(c.name);
    if (std::string(c.name) == "floor_divide" || std::string(c.name) == "remainder") continue;  // no policy row
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      CAPTURE(dtype_name(dt));
      manual_seed(3);
      Tensors in = c.inputs();
      for (Tensor& x : in) x = x.to(dt);
      Tensor y_eager;
      manual_seed(5);
      {
        AutocastGuard autocast;
        y_eager = c.eager(in);
      }
      manual_seed(5);
      Tensor y_script = in_autocast(c.name).call(ivalues(in))[0].to_tensor();
      CHECK(dtype_name(y_script.dtype()) == dtype_name(y_eager.dtype()));
      check_close(y_script, y_eager, 1e-6, 1e-6);
    }
  }
  // outside the scope the same file records no casts
  ScriptFile plain = script_source(kSource, "composites.py");
  Tensor x = randn({3, 6}), w = randn({4, 6}), b = randn({4});
  CHECK(plain.function("linear").call({x, w, b})[0].to_tensor().dtype() == DType::Float32);
  CHECK(in_autocast("linear").call({x, w, b})[0].to_tensor().dtype() == DType::BFloat16);
  CHECK(m->function("linear").call({x, w, b})[0].to_tensor().dtype() == DType::Float32);
}

TEST_CASE("composites: a scripted module lowers one graph per autocast state") {
  const char* src = R"(import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return F.softmax(self.norm(self.fc(x)), dim=1)
)";
  auto net = script_source(src, "net.py").module("Net");
  Tensor x = randn({3, 6});
  Tensor plain = (*net)(x);
  Tensor y;
  {
    AutocastGuard autocast;
    CHECK(net->call({x})[0].to_tensor().dtype() == DType::Float32);  // softmax and layer_norm in float32
    Function f = net->method();
    bool lowered = false;
    for (const ir::Node* n : f.graph().block()->nodes())
      if (n->prim() == ir::Prim::Autocast && n->attrs().s("policy") == "lower_precision") lowered = true;
    CHECK(lowered);
    y = (*net)(x);
  }
  check_close(y, plain, 2e-2, 2e-2);  // the linear ran in bf16
  check_close((*net)(x), plain, 0, 0);  // outside the scope again: the float32 graph
}

TEST_CASE("composites: errors name the composite, eager and scripted alike") {
  check_error([] { layer_norm(randn({2, 3}), {4}); }, "layer_norm: normalized_shape [4] does not match the trailing dims of input shape [2,3]");
  check_error([] { dropout(randn({2}), 1.5); }, "dropout: probability has to be between 0 and 1, but got 1.5");
  check_error([] { linear(randn({2, 3}), randn({1, 4, 3})); }, "linear: weight must be 1-D or 2-D, got shape [1,4,3]");
  check_error([] { floor_divide(tensor({1.0}).to(DType::Bool), tensor({1.0}).to(DType::Bool)); },
              "floor_divide: bool tensors cannot be divided, got bool and bool");
  ScriptFile m = script_source(kSource, "composites.py");
  check_error([&] { m.function("layer_norm").call({randn({2, 3}), randn({4}), randn({4})}); },
              "layer_norm: normalized_shape [4] does not match the trailing dims of the input");
  check_error([] { script::check_source("import torch.nn.functional as F\nfrom torch import Tensor\n\n\ndef f(x: Tensor) -> Tensor:\n"
                                 "    return F.dropout(x, 1.5)\n", "d.py"); },
              "dropout: probability has to be between 0 and 1, but got 1.5");
}

TEST_CASE("composites: floor_divide is a row, exact for integers with Python's signs") {
  Tensor a = tensor(std::vector<int64_t>{7, -7, 7, -7, (int64_t(1) << 60) + 1}, {5});
  Tensor b = tensor(std::vector<int64_t>{2, 2, -2, -2, 3}, {5});
  Tensor q = floor_divide(a, b);
  CHECK(q.dtype() == DType::Int64);
  CHECK(q.data_ptr<int64_t>()[0] == 3);
  CHECK(q.data_ptr<int64_t>()[1] == -4);
  CHECK(q.data_ptr<int64_t>()[2] == -4);
  CHECK(q.data_ptr<int64_t>()[3] == 3);
  CHECK(q.data_ptr<int64_t>()[4] == ((int64_t(1) << 60) + 1) / 3);  // past 2^53: no float64 detour
  Tensor r = remainder(a, b);
  std::vector<double> rv = test::values(r);
  CHECK(std::vector<double>(rv.begin(), rv.begin() + 4) == std::vector<double>{1, 1, -1, -1});
  Function traced = trace([](const Tensors& x) { return Tensors{floor_divide(x[0], x[1])}; }, {a, b});
  CHECK(names(op_rows(traced.graph())) == "floor_divide");
  // An integer division by zero raises, as torch's ZeroDivisionError, eager, traced and through
  // remainder; a float one gives inf or nan.
  Tensor z = tensor(std::vector<int64_t>{1, 0, 2, 3, 4}, {5});
  const char* zero = "floor_divide: integer division by zero (ZeroDivisionError)";
  check_error([&] { floor_divide(a, z); }, zero);
  check_error([&] { remainder(a, z); }, zero);
  check_error([&] { traced.call({a, z}); }, zero);
  Tensor fq = floor_divide(tensor({1.0, -1.0, 0.0}), tensor({0.0, 0.0, 0.0}));
  std::vector<double> fv = test::values(fq);
  CHECK(std::isinf(fv[0]));
  CHECK(std::isinf(fv[1]));
  CHECK(std::isnan(fv[2]));
}
