#include "jit/default_backend.h"

namespace kiln::jit {

Device::Type device_type_for(const std::vector<Device>& devices) {
  Device::Type type = Device::Type::CPU;
  for (const Device& d : devices)
    if (!d.is_cpu()) type = d.type;
  return type;
}

const Backend* backend_for(const std::vector<Device>& devices) {
  return backends::fusion_backend(device_type_for(devices));
}

GroupCompiler compiler_of(const Backend* b) {
  if (!b) return {};
  return [b](const ir::Graph& group, const std::string& name, std::string* why_not) {
    return b->compile(group, name, why_not);
  };
}

GroupCompiler default_backend() { return compiler_of(backend_for({Device::cpu()})); }

}  // namespace kiln::jit
