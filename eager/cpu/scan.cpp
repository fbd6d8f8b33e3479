// The running sum and product along a dim (torch.cumsum / cumprod): each row accumulates in double for
// floating types (torch's CPU accumulator) and in int64 for integers and bool, whose result is int64.
#include <type_traits>

#include "eager/cpu/dim_split.h"
#include "eager/cpu/copy.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

template <class T, class Out>
void scan_rows(const T* x, Out* out, int64_t outer, int64_t n, int64_t inner, bool product) {
  using Acc = std::conditional_t<std::is_floating_point_v<Out> || std::is_same_v<Out, BFloat16> || std::is_same_v<Out, Float16>,
                                 double, int64_t>;
#pragma omp parallel for if (outer * inner > 64 && outer * inner * n > (1 << 15))
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t o = r / inner, i = r % inner;
    const int64_t base = o * n * inner + i;
    Acc acc = product ? Acc(1) : Acc(0);
    for (int64_t j = 0; j < n; ++j) {
      Acc v;
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) v = Acc(float(x[base + j * inner]));
      else v = Acc(x[base + j * inner]);
      acc = product ? acc * v : acc + v;
      if constexpr (std::is_same_v<Out, BFloat16> || std::is_same_v<Out, Float16>) out[base + j * inner] = Out(float(acc));
      else out[base + j * inner] = Out(acc);
    }
  }
}

Tensors scan(OpId op, const Tensors& in, const Attrs& attrs) {
  const Tensor& x0 = in.at(0);
  const char* name = op == OpId::Cumprod ? "cumprod" : "cumsum";
  Tensor x = x0.is_contiguous() ? x0 : cast_to(x0, x0.dtype());
  const Shape s = x.dim() == 0 ? Shape{1} : x.sizes();
  const int64_t nd = int64_t(s.size());
  const int64_t dim = wrap_dim(name, attrs.i("dim"), nd);
  const DType out_dt = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  Tensor out = Tensor::empty(x0.sizes(), out_dt);
  if (out.numel() == 0) return {out};
  const auto [outer, n, inner] = split_at(s, dim);
  visit_dtype(x.dtype(), [&](auto v) {
    using T = decltype(v);
    const T* xp = static_cast<const T*>(x.raw_data());
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>)
      scan_rows(xp, static_cast<T*>(out.raw_data()), outer, n, inner, op == OpId::Cumprod);
    else
      scan_rows(xp, out.data_ptr<int64_t>(), outer, n, inner, op == OpId::Cumprod);
  });
  return {out};
}

}  // namespace

Tensors kernel_cumsum(OpId op, const Tensors& in, const Attrs& attrs) { return scan(op, in, attrs); }
Tensors kernel_cumprod(OpId op, const Tensors& in, const Attrs& attrs) { return scan(op, in, attrs); }

}  // namespace kiln::cpu
