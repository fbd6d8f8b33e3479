#pragma once
// The CUDA code generator behind the fusion-backend interface (backends/fusion_backend.h): groups are
// rendered by fusion_compiler.h when the JIT compiles them, compiled by NVRTC for a device's
// architecture the first time they run on it, and launched through the driver.
#include "backends/fusion_backend.h"

namespace kiln::cuda {

// Null in a build without the CUDA toolkit. Exists without a driver: compiling a group renders its
// source only; running it needs the device.
const backends::FusionBackend* fusion_backend();

}  // namespace kiln::cuda
