// The argsort kernel: per row along the dim, a stable sort of the positions by value. NaN compares as the
// largest value (torch's order), so it comes last ascending and first descending; equal values keep their
// order either way, which makes argsort of a constant row the positions 0..n-1.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "eager/cpu/dim_split.h"
#include "eager/cpu/copy.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

template <class T>
bool is_nan_value(T v) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) return false;
  else return std::isnan(float(v)) || v != v;
}

template <class T>
void sort_rows(const T* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool descending) {
#pragma omp parallel for if (outer * inner > 64 && outer * inner * n > (1 << 15))
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t o = r / inner, i = r % inner;
    const T* base = x + o * n * inner + i;
    std::vector<int64_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), int64_t(0));
    auto value = [&](int64_t j) {
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) return float(base[j * inner]);
      else return base[j * inner];
    };
    // a strict weak order with NaN above everything (NaNs equal among themselves)
    auto less = [&](int64_t a, int64_t b) {
      auto va = value(a), vb = value(b);
      bool na = is_nan_value(va), nb = is_nan_value(vb);
      if (na || nb) return !na && nb;
      return va < vb;
    };
    if (descending) std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return less(b, a); });
    else std::stable_sort(idx.begin(), idx.end(), less);
    int64_t* dst = out + o * n * inner + i;
    for (int64_t j = 0; j < n; ++j) dst[j * inner] = idx[size_t(j)];
  }
}

}  // namespace

Tensors kernel_argsort(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x0 = in.at(0);
  Tensor x = x0.is_contiguous() ? x0 : cast_to(x0, x0.dtype());
  const Shape s = x.dim() == 0 ? Shape{1} : x.sizes();
  const int64_t nd = int64_t(s.size());
  const int64_t dim = wrap_dim("argsort", attrs.i("dim"), nd);
  const bool descending = attrs.has("descending") && attrs.b("descending");
  Tensor out = Tensor::empty(x0.sizes(), DType::Int64);
  if (out.numel() == 0) return {out};
  const auto [outer, n, inner] = split_at(s, dim);
  visit_dtype(x.dtype(), [&](auto v) {
    using T = decltype(v);
    sort_rows(static_cast<const T*>(x.raw_data()), out.data_ptr<int64_t>(), outer, n, inner, descending);
  });
  return {out};
}

}  // namespace kiln::cpu
