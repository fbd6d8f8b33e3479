// One formula per row of the op table: the switch has no default, so under -Werror=switch a new row
// does not build until it says what it costs (a copy says 0 on purpose, never by omission).
#include "eager/profiler/flops.h"

#include <algorithm>

#include "core/matmul_shape.h"
#include "core/tensor.h"

namespace kiln {
namespace {

int64_t window(const Attrs& attrs) {
  const Shape& k = attrs.ints("kernel_size");
  int64_t n = 1;
  for (int64_t d : k) n *= d;
  return n;
}

// Multiply-adds per output element of a convolution: one per weight element feeding it,
// w = [out_channels, in_channels/groups, kh, kw] (groups already divide the channels).
int64_t conv_macs_per_output(const Shape& w) { return w.at(1) * w.at(2) * w.at(3); }

}  // namespace

int64_t op_flops(OpId op, const std::vector<Shape>& in, const Attrs& attrs, const std::vector<Shape>& out) {
  switch (op) {
#define KILN_UNARY(Id, name, rule, expr) case OpId::Id:
#define KILN_BINARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
    case OpId::Where:
      return numel_of(out.at(0));
#define KILN_REDUCE(Id, name, ...) case OpId::Id:
#include "core/ops.def"
    case OpId::Argsort:
    case OpId::Cumsum:
    case OpId::Cumprod:
    case OpId::Argmax:
    case OpId::Argmin:
      return numel_of(in.at(0));
    case OpId::Reshape:
    case OpId::Permute:
    case OpId::Expand:
    case OpId::Slice:
    case OpId::Select:
    case OpId::Squeeze:
    case OpId::Unsqueeze:
    case OpId::Contiguous:
    case OpId::Clone:
    case OpId::Cast:
    case OpId::Cat:
    case OpId::IndexSelect:
    case OpId::Gather:
    case OpId::SliceBackward:
      return 0;  // data movement
    case OpId::Matmul: {
      // Every output element is a dot product over a's last dim (1-D and batched cases alike).
      int64_t k = in.at(0).empty() ? 1 : in[0].back();
      return 2 * numel_of(out.at(0)) * k;
    }
    case OpId::Conv2d:  // the bias add is not counted, as torch's conv counter
      return 2 * numel_of(out.at(0)) * conv_macs_per_output(in.at(1));
    case OpId::Conv2dBackwardInput:  // inputs grad, w: a transposed convolution of the same size
      return 2 * numel_of(in.at(0)) * conv_macs_per_output(in.at(1));
    case OpId::Conv2dBackwardWeight:  // inputs grad, x; output shaped as w
      return 2 * numel_of(in.at(0)) * (numel_of(out.at(0)) / out[0].at(0));
    case OpId::MaxPool2d:
    case OpId::AvgPool2d:
      return numel_of(out.at(0)) * window(attrs);
    case OpId::AvgPool2dBackward:
      return numel_of(in.at(0)) * window(attrs);
    case OpId::IndexAdd:
    case OpId::ScatterAdd:
      return numel_of(in.at(2));
    case OpId::RnnLayer:  // per step h·W_hh^T, [N,H] by [H,G*H]; the gate arithmetic is not counted
      return 2 * numel_of(in.at(0)) * in.at(1).at(1);
    case OpId::FlashAttention: {  // q·k and p·v over every (query, key) pair; a causal mask halves them
      const Shape &q = in.at(0), &v = in.at(2);
      const int64_t pairs = numel_of(Shape(q.begin(), q.end() - 1)) * in.at(1).at(in[1].size() - 2);
      return 2 * pairs * (q.back() + v.back()) / (attrs.b_or("causal", false) ? 2 : 1);
    }
    case OpId::FlashAttentionBackward: {  // the scores again, then dp, dv, dk, dq: five products
      const Shape &q = in.at(4), &v = in.at(6);
      const int64_t pairs = numel_of(Shape(q.begin(), q.end() - 1)) * in.at(5).at(in[5].size() - 2);
      return 2 * pairs * (3 * q.back() + 2 * v.back()) / (attrs.b_or("causal", false) ? 2 : 1);
    }
    case OpId::RnnLayerBackward:  // the gradients of h and of W_hh, and the forward again unless its steps were kept
      return (numel_of(in.at(2)) > 0 ? 2 : 3) * 2 * numel_of(in.at(3)) * in.at(4).at(1);
  }
  return 0;  // unreachable: every OpId has a case above
}

int64_t op_flops(OpId op, const Tensors& in, const Attrs& attrs, const Tensors& out) {
  auto shapes = [](const Tensors& ts) {
    std::vector<Shape> s;
    s.reserve(ts.size());
    for (const Tensor& t : ts) s.push_back(t.defined() ? t.sizes() : Shape{});
    return s;
  };
  return op_flops(op, shapes(in), attrs, shapes(out));
}

namespace {

// shape(i): input i's shape, read only for the ops that have a formula here (no copies for the others).
template <class ShapeOf>
int64_t gemm_flops_impl(OpId op, size_t n, const ShapeOf& shape, const Attrs& attrs) {
  auto pair = [&](const char* name, size_t i, int64_t dflt) {
    return attrs.has(name) && attrs.ints(name).size() == 2 ? attrs.ints(name)[i] : dflt;
  };
  switch (op) {
    case OpId::Matmul:
      return n == 2 ? op_flops(op, {shape(0), shape(1)}, attrs, {matmul_shape(shape(0), shape(1))}) : 0;
    case OpId::Conv2d: {  // x [N,C,H,W], w [O,C/g,kh,kw]
      if (n < 2 || shape(0).size() != 4 || shape(1).size() != 4) return 0;
      const Shape &x = shape(0), &w = shape(1);
      Shape out{x[0], w[0]};
      for (size_t i = 0; i < 2; ++i)
        out.push_back(std::max<int64_t>(
            0, window_out(x[2 + i], w[2 + i], pair("stride", i, 1), pair("padding", i, 0), pair("dilation", i, 1))));
      return op_flops(op, {x, w}, attrs, {out});
    }
    case OpId::Conv2dBackwardInput:  // grad [N,O,OH,OW], w
      return n == 2 && shape(1).size() == 4 ? op_flops(op, {shape(0), shape(1)}, attrs, {}) : 0;
    case OpId::Conv2dBackwardWeight:  // grad, x; attr shape is w's
      return n == 2 && attrs.has("shape") && attrs.ints("shape").size() == 4
                 ? op_flops(op, {shape(0), shape(1)}, attrs, {attrs.ints("shape")})
                 : 0;
    default:
      return -1;
  }
}

}  // namespace

int64_t gemm_flops_before_run(OpId op, const std::vector<Shape>& in, const Attrs& attrs) {
  return gemm_flops_impl(op, in.size(), [&](size_t i) -> const Shape& { return in[i]; }, attrs);
}

int64_t gemm_flops_before_run(OpId op, const Tensors& in, const Attrs& attrs) {
  static const Shape none;
  return gemm_flops_impl(op, in.size(), [&](size_t i) -> const Shape& { return in[i].defined() ? in[i].sizes() : none; }, attrs);
}

}  // namespace kiln
