// Joining and indexing kernels: cat, index_select, gather (torch semantics). Each moves whole elements
// as bytes, so one code path serves every dtype; contiguous rows go through memcpy.
#include <omp.h>

#include <cstring>

#include "eager/cpu/copy.h"
#include "eager/cpu/strided_loop.h"
#include "eager/cpu/views.h"
#include "eager/kernels.h"

namespace kiln::cpu {
namespace {

// A contiguous copy when needed, made here rather than through dispatch so observers see only this op.
Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : cast_to(t, t.dtype()); }

int64_t prod_range(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

// Reads index element i of a contiguous int32 or int64 tensor.
int64_t index_at(const Tensor& index, int64_t i) {
  if (index.dtype() == DType::Int64) return static_cast<const int64_t*>(index.raw_data())[i];
  return static_cast<const int32_t*>(index.raw_data())[i];
}

// Copies one element of `size` bytes; fixed sizes let the compiler emit a single move.
inline void copy_elem(char* dst, const char* src, size_t size) {
  switch (size) {
    case 1: *dst = *src; return;
    case 2: std::memcpy(dst, src, 2); return;
    case 4: std::memcpy(dst, src, 4); return;
    case 8: std::memcpy(dst, src, 8); return;
    default: std::memcpy(dst, src, size); return;
  }
}

}  // namespace

Tensors kernel_cat(OpId, const Tensors& in, const Attrs& attrs) {
  if (in.empty()) fail("cat: expected a non-empty list of tensors");
  // torch.cat promotes over every input, the skipped legacy empties included.
  DType dtype = in[0].dtype();
  for (const Tensor& t : in) dtype = promote_types(dtype, t.dtype());
  // Legacy 1-D empty tensors ([0]) are placeholders that torch skips whatever the other shapes are.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; };
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dim() == 0) fail("cat: zero-dimensional tensor (at position {}) cannot be concatenated", i);
    if (!ref && !skipped(in[i])) ref = &in[i];
  }
  if (!ref) {
    Tensor out = Tensor::empty({0}, dtype);
    return {out};
  }
  int64_t nd = ref->dim();
  int64_t dim = wrap_dim("cat", attrs.i("dim"), nd);
  Shape out_shape = ref->sizes();
  out_shape[size_t(dim)] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (skipped(t)) continue;
    if (t.dim() != nd)
      fail("cat: tensors must have the same number of dimensions, got shapes {} and {} (tensor {})",
           shape_str(ref->sizes()), shape_str(t.sizes()), i);
    for (int64_t d = 0; d < nd; ++d)
      if (d != dim && t.sizes()[size_t(d)] != ref->sizes()[size_t(d)])
        fail("cat: shapes {} and {} (tensor {}) must match except in dimension {}", shape_str(ref->sizes()),
             shape_str(t.sizes()), i, dim);
    out_shape[size_t(dim)] += t.sizes()[size_t(dim)];
  }
  Tensor out = Tensor::empty(out_shape, dtype);
  if (out.numel() == 0) return {out};

  size_t es = itemsize(dtype);
  int64_t outer = prod_range(out_shape, 0, size_t(dim));
  int64_t inner = prod_range(out_shape, size_t(dim) + 1, out_shape.size());
  int64_t out_row = out_shape[size_t(dim)] * inner;  // elements between consecutive outer rows of out
  int64_t at = 0;                                     // position along dim of the next input
  char* base = static_cast<char*>(out.raw_data());
  for (const Tensor& t : in) {
    if (skipped(t)) continue;
    int64_t len = t.sizes()[size_t(dim)];
    if (len == 0) continue;
    if (t.dtype() == dtype && t.is_contiguous()) {
      // Each outer row of the input is one contiguous block of len*inner elements.
      size_t block = size_t(len * inner) * es;
      const char* src = static_cast<const char*>(t.raw_data());
      char* dst = base + size_t(at * inner) * es;
#pragma omp parallel for if (outer * len * inner > kParallelGrain && outer > 1)
      for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + size_t(o * out_row) * es, src + size_t(o) * block, block);
    } else {
      Shape st = contiguous_strides(out_shape);
      Shape sz = out_shape;
      sz[size_t(dim)] = len;
      copy_into(make_view(out, sz, st, at * inner), t);
    }
    at += len;
  }
  return {out};
}

