#pragma once
// The scalar functions that ops.def expressions call, beyond the std:: ones. The CUDA renderer
// defines the same names as __device__ functions, so one expression text serves both.
#include <cmath>
#include <type_traits>

namespace kiln::scalar_math {

using std::cos;
using std::erf;
using std::exp;
using std::log;
using std::log1p;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;

template <class T>
inline T kabs(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::fabs(x);  // abs(-0.0) is +0.0, as in torch
  else if constexpr (std::is_same_v<T, bool>) return x;
  else return x < T(0) ? T(-x) : x;
}

}  // namespace kiln::scalar_math
