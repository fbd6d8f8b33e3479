#pragma once
// The derivative formulas: one switch over the op table, each written with kiln ops so that the
// backward pass is itself recorded (higher-order gradients) and traceable.
#include <vector>

#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln {

// Whether the op has a derivative at all (comparisons, argmax, ... do not).
bool is_differentiable(OpId op);

// Whether the formula reads input i's values (false: only its shape and dtype, so the recorder keeps
// no reference to its storage and an in-place change to it is harmless).
bool derivative_reads_input(OpId op, size_t i);

// Gradients for each input given the gradients of the outputs (undefined = zero). `needs[i]` says
// which inputs want one; the result may be broader than the input's shape (broadcast): the engine
// sums it back with sum_to.
// `outputs` holds the op's outputs that its formula reads (op_facts' Out columns; the others may be undefined).
Tensors derivative(OpId op, const Attrs& attrs, const Tensors& inputs, const Tensors& grad_outputs,
                   const std::vector<bool>& needs, const Tensors& outputs = {});

// Sums g over the dims that broadcasting added or expanded so that it has `shape` (the one shared
// helper that undoes broadcasting for every op).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace kiln
