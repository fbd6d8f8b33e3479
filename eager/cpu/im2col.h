#pragma once
// Geometry and unfolding shared by the conv2d / pool2d kernels and their backward kernels
// (conv.cpp, pool.cpp, conv_backward.cpp): attrs parsed and checked one way for every member.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"
#include "eager/cpu/blas.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/strided_loop.h"

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
template <class T>
void gemm(bool ta, bool tb, const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
          int64_t ldc, bool accumulate = false) {
  blas::gemm(ta, tb, M, N, K, A, lda, B, ldb, accumulate ? T(1) : T(0), C, ldc);
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

// Samples unfolded at once: the column matrix of a chunk (and its GEMM result) stays around 32 MiB
// while small images still give BLAS one wide GEMM instead of one per sample.
inline int64_t chunk_samples(const ConvGeom& g, size_t elem) {
  int64_t per_sample = (g.C * g.kh * g.kw + g.O) * g.ohw() * int64_t(elem);
  return std::clamp<int64_t>((int64_t(32) << 20) / std::max<int64_t>(per_sample, 1), 1, std::max<int64_t>(g.N, 1));
}

// Scratch of n elements from the caching allocator: uninitialised, and reused across calls rather
// than faulted in fresh (a std::vector would also zero it first).
template <class T>
T* scratch(Tensor& holder, int64_t n) {
  holder = Tensor::empty({n}, std::is_same_v<T, double> ? DType::Float64 : DType::Float32);
  return static_cast<T*>(holder.raw_data());
}

// A short row copied inline: the rows of small images are a few elements, where a memcpy call per
// row (what std::copy becomes) costs more than the copy itself.
template <class T>
inline void copy_row(const T* s, int64_t n, T* d) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) __builtin_memcpy(d + i, s + i, 8 * sizeof(T));
  if (i + 4 <= n) {
    __builtin_memcpy(d + i, s + i, 4 * sizeof(T));
    i += 4;
  }
  for (; i < n; ++i) d[i] = s[i];
}

// f(std::integral_constant<int64_t, n>) for the row widths of small images, so that a row's copy or sum
// compiles to a few vector moves instead of a loop with a remainder; f(integral_constant<0>) otherwise.
template <class F>
inline void with_width(int64_t n, F&& f) {
  switch (n) {
    case 2: return f(std::integral_constant<int64_t, 2>{});
    case 4: return f(std::integral_constant<int64_t, 4>{});
    case 8: return f(std::integral_constant<int64_t, 8>{});
    case 16: return f(std::integral_constant<int64_t, 16>{});
    default: return f(std::integral_constant<int64_t, 0>{});
  }
}

// One [H,W] plane copied into a zero border of the padding, so that every tap of every window is an
// in-bounds read: without it, small images (a digits CNN's 8x8 and 4x4) spend their time in bounds
// arithmetic and three calls per output row. Returns the plane itself when there is no padding.
template <class T>
const T* padded(const T* plane, const ConvGeom& g, T* buf) {
  if (g.ph == 0 && g.pw == 0) return plane;
  int64_t Wp = g.W + 2 * g.pw;
  std::fill(buf, buf + (g.H + 2 * g.ph) * Wp, T(0));
  for (int64_t h = 0; h < g.H; ++h) copy_row(plane + h * g.W, g.W, buf + (h + g.ph) * Wp + g.pw);
  return buf;
}

inline int64_t padded_size(const ConvGeom& g) { return (g.H + 2 * g.ph) * (g.W + 2 * g.pw); }

// Runs f(s, c, pad) for every (sample, channel) plane of a chunk of nb samples, in parallel when the
// chunk's column matrix is big enough; pad is the thread's padded_size(g) buffer.
template <class T, class F>
void for_each_plane(const ConvGeom& g, int64_t nb, F&& f) {
  int64_t work = nb * g.C * g.kh * g.kw * g.ohw();
#pragma omp parallel if (work > kParallelGrain && nb * g.C > 1)
  {
    std::vector<T> pad(size_t(g.ph || g.pw ? padded_size(g) : 0));
#pragma omp for collapse(2)
    for (int64_t s = 0; s < nb; ++s)
      for (int64_t c = 0; c < g.C; ++c) f(s, c, pad.data());
  }
}

// Unfolds samples [n0, n0+nb) of x ([N,C,H,W], contiguous) into the column matrix col [C*kh*kw, ld]
// with ld = nb*OH*OW: row (c, ki, kj), column (s, oh, ow) holds x[n0+s, c, oh*sh - ph + ki*dh,
// ow*sw - pw + kj*dw], zero in the padding.
template <class T>
void unfold(const T* x, const ConvGeom& g, int64_t n0, int64_t nb, T* col) {
  int64_t ohw = g.ohw(), ld = nb * ohw, khw = g.kh * g.kw, Wp = g.W + 2 * g.pw;
  with_width(g.sw == 1 ? g.OW : 0, [&](auto width) {
    constexpr int64_t OWc = decltype(width)::value;
    for_each_plane<T>(g, nb, [&](int64_t s, int64_t c, T* pad) {
      const T* p = padded(x + ((n0 + s) * g.C + c) * g.H * g.W, g, pad);
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          T* d = col + (c * khw + ki * g.kw + kj) * ld + s * ohw;
          for (int64_t oh = 0; oh < g.OH; ++oh, d += g.OW) {
            const T* src = p + (oh * g.sh + ki * g.dh) * Wp + kj * g.dw;
            if constexpr (OWc > 0) __builtin_memcpy(d, src, OWc * sizeof(T));
            else if (g.sw == 1) copy_row(src, g.OW, d);
            else
              for (int64_t ow = 0; ow < g.OW; ++ow) d[ow] = src[ow * g.sw];
          }
        }
    });
  });
}

