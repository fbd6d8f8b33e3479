// gradcheck over every differentiable row of the op table, with broadcast and non-contiguous inputs;
// second order (gradgradcheck) for a representative subset. The switch has no default: a new row of
// ops.def does not compile until it is covered here (an elementwise row by its tests/op_cases.cpp entry).
#include "eager/autograd/derivatives.h"
#include "eager/dispatch.h"
#include "op_cases.h"
#include "support.h"

using namespace kiln;

namespace {

// Deterministic float64 values in [lo, hi), returned non-contiguous (a transposed view) when asked.
Tensor input(const Shape& shape, double lo, double hi, bool transposed = false, uint64_t seed = 1) {
  Shape s = shape;
  if (transposed && s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
  Tensor t = Tensor::empty(s, DType::Float64);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = std::fmod(std::sin(double(i + 1) * 12.9898 + double(seed) * 78.233) * 43758.5453, 1.0);
    p[i] = lo + (hi - lo) * std::fabs(u);
  }
  if (transposed && s.size() >= 2) t = t.transpose(-1, -2);
  return t.requires_grad_();
}

struct Case {
  DiffFn fn;
  Tensors inputs;
  bool second_order = false;
  GradcheckOptions opt = {};
};

Tensor idx(std::vector<int64_t> v, Shape shape = {}) { return tensor(v, shape, DType::Int64); }

Case case_for(OpId op) {
  // Unary inputs: a broadcast-free non-contiguous [3,4] (transposed), positive where the op needs it.
  auto unary = [&](double lo, double hi, bool second = true) {
    return Case{[op](const Tensors& x) { return dispatch1(op, {x[0]}); }, {input({3, 4}, lo, hi, true)}, second};
  };
  // Binary: [2,3,4] with [3,1] (broadcast) and a transposed operand.
  auto binary = [&](double lo, double hi, bool second = true) {
    return Case{[op](const Tensors& x) { return dispatch1(op, {x[0], x[1]}); },
                {input({2, 3, 4}, lo, hi, true, 1), input({3, 1}, lo, hi, false, 2)}, second};
  };
  auto red = [&](Shape dims, bool keepdim, bool second = true) {
    return Case{[op, dims, keepdim](const Tensors& x) {
                  return dispatch1(op, {x[0]}, Attrs().set("dims", dims).set("keepdim", keepdim));
                },
                {input({3, 4, 5}, 0.5, 2.0, true)}, second};
  };
  auto view = [&](Attrs a, Shape shape) {
    return Case{[op, a](const Tensors& x) { return dispatch1(op, {x[0]}, a); }, {input(shape, -1, 1, true)}, true};
  };
  switch (op) {
    // elementwise rows: their domain is their tests/op_cases.cpp entry
#define KILN_UNARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
    {
      if (!is_differentiable(op)) return Case{};
      test::ElementwiseCase e = test::elementwise_case(op);
      if (!e.kink_at_zero) return unary(e.lo, e.hi, e.second_order);
      // a kink at 0: magnitudes away from it, of both signs
      return Case{[op](const Tensors& x) { return dispatch1(op, {x[0]}); },
                  {(input({3, 4}, 0.2, 2, true) * tensor({1.0, -1.0, 1.0}, {3, 1}).to(DType::Float64)).detach().requires_grad_()},
                  e.second_order};
    }
#define KILN_BINARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
    {
      if (!is_differentiable(op)) return Case{};
      test::ElementwiseCase e = test::elementwise_case(op);
      if (e.other_hi <= e.other_lo) return binary(e.lo, e.hi, e.second_order);
      return Case{[op](const Tensors& x) { return dispatch1(op, {x[0], x[1]}); },
                  {input({2, 3, 4}, e.lo, e.hi, true, 1), input({3, 1}, e.other_lo, e.other_hi, false, 2)}, e.second_order};
    }
    case OpId::Sum: return red({1}, false);
    case OpId::Prod: return red({0, 2}, true);
    case OpId::Amax: case OpId::Amin: return red({2}, false, false);
    case OpId::Where:
      return Case{[](const Tensors& x) { return where(x[0].detach() > 0.5, x[0], x[1]); },
                  {input({3, 4}, 0, 1, true, 3), input({4}, -1, 1, false, 4)}};
    case OpId::Reshape: return view(Attrs().set("shape", Shape{4, -1}), {2, 3, 4});
    case OpId::Permute: return view(Attrs().set("dims", Shape{2, 0, 1}), {2, 3, 4});
    case OpId::Expand: return view(Attrs().set("shape", Shape{2, 3, 4}), {3, 1});
    case OpId::Slice: return view(Attrs().set("dim", int64_t(1)).set("start", int64_t(1)).set("end", int64_t(6)).set("step", int64_t(2)), {3, 6});
    case OpId::Select: return view(Attrs().set("dim", int64_t(0)).set("index", int64_t(-1)), {3, 4});
    case OpId::Squeeze: return view(Attrs().set("dims", Shape{1}), {3, 1, 4});
    case OpId::Unsqueeze: return view(Attrs().set("dim", int64_t(1)), {3, 4});
    case OpId::Contiguous: case OpId::Clone: return view(Attrs(), {3, 4});
    case OpId::Cast:  // float32 rounding in the forward: wider differences, looser tolerance
      return Case{[](const Tensors& x) { return (x[0] * x[0]).to(DType::Float32); }, {input({3, 4}, -1, 1, true)}, true,
                  GradcheckOptions{1e-3, 1e-3, 1e-3}};
    case OpId::Matmul:
      return Case{[](const Tensors& x) { return matmul(x[0], x[1]); },
                  {input({2, 3, 4}, -1, 1, true, 1), input({4, 5}, -1, 1, true, 2)}, true};
    case OpId::Conv2d:
      return Case{[](const Tensors& x) { return conv2d(x[0], x[1], x[2], {2, 1}, {1, 1}, {1, 1}, 2); },
                  {input({2, 4, 5, 5}, -1, 1, false, 1), input({4, 2, 3, 3}, -1, 1, false, 2), input({4}, -1, 1, false, 3)},
                  true};
    case OpId::MaxPool2d:
      return Case{[](const Tensors& x) { return max_pool2d(x[0], {2, 2}, {2, 2}); }, {input({2, 3, 4, 4}, -1, 1)}};
    case OpId::AvgPool2d:
      return Case{[](const Tensors& x) { return avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); }, {input({2, 3, 5, 5}, -1, 1)}, true};
    case OpId::Cat:
      return Case{[](const Tensors& x) { return cat({x[0], x[1]}, 1); }, {input({3, 2}, -1, 1, true), input({3, 4}, -1, 1)}, true};
    case OpId::IndexSelect:
      return Case{[](const Tensors& x) { return index_select(x[0], 0, idx({2, 0, 2})); }, {input({3, 4}, -1, 1, true)}, true};
    case OpId::Gather:
      return Case{[](const Tensors& x) { return gather(x[0], 1, idx({0, 1, 1, 0, 2, 2}, {3, 2})); }, {input({3, 4}, -1, 1)}, true};
    case OpId::IndexAdd:
      return Case{[](const Tensors& x) { return index_add(x[0], 0, idx({1, 1}), x[1]); },
                  {input({3, 4}, -1, 1), input({2, 4}, -1, 1, false, 5)}, true};
    case OpId::ScatterAdd:
      return Case{[](const Tensors& x) { return scatter_add(x[0], 1, idx({0, 0, 3, 1, 2, 2}, {3, 2}), x[1]); },
                  {input({3, 4}, -1, 1), input({3, 2}, -1, 1, false, 5)}, true};
    case OpId::Cumsum:
      return Case{[](const Tensors& x) { return dispatch1(OpId::Cumsum, {x[0]}, Attrs().set("dim", int64_t(1))); },
                  {input({3, 4}, -1, 1)}, true};
    case OpId::Cumprod:  // away from zero, where the derivative divides
      return Case{[](const Tensors& x) { return dispatch1(OpId::Cumprod, {x[0]}, Attrs().set("dim", int64_t(0))); },
                  {input({4, 3}, 0.5, 1.5)}};
    case OpId::SliceBackward:
      return Case{[](const Tensors& x) { return slice_backward(x[0], {3, 7}, 1, 1, 7, 3); }, {input({3, 2}, -1, 1)}, true};
    case OpId::AvgPool2dBackward:
      return Case{[](const Tensors& x) {
                    return dispatch1(OpId::AvgPool2dBackward, {x[0]},
                                     Attrs().set("kernel_size", Shape{2, 2}).set("stride", Shape{2, 2})
                                         .set("padding", Shape{0, 0}).set("shape", Shape{1, 2, 4, 4}));
                  },
                  {input({1, 2, 2, 2}, -1, 1)}, true};
    case OpId::Conv2dBackwardInput:
      return Case{[](const Tensors& x) {
                    return dispatch1(OpId::Conv2dBackwardInput, {x[0], x[1]},
                                     Attrs().set("stride", Shape{1, 1}).set("padding", Shape{1, 1})
                                         .set("dilation", Shape{1, 1}).set("groups", int64_t(1)).set("shape", Shape{1, 2, 4, 4}));
                  },
                  {input({1, 3, 4, 4}, -1, 1), input({3, 2, 3, 3}, -1, 1, false, 2)}};
    case OpId::Conv2dBackwardWeight:
      return Case{[](const Tensors& x) {
                    return dispatch1(OpId::Conv2dBackwardWeight, {x[0], x[1]},
                                     Attrs().set("stride", Shape{1, 1}).set("padding", Shape{1, 1})
                                         .set("dilation", Shape{1, 1}).set("groups", int64_t(1)).set("shape", Shape{3, 2, 3, 3}));
                  },
                  {input({1, 3, 4, 4}, -1, 1), input({1, 2, 4, 4}, -1, 1, false, 2)}};
    case OpId::RnnLayer:  // an LSTM over 3 steps from a given state, in reverse; tests/test_rnn.cpp has every mode
      return Case{[](const Tensors& x) {
                    return dispatch1(OpId::RnnLayer, x, Attrs().set("mode", std::string("lstm")).set("reverse", true));
                  },
                  {input({3, 2, 8}, -1, 1, false, 1), input({8, 2}, -1, 1, true, 2), input({8}, -1, 1, false, 3),
                   input({2, 2, 2}, -1, 1, false, 4)}};
    case OpId::FlashAttention:  // a bool mask broadcast over the batch; tests/test_flash_attention.cpp has the rest
      return Case{[](const Tensors& x) {
                    Tensor keep = tensor(std::vector<int64_t>{1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1}, {3, 5}).to(DType::Bool);
                    return dispatch1(OpId::FlashAttention, {x[0], x[1], x[2], x[3], keep});
                  },
                  {input({2, 3, 4}, -1, 1, false, 1), input({2, 5, 4}, -1, 1, false, 2), input({2, 5, 3}, -1, 1, true, 3),
                   input({}, 0.3, 0.6, false, 4)}};
    // not differentiable: covered by the is_differentiable check below
    // differentiable only to raise (tests/test_rnn.cpp checks the error)
    case OpId::RnnLayerBackward:
    case OpId::FlashAttentionBackward:
    case OpId::Argmax: case OpId::Argmin: case OpId::Argsort:
      return Case{};
  }
  return Case{};
}

}  // namespace

