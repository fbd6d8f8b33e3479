#include "backends/fusion_backend.h"

#include "backends/cuda/fusion_backend.h"
#include "backends/x86/fusion_backend.h"

namespace kiln::backends {

const FusionBackend* fusion_backend(Device::Type type) {
  switch (type) {
    case Device::Type::CPU: return x86::fusion_backend();
    case Device::Type::CUDA: return cuda::fusion_backend();
  }
  return nullptr;
}

const FusionBackend& default_fusion_rules() { return x86::fusion_rules(); }

}  // namespace kiln::backends
