// Derivative formulas, micrograd-style: for each op, the gradient of every input from the output
// gradient g, written with kiln ops. Broadcasting is undone by the engine (sum_to), not here.
#include "eager/autograd/derivatives.h"

#include <algorithm>
#include <cmath>

#include "core/trace_hooks.h"
#include "eager/builder.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace kiln {
namespace {

// A reduction's dims; absent means all, as in the kernels.
Shape reduce_dims(const Attrs& attrs) { return attrs.has("dims") ? attrs.ints("dims") : Shape{}; }

// g of a reduction over `dims` (without keepdim) brought back to the input's rank, then broadcast.
Tensor unreduce(const Tensor& g, const Shape& in_shape, const Attrs& attrs) {
  const Shape dims = reduce_dims(attrs);
  bool keepdim = attrs.b_or("keepdim", false);
  int64_t nd = int64_t(in_shape.size());
  if (keepdim || nd == 0) return g.expand(in_shape);
  std::vector<int64_t> ds;
  if (dims.empty()) {
    for (int64_t i = 0; i < nd; ++i) ds.push_back(i);
  } else {
    for (int64_t d : dims) ds.push_back(wrap_dim("sum", d, nd));
  }
  std::sort(ds.begin(), ds.end());
  Tensor r = g;
  for (int64_t d : ds) r = r.unsqueeze(d);
  return r.expand(in_shape);
}

// The conv2d family is bilinear, so each gradient is another member of the family.
// conv_transpose2d (conv2d_backward_input with no "shape") carries output_padding, which only it reads.
Tensor conv_family(OpId op, const Tensor& a, const Tensor& b, Attrs attrs, const Shape& shape) {
  attrs = attrs.without("output_padding");
  if (op != OpId::Conv2d) attrs.set("shape", shape);
  else attrs = attrs.without("shape");
  return dispatch1(op, {a, b}, attrs);
}

// max_pool2d's gradient: g scattered to the positions of the forward's saved indices (each window's
// first maximum, as torch), over the input's shape; no second pool.
Tensor max_pool2d_grad(const Tensor& g, const Tensor& x, const Tensor& idx) {
  Shape lead(x.sizes().begin(), x.sizes().end() - 2);
  Shape flat = lead, per = lead;
  flat.push_back(x.size(-2) * x.size(-1));
  per.push_back(-1);
  Tensor z = zeros(flat, {g.dtype(), g.device()});
  return scatter_add(z, -1, idx.reshape(per), g.reshape(per)).reshape(x.sizes());
}

// A 2-D tensor laid out as the transpose of a contiguous one.
bool column_major(const Tensor& t) {
  return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 && t.stride(1) == t.size(0);
}

// A float mask's gradient is the scores' gradient, P (dP - delta): the one case that builds the [..., L, S]
// probabilities, from the saved log-sum-exp, since the mask is as large.
Tensor flash_attention_mask_grad(const Tensors& in, const Attrs& attrs, const Tensor& g, const Tensor& glse,
                                 const Tensor& out, const Tensor& lse) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  Tensor s = matmul(q, k.transpose(-2, -1)) * in[3] + in[4];
  if (attrs.b_or("causal", false)) s = where(EagerBuilder().causal_mask(q, k), s, Scalar(-INFINITY));
  Tensor p = exp(s - lse.unsqueeze(-1));
  Tensor delta = sum(g * out, {-1}, true);
  if (glse.defined()) delta = delta - glse.unsqueeze(-1);
  return p * (matmul(g, v.transpose(-2, -1)) - delta);
}

}  // namespace

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  int64_t lead = g.dim() - int64_t(shape.size());
  if (lead < 0) fail("sum_to: gradient of shape {} cannot be summed to the larger shape {}", shape_str(g.sizes()), shape_str(shape));
  Shape dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && g.sizes()[size_t(lead) + i] != 1) dims.push_back(lead + int64_t(i));
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  if (lead > 0 || r.sizes() != shape) r = r.reshape(shape);
  return r;
}

bool is_differentiable(OpId op) { return op_facts(op).differentiable; }

bool derivative_reads_input(OpId op, size_t i) { return op_facts(op).derivative_reads(i); }

