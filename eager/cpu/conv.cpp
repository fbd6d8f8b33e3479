// conv2d as im2col + GEMM: a chunk of the batch is unfolded into one column matrix so each group is a
// single wide BLAS call (small images still give BLAS enough columns); the unfold and the copy back
// run in parallel over the batch with OpenMP while BLAS threads the GEMM itself.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "eager/cpu/copy.h"
#include "eager/cpu/strided_loop.h"
#include "eager/cpu/views.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

// A contiguous copy when needed, made here rather than through dispatch so observers see only this op.
Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : cast_to(t, t.dtype()); }

struct ConvGeom {
  int64_t N, C, H, W;       // input
  int64_t O, Cg, kh, kw;    // weight [O, C/groups, kh, kw]
  int64_t groups;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t OH, OW;
  int64_t K() const { return Cg * kh * kw; }  // rows of one group's column matrix
  int64_t ohw() const { return OH * OW; }
};

const Shape& pair_attr(const Attrs& attrs, const char* name) {
  const Shape& v = attrs.ints(name);
  if (v.size() != 2) fail("conv2d: {} must have 2 elements, got {}", name, shape_str(v));
  return v;
}

void gemm(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
          int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f, A, int(lda), B, int(ldb),
              0.0f, C, int(ldc));
}
void gemm(const double* A, const double* B, double* C, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
          int64_t ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0, A, int(lda), B, int(ldb), 0.0,
              C, int(ldc));
}

// Writes row r = (c, ki, kj) of one sample's column matrix: for every output position (oh, ow), the input
// tap x[c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw], zero where it falls in the padding.
template <class T>
void im2col_row(const T* x, const ConvGeom& g, int64_t r, T* dst) {
  int64_t kj = r % g.kw, ki = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
  const T* plane = x + c * g.H * g.W;
  // The output columns whose tap lands inside [0, W) form one range [ow_lo, ow_hi).
  int64_t off = kj * g.dw - g.pw;
  int64_t ow_lo = off >= 0 ? 0 : std::min(g.OW, (-off + g.sw - 1) / g.sw);
  int64_t ow_hi = g.W - off <= 0 ? 0 : std::min(g.OW, (g.W - off + g.sw - 1) / g.sw);
  ow_hi = std::max(ow_hi, ow_lo);
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
      int64_t off = kj * g.dw - g.pw;
      int64_t ow_lo = off >= 0 ? 0 : std::min(g.OW, (-off + g.sw - 1) / g.sw);
      int64_t ow_hi = std::max(ow_lo, g.W - off <= 0 ? 0 : std::min(g.OW, (g.W - off + g.sw - 1) / g.sw));
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
  if (g.Cg == 1 && g.kh * g.kw > 1) {
    conv_depthwise(X, Wt, B, Y, g);
    return;
  }
  // A 1x1, stride-1, unpadded conv reads the input as its own column matrix.
  bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  // Samples per chunk: keep the column matrix (and its GEMM result) around 32 MiB.
  int64_t per_sample = (rows + g.O) * ohw * int64_t(sizeof(T));
  int64_t chunk = std::clamp<int64_t>((int64_t(32) << 20) / std::max<int64_t>(per_sample, 1), 1, g.N);
  if (pointwise) chunk = 1;
  std::vector<T> col(pointwise ? 0 : size_t(rows * chunk * ohw));
  std::vector<T> tmp(chunk > 1 ? size_t(g.O * chunk * ohw) : 0);

  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    int64_t nb = std::min(chunk, g.N - n0), ld = nb * ohw;
    if (!pointwise) {
#pragma omp parallel for collapse(2) if (rows * ld > kParallelGrain)
      for (int64_t s = 0; s < nb; ++s)
        for (int64_t r = 0; r < rows; ++r) im2col_row(X + (n0 + s) * chw, g, r, col.data() + r * ld + s * ohw);
    }
    // With one sample the GEMM writes straight into the output; with several it writes [O, nb*ohw].
    T* dst = nb == 1 ? Y + n0 * g.O * ohw : tmp.data();
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* Bm = pointwise ? X + n0 * chw + grp * K * ohw : col.data() + grp * K * ld;
      gemm(Wt + grp * Og * K, Bm, dst + grp * Og * ld, Og, ld, K, K, ld, ld);
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
        const T* src = tmp.data() + o * ld + s * ohw;
        T* d = Y + ((n0 + s) * g.O + o) * ohw;
        if (B)
          for (int64_t i = 0; i < ohw; ++i) d[i] = src[i] + B[o];
        else
          std::memcpy(d, src, size_t(ohw) * sizeof(T));
      }
  }
}

}  // namespace

