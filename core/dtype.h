#pragma once
// Element types, their sizes and names, the half-precision storage types, and PyTorch's promotion lattice.
#include <cstdint>
#include <cstring>
#include <string_view>

namespace kiln {

enum class DType : uint8_t { Bool, Int32, Int64, BFloat16, Float16, Float32, Float64 };
constexpr int kNumDTypes = 7;

size_t itemsize(DType t);
std::string_view dtype_name(DType t);  // "float32", as torch prints it
bool is_floating(DType t);             // bf16/f16 count as floating
bool is_integral(DType t);             // bool is not integral
DType promote_types(DType a, DType b);  // torch.promote_types
DType default_dtype();                  // float32

// bfloat16 / float16: storage only; arithmetic happens in float32 after conversion.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = 0x7fc0; return; }  // NaN stays quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                  // round to nearest even
    bits = uint16_t(u >> 16);
  }
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f);
  operator float() const;
};

// Calls f(T{}) with the C++ type of a dtype: the one place that maps runtime dtypes to types.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(bool{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float16: return f(Float16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  return f(float{});
}

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<Float16>() { return DType::Float16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

}  // namespace kiln