Tensors derivative(OpId op, const Attrs& attrs, const Tensors& in, const Tensors& grads,
                   const std::vector<bool>& needs, const Tensors& outs) {
  const Tensor& g = grads.at(0);
  const Tensor& x = in.at(0);
  static const Tensor kNone;
  [[maybe_unused]] const Tensor& y = outs.empty() ? kNone : outs[0];
  Tensors r(in.size());
  auto need = [&](size_t i) { return i < needs.size() && needs[i]; };
  switch (op) {
    // ---- elementwise: core/op_facts.def ----
#define KILN_GRAD(Id, dx) \
  case OpId::Id:          \
    r[0] = dx;            \
    break;
#define KILN_GRAD2(Id, da, db)                \
  case OpId::Id: {                            \
    [[maybe_unused]] const Tensor& a = in[0]; \
    [[maybe_unused]] const Tensor& b = in[1]; \
    if (need(0)) r[0] = da;                   \
    if (need(1)) r[1] = db;                   \
    break;                                    \
  }
#include "core/op_facts.def"
    case OpId::Pow: {
      const Tensor& e = in[1];
      if (need(0)) r[0] = where(e == 0, zeros_like(g), g * e * pow(x, e - 1));
      if (need(1)) r[1] = where(logical_and(x == 0, e >= 0), zeros_like(g), g * pow(x, e) * log(x));
      break;
    }
    case OpId::Maximum:
    case OpId::Minimum: {
      const Tensor& b = in[1];
      Tensor wins = op == OpId::Maximum ? x > b : x < b;
      Tensor half = g * (x == b) * 0.5;
      if (need(0)) r[0] = g * wins + half;
      if (need(1)) r[1] = g * logical_not(logical_or(wins, x == b)) + half;
      break;
    }
    // ---- reductions ----
    case OpId::Sum: r[0] = unreduce(g, x.sizes(), attrs); break;
    case OpId::Prod: {
      // d prod / d x_i = product of the others: p / x_i without zeros; with one zero in a slice only
      // that element gets the product of the rest; with two or more, everything is 0.
      const Shape dims = reduce_dims(attrs);
      Tensor zero = x == 0;
      Tensor zeros_in_slice = sum(zero, dims, true).expand(x.sizes());
      Tensor p = prod(x, dims, true).expand(x.sizes());
      Tensor p_others = prod(where(zero, ones_like(x), x), dims, true).expand(x.sizes());
      Tensor d = where(zeros_in_slice == 0, p / where(zero, ones_like(x), x),
                       where(logical_and(zeros_in_slice == 1, zero), p_others, zeros_like(x)));
      r[0] = unreduce(g, x.sizes(), attrs) * d;
      break;
    }
    case OpId::Amax:
    case OpId::Amin: {
      Tensor m = op == OpId::Amax ? amax(x, reduce_dims(attrs), true) : amin(x, reduce_dims(attrs), true);
      Tensor mask = (x == m).to(g.dtype());
      Tensor count = sum(mask, reduce_dims(attrs), true);
      r[0] = unreduce(g, x.sizes(), attrs) * mask / count;
      break;
    }
    case OpId::Where:
      if (need(1)) r[1] = where(x, g, zeros_like(g));
      if (need(2)) r[2] = where(x, zeros_like(g), g);
      break;
    // ---- views ----
    case OpId::Reshape: case OpId::Squeeze: case OpId::Unsqueeze: r[0] = g.reshape(x.sizes()); break;
    case OpId::Permute: {
      const Shape& dims = attrs.ints("dims");
      Shape inv(dims.size());
      for (size_t i = 0; i < dims.size(); ++i) inv[size_t(wrap_dim("permute", dims[i], x.dim()))] = int64_t(i);
      r[0] = g.permute(inv);
      break;
    }
    case OpId::Expand: case OpId::Contiguous: case OpId::Clone: r[0] = g; break;
    case OpId::Cast: r[0] = g.to(x.dtype()); break;
    case OpId::Slice: {
      int64_t size = x.size(attrs.i("dim"));
      r[0] = slice_backward(g, x.sizes(), attrs.i("dim"), attrs.i_or("start", 0), attrs.i_or("end", size),
                            attrs.i_or("step", 1));
      break;
    }
    case OpId::Select: {
      int64_t d = wrap_dim("select", attrs.i("dim"), x.dim());
      int64_t i = attrs.i("index");
      if (i < 0) i += x.size(d);
      r[0] = slice_backward(g.unsqueeze(d), x.sizes(), d, i, i + 1, 1);
      break;
    }
    // ---- linear algebra and nn ----
    case OpId::Matmul: {
      const Tensor& b = in[1];
      if (x.dim() == 1 && b.dim() == 1) {
        if (need(0)) r[0] = g * b;
        if (need(1)) r[1] = g * x;
        break;
      }
      Tensor A = x.dim() == 1 ? x.unsqueeze(0) : x;
      Tensor B = b.dim() == 1 ? b.unsqueeze(-1) : b;
      Tensor G = g;
      if (x.dim() == 1) G = G.unsqueeze(-2);
      if (b.dim() == 1) G = G.unsqueeze(-1);
      // As torch's mm_mat1/mat2_backward: a 2-D operand stored transposed (a Linear's weight.t()) gets its
      // gradient computed transposed, so the permute's backward hands the weight a contiguous gradient
      // instead of a strided one that .grad would copy (a third of the step for an MLP layer).
      if (need(0))
        r[0] = column_major(x) && b.dim() == 2 ? matmul(b, g.transpose(0, 1)).transpose(0, 1)
                                               : sum_to(matmul(G, B.transpose(-1, -2)), A.sizes()).reshape(x.sizes());
      // A 2-D weight under a batch of rows (a Linear on [B, T, C]): the rows flattened make its gradient
      // one GEMM over all of them, not a batched GEMM per leading index summed after.
      Tensor rows = x, grows = g;
      if (x.dim() > 2 && b.dim() == 2) {
        rows = x.reshape({-1, x.size(-1)});
        grows = g.reshape({-1, g.size(-1)});
      }
      if (need(1))
        r[1] = column_major(b) && rows.dim() == 2 ? matmul(grows.transpose(0, 1), rows).transpose(0, 1)
               : rows.dim() == 2 && b.dim() == 2  ? matmul(rows.transpose(0, 1), grows)
                                                  : sum_to(matmul(A.transpose(-1, -2), G), B.sizes()).reshape(b.sizes());
      break;
    }
    case OpId::Conv2d:
      if (need(0)) r[0] = conv_family(OpId::Conv2dBackwardInput, g, in[1], attrs, x.sizes());
      if (need(1)) r[1] = conv_family(OpId::Conv2dBackwardWeight, g, x, attrs, in[1].sizes());
      if (in.size() > 2 && need(2)) r[2] = sum(g, {0, 2, 3});
      break;
    case OpId::Conv2dBackwardInput:  // inputs (grad_out, w) → grad_x
      if (need(0)) r[0] = conv_family(OpId::Conv2d, g, in[1], attrs, {});
      if (need(1)) r[1] = conv_family(OpId::Conv2dBackwardWeight, x, g, attrs, in[1].sizes());
      break;
    case OpId::Conv2dBackwardWeight:  // inputs (grad_out, x) → grad_w
      if (need(0)) r[0] = conv_family(OpId::Conv2d, in[1], g, attrs, {});
      if (need(1)) r[1] = conv_family(OpId::Conv2dBackwardInput, x, g, attrs, in[1].sizes());
      break;
    case OpId::MaxPool2d: r[0] = max_pool2d_grad(g, x, outs.at(1)); break;
    case OpId::RnnLayer: {  // inputs x_proj, w_hh[, b_hh][, state0][, lengths]; the backward row gives all four
      Tensors args{g, outs.at(0), outs.at(1)};  // gradients (the integer lengths take none)
      args.insert(args.end(), in.begin(), in.end());
      Tensors d = dispatch(OpId::RnnLayerBackward, args, attrs);
      size_t k = 0;
      r[k++] = d[0];
      r[k++] = d[1];
      if (attrs.b_or("bias", true)) r[k++] = d[2];
      if (k + (attrs.b_or("lengths", false) ? 1 : 0) < in.size()) r[k] = d[3];
      break;
    }
    case OpId::FlashAttention: {  // inputs q, k, v, scale[, mask]; the backward row gives q's, k's and v's
      const Tensor& out = outs.at(0);
      const Tensor glse = grads.size() > 1 ? grads[1] : Tensor();
      const Tensor go = g.defined() ? g : zeros_like(out);
      Tensors args{go, glse.defined() ? glse : Tensor::empty({0}, out.dtype(), out.device()), out, outs.at(1)};
      args.insert(args.end(), in.begin(), in.end());
      Tensors d = dispatch(OpId::FlashAttentionBackward, args, attrs);
      for (size_t i = 0; i < 3; ++i)
        if (need(i)) r[i] = d[i];
      // dq is scale * sum_j dscore_ij k_j, so d(loss)/d(scale) = sum_ij dscore_ij (q_i . k_j) = sum(q * dq) / scale
      if (need(3)) r[3] = (sum(in[0] * d[0]) / in[3]).reshape(in[3].sizes());
      if (in.size() > 4 && need(4)) r[4] = flash_attention_mask_grad(in, attrs, go, glse, out, outs.at(1));
      break;
    }
    case OpId::FlashAttentionBackward:  // recorded under create_graph=True; reached only by a second backward
      fail("flash_attention_backward: double backward through the fused attention is not supported (a gradient of a "
           "gradient through scaled_dot_product_attention)");
    case OpId::RnnLayerBackward:  // recorded under create_graph=True; reached only by a second backward
      fail("rnn_layer_backward: double backward through a recurrent layer is not supported (a gradient of a gradient "
           "through LSTM, GRU or RNN)");
    case OpId::AvgPool2d: {
      Attrs a = attrs;
      r[0] = dispatch1(OpId::AvgPool2dBackward, {g}, a.set("shape", x.sizes()));
      break;
    }
    case OpId::Cat: {
      int64_t d = attrs.i("dim");
      int64_t start = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].dim() == 1 && in[i].size(0) == 0 && g.dim() != 1) continue;  // legacy empty input
        int64_t dd = wrap_dim("cat", d, g.dim());
        int64_t len = in[i].size(dd);
        if (need(i)) r[i] = g.slice(dd, start, start + len);
        start += len;
      }
      break;
    }
    // a reversed running sum along dim: the total minus the running sum before each element
    case OpId::Cumsum: {
      const int64_t d = attrs.i("dim");
      r[0] = sum(g, {d}, true) - dispatch1(OpId::Cumsum, {g}, attrs) + g;
      break;
    }
    // d y_j / d x_i = y_j / x_i for j >= i: the reversed running sum of g * y, over x. Where the input has
    // zeros torch's rule instead: the quotient where no zero comes at or before i; at a slice's first zero
    // the reversed running sum of g times the running product with that zero taken as one; after it 0, as
    // every product holds the zero. Eager reads which applies (the division is the common case); a recorded
    // backward (compile()'s, from a sample) keeps torch's rule, which holds for any input it meets later. The
    // rule reads where the zeros are from y (0 from the first zero on, as the quotient's y is), by cheap ops
    // a compiled backward recomputes from the x and y it keeps, rather than a running count of its own to keep.
    case OpId::Cumprod: {
      const int64_t d = attrs.i("dim");
      auto rev_cumsum = [&](const Tensor& t) { return sum(t, {d}, true) - dispatch1(OpId::Cumsum, {t}, attrs) + t; };
      Tensor yx = dispatch1(OpId::Cumprod, {x}, attrs);
      Tensor gy = g * yx;
      Tensor zero = x == 0.0;
      if (!trace_hooks() && !amax(zero.to(DType::Int64)).item<int64_t>()) {
        r[0] = rev_cumsum(gy) / x;
        break;
      }
      Tensor before = yx != 0.0;
      // a zero with no zero before it: y one step back (1 at a slice's start) is not 0
      const int64_t n = x.dim() == 0 ? 1 : x.size(d);
      // (casts, not comparisons: a compiled backward keeps what it compares, so as not to recompute it differently)
      Tensor seen = logical_not(before).to(x.dtype());
      Tensor seen_before = n <= 1 ? zeros_like(seen) : slice_backward(seen.slice(d, 0, n - 1), seen.sizes(), d, 1, n, 1);
      Tensor first = logical_and(zero, logical_not(seen_before.to(DType::Bool)));
      Tensor at_first = rev_cumsum(g * dispatch1(OpId::Cumprod, {where(first, 1.0, x)}, attrs));
      r[0] = where(before, rev_cumsum(gy) / where(zero, 1.0, x), where(first, at_first, 0.0));
      break;
    }
    case OpId::IndexSelect:
      r[0] = index_add(zeros_like(x).to(g.dtype()), attrs.i("dim"), in[1], g);
      break;
    case OpId::Gather:
      r[0] = scatter_add(zeros_like(x).to(g.dtype()), attrs.i("dim"), in[1], g);
      break;
    case OpId::IndexAdd:
      if (need(0)) r[0] = g;
      if (need(2)) r[2] = index_select(g, attrs.i("dim"), in[1]);
      break;
    case OpId::ScatterAdd:
      if (need(0)) r[0] = g;
      if (need(2)) r[2] = gather(g, attrs.i("dim"), in[1]);
      break;
    case OpId::SliceBackward:
      r[0] = g.slice(attrs.i("dim"), attrs.i("start"), attrs.i("end"), attrs.i("step"));
      break;
    case OpId::AvgPool2dBackward:
      r[0] = dispatch1(OpId::AvgPool2d, {g}, attrs.without("shape"));
      break;
    // ---- not differentiable ----
    case OpId::Sign: case OpId::LogicalNot: case OpId::Eq: case OpId::Ne: case OpId::Lt: case OpId::Le:
    case OpId::Gt: case OpId::Ge: case OpId::LogicalAnd: case OpId::LogicalOr: case OpId::Argmax:
    case OpId::Argmin: case OpId::Argsort:
      break;
  }
  return r;
}

}  // namespace kiln
