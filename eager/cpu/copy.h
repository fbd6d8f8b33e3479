#pragma once
// Copies between layouts and dtypes: the kernels behind contiguous, clone, to and copy_.
#include "core/op.h"
#include "core/tensor.h"

namespace kiln::cpu {

Tensor cast_to(const Tensor& x, DType dtype);            // a fresh contiguous tensor of that dtype
void copy_into(const Tensor& dst, const Tensor& src);    // src broadcast to dst, converted
void binary_inplace(OpId op, const Tensor& self, const Tensor& other);  // self = op(self, other)
// True when a and b share memory but are not the very same view (elementwise writes would then
// clobber elements still to be read).
bool partially_overlaps(const Tensor& a, const Tensor& b);

}  // namespace kiln::cpu
