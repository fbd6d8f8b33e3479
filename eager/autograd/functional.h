#pragma once
// Functional autograd: forward-mode products (jvp) and gradient checkpointing.
#include <functional>
#include <utility>

#include "core/tensor.h"

namespace kiln {

using TensorsFn = std::function<Tensors(const Tensors&)>;

// (fn(primals), J·tangents): the Jacobian-vector product, computed as the gradient of a
// vector-Jacobian product with respect to its cotangent (exact; works for every op with a
// differentiable derivative).
std::pair<Tensors, Tensors> jvp(const TensorsFn& fn, const Tensors& primals, const Tensors& tangents);

// Runs fn without keeping its intermediate values; backward recomputes them from the saved inputs.
// Gradients equal the plain run's; peak memory drops to the segment inputs plus one segment.
Tensors checkpoint(const TensorsFn& fn, const Tensors& inputs);

}  // namespace kiln
