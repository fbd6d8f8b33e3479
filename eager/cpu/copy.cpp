#include "eager/cpu/copy.h"

#include "eager/cpu/isa_kernels.h"
#include "eager/kernels.h"

namespace kiln::cpu {

Tensor cast_to(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.sizes(), dtype);
  copy_into(out, x);
  return out;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  Shape b = broadcast_shapes("copy_", dst.sizes(), src.sizes());
  if (b != dst.sizes())
    fail("copy_: source of shape {} cannot be broadcast to destination of shape {}", shape_str(src.sizes()),
         shape_str(dst.sizes()));
  auto L = make_loop("copy_", dst, {&src});
  isa_kernels().cast(dst.dtype(), src.dtype(), L);
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
