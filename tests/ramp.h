#pragma once
// Inputs the tests' PyTorch generators make the same way: ((3i + k) mod 7 - 3) / 8, exact in float32 and float64.
#include <cstdint>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::test {

inline Tensor ramp(const Shape& shape, int k, DType dtype = DType::Float32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(double((3 * i + k) % 7 - 3) / 8.0);
  return tensor(v, shape, dtype);
}

}  // namespace kiln::test
