#include "core/dtype.h"

namespace kiln {

size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16 || t == DType::Float16;
}
bool is_integral(DType t) { return t == DType::Int32 || t == DType::Int64; }
DType default_dtype() { return DType::Float32; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // bf16 and f16 meet at float32, as in torch.
  if ((a == DType::BFloat16 && b == DType::Float16) || (a == DType::Float16 && b == DType::BFloat16))
    return DType::Float32;
  // Otherwise the enum order is the lattice: bool < int32 < int64 < half types < float32 < float64.
  return a > b ? a : b;
}

Float16::Float16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) { bits = uint16_t(sign | 0x7e00u); return; }           // NaN
  if (absx >= 0x477ff000u) { bits = uint16_t(sign | 0x7c00u); return; }          // overflow → inf
  if (absx < 0x38800000u) {                                                       // subnormal or zero
    float af;
    std::memcpy(&af, &absx, 4);
    bits = uint16_t(sign | uint32_t(__builtin_nearbyintf(af * 16777216.0f)));      // units of 2^-24
    return;
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // round to nearest even
  bits = uint16_t(sign | h);
}

Float16::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    float f = float(mant) / 16777216.0f;
    std::memcpy(&out, &f, 4);
    out |= sign;
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace kiln
