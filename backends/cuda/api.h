#pragma once
// kiln's CUDA runtime, the public part: availability, synchronisation and the device allocator's
// statistics. Tensors reach a GPU with x.cuda() / x.to(Device::cuda(i)) or a factory's device option.
#include <string>

#include "core/allocator.h"
#include "core/device.h"

namespace kiln::cuda {

// True when this build has CUDA support, the driver loads and at least one GPU is visible.
bool is_available();
// GPUs visible (0 without a driver or without CUDA support in this build).
int device_count();
// Waits until every kernel and copy queued on the device has finished.
void synchronize(int index = 0);
// Why is_available() is false, as the error a CUDA tensor would raise; empty when it is true.
std::string unavailable_reason();

}  // namespace kiln::cuda
