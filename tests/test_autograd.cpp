#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {
Tensor f64(std::initializer_list<double> v, Shape s = {}) { return tensor(v, s, DType::Float64); }
}  // namespace

TEST_CASE("autograd: new_handle shares the bytes, not the handle or its history") {
  Tensor x = f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor y = (x * 2).t();
  Tensor h = new_handle(y);
  CHECK_FALSE(h.is_same(y));
  CHECK(h.storage() == y.storage());
  CHECK(h.sizes() == y.sizes());
  CHECK(h.strides() == y.strides());
  CHECK(h.storage_offset() == y.storage_offset());
  CHECK(y.grad_fn());
  CHECK_FALSE(h.grad_fn());
  CHECK_FALSE(h.requires_grad());
}

TEST_CASE("autograd: grad_fn names, next functions and accumulation into leaves") {
  Tensor x = f64({1, 2, 3}).requires_grad_();
  Tensor y = f64({4, 5, 6}).requires_grad_();
  Tensor z = x * y + x;
  REQUIRE(z.grad_fn());
  CHECK(z.grad_fn()->name() == "AddBackward");
  CHECK(z.grad_fn()->next[0].node->name() == "MulBackward");
  CHECK(z.grad_fn()->next[1].node->name() == "AccumulateGrad");
  CHECK(x.is_leaf());
  CHECK_FALSE(z.is_leaf());
  z.sum().backward();
  check_close(x.grad(), f64({5, 6, 7}));
  check_close(y.grad(), f64({1, 2, 3}));
  // A second graph accumulates into the same .grad.
  (x * 2).sum().backward();
  check_close(x.grad(), f64({7, 8, 9}));
}

TEST_CASE("autograd: broadcasting is undone by sum_to") {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = f64({10, 20, 30}).requires_grad_();
  Tensor c = f64({2}, {1, 1}).requires_grad_();
  ((a + b) * c).sum().backward();
  check_close(b.grad(), f64({4, 4, 4}));
  check_close(c.grad(), f64({141}, {1, 1}));
  check_close(a.grad(), full({2, 3}, 2.0, DType::Float64));
}

TEST_CASE("autograd: retain_graph, freed buffers and retain_grad") {
  Tensor x = f64({0.5, 1.5}).requires_grad_();
  Tensor h = x.exp();
  h.retain_grad();
  Tensor y = (h * h).sum();
  y.backward({}, true);
  check_close(h.grad(), h.detach() * 2);
  y.backward();
  check_close(x.grad(), (x.detach() * 2).exp() * 4);
  check_error([&] { y.backward(); }, "backward through the graph a second time");
}

TEST_CASE("autograd: a graph whose nodes saved no values runs backward again, as torch's does") {
  // A cast, an add of a number and a sum save shapes only: nothing is freed, so a second backward (autocast
  // running two backward passes through one cached cast of a weight) accumulates again.
  Tensor x = f64({0.5, 1.5}).requires_grad_();
  Tensor y = (x.to(DType::Float32) + 1.0).sum();
  y.backward();
  y.backward();
  check_close(x.grad(), f64({2.0, 2.0}));
  // One that saved values still refuses.
  Tensor z = (x * x).sum();
  z.backward();
  check_error([&] { z.backward(); }, "backward through the graph a second time");
}

TEST_CASE("autograd: no_grad, detach and requires_grad errors") {
  Tensor x = f64({1, 2}).requires_grad_();
  {
    NoGradGuard ng;
    Tensor y = x * 2;
    CHECK_FALSE(y.requires_grad());
    {
      EnableGradGuard eg;
      CHECK((x * 2).requires_grad());
    }
  }
  CHECK_FALSE(x.detach().requires_grad());
  check_error([&] { arange(3).requires_grad_(); }, "only tensors of floating point dtype can require gradients");
  check_error([&] { (x * 2).backward(); }, "grad can be implicitly created only for scalar outputs");
  check_error([&] { f64({1}).backward(); }, "does not require grad");
}

