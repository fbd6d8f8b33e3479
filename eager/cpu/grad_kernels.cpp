// Kernels that scatter gradients back: slice_backward, index_add, scatter_add (and scatter_add into
// fresh zeros, eager/cpu/scatter.h).
#include "eager/cpu/scatter.h"

#include <algorithm>

#include "eager/cpu/copy.h"
#include "eager/cpu/views.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

Tensor zeros_of(const Shape& shape, DType t) {
  Tensor z = Tensor::empty(shape, t);
  copy_into(z, Tensor::wrap_scalar(0));
  return z;
}

int64_t index_at(const Tensor& index, int64_t i) {
  const char* p = static_cast<const char*>(index.raw_data()) + i * index.strides()[0] * int64_t(index.element_size());
  return index.dtype() == DType::Int64 ? *reinterpret_cast<const int64_t*>(p) : *reinterpret_cast<const int32_t*>(p);
}

// index and src contiguous and alike, and as large as self on every dim but d (self is copied, so
// contiguous): each row along d then starts where plain offsets say.
bool dense_along(const Tensor& index, const Tensor& src, const Tensor& self, int64_t d) {
  if (index.dim() == 0 || !index.is_contiguous() || !src.is_contiguous() || index.sizes() != src.sizes()) return false;
  for (int64_t k = 0; k < index.dim(); ++k)
    if (k != d && index.sizes()[size_t(k)] != self.sizes()[size_t(k)]) return false;
  return true;
}

}  // namespace

Tensors kernel_slice_backward(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& g = in.at(0);
  Tensor out = zeros_of(attrs.ints("shape"), g.dtype());
  Tensor view = kernel_slice(OpId::Slice, {out}, attrs)[0];
  if (view.sizes() != g.sizes())
    fail("slice_backward: grad of shape {} does not match the slice's shape {}", shape_str(g.sizes()),
         shape_str(view.sizes()));
  copy_into(view, g);
  return {out};
}

Tensors kernel_index_add(OpId op, const Tensors& in, const Attrs& attrs) {
  // bf16/f16 gradients (autocast) accumulate in float32: summing in half would lose most of them.
  if (all_half(in)) return run_in_float32(kernel_index_add, op, in, attrs);
  const Tensor &self = in.at(0), &index = in.at(1), &src = in.at(2);
  int64_t d = wrap_dim("index_add", attrs.i("dim"), self.dim());
  if (index.dtype() != DType::Int64 && index.dtype() != DType::Int32)
    fail("index_add: index must be int32 or int64, got {}", dtype_name(index.dtype()));
  if (index.dim() > 1) fail("index_add: index must be 1-D, got shape {}", shape_str(index.sizes()));
  int64_t n = index.numel();
  Tensor idx = index.dim() == 0 ? make_view(index, {1}, {1}, index.storage_offset()) : index;
  Shape expect = self.sizes();
  if (self.dim() > 0) expect[size_t(d)] = n;
  if (src.sizes() != expect)
    fail("index_add: source of shape {} does not match self {} with {} indices along dim {}",
         shape_str(src.sizes()), shape_str(self.sizes()), n, d);
  Tensor out = cast_to(self, self.dtype());
  int64_t size = self.dim() > 0 ? self.sizes()[size_t(d)] : 1;
  // Float rows of contiguous tensors (an embedding's gradient: one row per token) are added in place by
  // a plain loop: a select and an add dispatched per index cost microseconds each, the row's add
  // nanoseconds (a GPT's two embeddings: 8 ms a step before this, on 1,536 rows of 128).
  if ((out.dtype() == DType::Float32 || out.dtype() == DType::Float64) && out.is_contiguous() && src.is_contiguous() &&
      src.dtype() == out.dtype()) {
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < self.dim(); ++k) (k < d ? outer : inner) *= k == d ? 1 : self.sizes()[size_t(k)];
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = index_at(idx, i);
      if (k < -size || k >= size) fail("index_add: index {} is out of bounds for dimension {} with size {}", k, d, size);
    }
    visit_dtype(out.dtype(), [&](auto v) {
      using T = decltype(v);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        T* o = out.data_ptr<T>();
        const T* s = src.data_ptr<T>();
        for (int64_t b = 0; b < outer; ++b)
          for (int64_t i = 0; i < n; ++i) {
            int64_t k = index_at(idx, i);
            if (k < 0) k += size;
            T* dst = o + (b * size + k) * inner;
            const T* row = s + (b * n + i) * inner;
            for (int64_t j = 0; j < inner; ++j) dst[j] += row[j];
          }
      }
    });
    return {out};
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = index_at(idx, i);
    if (k < -size || k >= size) fail("index_add: index {} is out of bounds for dimension {} with size {}", k, d, size);
    if (k < 0) k += size;
    Tensor dst = kernel_select(OpId::Select, {out}, Attrs().set("dim", d).set("index", k))[0];
    Tensor s = kernel_select(OpId::Select, {src}, Attrs().set("dim", d).set("index", i))[0];
    binary_inplace(OpId::Add, dst, s);
  }
  return {out};
}

