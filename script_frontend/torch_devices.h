#pragma once
// torch.device values as script code passes them around: a device is kept as torch's string for it
// ("cpu", "cuda", "cuda:1"), since a graph runs where its inputs are and only needs to know that an
// argument is one. Internal to script_frontend.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::script {

// torch.device(type_or_string, index): torch's string for the device, or torch's RuntimeError text when the
// type is not one torch has (an index given twice, a negative index, `gpu`).
struct DeviceSpec {
  std::string text;   // "cuda:0"
  std::string error;  // set instead of text when torch would raise
};
DeviceSpec torch_device(std::string_view spec, std::optional<long long> index);
// True when torch would accept the string as a device ("cpu", "cuda:1", "mps").
bool is_device_string(std::string_view s);

// What a device query returns in kiln ("torch.cuda.is_available": whether kiln's CUDA runtime sees a GPU;
// "torch.cuda.device_count"; "torch.backends.mps.is_available": false), or nullopt for a name that is none.
struct DeviceQuery {
  bool is_int = false;  // device_count; the rest are bools
  int64_t value = 0;
};
std::optional<DeviceQuery> device_query(std::string_view qualified_name);
// The namespaces device queries live in: "torch.cuda", "torch.backends", "torch.backends.mps", ...
bool device_query_namespace(std::string_view qualified_name);

}  // namespace kiln::script
