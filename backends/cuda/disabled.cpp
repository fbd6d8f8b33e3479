// The CUDA runtime's public functions in a build without the CUDA toolkit (-Dnvrtc=disabled, or no
// toolkit found): no GPU is ever available, and a CUDA tensor raises from core/device_runtime.cpp.
#include "backends/cuda/api.h"
#include "backends/cuda/fusion_backend.h"

#include "core/error.h"

namespace kiln::cuda {

std::string unavailable_reason() { return "cuda: kiln was built without the cuda toolkit"; }
bool is_available() { return false; }
int device_count() { return 0; }
const backends::FusionBackend* fusion_backend() { return nullptr; }
void synchronize(int index) { fail("{} (synchronize cuda:{})", unavailable_reason(), index); }

}  // namespace kiln::cuda