TEST_CASE("autograd: hooks replace gradients") {
  Tensor x = f64({1, 2, 3}).requires_grad_();
  x.register_hook([](const Tensor& g) { return g * 10; });
  Tensor h = x * 2;
  h.register_hook([](const Tensor& g) { return g + 1; });
  h.sum().backward();
  check_close(x.grad(), f64({40, 40, 40}));
}

TEST_CASE("autograd: in-place modification of a saved tensor is caught") {
  Tensor x = f64({1, 2, 3}).requires_grad_();
  Tensor a = x * 2;
  Tensor b = sin(a);
  a.mul_(3);
  check_error([&] { b.sum().backward(); }, "a tensor needed for gradient computation was modified by an in-place operation");
  check_error([&] { x.add_(1); }, "a leaf tensor that requires grad is being used in an in-place operation");
  // In-place on a non-leaf is differentiated through.
  Tensor c = x * 2;
  c.mul_(x);
  c.sum().backward();
  check_close(x.grad(), x.detach() * 4);
}

TEST_CASE("autograd: kiln::grad, higher order and Hessian-vector products") {
  Tensor x = f64({0.3, -0.7, 1.1}).requires_grad_();
  Tensor y = (x * x * x).sum();
  Tensors g = grad({y}, {x}, {}, false, true);
  check_close(g[0], x.detach() * x.detach() * 3);
  Tensors gg = grad({g[0].sum()}, {x});
  check_close(gg[0], x.detach() * 6);
  CHECK_FALSE(x.grad().defined());  // grad() does not accumulate

  // Hessian-vector product of an MLP loss against central differences of the gradient.
  manual_seed(3);
  Tensor w1 = randn({4, 5}, DType::Float64).requires_grad_();
  Tensor w2 = randn({5, 2}, DType::Float64).requires_grad_();
  Tensor in = randn({3, 4}, DType::Float64);
  auto loss_grad = [&](const Tensor& w, bool create) {
    Tensor l = tanh(matmul(tanh(matmul(in, w)), w2)).pow(2).sum();
    return grad({l}, {w}, {}, create, create)[0];
  };
  Tensor v = randn({4, 5}, DType::Float64);
  Tensor gw = loss_grad(w1, true);
  Tensor hv = grad({(gw * v).sum()}, {w1})[0];
  double eps = 1e-6;
  Tensor wp = (w1.detach() + v * eps).requires_grad_();
  Tensor wm = (w1.detach() - v * eps).requires_grad_();
  Tensor fd = (loss_grad(wp, false) - loss_grad(wm, false)) / (2 * eps);
  check_close(hv, fd, 1e-5, 1e-7);
}

TEST_CASE("autograd: forward-mode jvp equals J·t") {
  Tensor x = f64({0.2, 0.4, -0.5, 1.0}, {2, 2});
  Tensor w = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = f64({1, 0, 0.5, -1}, {2, 2});
  auto [out, jv] = jvp([&](const Tensors& xs) { return Tensors{sum(exp(matmul(xs[0], w)), {1})}; }, {x}, {t});
  check_close(out[0], sum(exp(matmul(x, w)), {1}));
  check_close(jv[0], sum(exp(matmul(x, w)) * matmul(t, w), {1}), 1e-9, 1e-9);
  check_error([&] { jvp([](const Tensors& xs) { return xs; }, {x}, {f64({1})}); }, "jvp: tangent 0 has shape [1]");
}

