// 2-D pooling over [C,H,W] or [N,C,H,W], one plane per task: max_pool2d (values and torch's flat
// H*W indices) and avg_pool2d with torch's defaults (count_include_pad=True, ceil_mode=False).
#include <cmath>
#include <limits>

#include "eager/cpu/copy.h"
#include "eager/cpu/strided_loop.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

struct PoolGeom {
  int64_t planes, H, W;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t OH, OW;
};

const Shape& pair_attr(const char* op, const Attrs& attrs, const char* name) {
  const Shape& v = attrs.ints(name);
  if (v.size() != 2) fail("{}: {} must have 2 elements, got {}", op, name, shape_str(v));
  return v;
}

// Checks the input and attrs the way torch's pool2d_shape_check does and works out the output size.
PoolGeom pool_geometry(const char* op, const Tensor& x, const Attrs& attrs, bool has_dilation) {
  if (x.dim() != 3 && x.dim() != 4)
    fail("{}: expected a 3-D [C,H,W] or 4-D [N,C,H,W] input, got shape {}", op, shape_str(x.sizes()));
  for (int64_t d = x.dim() - 3; d < x.dim(); ++d)
    if (x.size(d) == 0) fail("{}: expected non-zero sizes for the non-batch dims, got input shape {}", op, shape_str(x.sizes()));
  if (!is_floating(x.dtype())) fail("{}: dtype {} is not supported", op, dtype_name(x.dtype()));
  const Shape& k = pair_attr(op, attrs, "kernel_size");
  const Shape& s = pair_attr(op, attrs, "stride");
  const Shape& p = pair_attr(op, attrs, "padding");
  Shape d = has_dilation ? pair_attr(op, attrs, "dilation") : Shape{1, 1};
  if (k[0] <= 0 || k[1] <= 0) fail("{}: kernel_size must be positive, got {}", op, shape_str(k));
  if (s[0] <= 0 || s[1] <= 0) fail("{}: stride must be positive, got {}", op, shape_str(s));
  if (d[0] <= 0 || d[1] <= 0) fail("{}: dilation must be positive, got {}", op, shape_str(d));
  if (p[0] < 0 || p[1] < 0) fail("{}: padding must be non-negative, got {}", op, shape_str(p));
  if (p[0] > k[0] / 2 || p[1] > k[1] / 2)
    fail("{}: padding {} must be at most half of kernel_size {}", op, shape_str(p), shape_str(k));
  PoolGeom g{};
  g.H = x.size(x.dim() - 2), g.W = x.size(x.dim() - 1);
  g.planes = x.numel() / (g.H * g.W);
  g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
  g.OH = (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.OW = (g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  if (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1 < 0 || g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1 < 0 || g.OH < 1 || g.OW < 1)
    fail("{}: output size is too small for input shape {} with kernel_size {}, stride {}, padding {}, dilation {}",
         op, shape_str(x.sizes()), shape_str(k), shape_str(s), shape_str(p), shape_str(d));
  return g;
}

Shape out_shape(const Tensor& x, const PoolGeom& g) {
  Shape s = x.sizes();
  s[s.size() - 2] = g.OH;
  s[s.size() - 1] = g.OW;
  return s;
}

template <class T>
void max_pool(const T* x, T* y, int64_t* idx, const PoolGeom& g) {
#pragma omp parallel for if (g.planes * g.OH * g.OW * g.kh * g.kw > kParallelGrain && g.planes > 1)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* in = x + pl * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      int64_t ih0 = oh * g.sh - g.ph, ih1 = std::min(ih0 + (g.kh - 1) * g.dh + 1, g.H);
      while (ih0 < 0) ih0 += g.dh;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        int64_t iw0 = ow * g.sw - g.pw, iw1 = std::min(iw0 + (g.kw - 1) * g.dw + 1, g.W);
        while (iw0 < 0) iw0 += g.dw;
        // torch's scan: a NaN always wins, so NaNs propagate and the index is the last NaN's.
        int64_t best_i = ih0 * g.W + iw0;
        T best = -std::numeric_limits<T>::infinity();
        for (int64_t ih = ih0; ih < ih1; ih += g.dh)
          for (int64_t iw = iw0; iw < iw1; iw += g.dw) {
            T v = in[ih * g.W + iw];
            if (v > best || std::isnan(v)) {
              best = v;
              best_i = ih * g.W + iw;
            }
          }
        int64_t o = (pl * g.OH + oh) * g.OW + ow;
        y[o] = best;
        idx[o] = best_i;
      }
    }
  }
}

template <class T>
void avg_pool(const T* x, T* y, const PoolGeom& g) {
  // count_include_pad with ceil_mode off: every window lies inside the padded input, so the divisor is kh*kw.
  double inv = 1.0 / double(g.kh * g.kw);
#pragma omp parallel for if (g.planes * g.OH * g.OW * g.kh * g.kw > kParallelGrain && g.planes > 1)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* in = x + pl * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      int64_t ih0 = std::max<int64_t>(oh * g.sh - g.ph, 0), ih1 = std::min(oh * g.sh - g.ph + g.kh, g.H);
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        int64_t iw0 = std::max<int64_t>(ow * g.sw - g.pw, 0), iw1 = std::min(ow * g.sw - g.pw + g.kw, g.W);
        double acc = 0;
        for (int64_t ih = ih0; ih < ih1; ++ih)
          for (int64_t iw = iw0; iw < iw1; ++iw) acc += double(in[ih * g.W + iw]);
        y[(pl * g.OH + oh) * g.OW + ow] = T(acc * inv);
      }
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
