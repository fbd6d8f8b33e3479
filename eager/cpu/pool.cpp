// 2-D pooling over [C,H,W] or [N,C,H,W], one plane per task: max_pool2d (values and torch's flat
// H*W indices) and avg_pool2d (ceil_mode, count_include_pad and divisor_override as torch's).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <limits>
#include <vector>

#include "eager/cpu/copy.h"
#include "eager/cpu/im2col.h"
#include "eager/cpu/strided_loop.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

using im2col::PoolGeom;

PoolGeom pool_geometry(const char* op, const Tensor& x, const Attrs& attrs, bool has_dilation) {
  return im2col::pool_geometry(op, x.sizes(), x.dtype(), attrs, has_dilation);
}

Shape out_shape(const Tensor& x, const PoolGeom& g) {
  Shape s = x.sizes();
  s[s.size() - 2] = g.OH;
  s[s.size() - 1] = g.OW;
  return s;
}

// v taken over best: torch's scan order and NaN rule, as in the general loop (the first maximum, or
// the last NaN), computed on the bits: a branch here mispredicts on random data and on a ReLU's ties
// at zero half the time, and the compiler turns a select on floats back into one.
template <class T>
inline void take_if_greater(T v, int64_t i, T& best, int64_t& bi) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits take = Bits(0) - Bits((v > best) | (v != v));
  best = std::bit_cast<T>(Bits((std::bit_cast<Bits>(v) & take) | (std::bit_cast<Bits>(best) & ~take)));
  uint64_t take64 = uint64_t(0) - uint64_t(take & 1);
  bi = int64_t((uint64_t(i) & take64) | (uint64_t(bi) & ~take64));
}

// Four outputs of a float 2x2 window at once, compared as a tree: (a,b) and (c,d), then the two
// winners. That keeps torch's scan rule (the first maximum; the last NaN) and has no chain of scalar
// compares through one running best, which was ~25 cycles an output.
using v4f = float __attribute__((vector_size(16)));
using v4i = int32_t __attribute__((vector_size(16)));

inline v4f load4(const float* p) {
  v4f v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline v4f select(v4i take, v4f x, v4f y) { return v4f((v4i(x) & take) | (v4i(y) & ~take)); }
inline v4i takes(v4f v, v4f best) { return v4i(v > best) | v4i(v != v); }

// Four outputs at once. Window k's top row pair is at top_lo[2k..] for k < 2 and top_hi[2(k-2)..]
// otherwise (bottom rows likewise); first[k] is the flat index of its top-left element.
inline void max_pool_2x2_4(const float* top_lo, const float* top_hi, const float* bot_lo, const float* bot_hi,
                           int64_t W, float* y, int64_t* idx, const int64_t (&first)[4]) {
  v4f lo = load4(top_lo), hi = load4(top_hi);
  v4f a = __builtin_shufflevector(lo, hi, 0, 2, 4, 6), b = __builtin_shufflevector(lo, hi, 1, 3, 5, 7);
  lo = load4(bot_lo), hi = load4(bot_hi);
  v4f c = __builtin_shufflevector(lo, hi, 0, 2, 4, 6), d = __builtin_shufflevector(lo, hi, 1, 3, 5, 7);
  v4i tb = takes(b, a), td = takes(d, c);
  v4f ab = select(tb, b, a), cd = select(td, d, c);
  v4i tf = takes(cd, ab);
  v4i off = (tf & (v4i{} + int32_t(W) + (td & 1))) | (~tf & (tb & 1));
  v4f best = select(tf, cd, ab);
  __builtin_memcpy(y, &best, sizeof best);
  for (int k = 0; k < 4; ++k) idx[k] = first[k] + off[k];
}

// Outputs [ow, ow+4) of one output row from input rows r0, r1 (base: r0's flat index in the plane).
inline void max_pool_2x2_4(const float* r0, const float* r1, int64_t ow, int64_t W, float* y, int64_t* idx,
                           int64_t base) {
  const int64_t f = base + 2 * ow;
  max_pool_2x2_4(r0 + 2 * ow, r0 + 2 * ow + 4, r1 + 2 * ow, r1 + 2 * ow + 4, W, y + ow, idx + ow,
                 {f, f + 2, f + 4, f + 6});
}

// One output row of a 2x2, stride-2 window from input rows r0 and r1 (base: r0's flat index in the plane).
template <int64_t OWc, class T>
void max_pool_2x2_row(const T* r0, const T* r1, T* y, int64_t* idx, int64_t OW, int64_t base, int64_t W) {
  if constexpr (OWc > 0) OW = OWc;  // unrolled for the narrow rows of small images
  int64_t ow = 0;
  if constexpr (std::is_same_v<T, float>)
    for (; ow + 4 <= OW; ow += 4) max_pool_2x2_4(r0, r1, ow, W, y, idx, base);
  for (; ow < OW; ++ow) {
    int64_t i = base + 2 * ow;
    T best = r0[2 * ow];
    int64_t bi = i;
    take_if_greater(r0[2 * ow + 1], i + 1, best, bi);
    take_if_greater(r1[2 * ow], i + W, best, bi);
    take_if_greater(r1[2 * ow + 1], i + W + 1, best, bi);
    y[ow] = best;
    idx[ow] = bi;
  }
}

// The common 2x2, stride 2, unpadded, undilated window (a model's every pool layer; the general loop
// below is ~10x slower on it).
// Rows two outputs wide (a 4x4 image pooled to 2x2) take the vector path two output rows at a time,
// across planes: the scalar loop was ~10 ns an output there.
void max_pool_2x2_ow2(const float* x, float* y, int64_t* idx, const PoolGeom& g) {
  const int64_t rows = g.planes * g.OH, pairs = rows / 2, W = g.W;
  auto top = [&](int64_t r) { return x + (r / g.OH) * g.H * W + 2 * (r % g.OH) * W; };
  auto first = [&](int64_t r) { return 2 * (r % g.OH) * W; };
#pragma omp parallel for if (rows * 2 * 4 > kParallelGrain)
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t r = 2 * p;
    const float *a = top(r), *b = top(r + 1);
    const int64_t fa = first(r), fb = first(r + 1);
    max_pool_2x2_4(a, b, a + W, b + W, W, y + 2 * r, idx + 2 * r, {fa, fa + 2, fb, fb + 2});
  }
  if (rows % 2) max_pool_2x2_row<2>(top(rows - 1), top(rows - 1) + W, y + 2 * (rows - 1), idx + 2 * (rows - 1), 2,
                                    first(rows - 1), W);
}

