// trace(): traced == eager for every op of the table and for the samples' models on fresh inputs,
// in-place writes, the honesty warnings, check_inputs and the call signature.
#include <sstream>

#include "ir_samples.h"
#include "op_cases.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::case_for;
using kiln::test::OpCase;

namespace {

void check_same(const Tensors& got, const Tensors& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].dtype() == want[i].dtype());
    check_close(got[i], want[i]);
  }
}

}  // namespace

TEST_CASE("trace: every op of the table, traced == eager on fresh inputs") {
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = OpId(i);
    CAPTURE(op_name(op));
    OpCase sample = case_for(op, 1);
    Attrs attrs = sample.attrs;
    Function f = trace([op, attrs](const Tensors& in) { return dispatch(op, in, attrs); }, sample.inputs);
    ir::verify(f.graph());
    int ops = 0;
    for (ir::Node* n : f.graph().block()->nodes()) ops += n->is_op(op);
    CHECK(ops == 1);
    CHECK(f.binding().warnings.empty());
    OpCase fresh = case_for(op, 2);
    check_same(f(fresh.inputs), dispatch(op, fresh.inputs, attrs));
  }
}

TEST_CASE("trace: the ops a kernel dispatches itself are not recorded, and need not be traceable") {
  // oneDNN's convolution copies a transposed input with contiguous(); cuBLAS's matmul does so on views it
  // makes from raw storage, which a trace cannot follow. The graph holds the user's ops only.
  Tensor x = randn({2, 16, 20, 18}), w = randn({8, 16, 3, 3});
  Function f = trace([](const Tensors& in) { return Tensors{conv2d(in[0].transpose(2, 3), in[1])}; }, {x, w});
  int ops = 0;
  for (ir::Node* n : f.graph().block()->nodes()) ops += n->is_op();
  CHECK(ops == 2);  // permute, conv2d
  check_close(f({x, w})[0], conv2d(x.transpose(2, 3), w));
}

TEST_CASE("trace: the samples' models, traced == eager on fresh inputs and through backward") {
  for (const char* name : {"mlp", "cnn"}) {
    CAPTURE(name);
    auto m = std::string(name) == "mlp" ? test::digits_mlp() : test::digits_cnn();
    Shape in_shape = std::string(name) == "mlp" ? Shape{8, 64} : Shape{8, 1, 8, 8};
    Function f = trace_module(*m, [m](const Tensors& in) { return Tensors{m->forward(in[0])}; }, {randn(in_shape)});
    // parameters are inputs, not constants
    for (ir::Node* n : f.graph().block()->nodes()) CHECK(n->prim() != ir::Prim::Constant);
    CHECK(f.graph().inputs().size() == 1 + m->parameters().size());
    for (int k = 0; k < 3; ++k) {
      Tensor x = randn(in_shape);
      check_same(f({x}), {m->forward(x)});
    }
    // gradients flow to the module's parameters through the traced function
    Tensor x = randn(in_shape);
    Tensor target = randint(0, 10, {8});
    m->zero_grad();
    cross_entropy(m->forward(x), target).backward();
    std::vector<Tensor> eager_grads;
    for (const Tensor& p : m->parameters()) eager_grads.push_back(p.grad());
    m->zero_grad();
    cross_entropy(f({x})[0], target).backward();
    auto params = m->parameters();
    for (size_t i = 0; i < params.size(); ++i) check_close(params[i].grad(), eager_grads[i], 1e-5, 1e-7);
  }
}

TEST_CASE("trace: a traced model keeps training like the eager one") {
  auto eager_model = test::digits_mlp();
  auto traced_model = test::digits_mlp();  // same seed, same weights
  Function f = trace_module(*traced_model, [traced_model](const Tensors& in) { return Tensors{traced_model->forward(in[0])}; },
                            {randn({16, 64})});
  optim::SGD opt_e(eager_model->parameters(), {.lr = 0.1});
  optim::SGD opt_t(traced_model->parameters(), {.lr = 0.1});
  manual_seed(5);
  for (int step = 0; step < 5; ++step) {
    Tensor x = randn({16, 64});
    Tensor y = randint(0, 10, {16});
    opt_e.zero_grad();
    cross_entropy(eager_model->forward(x), y).backward();
    opt_e.step();
    opt_t.zero_grad();
    cross_entropy(f({x})[0], y).backward();
    opt_t.step();
  }
  auto pe = eager_model->parameters(), pt = traced_model->parameters();
  for (size_t i = 0; i < pe.size(); ++i) check_close(pt[i], pe[i], 1e-5, 1e-6);
}