Tensors kernel_conv2d(OpId, const Tensors& in, const Attrs& attrs) {
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
  const Shape &stride = pair_attr(attrs, "stride"), &padding = pair_attr(attrs, "padding"),
              &dilation = pair_attr(attrs, "dilation");
  int64_t groups = attrs.i_or("groups", 1);
  if (stride[0] <= 0 || stride[1] <= 0) fail("conv2d: stride must be positive, got {}", shape_str(stride));
  if (padding[0] < 0 || padding[1] < 0) fail("conv2d: padding must be non-negative, got {}", shape_str(padding));
  if (dilation[0] <= 0 || dilation[1] <= 0) fail("conv2d: dilation must be positive, got {}", shape_str(dilation));
  if (groups <= 0) fail("conv2d: groups must be positive, got {}", groups);

  ConvGeom g{};
  g.N = x.size(0), g.C = x.size(1), g.H = x.size(2), g.W = x.size(3);
  g.O = w.size(0), g.Cg = w.size(1), g.kh = w.size(2), g.kw = w.size(3);
  g.groups = groups;
  g.sh = stride[0], g.sw = stride[1], g.ph = padding[0], g.pw = padding[1], g.dh = dilation[0], g.dw = dilation[1];
  if (g.O % groups != 0)
    fail("conv2d: out_channels {} (weight {}) is not divisible by groups {}", g.O, shape_str(w.sizes()), groups);
  if (g.C != g.Cg * groups)
    fail("conv2d: expected input with {} channels (weight {}, groups {}), got {}", g.Cg * groups,
         shape_str(w.sizes()), groups, g.C);
  if (b.defined()) {
    if (b.dtype() != x.dtype())
      fail("conv2d: bias dtype {} differs from input dtype {}", dtype_name(b.dtype()), dtype_name(x.dtype()));
    if (b.dim() != 1 || b.size(0) != g.O)
      fail("conv2d: expected a bias of shape [{}], got {}", g.O, shape_str(b.sizes()));
  }
  int64_t ekh = g.dh * (g.kh - 1) + 1, ekw = g.dw * (g.kw - 1) + 1;
  int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw;
  if (g.kh == 0 || g.kw == 0 || ekh > Hp || ekw > Wp)
    fail("conv2d: kernel size {}x{} (dilated {}x{}) is larger than the padded input {}x{} (input {})", g.kh, g.kw,
         ekh, ekw, Hp, Wp, shape_str(in[0].sizes()));
  g.OH = (Hp - ekh) / g.sh + 1;
  g.OW = (Wp - ekw) / g.sw + 1;

  Tensor out = Tensor::empty({g.N, g.O, g.OH, g.OW}, x.dtype());
  if (out.numel() > 0) {
    Tensor xc = dense(x), wc = dense(w), bc = b.defined() ? dense(b) : b;
    if (x.dtype() == DType::Float32) conv_forward<float>(xc, wc, bc, out, g);
    else conv_forward<double>(xc, wc, bc, out, g);
  }
  if (unbatched) return {make_view(out, {g.O, g.OH, g.OW}, {g.OH * g.OW, g.OW, 1}, 0)};
  return {out};
}

}  // namespace kiln::cpu
