// conv2d as im2col + GEMM (where oneDNN's primitive does not take it: eager/cpu/conv_onednn.h): a chunk of the batch is unfolded into one column matrix so each group is a
// single wide BLAS call (small images still give BLAS enough columns); the unfold and the copy back
// run in parallel over the batch with OpenMP while BLAS threads the GEMM itself.
#include <algorithm>
#include <cstring>

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

// Depthwise-style convs (one input channel per group) give GEMMs of a single row, so they run as
// direct loops instead: each output plane accumulates kh*kw shifted, scaled rows of its input plane.
template <class T>
void conv_depthwise(const T* X, const T* Wt, const T* B, T* Y, const ConvGeom& g) {
  int64_t Og = g.O / g.groups, ohw = g.ohw();
#pragma omp parallel for if (g.N * g.O * ohw * g.kh * g.kw > kParallelGrain)
  for (int64_t p = 0; p < g.N * g.O; ++p) {
    int64_t n = p / g.O, o = p % g.O;
    const T* plane = X + (n * g.C + o / Og) * g.H * g.W;
    const T* wk = Wt + o * g.kh * g.kw;
    T* y = Y + p * ohw;
    std::fill(y, y + ohw, B ? B[o] : T(0));
    for (int64_t kj = 0; kj < g.kw; ++kj) {
      auto [off, ow_lo, ow_hi] = im2col::col_range(g, kj);
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        T wv = wk[ki * g.kw + kj];
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          const T* src = plane + ih * g.W;
          T* d = y + oh * g.OW;
          if (g.sw == 1)
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[ow] += wv * src[ow + off];
          else
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[ow] += wv * src[ow * g.sw + off];
        }
      }
    }
  }
}

template <class T>
void conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, const ConvGeom& g) {
  const T* X = static_cast<const T*>(x.raw_data());
  const T* Wt = static_cast<const T*>(w.raw_data());
  const T* B = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
  T* Y = static_cast<T*>(out.raw_data());
  int64_t ohw = g.ohw(), K = g.K(), Og = g.O / g.groups, chw = g.C * g.H * g.W;
  int64_t rows = g.C * g.kh * g.kw;

  if (K == 0) {
    // No input channels: the output is the bias alone.
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t o = 0; o < g.O; ++o) std::fill(Y + (n * g.O + o) * ohw, Y + (n * g.O + o + 1) * ohw, B ? B[o] : T(0));
    return;
  }
  if (g.Cg == 1 && g.groups > 1 && g.kh * g.kw > 1) {
    conv_depthwise(X, Wt, B, Y, g);
    return;
  }
  // A 1x1, stride-1, unpadded conv reads the input as its own column matrix.
  bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  int64_t chunk = pointwise ? 1 : im2col::chunk_samples(g, sizeof(T));
  Tensor col_holder, tmp_holder;
  T* col = pointwise ? nullptr : im2col::scratch<T>(col_holder, rows * chunk * ohw);
  T* tmp = chunk > 1 ? im2col::scratch<T>(tmp_holder, g.O * chunk * ohw) : nullptr;

  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    int64_t nb = std::min(chunk, g.N - n0), ld = nb * ohw;
    if (!pointwise) im2col::unfold(X, g, n0, nb, col);
    // With one sample the GEMM writes straight into the output; with several it writes [O, nb*ohw].
    T* dst = nb == 1 ? Y + n0 * g.O * ohw : tmp;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* Bm = pointwise ? X + n0 * chw + grp * K * ohw : col + grp * K * ld;
      im2col::gemm(false, false, Wt + grp * Og * K, Bm, dst + grp * Og * ld, Og, ld, K, K, ld, ld);
    }
    if (nb == 1) {
      if (B) {
#pragma omp parallel for if (g.O * ohw > kParallelGrain)
        for (int64_t o = 0; o < g.O; ++o)
          for (T* p = dst + o * ohw; p < dst + (o + 1) * ohw; ++p) *p += B[o];
      }
      continue;
    }
