// The gradients of conv2d and avg_pool2d, as kernels of their own ops (see core/ops.def):
//   conv2d_backward_input:  per sample and group, col = W_g^T · grad_g, then col2im onto the input (also
//                           conv_transpose2d's forward, the output's shape then worked out here);
//   conv2d_backward_weight: per sample and group, grad_w_g += grad_g · im2col(x)_g^T;
//   avg_pool2d_backward:    each output gradient spread evenly over its window, by the forward's divisor;
// and conv2d_backward (conv_backward.h), any of conv2d's three gradients from one pass over grad.
// Attrs are parsed by the same helpers as the forward kernels (eager/cpu/im2col.h).
#include "eager/cpu/conv_backward.h"

#include <algorithm>
#include <vector>


#include "eager/cpu/conv_one_pixel.h"
#include "eager/cpu/conv_onednn.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/im2col.h"
#include "eager/cpu/strided_loop.h"
#include "eager/cpu/views.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

using im2col::ConvGeom;
using im2col::dense;

// A 3-D [C,H,W] tensor seen as [1,C,H,W], made here rather than through dispatch.
Tensor batched(const Tensor& t) {
  if (t.dim() == 4) return t;
  return make_view(t, {1, t.size(0), t.size(1), t.size(2)}, {0, t.stride(0), t.stride(1), t.stride(2)},
                   t.storage_offset());
}

Shape batched(const Shape& s) {
  if (s.size() == 4) return s;
  return {1, s[0], s[1], s[2]};
}

void check_float(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  if (a.dtype() != b.dtype())
    fail("{}: {} dtype {} and {} dtype {} differ", op, a_name, dtype_name(a.dtype()), b_name, dtype_name(b.dtype()));
  if (a.dtype() != DType::Float32 && a.dtype() != DType::Float64)
    fail("{}: dtype {} is not supported", op, dtype_name(a.dtype()));
}

void check_grad_shape(const char* op, const Tensor& grad, const ConvGeom& g, bool unbatched) {
  Shape want = unbatched ? Shape{g.O, g.OH, g.OW} : Shape{g.N, g.O, g.OH, g.OW};
  if (grad.sizes() != want)
    fail("{}: expected grad_output of shape {} (conv2d's output), got {}", op, shape_str(want),
         shape_str(grad.sizes()));
}

// The gradient [N,O,OH,OW] of a chunk of samples as [O, nb*ohw] (the layout its one GEMM reads):
// the gradient itself for one sample, else gathered into scratch.
template <class T>
const T* grad_chunk(const T* G, const ConvGeom& g, int64_t n0, int64_t nb, T* scratch) {
  if (nb == 1) return G + n0 * g.O * g.ohw();
  im2col::to_channel_major(G + n0 * g.O * g.ohw(), g, nb, scratch);
  return scratch;
}