TEST_CASE("trace: in-place writes are recorded and written back") {
  Function f = test::traced_sample("inplace");
  Tensor x = tensor({1.0, 2.0, 3.0});
  Tensors out = f({x});
  REQUIRE(out.size() == 1);
  check_close(out[0], tensor({3.0, 5.0, 7.0}));
  check_close(x, tensor({3.0, 6.0, 9.0}));  // the traced x.mul_(3) happened to the caller's tensor
  REQUIRE(f.binding().writebacks.size() == 1);
}

TEST_CASE("trace: batch norm's running statistics keep updating in a traced module") {
  manual_seed(0);
  auto bn_e = std::make_shared<nn::BatchNorm2d>(3);
  auto bn_t = std::make_shared<nn::BatchNorm2d>(3);
  Function f = trace_module(*bn_t, [bn_t](const Tensors& in) { return Tensors{bn_t->forward(in[0])}; },
                            {randn({4, 3, 2, 2})});
  // tracing ran forward once: bring the eager twin to the same state
  bn_e->forward(randn({4, 3, 2, 2}));
  for (auto& [name, t] : bn_t->named_buffers()) {
    for (auto& [name_e, te] : bn_e->named_buffers())
      if (name == name_e) te.copy_(t);
  }
  for (int k = 0; k < 3; ++k) {
    Tensor x = randn({4, 3, 2, 2});
    check_same(f({x}), {bn_e->forward(x)});
  }
  auto be = bn_e->named_buffers(), bt = bn_t->named_buffers();
  for (size_t i = 0; i < be.size(); ++i) {
    CAPTURE(be[i].first);
    check_close(bt[i].second, be[i].second);
  }
}

TEST_CASE("trace: writes through a view are refused, not silently lost") {
  check_error(
      [] {
        trace(
            [](const Tensors& in) {
              Tensor v = in[0].slice(0, 0, 1);
              v.mul_(2.0);
              return Tensors{in[0] + 1.0};
            },
            {randn({3})});
      },
      "trace: mul_ writes into a tensor that shares its storage with another traced tensor (a view)");
}

TEST_CASE("trace: reading a value into C++ warns and check_inputs catches the divergence") {
  Function f = test::traced_sample("item");
  REQUIRE(f.binding().warnings.size() == 1);
  CHECK(f.binding().warnings[0] ==
        "item() read the value of the output of sum into C++; the trace may not generalise to other inputs (branches "
        "and numbers computed from it are baked in)");
  // the trace took the relu branch; a negative input needs the other one
  auto fn = [](const Tensors& in) {
    Tensor s = in[0].sum();
    return Tensors{s.item<double>() > 0 ? relu(in[0]) : neg(in[0])};
  };
  TraceOptions o;
  o.check_inputs = {{tensor({3.0, 1.0})}};
  CHECK_NOTHROW(trace(fn, {tensor({1.0, 2.0})}, o));
  o.check_inputs = {{tensor({3.0, 1.0})}, {tensor({-1.0, -2.0})}};
  check_error([&] { trace(fn, {tensor({1.0, 2.0})}, o); },
              "trace forward: check_inputs[1]: output 0 differs between the trace and eager execution (element 0: "
              "traced 0 vs eager 1)");
}

