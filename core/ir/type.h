#pragma once
// The static type of an IR value: a tensor (dtype and shape, each possibly unknown, a dim possibly
// symbolic) or one of the script language's scalar and container types.
//
// Text form (the printer's and parser's):
//   f32[64,784]   f32[N,784]   f32[?,784]   f32[]  (0-d)   f32[*]  (rank unknown)   Tensor  (nothing known)
//   int  float  bool  str  NoneType  Tuple[int, f32[2]]  List[Tensor]  Optional[Tensor]
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace kiln::ir {

// One dimension: a known size, a named symbolic size (equal names are equal sizes), or unknown.
struct Dim {
  int64_t size = -1;
  std::string sym;
  static Dim known(int64_t n) { return {n, {}}; }
  static Dim symbolic(std::string name) { return {-1, std::move(name)}; }
  static Dim unknown() { return {}; }
  bool is_known() const { return size >= 0; }
  bool operator==(const Dim&) const = default;
};

enum class TypeKind : uint8_t { Tensor, Int, Float, Bool, Str, None, Tuple, List, Optional };

struct Type {
  TypeKind kind = TypeKind::Tensor;
  std::optional<DType> dtype;            // Tensor only
  std::optional<std::vector<Dim>> dims;  // Tensor only; nullopt = rank unknown
  std::vector<Type> elems;               // Tuple: the elements; List/Optional: the one element type

  static Type tensor(std::optional<DType> dt = std::nullopt, std::optional<std::vector<Dim>> dims = std::nullopt);
  static Type tensor(DType dt, const Shape& shape);
  static Type scalar(TypeKind k) { return Type{k, {}, {}, {}}; }
  static Type tuple(std::vector<Type> elems) { return Type{TypeKind::Tuple, {}, {}, std::move(elems)}; }
  static Type list(Type elem) { return Type{TypeKind::List, {}, {}, {std::move(elem)}}; }
  static Type optional(Type elem) { return Type{TypeKind::Optional, {}, {}, {std::move(elem)}}; }

  bool is_tensor() const { return kind == TypeKind::Tensor; }
  // Every dim known: the shape a kernel could be specialised for.
  bool has_static_shape() const;
  Shape static_shape() const;  // raises unless has_static_shape()
  bool operator==(const Type&) const = default;
  std::string str() const;
};

// The type a runtime tensor has: its dtype and exact shape.
Type type_of(DType dt, const Shape& shape);
// Short dtype spelling used in IR text: f32, f64, i32, i64, bool, bf16, f16.
const char* dtype_short_name(DType dt);
bool dtype_from_short_name(std::string_view s, DType* out);

}  // namespace kiln::ir
