#pragma once
// The dispatcher: the one entry through which every primitive op of core/ops.def runs. It checks
// devices, runs the CPU kernel, then tells the observers (autograd records grad_fn, the tracer
// records a node) what ran.
#include "core/attrs.h"
#include "core/op.h"
#include "core/tensor.h"
#include "eager/kernel_type.h"

namespace kiln {

Tensors dispatch(OpId op, const Tensors& inputs, const Attrs& attrs = {});
inline Tensor dispatch1(OpId op, const Tensors& inputs, const Attrs& attrs = {}) {
  return dispatch(op, inputs, attrs)[0];
}

// A device backend's kernels: kernel_for(op) for every row of ops.def (raising for rows it has no
// kernel for), and the strided, converting copy within one device that copy_, fill_ and the factories
// use. backends/cuda registers its table when the library loads; devices with none raise.
struct DeviceKernels {
  Kernel (*kernel_for)(OpId op);
  void (*copy_into)(const Tensor& dst, const Tensor& src);  // src broadcast to dst, converted
};
void register_device_kernels(Device::Type type, const DeviceKernels* kernels);
const DeviceKernels& device_kernels(Device device);

// dst = src broadcast and converted, wherever the two live: across devices through a host copy.
void copy_into(const Tensor& dst, const Tensor& src);

// Called after a kernel ran, with its inputs and outputs. Autograd installs one (process-wide); the
// tracer sees ops through core/trace_hooks.h, per thread.
using DispatchObserver = void (*)(OpId op, const Tensors& inputs, const Attrs& attrs, Tensors& outputs);
void set_autograd_observer(DispatchObserver obs);

}  // namespace kiln
