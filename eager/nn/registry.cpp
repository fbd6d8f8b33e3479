// Binding a layer's constructor arguments as Python binds them, and reading them with torch's checks.
#include "eager/nn/registry.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::nn {

const IValue& LayerArgs::operator[](std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) fail(fmt::format("internal error: no argument '{}'", name));
  return it->second;
}

void LayerArgs::fail(const std::string& msg) const { kiln::fail("nn.{}: {}", layer_, msg); }

int64_t LayerArgs::integer(std::string_view name) const {
  const IValue& v = (*this)[name];
  if (!v.is_int()) fail(fmt::format("{} must be an int, got {}", name, v.type_name()));
  return v.to_int();
}

int64_t LayerArgs::positive(std::string_view name) const {
  int64_t v = integer(name);
  if (v <= 0) fail(fmt::format("{} must be positive, got {}", name, v));
  return v;
}

double LayerArgs::number(std::string_view name) const {
  const IValue& v = (*this)[name];
  if (!v.is_int() && !v.is_double()) fail(fmt::format("{} must be a number, got {}", name, v.type_name()));
  return v.to_double();
}

bool LayerArgs::flag(std::string_view name) const {
  const IValue& v = (*this)[name];
  if (!v.is_bool()) fail(fmt::format("{} must be a bool, got {}", name, v.type_name()));
  return v.to_bool();
}

std::string LayerArgs::str(std::string_view name) const {
  const IValue& v = (*this)[name];
  if (!v.is_string()) fail(fmt::format("{} must be a str, got {}", name, v.type_name()));
  return v.to_string();
}

Shape LayerArgs::ints(std::string_view name) const {
  const IValue& v = (*this)[name];
  if (v.is_int()) return {v.to_int()};
  Shape s;
  if (v.is_tuple() || v.is_list())
    for (const IValue& e : v.elements()) {
      if (!e.is_int()) fail(fmt::format("{} must be an int or a tuple of ints, got {}", name, v.type_name()));
      s.push_back(e.to_int());
    }
  else
    fail(fmt::format("{} must be an int or a tuple of ints, got {}", name, v.type_name()));
  return s;
}

Shape LayerArgs::pair(std::string_view name) const {
  Shape s = ints(name);
  if (s.size() == 1) return {s[0], s[0]};
  if (s.size() != 2) fail(fmt::format("{} must be an int or a pair of ints, got {} values", name, s.size()));
  return s;
}

Tensor LayerArgs::tensor_or_none(std::string_view name) const {
  const IValue& v = (*this)[name];
  if (v.is_none()) return Tensor();
  if (!v.is_tensor()) fail(fmt::format("{} must be a Tensor or None, got {}", name, v.type_name()));
  return v.to_tensor();
}

void LayerArgs::unsupported_if_true(std::string_view name) const {
  if (flag(name)) fail(fmt::format("{}=True is not supported", name));
}

const LayerSpec* find_layer(std::string_view name) {
  for (const LayerSpec& s : layer_registry())
    if (s.name == name) return &s;
  return nullptr;
}

LayerArgs bind_layer_args(const LayerSpec& spec, const std::vector<IValue>& args, const std::map<std::string, IValue>& kwargs_,
                          const std::map<std::string, std::shared_ptr<Module>>& modules) {
  std::map<std::string, IValue> kwargs = kwargs_;
  for (const auto& [k, m] : modules) kwargs[k] = IValue();
  const std::string what = "nn." + spec.name + "()";
  size_t np = spec.params.size();
  if (args.size() > np && !spec.ignores_extra_args)
    fail("{} takes {} positional argument{} but {} were given", what, np, np == 1 ? "" : "s", args.size());
  std::map<std::string, IValue> bound;
  for (size_t i = 0; i < std::min(args.size(), np); ++i) bound[spec.params[i].name] = args[i];
  for (const auto& [k, v] : kwargs) {
    auto it = std::find_if(spec.params.begin(), spec.params.end(), [&](const LayerParam& p) { return p.name == k; });
    if (it == spec.params.end() && spec.ignores_extra_args) continue;
    if (it == spec.params.end()) fail("{} got an unexpected keyword argument '{}'", what, k);
    if (bound.count(k)) fail("{} got multiple values for argument '{}'", what, k);
    bound[k] = v;
  }
  for (const LayerParam& p : spec.params) {
    if (bound.count(p.name)) continue;
    if (!p.default_value) fail("{} is missing required argument '{}'", what, p.name);
    bound[p.name] = *p.default_value;
  }
  return LayerArgs(spec.name, std::move(bound), modules);
}

}  // namespace kiln::nn
