#pragma once
// Which backend compiles a graph's fusion groups: the one of the device its tensor inputs live on.
#include <vector>

#include "core/device.h"
#include "jit/group_kernel.h"

namespace kiln::jit {

// The device type a graph whose tensor inputs live on `devices` runs on: a GPU's when any input is on
// one (as eager dispatch, a 0-d CPU tensor beside GPU tensors is a scalar), else the CPU.
Device::Type device_type_for(const std::vector<Device>& devices);
// The backend for that device type. Null when this build or machine has none for it (groups then run
// on the interpreter).
const Backend* backend_for(const std::vector<Device>& devices);
// b's compile() as a GroupCompiler; empty for null.
GroupCompiler compiler_of(const Backend* b);
// The CPU's backend as a GroupCompiler: the x86 code generator where the CPU has AVX2.
GroupCompiler default_backend();

}  // namespace kiln::jit