TEST_CASE("gradcheck: every differentiable op of the table") {
  static_assert(kNumOps > 0);
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = OpId(i);
    Case c = case_for(op);
    CAPTURE(op_name(op));
    if (!c.fn) {
      CHECK_FALSE((is_differentiable(op) && op != OpId::RnnLayerBackward && op != OpId::FlashAttentionBackward));
      continue;
    }
    CHECK(is_differentiable(op));
    CHECK_NOTHROW(gradcheck(c.fn, c.inputs, c.opt));
    if (c.second_order) CHECK_NOTHROW(gradgradcheck(c.fn, c.inputs, c.opt));
  }
}

TEST_CASE("gradcheck: reports the worst element") {
  // A deliberately wrong "gradient": exp's forward with relu's derivative cannot pass.
  Tensor x = tensor({0.5, 1.0, 1.5}, {}, DType::Float64).requires_grad_();
  DiffFn wrong = [](const Tensors& in) { return relu(in[0]) + exp(in[0].detach()) * 0 + in[0] * in[0].detach(); };
  kiln::test::check_error([&] { gradcheck(wrong, {x}); }, "gradcheck: input 0 (shape [3]): element");
}

TEST_CASE("gather, scatter_add and index_add rows: values and gradients equal PyTorch 1.13's") {
  for (OpId op : {OpId::Gather, OpId::ScatterAdd, OpId::IndexAdd}) {
    CAPTURE(op_name(op));
    std::optional<kiln::test::TorchCase> c = kiln::test::torch_case(op);
    REQUIRE(c);
    Tensors in;
    for (const Tensor& t : c->inputs) in.push_back(is_floating(t.dtype()) ? t.clone().requires_grad_() : t);
    Tensor y = dispatch1(op, in, c->attrs);
    REQUIRE(y.sizes() == c->shape);
    kiln::test::check_close(y, tensor(c->out, c->shape, DType::Float64));
    sum(mul(y, kiln::test::seq(c->shape, 0.4, 0.3))).backward();
    REQUIRE(c->grads.size() == in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      CAPTURE(k);
      if (c->grads[k].empty()) continue;
      kiln::test::check_close(in[k].grad(), tensor(c->grads[k], in[k].sizes(), DType::Float64));
    }
  }
}
