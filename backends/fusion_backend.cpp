#include "backends/fusion_backend.h"

#include <fmt/format.h>

#include "backends/cpu/group_kernels.h"
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

bool compiles_kind(Device::Type type, std::string_view kind) {
  switch (type) {
    case Device::Type::CPU: return cpu::compiles_kind(kind);
    case Device::Type::CUDA: return false;
  }
  return false;
}

std::shared_ptr<FusedKernel> compile_kind(Device::Type type, std::string_view kind, const ir::Graph& group,
                                          const std::string& name, const GroupCompiler& epilogue,
                                          std::string* why_not) {
  switch (type) {
    case Device::Type::CPU: return cpu::compile_kind(kind, group, name, epilogue, why_not);
    case Device::Type::CUDA: break;
  }
  if (why_not) *why_not = fmt::format("no cuda kernel runs groups of kind {}", kind);
  return nullptr;
}

void warm_up_in_background(Device::Type type) {
  switch (type) {
    case Device::Type::CPU: cpu::warm_up_in_background(); return;
    case Device::Type::CUDA: return;
  }
}

}  // namespace kiln::backends
