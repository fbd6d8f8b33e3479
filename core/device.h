#pragma once
// Where a tensor's storage lives: the host, or a CUDA device by ordinal (backends/cuda runs those).
#include <cstdint>
#include <string>

namespace kiln {

struct Device {
  enum class Type : uint8_t { CPU, CUDA };
  Type type = Type::CPU;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {Type::CUDA, i}; }
  bool is_cpu() const { return type == Type::CPU; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace kiln