Tensors kernel_index_select(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  Tensor index = in.at(1);
  if (index.dtype() != DType::Int64 && index.dtype() != DType::Int32)
    fail("index_select: expected index of dtype int64 or int32, got {}", dtype_name(index.dtype()));
  if (index.dim() > 1) fail("index_select: index must be 1-D or 0-d, got shape {}", shape_str(index.sizes()));
  // A 0-d input behaves as one element along dim 0 (torch).
  int64_t nd = std::max<int64_t>(x.dim(), 1);
  int64_t dim = wrap_dim("index_select", attrs.i("dim"), nd);
  Shape xs = x.dim() == 0 ? Shape{1} : x.sizes();
  int64_t size = xs[size_t(dim)];
  index = dense(index);
  int64_t n = index.numel();
  if (x.dim() == 0 && n != 1)
    fail("index_select: index of a 0-d input must have one element, got shape {}", shape_str(index.sizes()));
  // With "indexing" set (the pick of an advanced index, x[idx]), a negative index counts from the end and a bad
  // one is reported as torch reports it, naming the index's own dim, not index_select.
  const bool indexing = attrs.has("indexing");
  bool negative = false;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = index_at(index, i);
    if (indexing && (v < -size || v >= size))
      fail("index {} is out of bounds for dimension {} with size {}", v, attrs.i("indexing"), size);
    if (!indexing && (v < 0 || v >= size))
      fail("index_select: index {} is out of bounds for dimension {} with size {}", v, dim, size);
    negative = negative || v < 0;
  }
  if (negative) {
    Tensor wrapped = Tensor::empty({n}, DType::Int64);
    int64_t* w = wrapped.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) w[i] = index_at(index, i) < 0 ? index_at(index, i) + size : index_at(index, i);
    index = wrapped;
  }
  Shape out_shape = xs;
  out_shape[size_t(dim)] = n;
  Tensor out = Tensor::empty(x.dim() == 0 ? Shape{} : out_shape, x.dtype());
  if (out.numel() == 0) return {out};

  Tensor xc = dense(x);
  size_t es = itemsize(x.dtype());
  int64_t outer = prod_range(xs, 0, size_t(dim));
  int64_t inner = prod_range(xs, size_t(dim) + 1, xs.size());
  const char* src = static_cast<const char*>(xc.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  int64_t total = outer * n;
  if (inner == 1) {
    // Selecting single elements: a copy per element, no memcpy call overhead.
#pragma omp parallel for if (total > kParallelGrain)
    for (int64_t r = 0; r < total; ++r) {
      int64_t o = r / n, i = r % n;
      copy_elem(dst + size_t(r) * es, src + size_t(o * size + index_at(index, i)) * es, es);
    }
  } else {
    size_t row = size_t(inner) * es;
#pragma omp parallel for if (total * inner > kParallelGrain && total > 1)
    for (int64_t r = 0; r < total; ++r) {
      int64_t o = r / n, i = r % n;
      std::memcpy(dst + size_t(r) * row, src + size_t(o * size + index_at(index, i)) * row, row);
    }
  }
  return {out};
}

Tensors kernel_gather(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  const Tensor& index = in.at(1);
  if (index.dtype() != DType::Int64) fail("gather: expected index of dtype int64, got {}", dtype_name(index.dtype()));
  if (index.dim() != x.dim() && !(std::max<int64_t>(x.dim(), 1) == 1 && std::max<int64_t>(index.dim(), 1) == 1))
    fail("gather: index shape {} must have the same rank as input shape {}", shape_str(index.sizes()),
         shape_str(x.sizes()));
  // 0-d operands act as 1-D with one element (torch).
  Shape xs = x.dim() == 0 ? Shape{1} : x.sizes(), xst = x.dim() == 0 ? Shape{0} : x.strides();
  Shape is = index.dim() == 0 ? Shape{1} : index.sizes();
  int64_t nd = int64_t(xs.size());
  int64_t dim = wrap_dim("gather", attrs.i("dim"), nd);
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim && is[size_t(d)] > xs[size_t(d)])
      fail("gather: index shape {} is larger than input shape {} in dimension {}", shape_str(index.sizes()),
           shape_str(x.sizes()), d);
  Tensor out = Tensor::empty(index.sizes(), x.dtype());
  int64_t numel = out.numel();
  if (numel == 0) return {out};
  Tensor idx = dense(index);
  const int64_t* ip = idx.data_ptr<int64_t>();
  int64_t size = xs[size_t(dim)];
  for (int64_t i = 0; i < numel; ++i)
    if (ip[i] < 0 || ip[i] >= size)
      fail("gather: index {} is out of bounds for dimension {} with size {}", ip[i], dim, size);

  // Rows along the last dim of the index; each row's base offset in x comes from the other coordinates.
  size_t es = itemsize(x.dtype());
  int64_t ses = int64_t(es);
  int64_t last = is.back(), rows = numel / last;
  int64_t last_stride = xst.back();
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  int64_t dim_stride = xst[size_t(dim)];
  bool dim_is_last = dim == nd - 1;
#pragma omp parallel for if (numel > kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, base = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      int64_t c = rem % is[size_t(d)];
      rem /= is[size_t(d)];
      if (d != dim) base += c * xst[size_t(d)];
    }
    const int64_t* irow = ip + r * last;
    char* orow = dst + size_t(r * last) * es;
    if (dim_is_last) {
      for (int64_t j = 0; j < last; ++j) copy_elem(orow + size_t(j) * es, src + (base + irow[j] * dim_stride) * ses, es);
    } else {
      for (int64_t j = 0; j < last; ++j)
        copy_elem(orow + size_t(j) * es, src + (base + j * last_stride + irow[j] * dim_stride) * ses, es);
    }
  }
  return {out};
}

}  // namespace kiln::cpu