#pragma omp parallel for collapse(2) if (nb * g.O * ohw > kParallelGrain)
    for (int64_t s = 0; s < nb; ++s)
      for (int64_t o = 0; o < g.O; ++o) {
        const T* src = tmp + o * ld + s * ohw;
        T* d = Y + ((n0 + s) * g.O + o) * ohw;
        if (B)
          for (int64_t i = 0; i < ohw; ++i) d[i] = src[i] + B[o];
        else
          std::memcpy(d, src, size_t(ohw) * sizeof(T));
      }
  }
}

}  // namespace

Tensors kernel_conv2d(OpId op, const Tensors& in, const Attrs& attrs) {
  if (all_half(in)) {
    // bf16 through oneDNN's bf16 conv where this CPU has one; the checks below then run in float32.
    if (in.size() >= 2) {
      const Tensor b = in.size() == 3 ? in[2] : Tensor();
      std::optional<Tensor> y = one_pixel_conv2d(in[0], in[1], b, attrs);
      if (!y) y = onednn_conv2d(in[0], in[1], b, attrs);
      if (y) return {*y};
    }
    return run_in_float32(kernel_conv2d, op, in, attrs);
  }
  if (in.size() < 2 || in.size() > 3) fail("conv2d: expected 2 or 3 inputs (input, weight[, bias]), got {}", in.size());
  Tensor x = in[0], w = in[1], b = in.size() == 3 ? in[2] : Tensor();
  if (x.dim() != 3 && x.dim() != 4)
    fail("conv2d: expected a 3-D [C,H,W] or 4-D [N,C,H,W] input, got shape {}", shape_str(x.sizes()));
  if (w.dim() != 4)
    fail("conv2d: expected a 4-D weight [out_channels,in_channels/groups,kh,kw], got shape {}", shape_str(w.sizes()));
  bool unbatched = x.dim() == 3;
  // Views made here, not through dispatch, so observers see one conv2d and nothing inside it.
  if (unbatched) x = make_view(x, {1, x.size(0), x.size(1), x.size(2)}, {0, x.stride(0), x.stride(1), x.stride(2)},
                               x.storage_offset());
  if (x.dtype() != w.dtype())
    fail("conv2d: input dtype {} and weight dtype {} differ", dtype_name(x.dtype()), dtype_name(w.dtype()));
  if (x.dtype() != DType::Float32 && x.dtype() != DType::Float64)
    fail("conv2d: dtype {} is not supported", dtype_name(x.dtype()));
  ConvGeom g = im2col::conv_geometry("conv2d", x.sizes(), w.sizes(), attrs, in[0].sizes());
  if (b.defined()) {
    if (b.dtype() != x.dtype())
      fail("conv2d: bias dtype {} differs from input dtype {}", dtype_name(b.dtype()), dtype_name(x.dtype()));
    if (b.dim() != 1 || b.size(0) != g.O)
      fail("conv2d: expected a bias of shape [{}], got {}", g.O, shape_str(b.sizes()));
  }

  // oneDNN's convolution where it takes the conv (float32, groups 1, at least 8 input channels): 2-3x
  // this file's im2col + GEMM on the digits CNN's second conv, as in torch, whose CPU conv is oneDNN's.
  std::optional<Tensor> fast = one_pixel_conv2d(x, w, b, attrs);
  if (!fast) fast = onednn_conv2d(x, w, b, attrs);
  Tensor out = fast ? *fast : Tensor::empty({g.N, g.O, g.OH, g.OW}, x.dtype());
  if (!fast && out.numel() > 0) {
    Tensor xc = dense(x), wc = dense(w), bc = b.defined() ? dense(b) : b;
    if (x.dtype() == DType::Float32) conv_forward<float>(xc, wc, bc, out, g);
    else conv_forward<double>(xc, wc, bc, out, g);
  }
  if (unbatched) return {make_view(out, {g.O, g.OH, g.OW}, {g.OH * g.OW, g.OW, 1}, 0)};
  return {out};
}

}  // namespace kiln::cpu