TEST_CASE("trace: sizes read as numbers specialise the function to the sample shapes") {
  auto flat = [](const Tensors& in) { return Tensors{in[0].reshape({in[0].size(0), -1}) * 2.0}; };
  Function f = trace(flat, {randn({2, 3, 4})});
  CHECK(f.binding().exact_shapes);
  CHECK_NOTHROW(f({randn({2, 3, 4})}));
  check_error([&] { f({randn({5, 3, 4})}); },
              "forward: input 0 (x0) has signature (f32[5,3,4]), the function takes (f32[2,3,4]); the trace read the "
              "sizes of input 0 (x0) as numbers");
  // without size reads, other sizes of the same rank run
  Function g = trace([](const Tensors& in) { return Tensors{exp(in[0]).sum({1})}; }, {randn({2, 3})});
  CHECK_FALSE(g.binding().exact_shapes);
  Tensor x = randn({7, 5});
  check_close(g({x})[0], exp(x).sum({1}));
}

TEST_CASE("trace: calls with another dtype, rank or count name both signatures") {
  Function f = trace([](const Tensors& in) { return Tensors{in[0] + in[1]}; }, {randn({2}), randn({2})});
  check_error([&] { f({randn({2}), randn({2}).to(DType::Float64)}); },
              "forward: input 1 (x1) has signature (f32[2], f64[2]), the function takes (f32[2], f32[2])");
  check_error([&] { f({randn({2}), randn({2, 2})}); }, "input 1 (x1) has signature (f32[2], f32[2,2])");
  check_error([&] { f({randn({2})}); }, "forward: expected 2 inputs (f32[2], f32[2]), got 1 (f32[2])");
}

TEST_CASE("trace: tensors from outside become constants, with a warning when they need grad") {
  Tensor w = tensor({1.0, 2.0, 3.0});
  Function f = trace([w](const Tensors& in) { return Tensors{in[0] * w}; }, {randn({3})});
  w.mul_(10.0);  // later writes do not change the graph: it captured the value
  Tensor x = tensor({1.0, 1.0, 1.0});
  check_close(f({x})[0], tensor({1.0, 2.0, 3.0}));
  CHECK(f.binding().warnings.empty());
  Tensor p = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Function g = trace([p](const Tensors& in) { return Tensors{in[0] * p}; }, {randn({3})});
  REQUIRE(g.binding().warnings.size() == 1);
  CHECK(g.binding().warnings[0].find("requires grad is captured as a constant") != std::string::npos);
}

TEST_CASE("trace: factories inside the traced function are constants; outputs may be inputs") {
  Function f = trace([](const Tensors& in) { return Tensors{in[0] + ones({2}), in[0]}; }, {randn({2})});
  Tensor x = tensor({1.0, 2.0});
  Tensors out = f({x});
  check_close(out[0], tensor({2.0, 3.0}));
  CHECK(out[1].is_same(x));
  std::ostringstream os;
  os << f;
  CHECK(os.str() == f.graph().str());
  CHECK(ir::to_dot(f.graph()).find("digraph") == 0);
}

TEST_CASE("trace: dropout draws a new mask at each call (prim::rand_like); a fixed-shape random factory warns") {
  manual_seed(3);
  Tensor x = ones({64});
  Function f = trace([](const Tensors& in) { return Tensors{dropout(in[0], 0.5, true)}; }, {x});
  int draws = 0;
  for (ir::Node* n : f.graph().block()->nodes()) draws += n->prim() == ir::Prim::RandLike;
  CHECK(draws == 1);
  CHECK(f.binding().warnings.empty());
  // The same stream as eager: from one seed, the traced call keeps what eager's dropout keeps.
  manual_seed(11);
  Tensor eager = dropout(x, 0.5, true);
  manual_seed(11);
  Tensor first = f({x})[0], second = f({x})[0];
  check_same({first}, {eager});
  CHECK(sum(ne(first, second)).item<int64_t>() > 0);
  Function g = trace([](const Tensors& in) { return Tensors{in[0] + rand({64})}; }, {x}, [] {
    TraceOptions o;
    o.quiet = true;
    return o;
  }());
  REQUIRE(g.binding().warnings.size() == 1);
  CHECK(g.binding().warnings[0] ==
        "rand draws its numbers once, while tracing: they are a constant of the trace, the same at every call "
        "(rand_like draws again at each call)");
}
