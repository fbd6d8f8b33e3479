#pragma once
// x[:, idx] = v, x[..., idx] = v as a new tensor: torch's index_put_ with an integer index tensor on one dim past
// the first (eager/tensor_ops.h has index_put for dim 0, and masked_put_dim for a bool mask on any dim). Its own
// header, so that kiln.h's many includers are not rebuilt for it.
#include <cstdint>

#include "core/tensor.h"

namespace kiln {

// idx an integer tensor over x's dim d (negative: from the end); v broadcast to x[:, idx]'s shape and cast to x's
// dtype as torch's index_put_ (accumulate=False; a repeated index keeps the last write)
Tensor index_put_dim(const Tensor& x, int64_t d, const Tensor& index, const Tensor& v);

}  // namespace kiln
