#pragma once
// Copies between layouts and dtypes: the kernels behind contiguous, clone, to and copy_.
#include "core/op.h"
#include "core/tensor.h"
#include "eager/kernel_type.h"

namespace kiln::cpu {

Tensor cast_to(const Tensor& x, DType dtype);            // a fresh contiguous tensor of that dtype
void copy_into(const Tensor& dst, const Tensor& src);    // src broadcast to dst, converted
void binary_inplace(OpId op, const Tensor& self, const Tensor& other);  // self = op(self, other)
// True when a and b share memory but are not the very same view (elementwise writes would then
// clobber elements still to be read).
bool partially_overlaps(const Tensor& a, const Tensor& b);

// For kernels with no bf16/f16 loop (conv2d and its gradients, as autocast feeds them): true when
// in[0] is bf16/f16 and every other floating input has that dtype; run_in_float32 then runs `kernel`
// on the inputs widened to float32 and narrows its floating outputs back.
bool all_half(const Tensors& in);
Tensors run_in_float32(Kernel kernel, OpId op, const Tensors& in, const Attrs& attrs);

}  // namespace kiln::cpu
