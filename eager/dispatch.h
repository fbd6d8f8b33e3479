#pragma once
// The dispatcher: the one entry through which every primitive op of core/ops.def runs. It checks
// devices, runs the CPU kernel, then tells the observers (autograd records grad_fn, the tracer
// records a node) what ran.
#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln {

Tensors dispatch(OpId op, const Tensors& inputs, const Attrs& attrs = {});
inline Tensor dispatch1(OpId op, const Tensors& inputs, const Attrs& attrs = {}) {
  return dispatch(op, inputs, attrs)[0];
}

// Called after a kernel ran, with its inputs and outputs. Autograd installs one (process-wide); the
// tracer sees ops through core/trace_hooks.h, per thread.
using DispatchObserver = void (*)(OpId op, const Tensors& inputs, const Attrs& attrs, Tensors& outputs);
void set_autograd_observer(DispatchObserver obs);

}  // namespace kiln
