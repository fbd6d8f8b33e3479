#pragma once
// Per-device state: the primary context, the one stream every kiln kernel and copy on the device
// runs in (so work is ordered without events, and the host waits only where it reads a value), and
// the compute capability kernels are compiled for.
#include <cuda.h>

#include "backends/cuda/api.h"

namespace kiln::cuda {

struct DeviceState {
  int index = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int arch() const { return cc_major * 10 + cc_minor; }  // 90 for sm_90
};

// The device's state, initialised on first use, with its context made current on this thread.
DeviceState& device_state(int index);

// The collective-library half of core's DeviceRuntime (see core/device_runtime.h).
int visible_device_count();  // raises the driver's error instead of returning 0
void* stream_handle(int index);
void* record_event(int index);
bool query_event(int index, void* event);
void release_event(int index, void* event);

}  // namespace kiln::cuda