// What one pass over a chunked gradient computes: any of dX (needs W), dW (needs X) and db, each null
// when not wanted. Per chunk of samples the gradient is gathered to [O, nb*ohw] once for all three;
// dX is col = W_g^T . grad_g folded back onto the input planes, dW accumulates grad_g . im2col(x)_g^T
// (the column scratch is shared: dX's fold is done with it before x is unfolded into it), and db sums
// the gathered rows in double, as the sum kernel does.
// A row summed in double with eight independent partial sums, which the compiler keeps in vector
// registers (one running sum would be a chain of dependent adds).
template <class T>
double row_sum(const T* p, int64_t n) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += double(p[i + j]);
  for (; i < n; ++i) acc[0] += double(p[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <class T>
struct ConvBackwardArgs {
  const T* G;
  const T* W = nullptr;  // for dX
  const T* X = nullptr;  // for dW
  T* dX = nullptr;
  T* dW = nullptr;
  T* dB = nullptr;
};

template <class T>
void conv_backward(const ConvBackwardArgs<T>& a, const ConvGeom& g) {
  int64_t ohw = g.ohw(), K = g.K(), Og = g.O / g.groups, chw = g.C * g.H * g.W;
  if (a.dW) std::fill(a.dW, a.dW + g.O * K, T(0));
  std::vector<double> bias_acc(a.dB ? size_t(g.O) : 0, 0.0);
  bool gemms = Og > 0 && K > 0;
  if (a.dX && !gemms) std::fill(a.dX, a.dX + g.N * chw, T(0));
  // A 1x1, stride-1, unpadded conv reads each sample as its own column matrix for dW, so it goes a
  // sample at a time; otherwise a chunk of samples is unfolded and each group is one GEMM over all of them.
  bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  bool need_col = gemms && (a.dX || (a.dW && !pointwise));
  int64_t chunk = pointwise && a.dW ? 1 : im2col::chunk_samples(g, sizeof(T));
  Tensor col_holder, g_holder;
  T* col = need_col ? im2col::scratch<T>(col_holder, g.C * g.kh * g.kw * chunk * ohw) : nullptr;
  T* gs = chunk > 1 ? im2col::scratch<T>(g_holder, g.O * chunk * ohw) : nullptr;
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    int64_t nb = std::min(chunk, g.N - n0), ld = nb * ohw;
    const T* Gc = grad_chunk(a.G, g, n0, nb, gs);
    if (a.dB)
      for (int64_t o = 0; o < g.O; ++o) bias_acc[size_t(o)] += row_sum(Gc + o * ld, ld);
    if (!gemms) continue;
    if (a.dX) {
      for (int64_t grp = 0; grp < g.groups; ++grp)
        im2col::gemm(true, false, a.W + grp * Og * K, Gc + grp * Og * ld, col + grp * K * ld, K, ld, Og, K, ld, ld);
      im2col::fold(col, g, n0, nb, a.dX);
    }
    if (a.dW) {
      if (!pointwise) im2col::unfold(a.X, g, n0, nb, col);
      const T* C = pointwise ? a.X + n0 * chw : col;
      for (int64_t grp = 0; grp < g.groups; ++grp)
        im2col::gemm(false, true, Gc + grp * Og * ld, C + grp * K * ld, a.dW + grp * Og * K, Og, K, ld, ld, ld, K,
                     /*accumulate=*/true);
    }
  }
  for (int64_t o = 0; o < (a.dB ? g.O : 0); ++o) a.dB[o] = T(bias_acc[size_t(o)]);
}

template <class T>
void backward_input(const Tensor& grad, const Tensor& w, const Tensor& out, const ConvGeom& g) {
  ConvBackwardArgs<T> a{static_cast<const T*>(grad.raw_data())};
  a.W = static_cast<const T*>(w.raw_data());
  a.dX = static_cast<T*>(out.raw_data());
  conv_backward(a, g);
}

template <class T>
void backward_weight(const Tensor& grad, const Tensor& x, const Tensor& out, const ConvGeom& g) {
  ConvBackwardArgs<T> a{static_cast<const T*>(grad.raw_data())};
  a.X = static_cast<const T*>(x.raw_data());
  a.dW = static_cast<T*>(out.raw_data());
  conv_backward(a, g);
}

template <class T>
void avg_pool_backward(const T* gy, T* gx, const im2col::PoolGeom& g) {
#pragma omp parallel for if (g.planes * g.OH * g.OW * g.kh * g.kw > kParallelGrain && g.planes > 1)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    T* in = gx + pl * g.H * g.W;
    std::fill(in, in + g.H * g.W, T(0));
    const T* out = gy + pl * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        im2col::AvgWindow w = im2col::avg_window(g, oh, ow);
        T v = T(double(out[oh * g.OW + ow]) * w.inv);
        for (int64_t ih = w.h0; ih < w.h1; ++ih)
          for (int64_t iw = w.w0; iw < w.w1; ++iw) in[ih * g.W + iw] += v;
      }
  }
}

}  // namespace

// With no "shape" attr the row is conv_transpose2d (eager/composites.h): the output's shape from its input's,
// torch's rule, with torch's checks.
static Shape transposed_shape(const char* op, const Tensor& x, const Tensor& w, const Attrs& attrs) {
  if (x.dim() != 3 && x.dim() != 4)
    fail("{}: Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input of size: {}", op,
         shape_str(x.sizes()));
  if (w.dim() != 4)
    fail("{}: expected a 4-D weight [in_channels,out_channels/groups,kh,kw], got shape {}", op, shape_str(w.sizes()));
  const Shape &s = im2col::pair_attr(op, attrs, "stride"), &p = im2col::pair_attr(op, attrs, "padding"),
              &d = im2col::pair_attr(op, attrs, "dilation");
  Shape o = attrs.has("output_padding") ? im2col::pair_attr(op, attrs, "output_padding") : Shape{0, 0};
  int64_t groups = attrs.i_or("groups", 1);
  if (groups <= 0) fail("{}: groups must be positive, got {}", op, groups);
  // output_padding below the dilation but not the stride (torch allows it) adds rows no convolution maps
  // back onto: kiln's kernels do not make them
  for (size_t i = 0; i < 2; ++i)
    if (o[i] < 0 || (o[i] >= s[i] && o[i] >= d[i]))
      fail("{}: output padding must be smaller than either stride or dilation, but got output_padding {} stride {} "
           "dilation {}", op, shape_str(o), shape_str(s), shape_str(d));
    else if (o[i] >= s[i])
      fail("{}: output_padding {} not smaller than stride {} is not supported", op, shape_str(o), shape_str(s));
  if (x.size(-3) != w.size(0))
    fail("{}: Given transposed=1, weight of size {}, expected input{} to have {} channels, but got {} channels instead", op,
         shape_str(w.sizes()), shape_str(x.sizes()), w.size(0), x.size(-3));
  if (w.size(0) % groups != 0)
    fail("{}: weight of size {} has {} input channels, not divisible by groups {}", op, shape_str(w.sizes()), w.size(0), groups);
  Shape out = x.sizes();
  out[out.size() - 3] = w.size(1) * groups;
  for (size_t i = 0; i < 2; ++i)
    out[out.size() - 2 + i] = transposed_window_out(x.size(int64_t(i) - 2), w.size(int64_t(i) + 2), s[i], p[i], d[i], o[i]);
  if (out[out.size() - 2] < 1 || out[out.size() - 1] < 1)
    fail("{}: Given input size per channel: ({} x {}). Calculated output size per channel: ({} x {}). Output size is too small",
         op, x.size(-2), x.size(-1), out[out.size() - 2], out[out.size() - 1]);
  return out;
}