template <class T>
bool max_pool_2x2(const T* x, T* y, int64_t* idx, const PoolGeom& g) {
  // ceil_mode's last window may hang over the edge: only whole windows take this path.
  if (!(g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 &&
        2 * g.OH <= g.H && 2 * g.OW <= g.W))
    return false;
  if constexpr (std::is_same_v<T, float>) {
    if (g.OW == 2) {
      max_pool_2x2_ow2(x, y, idx, g);
      return true;
    }
  }
  im2col::with_width(g.OW, [&](auto width) {
    constexpr int64_t OWc = decltype(width)::value;
#pragma omp parallel for if (g.planes * g.OH * g.OW * 4 > kParallelGrain && g.planes > 1)
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      const T* in = x + pl * g.H * g.W;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        int64_t o = (pl * g.OH + oh) * g.OW;
        max_pool_2x2_row<OWc>(in + 2 * oh * g.W, in + (2 * oh + 1) * g.W, y + o, idx + o, g.OW, 2 * oh * g.W, g.W);
      }
    }
  });
  return true;
}

// One window tap across a row's outputs: the outputs' compare chains are independent, so this
// vectorises; a window at a time was a chain of kh*kw dependent compares per output. The index is
// carried as wide as T (int32 for float) so value and index lanes match.
template <class T, class I>
void max_pool_tap(const T* __restrict p, int64_t sw, int64_t n, I i0, T* __restrict best, I* __restrict bi) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  for (int64_t ow = 0; ow < n; ++ow) {
    T v = p[ow * sw];
    Bits take = Bits(0) - Bits((v > best[ow]) | (v != v));
    best[ow] = std::bit_cast<T>(Bits((std::bit_cast<Bits>(v) & take) | (std::bit_cast<Bits>(best[ow]) & ~take)));
    bi[ow] = I((Bits(i0 + I(ow * sw)) & take) | (Bits(bi[ow]) & ~take));
  }
}

