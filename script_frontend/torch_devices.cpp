#include "script_frontend/torch_devices.h"

#include <fmt/format.h>

#include "core/device_runtime.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace kiln::script {
namespace {
// torch 1.13's device types, in the order its error message lists them
constexpr std::array<std::string_view, 19> kTypes = {"cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                                                     "ve", "fpga", "ort", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "privateuseone"};

std::string type_list() {
  std::string s;
  for (std::string_view t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}
}  // namespace

DeviceSpec torch_device(std::string_view spec, std::optional<long long> index) {
  size_t colon = spec.find(':');
  std::string_view type = spec.substr(0, colon);
  if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end())
    return {"", fmt::format("Expected one of {} device type at start of device string: {}", type_list(), spec)};
  std::optional<long long> ordinal;
  if (colon != std::string_view::npos) {
    std::string_view digits = spec.substr(colon + 1);
    bool ok = !digits.empty() && digits.size() < 10 && std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (!ok) return {"", fmt::format("Invalid device string: '{}'", spec)};
    ordinal = std::stoll(std::string(digits));
  }
  if (index) {
    if (ordinal) return {"", fmt::format("type (string) must not include an index because index was passed explicitly: {}", spec)};
    if (*index < 0) return {"", "Device index must not be negative"};
    ordinal = index;
  }
  return {ordinal ? fmt::format("{}:{}", type, *ordinal) : std::string(type), ""};
}

bool is_device_string(std::string_view s) { return torch_device(s, std::nullopt).error.empty(); }

std::optional<DeviceQuery> device_query(std::string_view name) {
  if (name == "torch.cuda.device_count") return DeviceQuery{true, visible_devices(Device::Type::CUDA)};
  if (name == "torch.cuda.is_available" || name == "torch.cuda.is_bf16_supported")
    return DeviceQuery{false, visible_devices(Device::Type::CUDA) > 0};
  // no other accelerator runs kiln
  if (name == "torch.backends.mps.is_available" || name == "torch.backends.mps.is_built" || name == "torch.backends.cudnn.is_available")
    return DeviceQuery{false, 0};
  return std::nullopt;
}

bool device_query_namespace(std::string_view name) {
  return name == "torch.cuda" || name == "torch.backends" || name == "torch.backends.mps" || name == "torch.backends.cudnn";
}

}  // namespace kiln::script