Tensors kernel_conv2d_backward_input(OpId id, const Tensors& in, const Attrs& attrs) {
  if (all_half(in)) {
    // bf16 through oneDNN's bf16 conv where this CPU has one (conv2d's gradient, not conv_transpose2d).
    if (in.size() == 2 && attrs.has("shape") && in[0].dim() == 4 && in[1].dim() == 4) {
      std::optional<ConvGrads> r =
          onednn_conv2d_backward(in[0], Tensor(), in[1], attrs.ints("shape"), in[1].sizes(), attrs, true, false, false);
      if (r) return {r->input};
    }
    return run_in_float32(kernel_conv2d_backward_input, id, in, attrs);
  }
  const bool transposed = !attrs.has("shape");
  const char* op = transposed ? "conv_transpose2d" : "conv2d_backward_input";
  if (in.size() != 2) fail("{}: expected 2 inputs (grad_output, weight), got {}", op, in.size());
  const Tensor &grad = in[0], &w = in[1];
  const Shape shape = transposed ? transposed_shape(op, grad, w, attrs) : attrs.ints("shape");
  if (shape.size() != 3 && shape.size() != 4)
    fail("{}: expected a 3-D [C,H,W] or 4-D [N,C,H,W] input shape, got {}", op, shape_str(shape));
  if (grad.dim() != int64_t(shape.size()))
    fail("{}: grad_output of shape {} does not match the {}-D input shape {}", op, shape_str(grad.sizes()),
         shape.size(), shape_str(shape));
  if (w.dim() != 4)
    fail("{}: expected a 4-D weight [out_channels,in_channels/groups,kh,kw], got shape {}", op, shape_str(w.sizes()));
  check_float(op, grad, "grad_output", w, "weight");
  bool unbatched = shape.size() == 3;
  ConvGeom g = im2col::conv_geometry(op, batched(shape), w.sizes(), attrs, shape);
  check_grad_shape(op, grad, g, unbatched);
  if (!unbatched) {
    std::optional<ConvGrads> r = one_pixel_conv2d_backward(grad, Tensor(), w, shape, w.sizes(), attrs, true, false, false);
    if (!r) r = onednn_conv2d_backward(grad, Tensor(), w, shape, w.sizes(), attrs, true, false, false);
    if (r) return {r->input};
  }
  Tensor out = Tensor::empty(batched(shape), grad.dtype());
  if (out.numel() > 0) {
    Tensor gc = dense(batched(grad)), wc = dense(w);
    if (grad.dtype() == DType::Float32) backward_input<float>(gc, wc, out, g);
    else backward_input<double>(gc, wc, out, g);
  }
  if (unbatched) return {make_view(out, shape, {g.H * g.W, g.W, 1}, 0)};
  return {out};
}

