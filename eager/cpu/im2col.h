#pragma once
// Geometry and unfolding shared by the conv2d / pool2d kernels and their backward kernels
// (conv.cpp, pool.cpp, conv_backward.cpp): attrs parsed and checked one way for every member.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "core/attrs.h"
#include "core/tensor.h"
#include "eager/cpu/copy.h"

namespace kiln::cpu::im2col {

// A contiguous copy when needed, made here rather than through dispatch so observers see only the calling op.
inline Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : cast_to(t, t.dtype()); }

inline const Shape& pair_attr(const char* op, const Attrs& attrs, const char* name) {
  const Shape& v = attrs.ints(name);
  if (v.size() != 2) fail("{}: {} must have 2 elements, got {}", op, name, shape_str(v));
  return v;
}

struct ConvGeom {
  int64_t N, C, H, W;       // input
  int64_t O, Cg, kh, kw;    // weight [O, C/groups, kh, kw]
  int64_t groups;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t OH, OW;
  int64_t K() const { return Cg * kh * kw; }  // rows of one group's column matrix
  int64_t ohw() const { return OH * OW; }
};

// Checks conv2d's attrs against a 4-D input shape x ([N,C,H,W]) and weight shape w and works out the
// output size. `shown` is the input shape as the caller gave it (3-D when unbatched), for messages.
inline ConvGeom conv_geometry(const char* op, const Shape& x, const Shape& w, const Attrs& attrs, const Shape& shown) {
  const Shape &stride = pair_attr(op, attrs, "stride"), &padding = pair_attr(op, attrs, "padding"),
              &dilation = pair_attr(op, attrs, "dilation");
  int64_t groups = attrs.i_or("groups", 1);
  if (stride[0] <= 0 || stride[1] <= 0) fail("{}: stride must be positive, got {}", op, shape_str(stride));
  if (padding[0] < 0 || padding[1] < 0) fail("{}: padding must be non-negative, got {}", op, shape_str(padding));
  if (dilation[0] <= 0 || dilation[1] <= 0) fail("{}: dilation must be positive, got {}", op, shape_str(dilation));
  if (groups <= 0) fail("{}: groups must be positive, got {}", op, groups);
  ConvGeom g{};
  g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
  g.O = w[0], g.Cg = w[1], g.kh = w[2], g.kw = w[3];
  g.groups = groups;
  g.sh = stride[0], g.sw = stride[1], g.ph = padding[0], g.pw = padding[1], g.dh = dilation[0], g.dw = dilation[1];
  if (g.O % groups != 0)
    fail("{}: out_channels {} (weight {}) is not divisible by groups {}", op, g.O, shape_str(w), groups);
  if (g.C != g.Cg * groups)
    fail("{}: expected input with {} channels (weight {}, groups {}), got {}", op, g.Cg * groups, shape_str(w),
         groups, g.C);
  int64_t ekh = g.dh * (g.kh - 1) + 1, ekw = g.dw * (g.kw - 1) + 1;
  int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw;
  if (g.kh == 0 || g.kw == 0 || ekh > Hp || ekw > Wp)
    fail("{}: kernel size {}x{} (dilated {}x{}) is larger than the padded input {}x{} (input {})", op, g.kh, g.kw,
         ekh, ekw, Hp, Wp, shape_str(shown));
  g.OH = (Hp - ekh) / g.sh + 1;
  g.OW = (Wp - ekw) / g.sw + 1;
  return g;
}

// Row-major C = A·B (+ C when accumulate), with A and/or B read transposed.
inline void gemm(bool ta, bool tb, const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K,
                 int64_t lda, int64_t ldb, int64_t ldc, bool accumulate = false) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0f, A, int(lda), B, int(ldb), accumulate ? 1.0f : 0.0f, C, int(ldc));
}
inline void gemm(bool ta, bool tb, const double* A, const double* B, double* C, int64_t M, int64_t N, int64_t K,
                 int64_t lda, int64_t ldb, int64_t ldc, bool accumulate = false) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0, A, int(lda), B, int(ldb), accumulate ? 1.0 : 0.0, C, int(ldc));
}

// For kernel column kj, the output columns whose tap lands inside [0, W) form one range [lo, hi);
// the tap of output column ow is ow*sw + off.
struct ColRange {
  int64_t off, lo, hi;
};
inline ColRange col_range(const ConvGeom& g, int64_t kj) {
  int64_t off = kj * g.dw - g.pw;
  int64_t lo = off >= 0 ? 0 : std::min(g.OW, (-off + g.sw - 1) / g.sw);
  int64_t hi = g.W - off <= 0 ? 0 : std::min(g.OW, (g.W - off + g.sw - 1) / g.sw);
  return {off, lo, std::max(hi, lo)};
}

