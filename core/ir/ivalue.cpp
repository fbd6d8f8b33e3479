#include "core/ir/ivalue.h"

#include <fmt/format.h>

namespace kiln {

IValue IValue::tuple(std::vector<IValue> elems) {
  IValue v;
  v.v_ = std::make_shared<Tuple>(Tuple{std::move(elems)});
  return v;
}

IValue IValue::list(std::vector<IValue> elems) {
  IValue v;
  v.v_ = std::make_shared<List>(List{std::move(elems)});
  return v;
}

IValue IValue::dict(std::vector<std::pair<IValue, IValue>> items) {
  IValue v;
  v.v_ = std::make_shared<Dict>(Dict{std::move(items)});
  return v;
}

const Tensor& IValue::to_tensor() const {
  if (!is_tensor()) fail("expected a Tensor, got {}", type_name());
  return std::get<Tensor>(v_);
}

int64_t IValue::to_int() const {
  if (is_int()) return std::get<int64_t>(v_);
  if (is_bool()) return std::get<bool>(v_);
  fail("expected an int, got {}", type_name());
}

double IValue::to_double() const {
  if (is_double()) return std::get<double>(v_);
  if (is_int()) return double(std::get<int64_t>(v_));
  if (is_bool()) return std::get<bool>(v_);
  fail("expected a float, got {}", type_name());
}

bool IValue::to_bool() const {
  if (!is_bool()) fail("expected a bool, got {}", type_name());
  return std::get<bool>(v_);
}

const std::string& IValue::to_string() const {
  if (!is_string()) fail("expected a str, got {}", type_name());
  return std::get<std::string>(v_);
}

const std::vector<IValue>& IValue::elements() const {
  if (is_tuple()) return std::get<std::shared_ptr<Tuple>>(v_)->elems;
  if (is_list()) return std::get<std::shared_ptr<List>>(v_)->elems;
  fail("expected a tuple or a list, got {}", type_name());
}

const std::vector<std::pair<IValue, IValue>>& IValue::items() const {
  if (!is_dict()) fail("expected a dict, got {}", type_name());
  return std::get<std::shared_ptr<Dict>>(v_)->items;
}

const IValue* IValue::find(std::string_view key) const {
  for (const auto& [k, v] : items())
    if (k.is_string() && k.to_string() == key) return &v;
  return nullptr;
}

std::string IValue::type_name() const {
  if (is_none()) return "None";
  if (is_tensor()) return "Tensor";
  if (is_int()) return "int";
  if (is_double()) return "float";
  if (is_bool()) return "bool";
  if (is_string()) return "str";
  if (is_dict()) {
    const auto& its = items();
    if (its.empty()) return "Dict[Any, Any]";
    return "Dict[" + its[0].first.type_name() + ", " + its[0].second.type_name() + "]";
  }
  std::string s = is_tuple() ? "Tuple[" : "List[";
  const auto& es = elements();
  if (is_list()) return s + (es.empty() ? "Any" : es[0].type_name()) + "]";
  for (size_t i = 0; i < es.size(); ++i) s += (i ? ", " : "") + es[i].type_name();
  return s + "]";
}

std::string IValue::repr() const {
  if (is_none()) return "None";
  if (is_tensor()) {
    const Tensor& t = to_tensor();
    return t.defined() ? fmt::format("tensor of shape {}", shape_str(t.sizes())) : "undefined tensor";
  }
  if (is_int()) return std::to_string(to_int());
  if (is_double()) return fmt::format("{}", to_double());
  if (is_bool()) return to_bool() ? "True" : "False";
  if (is_string()) return "'" + to_string() + "'";
  if (is_dict()) {
    std::string s = "{";
    const auto& its = items();
    for (size_t i = 0; i < its.size(); ++i) s += (i ? ", " : "") + its[i].first.repr() + ": " + its[i].second.repr();
    return s + "}";
  }
  std::string s = is_tuple() ? "(" : "[";
  const auto& es = elements();
  for (size_t i = 0; i < es.size(); ++i) s += (i ? ", " : "") + es[i].repr();
  if (is_tuple() && es.size() == 1) s += ",";
  return s + (is_tuple() ? ")" : "]");
}

}  // namespace kiln