Tensors kernel_conv2d_backward_weight(OpId id, const Tensors& in, const Attrs& attrs) {
  if (all_half(in)) {
    if (in.size() == 2 && in[0].dim() == 4 && in[1].dim() == 4 && attrs.ints("shape").size() == 4) {
      std::optional<ConvGrads> r =
          onednn_conv2d_backward(in[0], in[1], Tensor(), in[1].sizes(), attrs.ints("shape"), attrs, false, true, false);
      if (r) return {r->weight};
    }
    return run_in_float32(kernel_conv2d_backward_weight, id, in, attrs);
  }
  const char* op = "conv2d_backward_weight";
  if (in.size() != 2) fail("{}: expected 2 inputs (grad_output, input), got {}", op, in.size());
  const Tensor &grad = in[0], &x = in[1];
  const Shape& shape = attrs.ints("shape");
  if (shape.size() != 4)
    fail("{}: expected a 4-D weight shape [out_channels,in_channels/groups,kh,kw], got {}", op, shape_str(shape));
  if (x.dim() != 3 && x.dim() != 4)
    fail("{}: expected a 3-D [C,H,W] or 4-D [N,C,H,W] input, got shape {}", op, shape_str(x.sizes()));
  if (grad.dim() != x.dim())
    fail("{}: grad_output of shape {} does not match the input of shape {}", op, shape_str(grad.sizes()),
         shape_str(x.sizes()));
  check_float(op, grad, "grad_output", x, "input");
  bool unbatched = x.dim() == 3;
  ConvGeom g = im2col::conv_geometry(op, batched(x.sizes()), shape, attrs, x.sizes());
  check_grad_shape(op, grad, g, unbatched);
  if (!unbatched) {
    std::optional<ConvGrads> r = one_pixel_conv2d_backward(grad, x, Tensor(), x.sizes(), shape, attrs, false, true, false);
    if (!r) r = onednn_conv2d_backward(grad, x, Tensor(), x.sizes(), shape, attrs, false, true, false);
    if (r) return {r->weight};
  }
  Tensor out = Tensor::empty(shape, grad.dtype());
  if (out.numel() > 0) {
    Tensor gc = dense(batched(grad)), xc = dense(batched(x));
    if (grad.dtype() == DType::Float32) backward_weight<float>(gc, xc, out, g);
    else backward_weight<double>(gc, xc, out, g);
  }
  return {out};
}

std::optional<ConvGrads> conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& w, const Shape& input_shape,
                                         const Shape& weight_shape, const Attrs& attrs, bool need_input,
                                         bool need_weight, bool need_bias) {
  const char* op = "conv2d_backward";
  DType dt = grad.dtype();
  if (dt != DType::Float32 && dt != DType::Float64) return std::nullopt;
  if (!grad.device().is_cpu() || input_shape.size() != 4 || weight_shape.size() != 4 || grad.dim() != 4)
    return std::nullopt;
  for (const Tensor* t : {need_weight ? &x : nullptr, need_input ? &w : nullptr})
    if (t && (!t->defined() || t->dtype() != dt || !t->device().is_cpu())) return std::nullopt;
  if (need_weight && x.sizes() != input_shape) return std::nullopt;
  if (need_input && w.sizes() != weight_shape) return std::nullopt;
  ConvGeom g = im2col::conv_geometry(op, input_shape, weight_shape, attrs, input_shape);
  check_grad_shape(op, grad, g, false);
  if (grad.numel() == 0) return std::nullopt;  // nothing to gain; the ops' own kernels handle the empty cases
  ConvGrads r;
  if (need_input) r.input = Tensor::empty(input_shape, dt);
  if (need_weight) r.weight = Tensor::empty(weight_shape, dt);
  if (need_bias) r.bias = Tensor::empty({g.O}, dt);
  Tensor gc = dense(grad), wc = need_input ? dense(w) : Tensor(), xc = need_weight ? dense(x) : Tensor();
  auto run = [&](auto zero) {
    using T = decltype(zero);
    ConvBackwardArgs<T> a{static_cast<const T*>(gc.raw_data())};
    auto ptr = [](const Tensor& t) { return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr; };
    a.W = ptr(wc), a.X = ptr(xc), a.dX = ptr(r.input), a.dW = ptr(r.weight), a.dB = ptr(r.bias);
    conv_backward(a, g);
  };
  if (dt == DType::Float32) run(float(0));
  else run(double(0));
  return r;
}

Tensors kernel_avg_pool2d_backward(OpId, const Tensors& in, const Attrs& attrs) {
  const char* op = "avg_pool2d_backward";
  if (in.size() != 1) fail("{}: expected 1 input (grad_output), got {}", op, in.size());
  const Tensor& grad = in[0];
  const Shape& shape = attrs.ints("shape");
  im2col::PoolGeom g = im2col::pool_geometry(op, shape, grad.dtype(), attrs, false);
  Shape want = shape;
  want[want.size() - 2] = g.OH;
  want[want.size() - 1] = g.OW;
  if (grad.sizes() != want)
    fail("{}: expected grad_output of shape {} (avg_pool2d's output for input {}), got {}", op, shape_str(want),
         shape_str(shape), shape_str(grad.sizes()));
  // Half types are computed in float32 and converted back, as the forward does.
  DType dt = grad.dtype(), ct = dt == DType::Float64 ? dt : DType::Float32;
  Tensor gc = dt == ct ? dense(grad) : cast_to(grad, ct);
  Tensor out = Tensor::empty(shape, ct);
  if (out.numel() > 0) {
    if (ct == DType::Float32)
      avg_pool_backward(static_cast<const float*>(gc.raw_data()), static_cast<float*>(out.raw_data()), g);
    else avg_pool_backward(static_cast<const double*>(gc.raw_data()), static_cast<double*>(out.raw_data()), g);
  }
  if (ct != dt) out = cast_to(out, dt);
  return {out};
}

}  // namespace kiln::cpu
