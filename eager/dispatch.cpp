#include "eager/dispatch.h"

#include "eager/kernels.h"

namespace kiln {
namespace {
DispatchObserver g_autograd = nullptr;
}  // namespace

void set_autograd_observer(DispatchObserver obs) { g_autograd = obs; }

Tensors dispatch(OpId op, const Tensors& inputs, const Attrs& attrs) {
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs) {
    if (!t.defined()) fail("{}: an input tensor is undefined", op_name(op));
    if (!first) first = &t;
    else if (!(t.device() == first->device()))
      fail("{}: expected all tensors on one device, got {} and {}", op_name(op), first->device().str(),
           t.device().str());
  }
  if (first && !first->device().is_cpu())
    fail("{}: no kernel for device {} in this build", op_name(op), first->device().str());
  TraceHooks* tracer = trace_hooks();
  Tensors out;
  {
    QuietTraceReads quiet;  // kernels read their inputs; that is not user code reading values
    out = cpu::kernel_for(op)(op, inputs, attrs);
    if (g_autograd) g_autograd(op, inputs, attrs, out);
  }
  if (tracer) tracer->on_op(op, inputs, attrs, out);
  return out;
}

}  // namespace kiln
