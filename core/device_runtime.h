#pragma once
// The seam between core and a device backend: core allocates, frees and copies bytes of non-CPU
// storage through the runtime a backend registered (backends/cuda does so when the library loads), so
// core never depends on a device library and a build without one still links.
#include <cstddef>

#include "core/allocator.h"
#include "core/device.h"

namespace kiln {

struct DeviceRuntime {
  void* (*allocate)(int index, size_t nbytes);  // never null (throws kiln::Error)
  void (*release)(int index, void* p, size_t nbytes);
  // Copies n bytes between host and device memory or within one device, in the device's stream
  // order; returns after a copy to the host has landed.
  void (*copy_bytes)(void* dst, Device dst_device, const void* src, Device src_device, size_t n);
  MemoryStats (*memory_stats)(int index);
  void (*empty_cache)(int index);

  // For a library that queues its own work beside kiln's (NCCL): it must use the device's one stream
  // to stay ordered with kiln's kernels, and watch its work through events instead of synchronising.
  int (*device_count)();  // raises why when the driver cannot load
  // The device's stream (a CUstream), with the device's context made current on the calling thread.
  void* (*stream)(int index);
  // A new event, recorded on the device's stream after everything queued so far.
  void* (*record_event)(int index);
  // True once the work before the event has run; never blocks; raises on a device error.
  bool (*query_event)(int index, void* event);
  void (*release_event)(int index, void* event);
};

void register_device_runtime(Device::Type type, const DeviceRuntime* runtime);
// The runtime of a non-CPU device; raises when this build has none for its type.
const DeviceRuntime& device_runtime(Device device);
// Devices of a type this process can use: 0 without a registered runtime or when its driver cannot load
// (what torch.cuda.is_available() and device_count() read where the backends are out of reach).
int visible_devices(Device::Type type);

}  // namespace kiln
