#pragma once
// The scalar functions that ops.def expressions call, beyond the math library: one text for the CPU and
// the GPU. The CUDA prelude compiles this file as it stands (backends/cuda/meson.build embeds it at build
// time), under NVRTC with -default-device, where no standard header exists: the definitions below the two
// branches use only the names both branches give them, so neither side keeps a copy that could drift.
#ifdef __CUDACC_RTC__
namespace kiln::scalar_math {
// The device's types: bool, int, long long, float and double (half types compute in float).
template <class T> inline constexpr bool is_floating_point_v = false;
template <> inline constexpr bool is_floating_point_v<float> = true;
template <> inline constexpr bool is_floating_point_v<double> = true;
template <class A, class B> inline constexpr bool is_same_v = false;
template <class A> inline constexpr bool is_same_v<A, A> = true;
template <class T> struct make_unsigned { typedef unsigned long long type; };
template <> struct make_unsigned<int> { typedef unsigned int type; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;
template <class T> inline T infinity() { return T(1.0 / 0.0); }
}  // namespace kiln::scalar_math
#else
#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln::scalar_math {
using std::copysign;
using std::cos;
using std::erf;
using std::exp;
using std::fabs;
using std::floor;
using std::fmod;
using std::is_floating_point_v;
using std::is_same_v;
using std::log;
using std::log1p;
using std::make_unsigned_t;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;
template <class T> inline T infinity() { return std::numeric_limits<T>::infinity(); }
}  // namespace kiln::scalar_math
#endif

namespace kiln::scalar_math {

template <class T>
inline T kabs(T x) {
  if constexpr (is_floating_point_v<T>) return fabs(x);  // abs(-0.0) is +0.0, as in torch
  else if constexpr (is_same_v<T, bool>) return x;
  else return x < T(0) ? T(-x) : x;
}

// The identities of max and min (ops.def's KILN_REDUCE rows): infinities for floats, the ends of the range
// for integers, false / true for bool.
template <class T>
inline T khighest() {
  if constexpr (is_floating_point_v<T>) return infinity<T>();
  else if constexpr (is_same_v<T, bool>) return true;
  else return T(~make_unsigned_t<T>(0) >> 1);
}
template <class T>
inline T klowest() {
  if constexpr (is_floating_point_v<T>) return -infinity<T>();
  else if constexpr (is_same_v<T, bool>) return false;
  else return T(-khighest<T>() - T(1));
}

// floor; integers and bool are whole already.
template <class T>
inline T kfloor(T x) {
  if constexpr (is_floating_point_v<T>) return floor(x);
  else return x;
}

// floor_divide (Python's //): the quotient rounded toward -inf. Floats as torch rounds them: a - fmod(a, b)
// is an exact multiple of b, so dividing it gives the integer quotient up to one rounding, which rounding to
// nearest removes; floor(a / b) alone is off by one where a / b rounds up onto an integer (3 / 0.001f).
// A division by zero gives a / b (inf or nan). Integers exactly; an integer division by zero raises before
// the kernel runs (eager/cpu/elementwise.cpp, as torch's ZeroDivisionError): the 0 here is never seen.
template <class T>
inline T kfloordiv(T a, T b) {
  if constexpr (is_floating_point_v<T>) {
    if (b == T(0)) return a / b;
    T mod = fmod(a, b);
    T q = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) q -= T(1);
    if (q == T(0)) return copysign(T(0), a / b);
    T f = floor(q);
    return q - f > T(0.5) ? f + T(1) : f;
  } else if constexpr (is_same_v<T, bool>) {
    return a && b;
  } else {
    using U = make_unsigned_t<T>;
    if (b == T(0)) return T(0);
    if (b == T(-1)) return T(U(0) - U(a));  // the lowest value wraps, as torch's integer division
    T q = a / b;
    return (a % b != T(0) && ((a < T(0)) != (b < T(0)))) ? T(q - 1) : q;
  }
}

// pow; integers exactly (wrapping on overflow, as torch), where a negative exponent leaves 1 and -1 and
// truncates every other base to 0.
template <class T>
inline T kpow(T a, T b) {
  if constexpr (is_floating_point_v<T>) {
    return pow(a, b);
  } else if constexpr (is_same_v<T, bool>) {
    return a || !b;
  } else {
    using U = make_unsigned_t<T>;
    if (b < 0) return a == T(1) ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
    U r = 1, base = U(a);
    for (T e = b; e > 0; e >>= 1) {
      if (e & 1) r *= base;
      base *= base;
    }
    return T(r);
  }
}

}  // namespace kiln::scalar_math
