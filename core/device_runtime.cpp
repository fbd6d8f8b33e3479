#include "core/device_runtime.h"

#include "core/error.h"

namespace kiln {
namespace {
// Indexed by Device::Type; written once while the library loads, read afterwards.
const DeviceRuntime* g_runtimes[2] = {};
}  // namespace

void register_device_runtime(Device::Type type, const DeviceRuntime* runtime) { g_runtimes[size_t(type)] = runtime; }

const DeviceRuntime& device_runtime(Device device) {
  const DeviceRuntime* r = g_runtimes[size_t(device.type)];
  if (!r) fail("cuda: kiln was built without the cuda toolkit (asked for a tensor on {})", device.str());
  return *r;
}

int visible_devices(Device::Type type) {
  if (type == Device::Type::CPU) return 1;
  const DeviceRuntime* r = g_runtimes[size_t(type)];
  if (!r) return 0;
  try {
    return r->device_count();
  } catch (const Error&) {
    return 0;
  }
}

MemoryStats memory_stats(Device device) {
  return device.is_cpu() ? memory_stats() : device_runtime(device).memory_stats(device.index);
}

void empty_cache(Device device) {
  if (device.is_cpu()) return empty_cache();
  device_runtime(device).empty_cache(device.index);
}

}  // namespace kiln