template <class T>
void max_pool(const T* x, T* y, int64_t* idx, const PoolGeom& g) {
  if (max_pool_2x2(x, y, idx, g)) return;
  // Each plane is read from a copy padded with -inf out to the windows' reach, so every output takes
  // the same taps with no clipping: a -inf pad never wins (take_if_greater takes only a greater value),
  // and each output starts at its first tap inside the plane, as torch's scan does. ResNet's stem pool
  // (3x3, stride 2, pad 1 on 16x16) took 2.4 ms clipping windows at a row's ends of 8 outputs.
  const int64_t PH = (g.OH - 1) * g.sh + (g.kh - 1) * g.dh + 1, PW = (g.OW - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  const T lowest = -std::numeric_limits<T>::infinity();
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  if (g.H * g.W > std::numeric_limits<int32_t>::max()) fail("max_pool2d: a plane of {} x {} is too large", g.H, g.W);
#pragma omp parallel if (g.planes * g.OH * g.OW * g.kh * g.kw > kParallelGrain && g.planes > 1)
  {
    std::vector<T> pad(size_t(PH * PW));
    std::vector<I> bi(size_t(g.OW));
#pragma omp for
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      const T* in = x + pl * g.H * g.W;
      for (int64_t r = 0; r < PH; ++r) {
        T* row = pad.data() + r * PW;
        int64_t ih = r - g.ph;
        if (ih < 0 || ih >= g.H) {
          std::fill(row, row + PW, lowest);
          continue;
        }
        int64_t c0 = std::min(PW, g.pw), c1 = std::min(PW, g.pw + g.W);
        std::fill(row, row + c0, lowest);
        std::copy(in + ih * g.W, in + ih * g.W + (c1 - c0), row + c0);
        std::fill(row + c1, row + PW, lowest);
      }
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        int64_t ih0 = oh * g.sh - g.ph, ih1 = std::min(ih0 + (g.kh - 1) * g.dh + 1, g.H), ki0 = 0;
        while (ih0 < 0) ih0 += g.dh, ++ki0;
        T* yr = y + (pl * g.OH + oh) * g.OW;
        int64_t* ir = idx + (pl * g.OH + oh) * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          int64_t iw0 = ow * g.sw - g.pw;
          while (iw0 < 0) iw0 += g.dw;
          yr[ow] = lowest;
          bi[ow] = I(ih0 * g.W + iw0);
        }
        // rows wholly in the padding never win, so only the plane's rows are scanned
        for (int64_t ki = ki0, ih = ih0; ih < ih1; ++ki, ih += g.dh)
          for (int64_t kj = 0; kj < g.kw; ++kj) {
            const T* p = pad.data() + (oh * g.sh + ki * g.dh) * PW + kj * g.dw;
            max_pool_tap(p, g.sw, g.OW, I(ih * g.W + kj * g.dw - g.pw), yr, bi.data());
          }
        std::copy(bi.begin(), bi.end(), ir);
      }
    }
  }
}

template <class T>
void avg_pool(const T* x, T* y, const PoolGeom& g) {
#pragma omp parallel for if (g.planes * g.OH * g.OW * g.kh * g.kw > kParallelGrain && g.planes > 1)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* in = x + pl * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        im2col::AvgWindow w = im2col::avg_window(g, oh, ow);
        double acc = 0;
        for (int64_t ih = w.h0; ih < w.h1; ++ih)
          for (int64_t iw = w.w0; iw < w.w1; ++iw) acc += double(in[ih * g.W + iw]);
        y[(pl * g.OH + oh) * g.OW + ow] = T(acc * w.inv);
      }
  }
}

// Runs f on float or double data; half types are computed in float32 and converted back.
template <class F>
Tensors run_float(const Tensor& x, F&& f) {
  if (x.dtype() == DType::Float64) return f(x, double{});
  if (x.dtype() == DType::Float32) return f(x, float{});
  Tensors r = f(cast_to(x, DType::Float32), float{});
  r[0] = cast_to(r[0], x.dtype());
  return r;
}

}  // namespace

Tensors kernel_max_pool2d(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  PoolGeom g = pool_geometry("max_pool2d", x, attrs, true);
  return run_float(x, [&](const Tensor& xf, auto tag) -> Tensors {
    using T = decltype(tag);
    Tensor xc = xf.is_contiguous() ? xf : cast_to(xf, xf.dtype());
    Tensor y = Tensor::empty(out_shape(x, g), xf.dtype());
    Tensor idx = Tensor::empty(out_shape(x, g), DType::Int64);
    if (y.numel() > 0)
      max_pool<T>(static_cast<const T*>(xc.raw_data()), static_cast<T*>(y.raw_data()), idx.data_ptr<int64_t>(), g);
    return {y, idx};
  });
}

Tensors kernel_avg_pool2d(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  PoolGeom g = pool_geometry("avg_pool2d", x, attrs, false);
  return run_float(x, [&](const Tensor& xf, auto tag) -> Tensors {
    using T = decltype(tag);
    Tensor xc = xf.is_contiguous() ? xf : cast_to(xf, xf.dtype());
    Tensor y = Tensor::empty(out_shape(x, g), xf.dtype());
    if (y.numel() > 0) avg_pool<T>(static_cast<const T*>(xc.raw_data()), static_cast<T*>(y.raw_data()), g);
    return {y};
  });
}

}  // namespace kiln::cpu