// Writes row r = (c, ki, kj) of one sample's column matrix: for every output position (oh, ow), the input
// tap x[c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw], zero where it falls in the padding.
template <class T>
void im2col_row(const T* x, const ConvGeom& g, int64_t r, T* dst) {
  int64_t kj = r % g.kw, ki = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
  const T* plane = x + c * g.H * g.W;
  auto [off, ow_lo, ow_hi] = col_range(g, kj);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    int64_t ih = oh * g.sh - g.ph + ki * g.dh;
    T* d = dst + oh * g.OW;
    if (ih < 0 || ih >= g.H) {
      std::fill(d, d + g.OW, T(0));
      continue;
    }
    const T* srow = plane + ih * g.W;
    std::fill(d, d + ow_lo, T(0));
    if (g.sw == 1) std::memcpy(d + ow_lo, srow + ow_lo + off, size_t(ow_hi - ow_lo) * sizeof(T));
    else
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[ow] = srow[ow * g.sw + off];
    std::fill(d + ow_hi, d + g.OW, T(0));
  }
}

// The adjoint of im2col_row: adds row r = (c, ki, kj) of a column matrix back onto the taps it was read
// from in one sample's input x (padding taps are dropped).
template <class T>
void col2im_row(const T* src, const ConvGeom& g, int64_t r, T* x) {
  int64_t kj = r % g.kw, ki = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
  T* plane = x + c * g.H * g.W;
  auto [off, ow_lo, ow_hi] = col_range(g, kj);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    int64_t ih = oh * g.sh - g.ph + ki * g.dh;
    if (ih < 0 || ih >= g.H) continue;
    const T* s = src + oh * g.OW;
    T* drow = plane + ih * g.W;
    if (g.sw == 1)
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) drow[ow + off] += s[ow];
    else
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) drow[ow * g.sw + off] += s[ow];
  }
}

// ---- 2-D pooling over [C,H,W] or [N,C,H,W] ----
struct PoolGeom {
  int64_t planes, H, W;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t OH, OW;
};

// Checks an input of shape xs and the attrs the way torch's pool2d_shape_check does and works out the
// output size. A missing or empty "stride" means kernel_size.
inline PoolGeom pool_geometry(const char* op, const Shape& xs, DType dtype, const Attrs& attrs, bool has_dilation) {
  int64_t dim = int64_t(xs.size());
  if (dim != 3 && dim != 4)
    fail("{}: expected a 3-D [C,H,W] or 4-D [N,C,H,W] input, got shape {}", op, shape_str(xs));
  for (int64_t d = dim - 3; d < dim; ++d)
    if (xs[size_t(d)] == 0)
      fail("{}: expected non-zero sizes for the non-batch dims, got input shape {}", op, shape_str(xs));
  if (!is_floating(dtype)) fail("{}: dtype {} is not supported", op, dtype_name(dtype));
  const Shape& k = pair_attr(op, attrs, "kernel_size");
  bool stride_given = attrs.has("stride") && !attrs.ints("stride").empty();
  const Shape& s = stride_given ? pair_attr(op, attrs, "stride") : k;
  const Shape& p = pair_attr(op, attrs, "padding");
  Shape d = has_dilation ? pair_attr(op, attrs, "dilation") : Shape{1, 1};
  if (k[0] <= 0 || k[1] <= 0) fail("{}: kernel_size must be positive, got {}", op, shape_str(k));
  if (s[0] <= 0 || s[1] <= 0) fail("{}: stride must be positive, got {}", op, shape_str(s));
  if (d[0] <= 0 || d[1] <= 0) fail("{}: dilation must be positive, got {}", op, shape_str(d));
  if (p[0] < 0 || p[1] < 0) fail("{}: padding must be non-negative, got {}", op, shape_str(p));
  if (p[0] > k[0] / 2 || p[1] > k[1] / 2)
    fail("{}: padding {} must be at most half of kernel_size {}", op, shape_str(p), shape_str(k));
  PoolGeom g{};
  g.H = xs[size_t(dim - 2)], g.W = xs[size_t(dim - 1)];
  g.planes = 1;
  for (int64_t i = 0; i < dim - 2; ++i) g.planes *= xs[size_t(i)];
  g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
  g.OH = (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.OW = (g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  if (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1 < 0 || g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1 < 0 || g.OH < 1 || g.OW < 1)
    fail("{}: output size is too small for input shape {} with kernel_size {}, stride {}, padding {}, dilation {}",
         op, shape_str(xs), shape_str(k), shape_str(s), shape_str(p), shape_str(d));
  return g;
}

}  // namespace kiln::cpu::im2col