// The adjoint of unfold: every entry of col added back onto the tap it was read from, padding taps
// dropped; samples [n0, n0+nb) of x are overwritten with the sums.
template <class T>
void fold(const T* col, const ConvGeom& g, int64_t n0, int64_t nb, T* x) {
  int64_t ohw = g.ohw(), ld = nb * ohw, khw = g.kh * g.kw, Wp = g.W + 2 * g.pw;
  bool has_pad = g.ph || g.pw;
  with_width(g.sw == 1 ? g.OW : 0, [&](auto width) {
    constexpr int64_t OWc = decltype(width)::value;
    for_each_plane<T>(g, nb, [&](int64_t s, int64_t c, T* pad) {
      T* plane = x + ((n0 + s) * g.C + c) * g.H * g.W;
      T* p = has_pad ? pad : plane;
      std::fill(p, p + (has_pad ? padded_size(g) : g.H * g.W), T(0));
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const T* src = col + (c * khw + ki * g.kw + kj) * ld + s * ohw;
          for (int64_t oh = 0; oh < g.OH; ++oh, src += g.OW) {
            T* d = p + (oh * g.sh + ki * g.dh) * Wp + kj * g.dw;
            if constexpr (OWc > 0)
              for (int64_t ow = 0; ow < OWc; ++ow) d[ow] += src[ow];
            else if (g.sw == 1)
              for (int64_t ow = 0; ow < g.OW; ++ow) d[ow] += src[ow];
            else
              for (int64_t ow = 0; ow < g.OW; ++ow) d[ow * g.sw] += src[ow];
          }
        }
      if (has_pad)
        for (int64_t h = 0; h < g.H; ++h) copy_row(p + (h + g.ph) * Wp + g.pw, g.W, plane + h * g.W);
    });
  });
}

// [nb, O, ohw] (samples of a conv's output or its gradient) to and from [O, nb*ohw], the layout the
// chunk's single GEMM reads or writes; bias (when given) added on the way back.
template <class T>
void to_channel_major(const T* src, const ConvGeom& g, int64_t nb, T* dst) {
  int64_t ohw = g.ohw(), ld = nb * ohw;
#pragma omp parallel for collapse(2) if (nb * g.O * ohw > kParallelGrain)
  for (int64_t s = 0; s < nb; ++s)
    for (int64_t o = 0; o < g.O; ++o) copy_row(src + (s * g.O + o) * ohw, ohw, dst + o * ld + s * ohw);
}

// ---- 2-D pooling over [C,H,W] or [N,C,H,W] ----
struct PoolGeom {
  int64_t planes, H, W;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t OH, OW;
  bool count_include_pad;    // avg: padding counts in the divisor (torch's default)
  int64_t divisor_override;  // avg: 0 when not given
};

// An avg_pool2d window clipped to the input, rows [h0, h1) and columns [w0, w1), and the reciprocal of
// torch's divisor: divisor_override, else the window within the padded input (count_include_pad; a ceil_mode
// window hanging over the right padding counts only what lies inside it), else the elements inside the input.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double inv;
};
inline AvgWindow avg_window(const PoolGeom& g, int64_t oh, int64_t ow) {
  int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  int64_t h1 = std::min(h0 + g.kh, g.H + g.ph), w1 = std::min(w0 + g.kw, g.W + g.pw);
  int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.H), w1 = std::min(w1, g.W);
  int64_t n = g.divisor_override ? g.divisor_override : g.count_include_pad ? padded : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, 1.0 / double(n)};
}

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
  bool ceil_mode = attrs.b_or("ceil_mode", false);
  g.count_include_pad = attrs.b_or("count_include_pad", true);
  g.divisor_override = attrs.i_or("divisor_override", 0);
  if (attrs.has("divisor_override") && g.divisor_override == 0) fail("{}: divisor must be not zero", op);
  g.OH = window_out(g.H, g.kh, g.sh, g.ph, g.dh, ceil_mode);
  g.OW = window_out(g.W, g.kw, g.sw, g.pw, g.dw, ceil_mode);
  if (g.OH < 1 || g.OW < 1)
    fail("{}: output size is too small for input shape {} with kernel_size {}, stride {}, padding {}, dilation {}{}",
         op, shape_str(xs), shape_str(k), shape_str(s), shape_str(p), shape_str(d), ceil_mode ? ", ceil_mode" : "");
  return g;
}

}  // namespace kiln::cpu::im2col
