#include "core/ir/type.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kiln::ir {

Type Type::tensor(std::optional<DType> dt, std::optional<std::vector<Dim>> dims) {
  return Type{TypeKind::Tensor, dt, std::move(dims), {}};
}
Type Type::tensor(DType dt, const Shape& shape) { return type_of(dt, shape); }

Type type_of(DType dt, const Shape& shape) {
  std::vector<Dim> dims;
  dims.reserve(shape.size());
  for (int64_t s : shape) dims.push_back(Dim::known(s));
  return Type::tensor(dt, std::move(dims));
}

bool Type::has_static_shape() const {
  if (kind != TypeKind::Tensor || !dims) return false;
  for (const Dim& d : *dims)
    if (!d.is_known()) return false;
  return true;
}

Shape Type::static_shape() const {
  if (!has_static_shape()) fail("type: {} has no static shape", str());
  Shape s;
  for (const Dim& d : *dims) s.push_back(d.size);
  return s;
}

const char* dtype_short_name(DType dt) {
  switch (dt) {
    case DType::Bool: return "bool";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::BFloat16: return "bf16";
    case DType::Float16: return "f16";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  return "?";
}

bool dtype_from_short_name(std::string_view s, DType* out) {
  for (DType d : {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16, DType::Float16, DType::Float32,
                  DType::Float64})
    if (s == dtype_short_name(d)) {
      *out = d;
      return true;
    }
  return false;
}

namespace {
std::string join_types(const std::vector<Type>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s;
}
}  // namespace

std::string Type::str() const {
  switch (kind) {
    case TypeKind::Tensor: {
      if (!dtype && !dims) return "Tensor";
      std::string s = dtype ? dtype_short_name(*dtype) : "Tensor";
      if (!dims) return s + "[*]";
      s += '[';
      for (size_t i = 0; i < dims->size(); ++i) {
        const Dim& d = (*dims)[i];
        if (i) s += ',';
        s += d.is_known() ? std::to_string(d.size) : (d.sym.empty() ? "?" : d.sym);
      }
      return s + ']';
    }
    case TypeKind::Int: return "int";
    case TypeKind::Float: return "float";
    case TypeKind::Bool: return "bool";
    case TypeKind::Str: return "str";
    case TypeKind::None: return "NoneType";
    case TypeKind::Tuple: return "Tuple[" + join_types(elems) + "]";
    case TypeKind::List: return "List[" + join_types(elems) + "]";
    case TypeKind::Optional: return "Optional[" + join_types(elems) + "]";
  }
  return "?";
}

}  // namespace kiln::ir
