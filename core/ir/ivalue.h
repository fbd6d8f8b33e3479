#pragma once
// IValue: a value a graph takes or returns (PyTorch's name): None, a Tensor, an int, a float, a
// bool, a string, or a tuple, list or dict of IValues. Script functions take ints and floats; traced
// functions only tensors; dicts come from PyTorch checkpoints (eager/torch_checkpoint.h) and keep their
// insertion order, as Python's do.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace kiln {

class IValue {
 public:
  struct Tuple;
  struct List;
  struct Dict;

  IValue() = default;  // None
  IValue(Tensor t) : v_(std::move(t)) {}
  IValue(int64_t i) : v_(i) {}
  IValue(int i) : v_(int64_t(i)) {}
  IValue(double d) : v_(d) {}
  IValue(bool b) : v_(b) {}
  IValue(std::string s) : v_(std::move(s)) {}
  IValue(const char* s) : v_(std::string(s)) {}
  static IValue tuple(std::vector<IValue> elems);
  static IValue list(std::vector<IValue> elems);
  static IValue dict(std::vector<std::pair<IValue, IValue>> items);

  bool is_none() const { return v_.index() == 0; }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_double() const { return std::holds_alternative<double>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_tuple() const { return std::holds_alternative<std::shared_ptr<Tuple>>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v_); }
  bool is_number() const { return is_int() || is_double() || is_bool(); }

  // Each raises kiln::Error naming both kinds when the value holds another kind.
  const Tensor& to_tensor() const;
  int64_t to_int() const;   // bools convert, as in Python
  double to_double() const; // ints and bools convert
  bool to_bool() const;
  const std::string& to_string() const;
  const std::vector<IValue>& elements() const;  // a tuple's or a list's
  const std::vector<std::pair<IValue, IValue>>& items() const;  // a dict's, in insertion order
  // A dict's value under a string key; null when the dict lacks it (raises when this is not a dict).
  const IValue* find(std::string_view key) const;

  // "Tensor", "int", "float", "bool", "str", "None", "Tuple[int, Tensor]", "List[int]"
  std::string type_name() const;
  // Python-like text for messages and the CLI: 3, 2.5, True, (1, 2), [tensor of shape [2, 3]]
  std::string repr() const;

 private:
  std::variant<std::monostate, Tensor, int64_t, double, bool, std::string, std::shared_ptr<Tuple>,
               std::shared_ptr<List>, std::shared_ptr<Dict>>
      v_;
};

struct IValue::Tuple {
  std::vector<IValue> elems;
};
struct IValue::List {
  std::vector<IValue> elems;
};

struct IValue::Dict {
  std::vector<std::pair<IValue, IValue>> items;
};

}  // namespace kiln
