#pragma once
// Attrs: an op call's non-tensor arguments by name (dim, keepdim, shape, ...), the same kinds the IR
// carries (int, float, int list, string, dtype, bool).
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace kiln {

using AttrValue = std::variant<int64_t, double, Shape, std::string, DType, bool>;

class Attrs {
 public:
  Attrs() = default;
  Attrs& set(std::string name, AttrValue v) {
    for (auto& [n, val] : items_)
      if (n == name) {
        val = std::move(v);
        return *this;
      }
    items_.emplace_back(std::move(name), std::move(v));
    return *this;
  }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  // A copy without `name` (the forward op of a gradient row takes its attributes less "shape").
  Attrs without(std::string_view name) const {
    Attrs r;
    for (const auto& [n, v] : items_)
      if (n != name) r.items_.emplace_back(n, v);
    return r;
  }
  int64_t i(std::string_view name) const { return get<int64_t>(name); }
  double f(std::string_view name) const { return get<double>(name); }
  const Shape& ints(std::string_view name) const { return get<Shape>(name); }
  const std::string& s(std::string_view name) const { return get<std::string>(name); }
  DType dtype(std::string_view name) const { return get<DType>(name); }
  bool b(std::string_view name) const { return get<bool>(name); }
  int64_t i_or(std::string_view name, int64_t dflt) const { return has(name) ? i(name) : dflt; }
  bool b_or(std::string_view name, bool dflt) const { return has(name) ? b(name) : dflt; }
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs&) const = default;

 private:
  const AttrValue* find(std::string_view name) const {
    for (auto& [n, v] : items_)
      if (n == name) return &v;
    return nullptr;
  }
  template <class T>
  const T& get(std::string_view name) const {
    const AttrValue* v = find(name);
    if (!v) fail("attrs: missing attribute '{}'", name);
    if (!std::holds_alternative<T>(*v)) fail("attrs: attribute '{}' has another type", name);
    return std::get<T>(*v);
  }
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace kiln
