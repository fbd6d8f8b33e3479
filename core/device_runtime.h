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
};

void register_device_runtime(Device::Type type, const DeviceRuntime* runtime);
// The runtime of a non-CPU device; raises when this build has none for its type.
const DeviceRuntime& device_runtime(Device device);

}  // namespace kiln