namespace {

// scatter_add of src at index along dim into a copy of self, or (self undefined) into zeros of
// `shape`: then each row along dim is zeroed just before its values land, so the output is written
// once, while in cache, instead of filled (or copied from a zero tensor) and then scattered into.
Tensor scatter_add_impl(const Tensor& self, const Shape& shape, DType dtype, const Tensor& index, const Tensor& src,
                        int64_t dim) {
  int64_t nd = int64_t(shape.size());
  int64_t d = wrap_dim("scatter_add", dim, nd);
  if (index.dtype() != DType::Int64) fail("scatter_add: index must be int64, got {}", dtype_name(index.dtype()));
  if (index.dim() != nd || src.dim() != nd)
    fail("scatter_add: index {} and src {} must have the rank of self {}", shape_str(index.sizes()),
         shape_str(src.sizes()), shape_str(shape));
  for (int64_t k = 0; k < nd; ++k)
    if (index.sizes()[size_t(k)] > src.sizes()[size_t(k)] || (k != d && index.sizes()[size_t(k)] > shape[size_t(k)]))
      fail("scatter_add: index {} is larger than src {} or self {} at dim {}", shape_str(index.sizes()),
           shape_str(src.sizes()), shape_str(shape), k);
  if (src.dtype() != dtype)
    fail("scatter_add: src dtype {} differs from self dtype {}", dtype_name(src.dtype()), dtype_name(dtype));
  bool fresh = !self.defined();
  Tensor out = fresh ? Tensor::empty(shape, dtype) : cast_to(self, dtype);
  int64_t total = index.numel();
  if (total == 0 && !fresh) return out;
  visit_dtype(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) {
      fail("scatter_add: dtype {} is not supported", dtype_name(dtype));
    } else {
      T* o = static_cast<T*>(out.raw_data());
      const T* s = static_cast<const T*>(src.raw_data());
      const int64_t* ix = static_cast<const int64_t*>(index.raw_data());
      int64_t dim_size = nd > 0 ? shape[size_t(d)] : 1;
      auto check = [&](int64_t t) {
        if (t < 0 || t >= dim_size)
          fail("scatter_add: index {} is out of bounds for dimension {} with size {}", t, d, dim_size);
      };
      if (total > 0 && dense_along(index, src, out, d)) {
        // [outer, L, inner] onto [outer, dim_size, inner] with plain offsets: max_pool2d's and
        // nll_loss's backward, where the general loop's per-element index arithmetic was most of the time.
        int64_t L = index.sizes()[size_t(d)], inner = 1;
        for (int64_t k = d + 1; k < nd; ++k) inner *= index.sizes()[size_t(k)];
        int64_t outer = total / (L * inner);
        for (int64_t a = 0; a < outer; ++a) {
          T* obase = o + a * dim_size * inner;
          if (fresh) std::fill(obase, obase + dim_size * inner, T(0));
          if (inner == 1) {  // the rows of max_pool2d's and nll_loss's gradient: one index per value
            const int64_t* irow = ix + a * L;
            const T* srow = s + a * L;
            for (int64_t j = 0; j < L; ++j) {
              check(irow[j]);
              obase[irow[j]] += srow[j];
            }
            continue;
          }
          for (int64_t j = 0; j < L; ++j) {
            const int64_t* irow = ix + (a * L + j) * inner;
            const T* srow = s + (a * L + j) * inner;
            for (int64_t b = 0; b < inner; ++b) {
              int64_t t = irow[b];
              check(t);
              obase[t * inner + b] += srow[b];
            }
          }
        }
        return;
      }
      if (fresh) std::fill(o, o + out.numel(), T(0));
      Shape pos(static_cast<size_t>(nd), 0);
      for (int64_t e = 0; e < total; ++e) {
        int64_t io = 0, so = 0, oo = 0;
        for (int64_t k = 0; k < nd; ++k) {
          io += pos[size_t(k)] * index.strides()[size_t(k)];
          so += pos[size_t(k)] * src.strides()[size_t(k)];
          if (k != d) oo += pos[size_t(k)] * out.strides()[size_t(k)];
        }
        int64_t t = ix[io];
        check(t);
        if (nd > 0) oo += t * out.strides()[size_t(d)];
        o[oo] += s[so];
        for (int64_t k = nd - 1; k >= 0; --k) {
          if (++pos[size_t(k)] < index.sizes()[size_t(k)]) break;
          pos[size_t(k)] = 0;
        }
      }
    }
  });
  return out;
}

}  // namespace

Tensors kernel_scatter_add(OpId op, const Tensors& in, const Attrs& attrs) {
  if (all_half(in)) return run_in_float32(kernel_scatter_add, op, in, attrs);
  const Tensor& self = in.at(0);
  return {scatter_add_impl(self, self.sizes(), self.dtype(), in.at(1), in.at(2), attrs.i("dim"))};
}

std::optional<Tensor> scatter_add_into_zeros(const Shape& shape, DType dtype, const Tensor& index, const Tensor& src,
                                             int64_t dim) {
  if ((dtype != DType::Float32 && dtype != DType::Float64) || !index.device().is_cpu() || !src.device().is_cpu())
    return std::nullopt;
  return scatter_add_impl(Tensor(), shape, dtype, index, src, dim);
}

}  // namespace kiln::cpu
