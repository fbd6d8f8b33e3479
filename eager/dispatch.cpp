#include "eager/dispatch.h"

#include "core/device_runtime.h"
#include "eager/autocast/autocast.h"
#include "eager/cpu/copy.h"
#include "eager/kernels.h"
#include "eager/profiler/profile_hooks.h"
#include "eager/shapes_only.h"
#include "eager/untraced.h"

#include <optional>
#include <utility>

namespace kiln {
namespace {
DispatchObserver g_autograd = nullptr;
const DeviceKernels* g_device_kernels[2] = {};  // by Device::Type; written while the library loads

// A 0-d CPU tensor (a C++ scalar, or a torch-style CPU scalar) may join a device op, as in torch.
bool is_cpu_scalar(const Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }
}  // namespace

void set_autograd_observer(DispatchObserver obs) { g_autograd = obs; }

namespace detail {
thread_local ShapesOnlyHooks* t_shapes_only_hooks = nullptr;
}  // namespace detail

ShapesOnlyHooks* set_shapes_only_hooks(ShapesOnlyHooks* hooks) { return std::exchange(detail::t_shapes_only_hooks, hooks); }

void register_device_kernels(Device::Type type, const DeviceKernels* kernels) { g_device_kernels[size_t(type)] = kernels; }

const DeviceKernels& device_kernels(Device device) {
  const DeviceKernels* k = g_device_kernels[size_t(device.type)];
  if (!k) device_runtime(device);  // raises: no backend for this device in this build
  if (!k) fail("{}: no kernels registered for this device", device.str());
  return *k;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  Device dd = dst.device(), sd = src.device();
  if (dd.is_cpu() && sd.is_cpu()) return cpu::copy_into(dst, src);
  if (dd == sd || (is_cpu_scalar(src) && !dd.is_cpu())) return device_kernels(dd).copy_into(dst, src);
  // Across devices: convert and lay out on the source's side, move the bytes, then copy within dst's
  // device (which handles dst's strides).
  Shape b = broadcast_shapes("copy_", dst.sizes(), src.sizes());
  if (b != dst.sizes())
    fail("copy_: source of shape {} cannot be broadcast to destination of shape {}", shape_str(src.sizes()),
         shape_str(dst.sizes()));
  Tensor packed = Tensor::empty(src.sizes(), dst.dtype(), sd);
  copy_into(packed, src);
  Tensor moved = dst.is_contiguous() && dst.sizes() == src.sizes() ? dst : Tensor::empty(src.sizes(), dst.dtype(), dd);
  if (packed.numel() > 0)
    device_runtime(dd.is_cpu() ? sd : dd)
        .copy_bytes(moved.raw_data(), dd, packed.raw_data(), sd, size_t(packed.numel()) * packed.element_size());
  if (!moved.is_same(dst)) copy_into(dst, moved);
}

Tensors dispatch(OpId op, const Tensors& inputs_in, const Attrs& attrs) {
  // Autocast's casts are dispatched ops themselves, recorded before this op by autograd and the tracer.
  bool autocast = autocast_enabled();
  Tensors cast;
  if (autocast) cast = autocast_inputs(op, inputs_in);
  const Tensors& inputs = autocast ? cast : inputs_in;
  const Tensor* ref = nullptr;  // the first input that fixes the device
  for (const Tensor& t : inputs) {
    if (!t.defined()) fail("{}: an input tensor is undefined", op_name(op));
    if (is_cpu_scalar(t)) continue;
    if (!ref) ref = &t;
    else if (!(t.device() == ref->device()))
      fail("{}: expected all tensors on one device, got {} and {}", op_name(op), ref->device().str(),
           t.device().str());
  }
  Device device = ref ? ref->device() : Device::cpu();
  TraceHooks* tracer = trace_hooks();
  ProfileHooks* profiler = profile_hooks();  // null unless a Profiler records on this thread
  int64_t start_ns = profiler ? profile_clock_ns() : 0;
  Tensors out;
  ShapesOnlyHooks* shapes_only = tracer ? shapes_only_hooks() : nullptr;  // only where the op is recorded
  bool recorded_only = shapes_only && shapes_only->record_only(op, inputs, attrs, out);
  {
    // Kernels read their inputs and may dispatch ops of their own (a contiguous copy, a cast): none of that
    // is the user's code, and a trace records only the op itself, below.
    std::optional<Untraced> untraced;
    if (tracer) untraced.emplace();
    if (!recorded_only)
      out = device.is_cpu() ? cpu::kernel_for(op)(op, inputs, attrs) : device_kernels(device).kernel_for(op)(op, inputs, attrs);
    if (g_autograd) g_autograd(op, inputs, attrs, out);
    if (profiler) profiler->on_op(op, inputs, attrs, out, start_ns, profile_clock_ns());
  }
  if (tracer) tracer->on_op(op, inputs, attrs, out);
  return out;
}

}  // namespace kiln
