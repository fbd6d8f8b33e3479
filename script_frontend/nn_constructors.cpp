// torch.nn's module constructors as __init__ calls them: kiln's eager layers built from torch's names and
// arguments, and the module objects lowering reads for them.
#include "script_frontend/nn_constructors.h"

#include <fmt/format.h>

#include <algorithm>

#include "eager/nn/registry.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/module.h"

namespace kiln::script {

using Kind = Static::Kind;

namespace {

// nn.Sequential and nn.ModuleList: children only, under their state_dict names (an OrderedDict's keys
// or add_module's names for a Sequential). Methods call a Sequential's items when lowered.
class Container : public nn::Module {
 public:
  explicit Container(std::string name) : name_(std::move(name)) {}
  void add(const std::string& key, std::shared_ptr<nn::Module> m) { register_module(key, std::move(m)); }
  Tensor forward(const Tensor&) override { fail("{} built by a script's __init__ is called through its script module", name_); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
};

}  // namespace

ScriptedModule& NnConstructors::module_of(const Object& o) { return *static_cast<ScriptedModule*>(o.module); }

std::string NnConstructors::prefix(const Object& o) { return o.path.empty() ? "" : o.path + "."; }
void NnConstructors::set_path(Object& o, const std::string& p) {
  o.path = p;
  for (size_t i = 0; i < o.items.size(); ++i) set_path(*o.items[i], prefix(o) + o.item_names[i]);
  for (auto& [k, v] : o.attrs)
    if (v.kind == Kind::Module && !v.obj->plain) set_path(*v.obj, prefix(o) + k);
}

void NnConstructors::add_item(Object& container, const Static& m, SourceLoc loc, std::string name) {
  if (m.kind != Kind::Module)
    fail(loc, fmt::format("{} holds modules, got {}", container.cls, m.type_name()));
  if (!m.obj->path.empty()) fail(loc, fmt::format("module '{}' is already a submodule; kiln script does not share modules", m.obj->path));
  if (name.empty()) name = std::to_string(container.items.size());
  if (std::count(container.item_names.begin(), container.item_names.end(), name) || container.attr(name))
    fail(loc, fmt::format("{} already has a module named '{}'", container.cls, name));
  std::shared_ptr<nn::Module> owned = owned_.at(m.obj.get());
  if (container.def) module_of(container).add_child(name, owned);  // a class of the file deriving from nn.Sequential
  else static_cast<Container*>(container.module)->add(name, owned);
  container.items.push_back(m.obj);
  container.item_names.push_back(name);
  if (!container.path.empty()) set_path(*container.items.back(), prefix(container) + name);
}

// nn.Sequential(a, b, ...) or nn.Sequential(OrderedDict([("conv", a), ...])): its items, named.
void NnConstructors::add_items(Object& container, const std::vector<Static>& mods, SourceLoc loc) {
  if (mods.size() == 1 && mods[0].kind == Kind::Dict) {
    for (const Static& kv : mods[0].elems) {
      if (kv.elems[0].kind != Kind::Str) fail(loc, fmt::format("module names must be strings, got {}", kv.elems[0].type_name()));
      add_item(container, kv.elems[1], loc, kv.elems[0].s);
    }
    return;
  }
  for (const Static& x : mods) add_item(container, x, loc);
}

Static NnConstructors::make(Layer l, const std::string& cls, std::shared_ptr<nn::Module> m, Bound attrs) {
  auto obj = std::make_shared<Object>();
  obj->layer = l;
  obj->cls = cls;
  obj->module = m.get();
  obj->attrs = std::move(attrs);
  objs_[m.get()] = obj;
  owned_[obj.get()] = std::move(m);
  return Static::module(obj);
}

// The Transformer layers' activation given as a callable (`activation=F.gelu`, `nn.GELU()`), as the string
// torch's layers treat it as: they run F.relu / F.gelu for either form.
Static NnConstructors::activation_name(const nn::LayerSpec& spec, const Static& v, SourceLoc loc) {
  if (v.kind == Kind::Str) return v;
  if (v.kind == Kind::Function && !v.fn && (v.s == "torch.nn.functional.relu" || v.s == "torch.nn.functional.gelu"))
    return Static::str(v.s.substr(v.s.rfind('.') + 1));
  if (v.kind == Kind::Module && v.obj->layer == Layer::Registered && (v.obj->cls == "ReLU" || v.obj->cls == "GELU")) {
    const Static* approximate = v.obj->attr("approximate");
    if (!approximate || approximate->kind != Kind::Str || approximate->s == "none") return Static::str(v.obj->cls == "ReLU" ? "relu" : "gelu");
  }
  fail(loc, fmt::format("nn.{}: kiln supports the activation relu or gelu (a string, F.relu, F.gelu, nn.ReLU() or nn.GELU()), got {}",
                        spec.name, v.type_name()));
}

// A layer of eager's registry: bound with its LayerSpec's names and defaults, built by its make().
Static NnConstructors::registered_layer(const nn::LayerSpec& spec, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
  Signature sig{{}, 0, {}, spec.ignores_extra_args};
  for (const nn::LayerParam& p : spec.params) {
    sig.params.push_back(p.name);
    if (p.default_value) sig.defaults.push_back(static_of(*p.default_value));
    else ++sig.required;
  }
  Bound declared = kw;
  if (spec.ignores_extra_args) std::erase_if(declared, [&](const auto& kv) { return !std::count(sig.params.begin(), sig.params.end(), kv.first); });
  std::vector<Static> ignored;
  Bound b = bind("nn." + spec.name, sig, a, declared, loc, &ignored);
  std::map<std::string, IValue> values;
  std::map<std::string, std::shared_ptr<nn::Module>> modules;  // nn.TransformerEncoder's encoder_layer
  if (auto act = b.find("activation"); act != b.end() && spec.name.starts_with("Transformer"))
    act->second = activation_name(spec, act->second, loc);
  for (const auto& [k, v] : b) {
    auto owned = v.kind == Kind::Module ? owned_.find(v.obj.get()) : owned_.end();
    if (owned != owned_.end()) modules[k] = owned->second, values[k] = IValue();
    else values[k] = ivalue_of(v, loc, fmt::format("nn.{}: {}", spec.name, k));
  }
  // A module argument is copied into the layer (torch deep-copies encoder_layer) and kept by nothing: it
  // must not stay an attribute, or walking the tree would reach it after this evaluator frees it.
  for (const auto& [k, mod] : modules) b.erase(k);
  std::shared_ptr<nn::Module> m;
  try {
    m = spec.make(nn::LayerArgs(spec.name, std::move(values), std::move(modules)));
  } catch (const Error& e) {
    fail(loc, e.what());
  }
  Static s = make(Layer::Registered, spec.name, m, b);
  s.obj->spec = &spec;
  return s;
}

// A constructor argument as an IValue: numbers, strings, None, tensors and tuples or lists of them.
IValue NnConstructors::ivalue_of(const Static& v, SourceLoc loc, const std::string& what) {
  switch (v.kind) {
    case Kind::None: return IValue();
    case Kind::Int: return IValue(v.i);
    case Kind::Float: return IValue(v.f);
    case Kind::Bool: return IValue(v.i != 0);
    case Kind::Str: return IValue(v.s);
    case Kind::Tuple:
    case Kind::List: {
      std::vector<IValue> es;
      for (const Static& e : v.elems) es.push_back(ivalue_of(e, loc, what));
      return v.kind == Kind::Tuple ? IValue::tuple(std::move(es)) : IValue::list(std::move(es));
    }
    case Kind::Tensor: return IValue(v.tensor);  // a loss's weight
    case Kind::Dict:
    case Kind::Module:
    case Kind::Class:
    case Kind::Function:
    case Kind::Partial:
    case Kind::Namespace:
    case Kind::Exception: break;
  }
  fail(loc, fmt::format("{} must be a number, a string, a tensor or a tuple of them, got {}", what, v.type_name()));
}

// nn.ParameterList(values=None) / nn.ParameterDict(parameters=None): a list, or a dict by string keys, of
// parameters (a plain Tensor becomes one, as torch wraps it), marked by s; assigned to self, each is
// registered as "name.index" / "name.key", torch's state_dict names.
Static NnConstructors::parameter_container(const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
  bool list = name == "ParameterList";
  Bound b = bind("nn." + name, Signature{{list ? "values" : "parameters"}, 0, {Static::none()}}, a, kw, loc);
  const Static& init = b.begin()->second;
  Static out = Static::seq(list ? Kind::List : Kind::Dict, {});
  out.s = name;
  if (init.kind == Kind::None) return out;
  if (list) {
    for (const Static& x : iterate(init, loc)) out.elems.push_back(as_parameter(x, name, loc));
    return out;
  }
  std::vector<Static> pairs = init.kind == Kind::Dict ? init.elems : iterate(init, loc);
  for (const Static& kv : pairs) {
    std::vector<Static> pair = kv.kind == Kind::Tuple || kv.kind == Kind::List ? kv.elems : std::vector<Static>{};
    if (pair.size() != 2) fail(loc, "nn.ParameterDict() takes a dict or (key, value) pairs");
    parameter_dict_set(out, pair[0], pair[1], loc);
  }
  return out;
}

Static NnConstructors::as_parameter(const Static& v, const std::string& container, SourceLoc loc) {
  if (v.kind != Kind::Tensor) fail(loc, fmt::format("nn.{} holds Tensors in kiln script, got {}", container, v.type_name()));
  return v.parameter ? v : Static::of_tensor(v.tensor.detach(), true);
}

void NnConstructors::parameter_dict_set(Static& d, const Static& key, const Static& v, SourceLoc loc) {
  if (key.kind != Kind::Str) fail(loc, fmt::format("parameter name should be a string. Got {}", key.type_name()));
  Static p = as_parameter(v, "ParameterDict", loc);
  for (Static& kv : d.elems)
    if (kv.elems[0].s == key.s) return void(kv.elems[1] = p);
  d.elems.push_back(Static::seq(Kind::Tuple, {key, p}));
}

Static NnConstructors::layer(const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
  if (const nn::LayerSpec* spec = nn::find_layer(name)) return registered_layer(*spec, a, kw, loc);
  auto B = Static::boolean;
  if (name == "Sequential" || name == "ModuleList") {
    std::vector<Static> mods;
    bool seq = name == "Sequential";
    if (!kw.empty()) fail(loc, fmt::format("nn.{}() takes no keyword arguments in kiln script", name));
    if (seq) {
      mods = a;
    } else {
      if (a.size() > 1) fail(loc, "nn.ModuleList() takes one list of modules");
      if (!a.empty() && a[0].kind != Kind::None) mods = iterate(a[0], loc);
    }
    Static s = make(seq ? Layer::Sequential : Layer::ModuleList, name, std::make_shared<Container>(name), {});
    add_items(*s.obj, mods, loc);
    return s;
  }
  if (name == "ModuleDict") {
    if (!kw.empty() || a.size() > 1) fail(loc, "nn.ModuleDict() takes one dict of modules");
    Static s = make(Layer::ModuleDict, name, std::make_shared<Container>(name), {});
    if (!a.empty() && a[0].kind != Kind::None) {
      if (a[0].kind != Kind::Dict) fail(loc, fmt::format("nn.ModuleDict() takes a dict of modules, got {}", a[0].type_name()));
      add_items(*s.obj, a, loc);
    }
    return s;
  }
  if (name == "ParameterList" || name == "ParameterDict") return parameter_container(name, a, kw, loc);
  if (name == "Parameter") {
    Bound b = bind("nn.Parameter", Signature{{"data", "requires_grad"}, 1, {B(true)}}, a, kw, loc);
    if (b["data"].kind != Kind::Tensor) fail(loc, fmt::format("nn.Parameter() takes a Tensor, got {}", b["data"].type_name()));
    if (!need_bool(b["requires_grad"], loc, "requires_grad"))
      fail(loc, "nn.Parameter(requires_grad=False) is not supported in kiln script; use register_buffer");
    return Static::of_tensor(b["data"].tensor.detach(), true);
  }
  std::vector<std::string> known = {"Sequential", "ModuleList", "ModuleDict", "Parameter", "ParameterList", "ParameterDict"};
  for (const nn::LayerSpec& spec : nn::layer_registry()) known.push_back(spec.name);
  fail(loc, fmt::format("nn.{} is not supported in kiln script{}", name, did_you_mean(name, known)));
}

}  // namespace kiln::script