// Plain, each layer keeps one [batch, width] tensor: tanh's output, which tanh's derivative and the next
// matmul's both read (tanh saves its result, as torch's does, so its input is freed).
TEST_CASE("autograd: checkpointing keeps gradients and cuts peak memory 2x") {
  const int layers = 32, width = 64, batch = 512, seg = 6;
  manual_seed(7);
  std::vector<Tensor> ws;
  for (int i = 0; i < layers; ++i) ws.push_back((randn({width, width}) * (1.0 / std::sqrt(double(width)))).requires_grad_());
  Tensor x = randn({batch, width}).requires_grad_();
  auto block = [&](int from, int to) {
    return [&, from, to](const Tensors& in) {
      Tensor h = in[0];
      for (int i = from; i < to; ++i) h = tanh(matmul(h, ws[size_t(i)]));
      return Tensors{h};
    };
  };
  auto run = [&](bool ckpt) {
    for (auto& w : ws) w.set_grad(Tensor());
    int64_t before = memory_stats().current_bytes;
    reset_peak_memory_stats();
    Tensor h = x;
    for (int s = 0; s < layers; s += seg) {
      int e = std::min(layers, s + seg);
      h = ckpt ? checkpoint(block(s, e), {h})[0] : block(s, e)({h})[0];
    }
    h.sum().backward();
    return memory_stats().peak_bytes - before;
  };
  int64_t plain = run(false);
  std::vector<Tensor> plain_grads;
  for (auto& w : ws) plain_grads.push_back(w.grad());
  int64_t ck = run(true);
  for (int i = 0; i < layers; ++i) check_close(ws[size_t(i)].grad(), plain_grads[size_t(i)], 1e-4, 1e-5);
  MESSAGE("peak bytes plain " << plain << ", checkpointed " << ck);
  CHECK(plain >= 2 * ck);
  CHECK(plain < int64_t(layers + 8) * batch * width * 4);  // with the backward's own few
}

TEST_CASE("autograd: prod's gradient with zeros in the slice") {
  Tensor x = f64({2, 0, 3, 0, 0, 5, 4, 1, 0.5}, {3, 3}).requires_grad_();
  prod(x, {1}).sum().backward();
  // row 0: one zero → only it gets 2*3; row 1: two zeros → all 0; row 2: no zero → p / x
  check_close(x.grad(), f64({0, 6, 0, 0, 0, 0, 0.5, 2, 4}, {3, 3}));
  Tensor y = f64({2, 0, 3, 1.5}).requires_grad_();
  CHECK_NOTHROW(gradcheck([](const Tensors& in) { return prod(in[0], {0}) * in[0].sum(); }, {y}));
}

// tanh, sigmoid, exp, sqrt and rsqrt save their result for the backward (op_facts' Out), not their input:
// the input is freed, a write into the result is caught, and the second derivative still flows through the
// result when the caller dropped it (the node rebuilds it pointing back at itself).
TEST_CASE("autograd: ops whose derivative reads the result save the result, not the input") {
  using Fn = Tensor (*)(const Tensor&);
  const std::pair<const char*, Fn> ops[] = {{"tanh", [](const Tensor& t) { return tanh(t); }},
                                            {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
                                            {"exp", [](const Tensor& t) { return exp(t); }},
                                            {"sqrt", [](const Tensor& t) { return sqrt(t); }},
                                            {"rsqrt", [](const Tensor& t) { return rsqrt(t); }}};
  for (const auto& [name, f] : ops) {
    std::string op = name;
    CAPTURE(op);
    Tensor x = (rand({64, 64}, DType::Float64) + 0.5).requires_grad_();
    CHECK(gradcheck([&](const Tensors& in) { return f(in[0]); }, {x}));
    CHECK(gradgradcheck([&](const Tensors& in) { return f(in[0] * 1.0); }, {x}));
    // the input of f (x * 2, an intermediate) is freed once f has run: only the result stays
    int64_t before = memory_stats().current_bytes;
    Tensor y = f(x * 2.0);
    CHECK(memory_stats().current_bytes - before < 2 * 64 * 64 * 8);  // one [64,64] double (and the scalar 2)
    y.sum().backward();
  }
  Tensor x = randn({4}).requires_grad_();
  Tensor y = tanh(x);
  y.add_(1.0);
  test::check_error([&] { y.sum().backward(); }, "its output saved by TanhBackward is at version 1, expected version 0");
}

// The second derivative through a result the caller dropped: the node rebuilds it pointing back at itself
// (and ASan's leak check sees no cycle left behind).
TEST_CASE("autograd: a second derivative through a dropped saved result") {
  Tensor x = (rand({5}, DType::Float64) + 0.1).requires_grad_();
  Tensor g = grad({tanh(x * 1.0).sum()}, {x}, {}, false, true)[0];  // tanh's result is dropped here
  Tensor gg = grad({g.sum()}, {x})[0];
  Tensor t = tanh(x.detach());
  check_close(gg, -2.0 * t * (1.0 - t * t), 1e-10, 1e-12);
}
