#include "eager/cpu/copy.h"

#include "eager/cpu/bf16_convert.h"
#include "eager/cpu/isa_kernels.h"
#include "eager/kernels.h"

namespace kiln::cpu {

Tensor cast_to(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.sizes(), dtype);
  copy_into(out, x);
  return out;
}

namespace {
// The byte range [first, last] an element of t can touch.
std::pair<int64_t, int64_t> byte_span(const Tensor& t) {
  int64_t lo = t.storage_offset(), hi = lo;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t reach = (t.sizes()[size_t(d)] - 1) * t.strides()[size_t(d)];
    (reach < 0 ? lo : hi) += reach;
  }
  int64_t item = int64_t(t.element_size());
  return {lo * item, hi * item + item - 1};
}
}  // namespace

bool partially_overlaps(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return false;
  if (a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
      a.dtype() == b.dtype())
    return false;
  auto [alo, ahi] = byte_span(a);
  auto [blo, bhi] = byte_span(b);
  return alo <= bhi && blo <= ahi;
}

void copy_into(const Tensor& dst, const Tensor& src_in) {
  Shape b = broadcast_shapes("copy_", dst.sizes(), src_in.sizes());
  if (b != dst.sizes())
    fail("copy_: source of shape {} cannot be broadcast to destination of shape {}", shape_str(src_in.sizes()),
         shape_str(dst.sizes()));
  // A source overlapping the destination is read as it was before the copy.
  Tensor src = partially_overlaps(dst, src_in) ? cast_to(src_in, src_in.dtype()) : src_in;
  // autocast's casts: dense float32 <-> bfloat16 take the AVX512_BF16 kernels where the CPU has them.
  if (dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous()) {
    if (dst.dtype() == DType::BFloat16 && src.dtype() == DType::Float32)
      return f32_to_bf16(static_cast<const float*>(src.raw_data()), static_cast<uint16_t*>(dst.raw_data()), dst.numel());
    if (dst.dtype() == DType::Float32 && src.dtype() == DType::BFloat16)
      return bf16_to_f32(static_cast<const uint16_t*>(src.raw_data()), static_cast<float*>(dst.raw_data()), dst.numel());
  }
  auto L = make_loop("copy_", dst, {&src});
  isa_kernels().cast(dst.dtype(), src.dtype(), L);
}

bool all_half(const Tensors& in) {
  if (in.empty() || !in[0].defined()) return false;
  DType h = in[0].dtype();
  if (h != DType::BFloat16 && h != DType::Float16) return false;
  for (const Tensor& t : in)
    if (t.defined() && is_floating(t.dtype()) && t.dtype() != h) return false;
  return true;
}

Tensors run_in_float32(Kernel kernel, OpId op, const Tensors& in, const Attrs& attrs) {
  DType h = in[0].dtype();
  Tensors wide = in;
  for (Tensor& t : wide)
    if (t.defined() && t.dtype() == h) t = cast_to(t, DType::Float32);
  Tensors out = kernel(op, wide, attrs);
  for (Tensor& t : out)
    if (t.defined() && t.dtype() == DType::Float32) t = cast_to(t, h);
  return out;
}

Tensors kernel_contiguous(OpId, const Tensors& in, const Attrs&) {
  const Tensor& x = in.at(0);
  if (x.is_contiguous()) return {x};
  return {cast_to(x, x.dtype())};
}

Tensors kernel_clone(OpId, const Tensors& in, const Attrs&) { return {cast_to(in.at(0), in.at(0).dtype())}; }

Tensors kernel_to(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  DType d = attrs.dtype("dtype");
  if (x.dtype() == d) return {x};
  return {cast_to(x, d)};
}

}  // namespace kiln::cpu
