// __init__ at construction. TorchScript scripts a module after Python ran its __init__; kiln has no
// Python, so it runs __init__ itself: a small evaluator of the file's statements over Static values
// (numbers, strings, lists, tensors, modules). What it builds is the object tree lowering reads as
// `self`, and the nn::Module tree (kiln's own layers for torch.nn's) that owns the parameters.
// torch.nn's module constructors are nn_constructors.h's, a base of this evaluator.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include "eager/autograd/graph.h"
#include "eager/nn/init.h"
#include "eager/nn/layers.h"
#include "eager/nn/registry.h"
#include "eager/ops.h"
#include "script_frontend/init_fills.h"
#include "script_frontend/init_tensors.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/module.h"
#include "script_frontend/nn_constructors.h"
#include "script_frontend/objects.h"
#include "script_frontend/python_math.h"
#include "script_frontend/torch_devices.h"
#include "script_frontend/torch_nn_classes.h"
#include "script_frontend/parser.h"
#include "script_frontend/py_exceptions.h"

namespace kiln::script {

using Kind = Static::Kind;

std::string Static::type_name() const {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Bool: return "bool";
    case Kind::Str: return "str";
    case Kind::Tuple:
    case Kind::List: {
      std::string s = kind == Kind::Tuple ? "Tuple[" : "List[";
      for (size_t k = 0; k < elems.size() && (kind == Kind::Tuple || k < 1); ++k) s += (k ? ", " : "") + elems[k].type_name();
      return s + "]";
    }
    case Kind::Dict: return "dict";
    case Kind::Module: return obj->cls;
    case Kind::Tensor: return parameter ? "Parameter" : "Tensor";
    case Kind::Class: return "type[" + (cls ? cls->name : s) + "]";
    case Kind::Function: return fn ? "function " + fn->name : "builtin " + s;
    case Kind::Partial: return "functools.partial";
    case Kind::Namespace: return is_file_module(*this) ? "module '" + module_dotted_name(file_module_path(*this)) + "'" : "module " + s;
    case Kind::Exception: return s;
  }
  return "?";
}

void Object::walk(const std::function<void(const Object&)>& f) const {
  f(*this);
  for (const auto& [k, v] : attrs)
    if (v.kind == Kind::Module && !v.obj->plain) v.obj->walk(f);
  for (const ObjectPtr& o : items) o->walk(f);
}

Static static_of(const IValue& v) {
  if (v.is_none()) return Static::none();
  if (v.is_bool()) return Static::boolean(v.to_bool());
  if (v.is_int()) return Static::integer(v.to_int());
  if (v.is_double()) return Static::number(v.to_double());
  if (v.is_string()) return Static::str(v.to_string());
  if (v.is_tensor()) return Static::of_tensor(v.to_tensor(), false);
  std::vector<Static> es;
  for (const IValue& e : v.elements()) es.push_back(static_of(e));
  return Static::seq(v.is_tuple() ? Kind::Tuple : Kind::List, std::move(es));
}

namespace {

// A module object with the nn::Module that owns its tensors.
struct Built {
  ObjectPtr obj;
  std::shared_ptr<nn::Module> module;
};

// f called with `self` first (a bound method; a classmethod's or a metaclass method's class): a partial.
Static bound_method(const FunctionDef* f, const Static& self) {
  Static fn = Static::named(Kind::Function, "");
  fn.fn = f;
  Static p;
  p.kind = Kind::Partial;
  p.elems = {fn, self};
  return p;
}

class Init : public NnConstructors {
 public:
  explicit Init(std::shared_ptr<const File> file) : file_(std::move(file)), cur_(file_.get()), src_(&file_->src), m_(&file_->ast) {
    know(file_);
  }

  // Every file read so far: the model file and the ones its imports led to.
  std::vector<std::shared_ptr<const File>> files() const {
    std::vector<std::shared_ptr<const File>> out;
    for (const auto& [path, f] : loaded_) out.push_back(f);
    return out;
  }

  // An argument given from C++ or the command line: a value, or an expression read in module scope
  // (errors point into the expression's own text).
  Static argument(const CtorArg& a) {
    if (!a.expr) return a.value;
    const Source* outer = src_;
    src_ = &a.expr->src;
    Scope top;
    Static v = eval(*a.expr->ast.body.at(0)->value, top);
    src_ = outer;
    return v;
  }

  std::shared_ptr<ScriptedModule> build(const ClassDef& c, const std::vector<Static>& args, const Bound& kwargs,
                                        SourceLoc at) {
    if (++depth_ > 64) fail(at, fmt::format("constructing '{}' nests more than 64 modules deep (a class that builds itself?)", c.name));
    InFile in(*this, file_of(&c));
    resolve_bases(c, at);
    auto obj = std::make_shared<Object>();
    obj->file = shared(cur_);
    obj->layer = !c.method("forward") && c.root()->torch_base == "Sequential" ? Layer::Sequential : Layer::User;
    obj->cls = c.name;
    obj->def = &c;
    obj->plain = c.root()->torch_base.empty() || c.root()->torch_base == "dataclass";
    auto mod = std::make_shared<ScriptedModule>(obj->file, obj);
    obj->module = mod.get();
    objs_[mod.get()] = obj;
    // Class-level attributes first (a base class's before its subclass's): __init__ reads them through
    // self and may rebind them.
    std::vector<const ClassDef*> chain;
    for (const ClassDef* k = &c; k; k = k->parent) chain.insert(chain.begin(), k);
    for (const ClassDef* k : chain)
      for (const auto& [name, value] : k->attrs) {
        InFile base_file(*this, file_of(k));
        Scope sc;
        obj->attrs[name] = eval(*value, sc);
      }
    Static self = Static::module(obj);
    init_object(self, c, args, kwargs, at);
    --depth_;
    return mod;
  }

  // A module-level name as lowered code reads it: a constant of the file (computed as __init__ computes it) or
  // what a relative import binds (its file read now); null for any other name. `known`: files read before.
  std::optional<ModuleGlobal> lowered_global(const std::string& name, SourceLoc loc, const std::vector<std::shared_ptr<const File>>& known,
                                             bool attribute) {
    for (const auto& f : known) know(f);
    const Static* v = module_constant(name, loc);
    auto a = m_->aliases.find(name);
    if (!v && (attribute || (a != m_->aliases.end() && a->second.rfind("import:", 0) == 0))) v = global_value(name, loc);
    if (!v) return std::nullopt;
    const File* home = v->fn ? file_of(v->fn) : nullptr;
    return ModuleGlobal{*v, home ? shared(home) : nullptr, files()};
  }

  // A builder function of the file (torchvision's `resnet18(weights=None)`): run, its result the module.
  std::shared_ptr<ScriptedModule> call_builder(const FunctionDef& f, const std::vector<Static>& args, const Bound& kwargs) {
    Static r = run_function(f, nullptr, args, kwargs, f.loc);
    if (r.kind != Kind::Module || r.obj->plain || !owned_.count(r.obj.get()))
      fail(f.loc, fmt::format("'{}' returned {}, not a module it built", f.name, r.type_name()));
    auto m = std::dynamic_pointer_cast<ScriptedModule>(owned_.at(r.obj.get()));
    if (!m) fail(f.loc, fmt::format("'{}' returned a torch.nn layer ({}), not a module of the file", f.name, r.obj->cls));
    return m;
  }

 private:
  struct Scope {
    std::map<std::string, Static> vars;
    const Static* self = nullptr;
    const FunctionDef* fn = nullptr;
    const ClassDef* cls = nullptr;  // the class whose method runs (where super() looks next)
    Scope* function = nullptr;      // a comprehension's: the function's scope, where `:=` also binds (PEP 572)
  };

  // Python 3 gives a comprehension its own scope: its targets do not leak into the function's.
  static Scope comprehension_scope(Scope& sc) {
    Scope inner = sc;
    inner.function = sc.function ? sc.function : &sc;
    return inner;
  }
  enum class Flow { Normal, Break, Continue, Return };

  const Source& source() const override { return *src_; }

  // A Python exception of class `type`: an `except` naming it (or a base) catches it, else it is the error.
  [[noreturn]] void py_raise(SourceLoc loc, std::string type, std::string message) const {
    std::string text = message.empty() ? type : type + ": " + message;
    throw Raised(format_source_error(src_->name, src_->text, loc, text), std::move(type), std::move(message));
  }


  // cls.__init__ on self: the class's own or inherited one, or what nn.Sequential and @dataclass give.
  void init_object(const Static& self, const ClassDef& c, const std::vector<Static>& args, const Bound& kwargs, SourceLoc at) {
    if (const FunctionDef* init = c.method("__init__")) {
      run_function(*init, &self, args, kwargs, at, c.owner_of("__init__"));
    } else if (c.root()->torch_base == "Sequential") {
      if (!kwargs.empty()) fail(at, "nn.Sequential.__init__() takes no keyword arguments");
      add_items(*self.obj, args, at);
    } else if (const nn::LayerSpec* spec = nn::find_layer(c.root()->torch_base)) {
      init_layer_base(self, *spec, args, kwargs, at);
    } else if (c.root()->torch_base == "dataclass") {
      // the generated __init__: one parameter per field, in order, with the field's default
      const ClassDef& root = *c.root();
      InFile in(*this, file_of(&root));
      Signature sig;
      sig.required = 0;
      for (const auto& [name, def] : root.fields) {
        sig.params.push_back(name);
        if (def) {
          Scope top;
          sig.defaults.push_back(eval(*def, top));
        } else if (!sig.defaults.empty()) {
          fail(root.loc, "a field without a default follows one with a default");
        } else {
          ++sig.required;
        }
      }
      for (auto& [k, v] : bind(root.name, sig, args, kwargs, at)) self.obj->attrs[k] = v;
    } else if (!args.empty() || !kwargs.empty()) {
      fail(at, fmt::format("{}() takes no arguments (the class has no __init__)", c.name));
    }
  }

  // Base classes imported from other files, read now (each in the file of the class naming it).
  // The files a base comes from are read by this evaluator and go with it, so a parent that an earlier build set
  // (a second build of resnet18 from one ScriptFile) is set again, never followed.
  void resolve_bases(const ClassDef& c, SourceLoc at) {
    for (const ClassDef* k = &c; k; k = k->parent) {
      if (k->base_import.empty() || resolved_.count(k)) continue;
      InFile in(*this, file_of(k));
      Static* b = global_value(k->base_import, k->bases[0]->loc);
      if (!b || b->kind != Kind::Class || !b->cls)
        fail(k->bases[0]->loc, fmt::format("class '{}' derives from '{}', which is not a class kiln builds", k->name, k->base_import));
      k->parent = b->cls;
      resolved_.insert(k);
    }
    (void)at;
  }
  std::set<const ClassDef*> resolved_;
  std::set<const Object*> inherited_;  // submodules a registered base layer made, which the subclass may replace

  // A class deriving from a registered layer (convnext's `LayerNorm2d(nn.LayerNorm)`): the layer's
  // __init__ gives self its parameters, buffers and constructor arguments (`self.normalized_shape`,
  // `self.eps`), under the layer's names, for the subclass's own forward.
  void init_layer_base(const Static& self, const nn::LayerSpec& spec, std::vector<Static> args, const Bound& kwargs, SourceLoc at) {
    Static base = registered_layer(spec, args, kwargs, at);
    Object& o = *self.obj;
    for (auto& [n, t] : base.obj->module->named_parameters(false)) {
      module_of(o).add_parameter(n, t);
      o.attrs[n] = Static::of_tensor(t, true);
    }
    for (auto& [n, t] : base.obj->module->named_buffers(false)) {
      module_of(o).add_buffer(n, t);
      buffers_.insert(t.impl());
      o.attrs[n] = Static::of_tensor(t, false);
    }
    // Its submodules (nn.Transformer's encoder and decoder) are the subclass's, called as the registered
    // layers they are (`self.encoder(src, mask=mask)`); the subclass may replace one, as torch's
    // word_language_model replaces the decoder with its nn.Linear.
    for (auto& [n, child] : base.obj->module->named_children()) {
      const nn::LayerSpec* child_spec = nn::find_layer(child->name());
      if (!child_spec) continue;
      Static c = make(Layer::Registered, child_spec->name, child, {});
      c.obj->spec = child_spec;
      inherited_.insert(c.obj.get());
      set_path(*c.obj, prefix(o) + n);
      module_of(o).add_child(n, child);
      o.attrs[n] = c;
    }
    for (auto& [k, v] : base.obj->attrs) {
      if (o.attrs.count(k)) continue;
      // torch keeps LayerNorm's normalized_shape as a tuple whatever was passed
      o.attrs[k] = k == "normalized_shape" && v.kind == Kind::Int ? Static::seq(Kind::Tuple, {v}) : v;
    }
  }

  // Tensor arithmetic (init_tensors.h) with its errors pointing at loc.
  template <class F>
  std::optional<Static> tensor_math(SourceLoc loc, F&& f) {
    try {
      return f();
    } catch (const Error& e) {
      fail(loc, e.what());
    }
  }

  // t[i, a:b, None, ...]: a view of the tensor (writes through it change t, as in torch).
  Tensor tensor_index(const Tensor& t, const Expr& e, Scope& sc) {
    std::vector<TensorIndex> ix;
    for (size_t k = 1; k < e.args.size(); ++k) {
      const Expr& a = *e.args[k];
      TensorIndex x;
      if (a.kind == ExprKind::Slice) {
        x.kind = TensorIndex::Kind::Slice;
        if (a.args[0]) x.start = need_int(eval(*a.args[0], sc), a.loc, "a slice bound");
        if (a.args[1]) x.stop = need_int(eval(*a.args[1], sc), a.loc, "a slice bound");
        if (a.args[2]) x.step = need_int(eval(*a.args[2], sc), a.loc, "a slice step");
      } else if (a.kind == ExprKind::None) {
        x.kind = TensorIndex::Kind::None;
      } else if (a.kind == ExprKind::Ellipsis) {
        x.kind = TensorIndex::Kind::Ellipsis;
      } else {
        x.i = need_int(eval(a, sc), a.loc, "a tensor index (tensors index tensors only in lowered code)");
      }
      ix.push_back(x);
    }
    std::optional<Static> r = tensor_math(e.loc, [&] { return std::optional<Static>(Static::of_tensor(init_tensor_index(t, ix), false)); });
    return r->tensor;
  }

  // ---- functions and arguments

  Bound bind(const std::string& what, const Signature& sig, std::vector<Static> args, const Bound& kwargs,
             SourceLoc loc, std::vector<Static>* rest = nullptr) override {
    Bound b;
    size_t np = sig.params.size();
    if (args.size() > np && !sig.varargs)
      fail(loc, fmt::format("{}() takes {} positional argument{} but {} were given", what, np, np == 1 ? "" : "s", args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      if (i < np && !sig.varargs) b[sig.params[i]] = args[i];
      else if (rest) rest->push_back(args[i]);
    }
    for (const auto& [k, v] : kwargs) {
      auto it = std::find(sig.params.begin(), sig.params.end(), k);
      if (it == sig.params.end())
        fail(loc, fmt::format("{}() got an unexpected keyword argument '{}'{}", what, k, did_you_mean(k, sig.params)));
      if (b.count(k)) fail(loc, fmt::format("{}() got multiple values for argument '{}'", what, k));
      b[k] = v;
    }
    for (size_t i = 0; i < np; ++i) {
      if (b.count(sig.params[i])) continue;
      if (i < sig.required) fail(loc, fmt::format("{}() is missing required argument '{}'", what, sig.params[i]));
      b[sig.params[i]] = sig.defaults[i - sig.required];
    }
    return b;
  }

  Static run_function(const FunctionDef& f, const Static* self, const std::vector<Static>& args, const Bound& kwargs,
                      SourceLoc at, const ClassDef* owner = nullptr, const Static* closure = nullptr) {
    if (++depth_ > 64) fail(at, fmt::format("calls nest more than 64 deep in '{}' (recursion?)", f.name));
    InFile in(*this, file_of(&f));
    check_def(*src_, f, self != nullptr, "__init__");
    Signature sig;
    size_t first = self ? 1 : 0;
    if (self && (f.params.empty() || f.params[0].name != "self"))
      fail(f.loc, fmt::format("method '{}' must take self as its first parameter", f.name));
    Scope empty;
    sig.required = f.params.size() - first;
    for (size_t i = first; i < f.params.size(); ++i) {
      sig.params.push_back(f.params[i].name);
      if (f.params[i].default_value) {
        if (sig.required == f.params.size() - first) sig.required = i - first;
        sig.defaults.push_back(eval(*f.params[i].default_value, empty));
      } else if (sig.required != f.params.size() - first) {
        fail(f.params[i].loc, "a parameter without a default follows one with a default");
      }
    }
    Scope sc;
    sc.self = self;
    sc.fn = &f;
    sc.cls = owner;
    // *args takes the positional arguments past the named ones, **kwargs the keywords no parameter
    // names; keyword-only parameters bind by keyword alone.
    std::vector<Static> pos = args, extra;
    if (f.vararg && pos.size() > sig.params.size()) {
      extra.assign(pos.begin() + long(sig.params.size()), pos.end());
      pos.resize(sig.params.size());
    }
    Bound named, rest;
    for (const auto& kv : kwargs) {
      const std::string& k = kv.first;
      const Static& v = kv.second;
      bool param = std::count(sig.params.begin(), sig.params.end(), k) != 0;
      bool kwonly = std::any_of(f.kwonly.begin(), f.kwonly.end(), [&k](const Param& p) { return p.name == k; });
      if (param) named[k] = v;
      else if (kwonly || f.kwarg) rest[k] = v;
      else fail(at, fmt::format("{}() got an unexpected keyword argument '{}'{}", f.name, k, did_you_mean(k, sig.params)));
    }
    sc.vars = bind(f.name, sig, pos, named, at);
    for (const Param& p : f.kwonly) {
      if (auto it = rest.find(p.name); it != rest.end()) {
        sc.vars[p.name] = it->second;
        rest.erase(it);
      } else if (p.default_value) {
        sc.vars[p.name] = eval(*p.default_value, empty);
      } else {
        fail(at, fmt::format("{}() missing required keyword-only argument '{}'", f.name, p.name));
      }
    }
    if (f.vararg) sc.vars[f.vararg->name] = Static::seq(Kind::Tuple, std::move(extra));
    if (f.kwarg) {
      Static d = Static::seq(Kind::Dict, {});
      for (const auto& [k, v] : rest) dict_set(d, Static::str(k), v);
      sc.vars[f.kwarg->name] = d;
    }
    if (self) sc.vars["self"] = *self;
    if (closure)  // a lambda's parameters shadow what it closed over
      for (size_t i = 0; i < closure->keys.size(); ++i) sc.vars.emplace(closure->keys[i], closure->elems[i]);
    Static ret;
    exec(f.body, sc, ret);
    --depth_;
    return ret;
  }

  // ---- statements

  Flow exec(const std::vector<StmtPtr>& body, Scope& sc, Static& ret) {
    for (const StmtPtr& s : body) {
      Flow fl = stmt(*s, sc, ret);
      if (fl != Flow::Normal) return fl;
    }
    return Flow::Normal;
  }

  Flow stmt(const Stmt& s, Scope& sc, Static& ret) {
    switch (s.kind) {
      case StmtKind::Expr:
        if (s.value->kind != ExprKind::String) eval(*s.value, sc);
        return Flow::Normal;
      case StmtKind::Assign: {
        Static v = eval(*s.value, sc);
        for (const auto& t : s.targets) assign(*t, v, sc);
        return Flow::Normal;
      }
      case StmtKind::AnnAssign:
        if (s.value) assign(*s.targets[0], eval(*s.value, sc), sc);  // `self.stage2: nn.Sequential` alone binds nothing
        return Flow::Normal;
      case StmtKind::AugAssign: {
        Static cur = eval(*s.targets[0], sc);
        if (s.op == PyOp::Add && cur.kind == Kind::Module && cur.obj->layer == Layer::ModuleList) {
          // modules += [...] extends the ModuleList in place, as torch's __iadd__ (maxvit's MaxVitBlock)
          std::vector<Static> a = {eval(*s.value, sc)};
          method_call(cur, "extend", a, {}, s.loc);
          return Flow::Normal;
        }
        assign(*s.targets[0], binary(s.op, cur, eval(*s.value, sc), s.loc), sc);
        return Flow::Normal;
      }
      case StmtKind::If:
        return truthy(eval(*s.test, sc), s.test->loc) ? exec(s.body, sc, ret) : exec(s.orelse, sc, ret);
      case StmtKind::While: {
        if (!s.orelse.empty()) fail(s.loc, "while ... else is not supported in __init__");
        for (int64_t n = 0; truthy(eval(*s.test, sc), s.test->loc); ++n) {
          if (n > 1000000) fail(s.loc, "a while loop in __init__ ran more than a million times");
          Flow fl = exec(s.body, sc, ret);
          if (fl == Flow::Break) break;
          if (fl == Flow::Return) return fl;
        }
        return Flow::Normal;
      }
      case StmtKind::For: {
        if (!s.orelse.empty()) fail(s.loc, "for ... else is not supported in __init__");
        Static seq = eval(*s.value, sc);
        std::vector<Static> elems = iterate(seq, s.value->loc);
        for (const Static& e : elems) {
          assign(*s.targets[0], e, sc);
          Flow fl = exec(s.body, sc, ret);
          if (fl == Flow::Break) break;
          if (fl == Flow::Return) return fl;
        }
        return Flow::Normal;
      }
      case StmtKind::Return:
        ret = s.value ? eval(*s.value, sc) : Static::none();
        if (sc.fn && sc.fn->name == "__init__" && ret.kind != Kind::None)
          fail(s.loc, fmt::format("__init__() should return None, not {}", ret.type_name()));
        return Flow::Return;
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
      case StmtKind::Pass: return Flow::Normal;
      case StmtKind::Assert:
        if (!truthy(eval(*s.test, sc), s.test->loc))
          py_raise(s.loc, "AssertionError", s.value && s.value->kind == ExprKind::String ? s.value->name : "");
        return Flow::Normal;
      case StmtKind::Raise: raise(s, sc);
      case StmtKind::Try: return try_stmt(s, sc, ret);
      case StmtKind::Delete:
        for (const auto& t : s.targets) {
          if (t->kind != ExprKind::Name) fail(t->loc, "only names can be deleted in __init__");
          if (!sc.vars.erase(t->name)) fail(t->loc, fmt::format("name '{}' is not defined", t->name));
        }
        return Flow::Normal;
      case StmtKind::FunctionDef: {
        // a helper defined inside __init__ (PyTorch-GAN's `def block(...)`): a function value holding the locals
        // in scope now, as a lambda holds what it reads
        Static v = Static::named(Kind::Function, s.fn->name);
        v.fn = s.fn.get();
        def_file_[v.fn] = cur_;
        for (const auto& [name, value] : sc.vars) {
          v.keys.push_back(name);
          v.elems.push_back(value);
        }
        sc.vars[s.fn->name] = std::move(v);
        return Flow::Normal;
      }
      case StmtKind::ClassDef:
      case StmtKind::Import:
      case StmtKind::ImportFrom:
      case StmtKind::AsyncFor:
      case StmtKind::TryStar:
      case StmtKind::With:
      case StmtKind::AsyncWith:
      case StmtKind::Global:
      case StmtKind::Nonlocal:
      case StmtKind::Match: fail(s.loc, fmt::format("{} not supported in __init__", unsupported_construct(s.kind)));
    }
    return Flow::Normal;
  }

  std::vector<Static> iterate(const Static& seq, SourceLoc loc) override {
    if (seq.kind == Kind::List || seq.kind == Kind::Tuple) return seq.elems;
    if (seq.kind == Kind::Dict) {
      std::vector<Static> keys;
      for (const Static& kv : seq.elems) keys.push_back(kv.elems[0]);
      return keys;
    }
    if (seq.kind == Kind::Str) {
      std::vector<Static> chars;
      for (char ch : seq.s) chars.push_back(Static::str(std::string(1, ch)));
      return chars;
    }
    if (seq.kind == Kind::Module && (seq.obj->layer == Layer::ModuleList || seq.obj->layer == Layer::Sequential)) {
      std::vector<Static> out;
      for (const ObjectPtr& o : seq.obj->items) out.push_back(Static::module(o));
      return out;
    }
    if (seq.kind == Kind::Module && seq.obj->layer == Layer::ModuleDict) {  // its keys, as a dict's
      std::vector<Static> out;
      for (const std::string& k : seq.obj->item_names) out.push_back(Static::str(k));
      return out;
    }
    fail(loc, fmt::format("cannot iterate over {} in __init__", seq.type_name()));
  }

  void assign(const Expr& t, const Static& v, Scope& sc) {
    switch (t.kind) {
      case ExprKind::Name:
        if (t.name == "self") fail(t.loc, "cannot assign to self");
        sc.vars[t.name] = v;
        return;
      case ExprKind::Tuple:
      case ExprKind::List: {
        std::vector<Static> es = iterate(v, t.loc);
        auto star = std::find_if(t.args.begin(), t.args.end(), [](const ExprPtr& a) { return a->kind == ExprKind::Starred; });
        if (star != t.args.end()) return assign_starred(t, size_t(star - t.args.begin()), es, sc);
        if (es.size() > t.args.size()) py_raise(t.loc, "ValueError", fmt::format("too many values to unpack (expected {})", t.args.size()));
        if (es.size() < t.args.size())
          py_raise(t.loc, "ValueError", fmt::format("not enough values to unpack (expected {}, got {})", t.args.size(), es.size()));
        for (size_t i = 0; i < es.size(); ++i) assign(*t.args[i], es[i], sc);
        return;
      }
      case ExprKind::Attribute: {
        Static base = eval(*t.args[0], sc);
        if (base.kind == Kind::Module && base.obj->plain) {  // a config object's field, wherever it is
          base.obj->attrs[t.name] = v;
          return;
        }
        if (base.kind == Kind::Module && v.kind == Kind::Tensor && v.parameter && !(sc.self && base.obj == sc.self->obj))
          return tie_parameter(*base.obj, t.name, v, t.loc);
        // a constant on a child module (inception's `self.conv.stddev = 0.01` and `self.fc.stddev = 0.001`, read by
        // the init loop's hasattr(m, "stddev"))
        bool constant = v.kind == Kind::None || v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool ||
                        v.kind == Kind::Str;
        if (base.kind == Kind::Module && constant && sc.self && base.obj != sc.self->obj) {
          base.obj->attrs[t.name] = v;
          return;
        }
        if (base.kind != Kind::Module || !base.obj->def || !sc.self || base.obj != sc.self->obj)
          fail(t.loc, fmt::format("only attributes of self can be assigned in __init__, not of {}", base.type_name()));
        return set_attr(*base.obj, t.name, v, t.loc);
      }
      case ExprKind::Subscript: {
        if (t.args[0]->kind == ExprKind::Name && sc.vars.count(t.args[0]->name) && sc.vars[t.args[0]->name].kind == Kind::Tensor) {
          // t[:, :, 0] = v (and +=): stored through the view, as torch's copy_
          Tensor view = tensor_index(sc.vars[t.args[0]->name].tensor, t, sc);
          tensor_math(t.loc, [&] {
            if (v.kind == Kind::Tensor) view.copy_(v.tensor);
            else if (v.is_number()) view.copy_(Tensor::wrap_scalar(v.kind == Kind::Float ? Scalar(v.f) : Scalar(static_cast<long long>(v.i))));
            else kiln::fail("cannot store {} into a Tensor", v.type_name());
            return std::optional<Static>();
          });
          return;
        }
        if (t.args[0]->kind != ExprKind::Name || t.args.size() != 2)
          fail(t.loc, "only a local list's element or dict's item can be assigned by index in __init__");
        Static& list = var(t.args[0]->name, sc, t.args[0]->loc);
        if (list.kind == Kind::Dict && list.s == "ParameterDict") return parameter_dict_set(list, eval(*t.args[1], sc), v, t.loc);
        if (list.kind == Kind::Dict) return dict_set(list, eval(*t.args[1], sc), v);
        if (list.kind != Kind::List) fail(t.loc, fmt::format("{} does not support item assignment", list.type_name()));
        int64_t i = index_of(eval(*t.args[1], sc), int64_t(list.elems.size()), t.args[1]->loc);
        list.elems[size_t(i)] = v;
        return;
      }
      default: fail(t.loc, "cannot assign to this expression");
    }
  }

  // `A, *B, C = xs`: the starred name takes what the others leave, always as a list (Python's rule, a tuple
  // value included); the parser has allowed one starred target per level.
  void assign_starred(const Expr& t, size_t star, const std::vector<Static>& es, Scope& sc) {
    size_t fixed = t.args.size() - 1;
    if (es.size() < fixed)
      py_raise(t.loc, "ValueError", fmt::format("not enough values to unpack (expected at least {}, got {})", fixed, es.size()));
    size_t rest = es.size() - fixed;
    for (size_t i = 0; i < star; ++i) assign(*t.args[i], es[i], sc);
    assign(*t.args[star]->args[0], Static::seq(Kind::List, std::vector<Static>(es.begin() + star, es.begin() + star + rest)), sc);
    for (size_t i = star + 1; i < t.args.size(); ++i) assign(*t.args[i], es[i - 1 + rest], sc);
  }

  Static& var(const std::string& name, Scope& sc, SourceLoc loc) {
    auto it = sc.vars.find(name);
    if (it != sc.vars.end()) return it->second;
    if (Static* c = module_constant(name, loc)) return *c;
    if (Static* v = global_value(name, loc)) return *v;
    if (const std::string* why = m_->why_unavailable(name)) fail(loc, *why);
    std::vector<std::string> names;
    for (auto& [k, v] : sc.vars) names.push_back(k);
    for (const auto& c : m_->classes) names.push_back(c->name);
    for (const auto& f : m_->functions) names.push_back(f->name);
    for (const auto& [k, v] : m_->constants) names.push_back(k);
    fail(loc, fmt::format("undefined name '{}'{}", name, did_you_mean(name, names)));
  }

  // `m.weight = other.weight` on a submodule: m's parameter becomes the other tensor (weight tying). state_dict
  // keeps both names, parameters() the tensor once, as torch's.
  void tie_parameter(Object& o, const std::string& name, const Static& v, SourceLoc loc) {
    Tensor old;
    for (auto& [n, p] : o.module->named_parameters(false))
      if (n == name) old = p;
    if (!old.defined())
      fail(loc, fmt::format("only a parameter '{}' already has can be replaced in kiln script; {} has none", name, o.cls));
    if (old.sizes() != v.tensor.sizes())
      fail(loc, fmt::format("cannot tie {}.{} of shape {} to a parameter of shape {}", o.cls, name, shape_str(old.sizes()),
                            shape_str(v.tensor.sizes())));
    o.module->replace_parameter(name, v.tensor);
    if (o.layer == Layer::User) o.attrs[name] = v;
    else o.tied.emplace_back(old, v.tensor);
  }

  // self.name = v: a submodule, parameter or constant attribute, under the name state_dict uses.
  void set_attr(Object& o, const std::string& name, const Static& v, SourceLoc loc) {
    if (name == "training") fail(loc, "self.training is set by train() and eval(), not assigned");
    ScriptedModule& m = module_of(o);
    if (const Static* old = o.attr(name)) {
      if (old->kind == Kind::Module && inherited_.count(old->obj.get())) {
        if (v.kind != Kind::Module || v.obj->plain)
          fail(loc, fmt::format("cannot assign {} as child module '{}' (torch.nn.Module or None expected)", v.type_name(), name));
      } else if (old->kind == Kind::Module && v.kind == Kind::Module && !old->obj->plain && !v.obj->plain) {
        // torch's _modules[name] = m: the new module takes the old one's place (pytorch-cifar's
        // `self.shortcut = nn.Sequential()`, replaced by a projection where the shapes change)
      } else if (old->kind == Kind::Module || (old->kind == Kind::Tensor && (old->parameter || buffers_.count(old->tensor.impl())))) {
        fail(loc, fmt::format("'{}' is assigned twice; kiln script registers a submodule once, and a parameter or buffer once",
                              name));
      }
    }
    // A module assigned to a class deriving from nn.Sequential (densenet's _Transition: `self.norm = ...`)
    // is one of its items, run in the order assigned, as torch registers it in _modules.
    if (v.kind == Kind::Module && o.layer == Layer::Sequential && o.def && !v.obj->plain) return add_item(o, v, loc, name);
    // A config object kept by a module (nanoGPT's self.config) is no submodule: its fields are constants
    // of the methods, as the module's own numbers are.
    if (v.kind == Kind::Module && !o.plain && !v.obj->plain) {
      if (!v.obj->path.empty())
        fail(loc, fmt::format("module '{}' is already a submodule ('{}'); kiln script does not share modules", name, v.obj->path));
      set_path(*v.obj, prefix(o) + name);
      m.add_child(name, owned_.at(v.obj.get()));
    } else if (v.kind == Kind::Tensor && v.parameter) {
      m.add_parameter(name, v.tensor);
    } else if (parameter_container(v)) {
      for (const Static& x : v.elems)
        v.kind == Kind::List ? m.add_parameter(name + "." + std::to_string(&x - v.elems.data()), x.tensor)
                             : m.add_parameter(name + "." + x.elems[0].s, x.elems[1].tensor);
    }
    o.attrs[name] = v;
  }

  static bool parameter_container(const Static& v) {
    return (v.kind == Kind::List && v.s == "ParameterList") || (v.kind == Kind::Dict && v.s == "ParameterDict");
  }

  // self.params.append(p) / .extend(ps) on a ParameterList already assigned: registered as torch does, "params.3"
  bool grow_parameter_list(const Expr& base, const std::string& how, std::vector<Static>& args, Scope& sc, SourceLoc loc) {
    if (base.kind != ExprKind::Attribute || base.args[0]->kind != ExprKind::Name || base.args[0]->name != "self" || !sc.self) return false;
    Object& o = *sc.self->obj;
    auto it = o.attrs.find(base.name);
    if (it == o.attrs.end() || it->second.kind != Kind::List || it->second.s != "ParameterList") return false;
    if (args.size() != 1) fail(loc, fmt::format("ParameterList.{}() takes one argument", how));
    for (const Static& x : how == "append" ? std::vector<Static>{args[0]} : iterate(args[0], loc)) {
      Static p = as_parameter(x, "ParameterList", loc);
      module_of(o).add_parameter(base.name + "." + std::to_string(it->second.elems.size()), p.tensor);
      it->second.elems.push_back(p);
    }
    return true;
  }

  // ---- expressions

  bool truthy(const Static& v, SourceLoc loc) {
    switch (v.kind) {
      case Kind::None: return false;
      case Kind::Int:
      case Kind::Bool: return v.i != 0;
      case Kind::Float: return v.f != 0;
      case Kind::Str: return !v.s.empty();
      case Kind::Tuple:
      case Kind::List:
      case Kind::Dict: return !v.elems.empty();
      case Kind::Module:
      case Kind::Class:
      case Kind::Function:
      case Kind::Partial:
      case Kind::Namespace:
      case Kind::Exception: return true;
      case Kind::Tensor: break;
    }
    fail(loc, fmt::format("cannot use {} as a condition in __init__", v.type_name()));
  }

  int64_t need_int(const Static& v, SourceLoc loc, std::string_view what) {
    if (v.kind == Kind::Int || v.kind == Kind::Bool) return v.i;
    fail(loc, fmt::format("{} must be an int, got {}", what, v.type_name()));
  }
  // int(text) / float(text) as Python reads them: surrounding whitespace, a sign, and for float 'inf', 'infinity'
  // and 'nan' in any case; anything else is Python's ValueError
  Static number_of_text(const std::string& n, const std::string& text, SourceLoc loc) const {
    size_t b = text.find_first_not_of(" \t\n\r\f\v"), e = text.find_last_not_of(" \t\n\r\f\v");
    std::string t = b == std::string::npos ? "" : text.substr(b, e - b + 1);
    char* end = nullptr;
    bool hex = t.find_first_of("xXpP") != std::string::npos;
    if (n == "float") {
      double x = t.empty() || hex ? 0 : std::strtod(t.c_str(), &end);
      if (t.empty() || hex || *end) py_raise(loc, "ValueError", fmt::format("could not convert string to float: '{}'", text));
      return Static::number(x);
    }
    bool digits = !t.empty() && t.find_first_not_of("0123456789", t[0] == '-' || t[0] == '+' ? 1 : 0) == std::string::npos &&
                  t.size() > size_t(t[0] == '-' || t[0] == '+');
    errno = 0;
    long long x = digits ? std::strtoll(t.c_str(), &end, 10) : 0;
    if (!digits || errno == ERANGE) py_raise(loc, "ValueError", fmt::format("invalid literal for int() with base 10: '{}'", text));
    return Static::integer(int64_t(x));
  }
  double need_number(const Static& v, SourceLoc loc, std::string_view what) {
    if (v.is_number()) return v.as_double();
    fail(loc, fmt::format("{} must be a number, got {}", what, v.type_name()));
  }
  bool need_bool(const Static& v, SourceLoc loc, std::string_view what) override {
    if (v.kind == Kind::Bool || v.kind == Kind::Int) return v.i != 0;
    fail(loc, fmt::format("{} must be a bool, got {}", what, v.type_name()));
  }
  // An int or a tuple/list of ints (kernel sizes, shapes).
  Shape need_ints(const Static& v, SourceLoc loc, std::string_view what) {
    if (v.kind == Kind::Int) return {v.i};
    if (v.kind == Kind::Tuple || v.kind == Kind::List) {
      Shape s;
      for (const Static& e : v.elems) s.push_back(need_int(e, loc, what));
      return s;
    }
    fail(loc, fmt::format("{} must be an int or a tuple of ints, got {}", what, v.type_name()));
  }
  int64_t index_of(const Static& i, int64_t n, SourceLoc loc) {
    int64_t k = need_int(i, loc, "an index");
    int64_t j = k < 0 ? k + n : k;
    if (j < 0 || j >= n) py_raise(loc, "IndexError", fmt::format("index {} is out of range for {} elements", k, n));
    return j;
  }

  Static eval(const Expr& e, Scope& sc) {
    switch (e.kind) {
      case ExprKind::Name: return var(e.name, sc, e.loc);
      case ExprKind::Int: return Static::integer(e.int_value);
      case ExprKind::Float: return Static::number(e.float_value);
      case ExprKind::Bool: return Static::boolean(e.int_value != 0);
      case ExprKind::None: return Static::none();
      case ExprKind::String: return Static::str(e.name);
      case ExprKind::Tuple:
      case ExprKind::List: {
        std::vector<Static> es;
        for (const auto& a : e.args) es.push_back(eval(*a, sc));
        return Static::seq(e.kind == ExprKind::Tuple ? Kind::Tuple : Kind::List, std::move(es));
      }
      case ExprKind::Attribute: return attribute(e, sc);
      case ExprKind::Call: return call(e, sc);
      case ExprKind::Subscript: {
        Static base = eval(*e.args[0], sc);
        if (base.kind == Kind::Tensor) return Static::of_tensor(tensor_index(base.tensor, e, sc), false);
        if (e.args.size() != 2) fail(e.loc, "only one index is supported in __init__");
        const Expr& ix = *e.args[1];
        if (base.kind == Kind::Class && base.cls) {
          // Enum[name] (StrEnumMeta.from_str's `self[member]`): the member, else Python's KeyError
          Static key = eval(ix, sc);
          if (key.kind != Kind::Str) fail(ix.loc, fmt::format("class '{}' is not subscriptable by {}", base.cls->name, key.type_name()));
          if (std::optional<Static> member = class_attribute(*base.cls, key.s, ix.loc)) return *member;
          py_raise(ix.loc, "KeyError", py_repr(key));
        }
        if (base.kind == Kind::Dict) {
          Static key = eval(ix, sc);
          if (const Static* v = dict_get(base, key)) return *v;
          py_raise(ix.loc, "KeyError", py_repr(key));
        }
        if (base.kind == Kind::Module && base.obj->layer != Layer::User) {
          Static i = eval(ix, sc);
          const auto& items = base.obj->items;
          return Static::module(items[size_t(index_of(i, int64_t(items.size()), ix.loc))]);
        }
        std::vector<Static> es = iterate(base, e.loc);
        if (ix.kind == ExprKind::Slice) {
          int64_t n = int64_t(es.size()), b[3] = {0, n, 1};
          for (int k = 0; k < 3; ++k)
            if (ix.args[size_t(k)]) b[k] = need_int(eval(*ix.args[size_t(k)], sc), ix.loc, "a slice bound");
          if (b[2] != 1) fail(ix.loc, "slices with a step are not supported in __init__");
          for (int k = 0; k < 2; ++k) b[k] = std::clamp(b[k] < 0 ? b[k] + n : b[k], int64_t(0), n);
          std::vector<Static> out(es.begin() + b[0], es.begin() + std::max(b[0], b[1]));
          return Static::seq(base.kind == Kind::Tuple ? Kind::Tuple : Kind::List, std::move(out));
        }
        return es[size_t(index_of(eval(ix, sc), int64_t(es.size()), ix.loc))];
      }
      case ExprKind::Unary: {
        Static x = eval(*e.args[0], sc);
        switch (e.op) {
          case PyOp::Not: return Static::boolean(!truthy(x, e.loc));
          case PyOp::Neg:
            if (x.kind == Kind::Float) return Static::number(-x.f);
            if (x.kind == Kind::Int || x.kind == Kind::Bool) return Static::integer(-x.i);
            break;
          case PyOp::Pos:
            if (x.is_number()) return x;
            break;
          case PyOp::Invert: break;
          default: fail(e.loc, fmt::format("'{}' is not a unary operator", spelling(e.op)));
        }
        if (auto t = tensor_math(e.loc, [&] { return init_tensor_unary(e.op, x); })) return *t;
        fail(e.loc, fmt::format("bad operand type for unary {}: {}", spelling(e.op), x.type_name()));
      }
      case ExprKind::Binary: {
        Static lhs = eval(*e.args[0], sc);  // Python's order: the left operand first (a call's arguments are not ordered)
        return binary(e.op, lhs, eval(*e.args[1], sc), e.loc);
      }
      case ExprKind::BoolOp: {
        Static v;
        for (const auto& a : e.args) {
          v = eval(*a, sc);
          if (truthy(v, a->loc) == (e.op == PyOp::Or)) return v;
        }
        return v;
      }
      case ExprKind::Compare: {
        Static left = eval(*e.args[0], sc);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Static right = eval(*e.args[k + 1], sc);
          if (!compare(e.ops[k], left, right, e.loc)) return Static::boolean(false);
          left = right;
        }
        return Static::boolean(true);
      }
      case ExprKind::IfExp: return truthy(eval(*e.args[0], sc), e.loc) ? eval(*e.args[1], sc) : eval(*e.args[2], sc);
      case ExprKind::Ellipsis:
      case ExprKind::Slice:
      case ExprKind::Starred: break;
      case ExprKind::Dict: {
        Static d = Static::seq(Kind::Dict, {});
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          if (!e.args[i]) {
            // {**_COMMON_META, "num_params": ...} (torchvision's weight metadata): the other dict's items, in order
            Static other = eval(*e.args[i + 1], sc);
            if (other.kind != Kind::Dict) fail(e.args[i + 1]->loc, fmt::format("'{}' object is not a mapping", other.type_name()));
            for (const Static& kv : other.elems) dict_set(d, kv.elems[0], kv.elems[1]);
            continue;
          }
          dict_set(d, eval(*e.args[i], sc), eval(*e.args[i + 1], sc));
        }
        return d;
      }
      case ExprKind::BigInt: fail(e.loc, fmt::format("integer literal {} does not fit in int64", e.name));
      case ExprKind::FString: {
        std::string out;
        for (const auto& part : e.args) out += part->kind == ExprKind::String ? part->name : formatted(*part, sc);
        return Static::str(out);
      }
      case ExprKind::FormattedValue: return Static::str(formatted(e, sc));
      case ExprKind::ListComp:
      case ExprKind::GeneratorExp: {
        Scope inner = comprehension_scope(sc);
        std::vector<Static> out;
        comprehend(e, 0, inner, out);
        return Static::seq(Kind::List, std::move(out));
      }
      case ExprKind::Set:
      case ExprKind::SetComp: {
        Scope inner = comprehension_scope(sc);
        std::vector<Static> out;
        if (e.kind == ExprKind::SetComp) comprehend(e, 0, inner, out);
        else
          for (const auto& a : e.args) out.push_back(eval(*a, sc));
        return distinct(out);
      }
      case ExprKind::DictComp: {
        Scope inner = comprehension_scope(sc);
        Static d = Static::seq(Kind::Dict, {});
        comprehend_each(e, 0, inner, [&](Scope& at) {
          Static k = eval(*e.args[0], at);
          dict_set(d, k, eval(*e.args[1], at));
        });
        return d;
      }
      case ExprKind::Lambda: return lambda(e, sc);
      case ExprKind::NamedExpr: {
        if (e.args[0]->kind != ExprKind::Name) fail(e.args[0]->loc, fmt::format("cannot use assignment expressions with {}", unsupported_construct(e.args[0]->kind)));
        Static v = eval(*e.args[1], sc);
        sc.vars[e.args[0]->name] = v;
        if (sc.function) sc.function->vars[e.args[0]->name] = v;
        return v;
      }
      case ExprKind::Imaginary:
      case ExprKind::Bytes:
      case ExprKind::Yield:
      case ExprKind::YieldFrom:
      case ExprKind::Await: fail(e.loc, fmt::format("{} not supported in __init__", unsupported_construct(e.kind)));
    }
    fail(e.loc, "this expression is not supported in __init__");
  }

  // A local dict changed in place: d.pop(k[, default]), d.update(other, **kw), d.setdefault(k[, v]).
  Static dict_update(Static& d, const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (name == "update") {
      if (a.size() > 1) fail(loc, "dict.update() takes at most one positional argument");
      if (!a.empty())
        for (const Static& kv : a[0].kind == Kind::Dict ? a[0].elems : iterate(a[0], loc)) {
          std::vector<Static> pair = iterate(kv, loc);
          if (pair.size() != 2) fail(loc, "dict.update() takes (key, value) pairs");
          dict_set(d, pair[0], pair[1]);
        }
      for (const auto& [k, v] : kw) dict_set(d, Static::str(k), v);
      return Static::none();
    }
    if (a.empty() || a.size() > 2 || !kw.empty()) fail(loc, fmt::format("dict.{}() takes a key and an optional default", name));
    for (auto it = d.elems.begin(); it != d.elems.end(); ++it)
      if (equal(it->elems[0], a[0])) {
        Static v = it->elems[1];
        if (name == "pop") d.elems.erase(it);
        return v;
      }
    if (name == "setdefault") {
      Static v = a.size() > 1 ? a[1] : Static::none();
      dict_set(d, a[0], v);
      return v;
    }
    if (a.size() > 1) return a[1];
    py_raise(loc, "KeyError", py_repr(a[0]));
  }

  static const Static* dict_get(const Static& d, const Static& key) {
    for (const Static& kv : d.elems)
      if (equal(kv.elems[0], key)) return &kv.elems[1];
    return nullptr;
  }
  static void dict_set(Static& d, const Static& key, const Static& value) {
    for (Static& kv : d.elems)
      if (equal(kv.elems[0], key)) {
        kv.elems[1] = value;
        return;
      }
    d.elems.push_back(Static::seq(Kind::Tuple, {key, value}));
  }

  // A class-level attribute of cls or its bases (block.expansion, an enum's member), the subclass's first
  std::optional<Static> class_attribute(const ClassDef& cls, const std::string& name, SourceLoc loc) {
    resolve_bases(cls, loc);
    for (const ClassDef* k = &cls; k; k = k->parent)
      for (const auto& [n, value] : k->attrs)
        if (n == name) {
          // another attribute of the class body by its bare name (an enum's alias, `DEFAULT = IMAGENET1K_V1`)
          if (value->kind == ExprKind::Name && value->name != name)
            for (const auto& [other, v] : k->attrs)
              if (other == value->name) return class_attribute(*k, other, loc);
          InFile in(*this, file_of(k));
          Scope inner;
          Static v = eval(*value, inner);
          // an enum's member is its value here; remembered as the member of cls, so isinstance(member, cls) holds
          bool is_enum = false;
          for (const ClassDef* r = &cls; r; r = r->parent)
            is_enum = is_enum || (r->bases.size() == 1 && r->bases[0]->kind == ExprKind::Attribute && r->bases[0]->name == "Enum");
          if (is_enum && v.kind == Kind::Module && v.obj) enum_members_[v.obj.get()] = &cls;
          return v;
        }
    return std::nullopt;
  }
  std::map<const Object*, const ClassDef*> enum_members_;

  // A name of the file or of what it imported, as a value: a class, a function, torch.nn, partial, int...
  Static* global_value(const std::string& name, SourceLoc loc) {
    if (auto it = globals_.find({m_, name}); it != globals_.end()) return &it->second;
    Static v;
    bool found = true;
    auto cls = std::find_if(m_->classes.begin(), m_->classes.end(), [&](const auto& c) { return c->name == name; });
    auto fn = std::find_if(m_->functions.begin(), m_->functions.end(), [&](const auto& f) { return f->name == name; });
    static const std::set<std::string> kBuiltins = {"int", "float", "str", "bool", "list", "tuple", "dict", "len", "range",
                                                    "isinstance", "getattr", "hasattr", "setattr", "min", "max", "abs",
                                                    "sum", "any", "all", "enumerate", "zip", "print", "repr", "round",
                                                    "sorted", "reversed", "object", "type", "callable", "set",
                                                    // warning categories, for warnings.warn(msg, FutureWarning)
                                                    "Warning", "UserWarning", "FutureWarning", "DeprecationWarning", "RuntimeWarning"};
    if (cls != m_->classes.end()) {
      v.kind = Kind::Class;
      v.cls = cls->get();
    } else if (fn != m_->functions.end()) {
      v.kind = Kind::Function;
      v.fn = fn->get();
    } else if (m_->nn_names.count(name)) {
      v = Static::named(Kind::Namespace, "torch.nn");
    } else if (m_->functional_names.count(name)) {
      v = Static::named(Kind::Namespace, "torch.nn.functional");
    } else if ((name == "torch" || name == "math") && m_->imported.count(name)) {
      v = Static::named(Kind::Namespace, name);
    } else if (auto a = m_->aliases.find(name); a != m_->aliases.end() && a->second.rfind("import:", 0) == 0) {
      v = imported(a->second, name, loc);
    } else if (a != m_->aliases.end() && a->second.rfind("attr:", 0) == 0) {
      const size_t colon = a->second.rfind(':');
      v = attr_of(Static::named(Kind::Namespace, a->second.substr(5, colon - 5)), a->second.substr(colon + 1), loc);
    } else if (a != m_->aliases.end()) {
      bool module = a->second == "torch.nn.init" || a->second == "warnings" || a->second == "functools" || a->second == "numpy" ||
                    a->second == "collections" || a->second == "copy";
      v = Static::named(module ? Kind::Namespace : Kind::Function, a->second);
    } else if (kBuiltins.count(name) && !m_->why_unavailable(name)) {
      v = Static::named(Kind::Function, name);
    } else {
      found = false;
    }
    if (!found) return nullptr;
    return &globals_.emplace(Global{m_, name}, std::move(v)).first->second;
  }

  // ---- other files: `from ..ops.misc import Conv2dNormActivation`, read when a name of it is first used

  // Runs code of another file (its names, its errors) while it lives; restores the caller's on exit.
  struct InFile {
    Init& I;
    const File* file;
    const Source* src;
    const FileAst* m;
    InFile(Init& i, const File* f) : I(i), file(i.cur_), src(i.src_), m(i.m_) {
      if (f) {
        I.cur_ = f;
        I.src_ = &f->src;
        I.m_ = &f->ast;
      }
    }
    ~InFile() {
      I.cur_ = file;
      I.src_ = src;
      I.m_ = m;
    }
  };
  const File* file_of(const void* def) const {
    auto it = def_file_.find(def);
    return it == def_file_.end() ? nullptr : it->second;
  }
  void know(const std::shared_ptr<const File>& f) {
    loaded_.emplace(f->src.name, f);
    for (const auto& fn : f->ast.functions) def_file_[fn.get()] = f.get();
    for (const auto& c : f->ast.classes) {
      def_file_[c.get()] = f.get();
      for (const auto& m : c->methods) def_file_[m.get()] = f.get();
    }
  }
  std::shared_ptr<const File> shared(const File* f) const {
    for (const auto& [path, sp] : loaded_)
      if (sp.get() == f) return sp;
    return file_;
  }

  // "import:LEVEL:MODULE:NAME" (collect.cpp): the package directory LEVEL - 1 levels above the importing
  // file's, MODULE's file there (MODULE.py or MODULE/__init__.py), and NAME in it.
  Static imported(const std::string& spec, const std::string& as, SourceLoc loc) {
    size_t a = spec.find(':', 7), b = spec.find(':', a + 1);
    int level = std::stoi(spec.substr(7, a - 7));
    std::string module = spec.substr(a + 1, b - a - 1), name = spec.substr(b + 1);
    std::string stmt0 = fmt::format("from {}{} import {}{}", std::string(size_t(level), '.'), module, name, as == name ? "" : " as " + as);
    // the importing file's directory made absolute: `..` climbs above the first directory of a relative path
    // (`kiln check models/resnet.py` run inside the package), as Python resolves packages; a bare name is a
    // file in the working directory only where one is there (script_source's names are not)
    std::error_code ec;
    const std::filesystem::path src(cur_->src.name);
    std::string dir = std::filesystem::absolute(src, ec).lexically_normal().parent_path().string();
    if (ec || dir.empty() || (!src.has_parent_path() && !std::filesystem::exists(src, ec)))
      fail(loc, fmt::format("'{}' comes from `{}`, which kiln cannot read (the source has no file path to resolve it from)", as, stmt0));
    if (dir.back() != '/') dir += '/';
    for (int k = 1; k < level; ++k) {
      if (dir.size() < 2 || dir.find_last_of('/', dir.size() - 2) == std::string::npos)
        fail(loc, fmt::format("'{}' comes from `{}`, which goes above the top of the file's directories", as, stmt0));
      dir = dir.substr(0, dir.find_last_of('/', dir.size() - 2) + 1);
    }
    std::string rel = module;
    if (level == 0) {
      // an absolute import of the package the file is in: the directory above the one named after its top
      std::string top = module.substr(0, module.find('.'));
      std::string up = dir;
      while (up.size() > 1) {
        std::string parent = up.substr(0, up.find_last_of('/', up.size() - 2) + 1);
        if (up.substr(parent.size(), up.size() - parent.size() - 1) == top) break;
        up = parent;
      }
      if (up.size() <= 1) {
        const std::string* why = m_->why_unavailable(as);
        fail(loc, why ? *why : fmt::format("'{}' comes from `from {} import {}`, which kiln cannot read", as, module, name));
      }
      dir = up.substr(0, up.find_last_of('/', up.size() - 2) + 1);
    }
    std::replace(rel.begin(), rel.end(), '.', '/');
    std::string stmt = fmt::format("from {}{} import {}{}", std::string(size_t(level), '.'), module, name, as == name ? "" : " as " + as);
    std::string base = dir + (rel.empty() ? "" : rel + "/");
    // `from . import helpers` reads the package's __init__.py, as Python does
    std::shared_ptr<const File> f = module.empty() ? read_file(dir + "__init__.py") : read_module(dir + rel);
    std::string why;
    if (f)
      if (std::optional<Static> v = bound_in(*f, name, loc, &why)) return *v;
    // a name the package does not bind is its submodule (`from . import helpers`, `from .. import pkgmod`)
    if (std::shared_ptr<const File> sub = read_module(base + name)) return file_module(sub->src.name);
    if (!why.empty()) fail(loc, why);
    if (!f || module.empty())
      fail(loc, fmt::format("'{}' comes from `{}`, and kiln found no file for it ({}{}.py)", as, stmt, dir, module.empty() ? name : rel));
    fail(loc, fmt::format("cannot import name '{}' from '{}' ({})", name, module_dotted_name(f->src.name), f->src.name));
  }

  // PATH.py or PATH/__init__.py, parsed on first read; null when neither is there.
  std::shared_ptr<const File> read_module(const std::string& path) {
    if (auto f = read_file(path + ".py")) return f;
    return read_file(path + "/__init__.py");
  }
  std::shared_ptr<const File> read_file(const std::string& path) {
    if (auto it = loaded_.find(path); it != loaded_.end()) return it->second;
    std::FILE* fp = std::fopen(path.c_str(), "rb");
    if (!fp) return nullptr;
    std::string text;
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, fp)) > 0;) text.append(buf, n);
    std::fclose(fp);
    auto file = std::make_shared<File>();
    file->src = Source{path, std::move(text)};
    file->ast = parse(file->src);
    know(file);
    return file;
  }

  // helpers.NAME of a module of the package: NAME read in its file, as a from-import of it reads it.
  Static file_module_attr(const Static& mod, const std::string& name, SourceLoc loc) {
    std::string path = file_module_path(mod);
    std::string why;
    if (std::optional<Static> v = bound_in(*loaded_.at(path), name, loc, &why)) return *v;
    std::string dotted = module_dotted_name(path);
    fail(loc, why.empty() ? fmt::format("module '{}' has no attribute '{}'", dotted, name) : fmt::format("{} in module '{}'", why, dotted));
  }

  // NAME as file f's module-level code binds it (a constant or a class, function or import); none, with *why set
  // where the file says why the name is unavailable, otherwise.
  std::optional<Static> bound_in(const File& f, const std::string& name, SourceLoc loc, std::string* why) {
    InFile in(*this, &f);
    if (Static* c = module_constant(name, loc)) return *c;
    if (Static* g = global_value(name, loc)) return *g;
    if (const std::string* w = m_->why_unavailable(name)) *why = *w;
    return std::nullopt;
  }

  // A module-level `NAME = value`, computed on first read (in an empty scope, as Python's module-level
  // code sees no function's locals); a value that reads itself is an error, not a hang.
  Static* module_constant(const std::string& name, SourceLoc loc) {
    auto it = m_->constants.find(name);
    if (it == m_->constants.end()) return nullptr;
    Global key{m_, name};
    if (auto done = constants_.find(key); done != constants_.end()) return &done->second;
    if (!computing_.insert(key).second) fail(loc, fmt::format("module-level '{}' is defined in terms of itself", name));
    Scope top;
    Static v = eval(*it->second, top);
    if (auto t = m_->unpacked.find(name); t != m_->unpacked.end()) {
      assign(*t->second, v, top);
      v = top.vars.at(name);
    }
    computing_.erase(key);
    return &constants_.emplace(key, std::move(v)).first->second;
  }

  // The `for ... in ... if ...` clauses of a list comprehension or generator from the k-th on, appending
  // the element for each binding that passes every condition.
  void comprehend(const Expr& e, size_t k, Scope& sc, std::vector<Static>& out) {
    comprehend_each(e, k, sc, [&](Scope& at) { out.push_back(eval(*e.args[0], at)); });
  }

  // Runs leaf once for each binding of the comprehension's targets that its conditions keep.
  template <class Leaf>
  void comprehend_each(const Expr& e, size_t k, Scope& sc, Leaf&& leaf) {
    if (k == e.generators.size()) return leaf(sc);
    const Comprehension& g = e.generators[k];
    if (g.is_async) fail(e.loc, "async comprehensions are not supported in __init__");
    for (const Static& v : iterate(eval(*g.iter, sc), g.iter->loc)) {
      assign(*g.target, v, sc);
      bool keep = true;
      for (const ExprPtr& cond : g.ifs) keep = keep && truthy(eval(*cond, sc), cond->loc);
      if (keep) comprehend_each(e, k + 1, sc, leaf);
    }
  }

  // A set as kiln's __init__ keeps one: its elements once each, in first-seen order (the __init__s that
  // build sets test membership and size, and sort them before relying on an order).
  Static distinct(const std::vector<Static>& xs) {
    std::vector<Static> out;
    for (const Static& x : xs)
      if (std::none_of(out.begin(), out.end(), [&](const Static& y) { return equal(x, y); })) out.push_back(x);
    return Static::seq(Kind::List, std::move(out));
  }

  // The names an expression reads, nested lambdas and comprehensions included: what a lambda closes over.
  static void names_in(const Expr* e, std::set<std::string>& out) {
    if (!e) return;
    if (e->kind == ExprKind::Name) out.insert(e->name);
    for (const auto& a : e->args) names_in(a.get(), out);
    for (const auto& k : e->keywords) names_in(k.value.get(), out);
    for (const auto& g : e->generators) {
      names_in(g.iter.get(), out);
      for (const auto& c : g.ifs) names_in(c.get(), out);
    }
    if (e->fn)
      for (const auto& st : e->fn->body) names_in(st->value.get(), out);
  }

  // lambda: a function value holding the locals it reads (keys, elems), copied when it is made; Python's
  // closures would see a later rebinding, which no published __init__ relies on.
  Static lambda(const Expr& e, Scope& sc) {
    Static v = Static::named(Kind::Function, "<lambda>");
    v.fn = e.fn.get();
    def_file_[v.fn] = cur_;
    std::set<std::string> reads;
    names_in(&e, reads);
    for (const std::string& n : reads)
      if (auto it = sc.vars.find(n); it != sc.vars.end()) {
        v.keys.push_back(n);
        v.elems.push_back(it->second);
      }
    return v;
  }

  // Python's < for sorted(): numbers, strings, and tuples or lists element by element.
  bool py_less(const Static& a, const Static& b, SourceLoc loc) {
    if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
    if (a.kind == Kind::Str && b.kind == Kind::Str) return a.s < b.s;
    bool seqs = (a.kind == Kind::Tuple || a.kind == Kind::List) && a.kind == b.kind;
    if (!seqs) py_raise(loc, "TypeError", fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()));
    for (size_t i = 0; i < a.elems.size() && i < b.elems.size(); ++i)
      if (!equal(a.elems[i], b.elems[i])) return py_less(a.elems[i], b.elems[i], loc);
    return a.elems.size() < b.elems.size();
  }

  // sorted(iterable, *, key=None, reverse=False): stable, as Python's (reverse keeps equal items' order)
  Static sorted(const std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (a.size() != 1) fail(loc, fmt::format("sorted expected 1 argument, got {}", a.size()));
    for (const auto& [k, v] : kw)
      if (k != "key" && k != "reverse") fail(loc, fmt::format("sorted() got an unexpected keyword argument '{}'", k));
    std::vector<Static> xs = iterate(a[0], loc);
    std::vector<Static> keys = xs;
    if (kw.count("key") && kw.at("key").kind != Kind::None)
      for (Static& k : keys) k = call_value(kw.at("key"), {k}, {}, loc);
    bool reverse = kw.count("reverse") && truthy(kw.at("reverse"), loc);
    std::vector<size_t> order(xs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
      return reverse ? py_less(keys[j], keys[i], loc) : py_less(keys[i], keys[j], loc);
    });
    std::vector<Static> out;
    for (size_t i : order) out.push_back(xs[i]);
    return Static::seq(Kind::List, std::move(out));
  }

  // `raise ValueError(f"...")` in __init__: a kiln::Error with Python's words, `ValueError: ...`; a bare
  // `raise` in an except re-raises what it caught. `from e` only chains (the message is the new one's).
  [[noreturn]] void raise(const Stmt& s, Scope& sc) {
    if (!s.value) {
      if (handling_.empty()) py_raise(s.loc, "RuntimeError", "No active exception to reraise");
      throw handling_.back();
    }
    const Expr& exc = *s.value;
    if (exc.kind == ExprKind::Name && sc.vars.count(exc.name) && sc.vars.at(exc.name).kind == Kind::Exception) {
      const Static& e = sc.vars.at(exc.name);  // `raise e`: the exception caught, again
      if (s.cause) eval(*s.cause, sc);
      py_raise(s.loc, e.s, py_str(e));
    }
    const Expr& type = exc.kind == ExprKind::Call ? *exc.args[0] : exc;
    std::string name = type.kind == ExprKind::Name ? type.name : type.kind == ExprKind::Attribute ? type.name : "Exception";
    std::string msg;
    if (exc.kind == ExprKind::Call && exc.args.size() > 1) msg = py_str(eval(*exc.args[1], sc));
    if (s.cause) eval(*s.cause, sc);
    py_raise(s.loc, name, msg);
  }

  // try / except / else / finally as Python runs them, over the exceptions __init__ raises (py_exceptions.h).
  Flow try_stmt(const Stmt& s, Scope& sc, Static& ret) {
    Flow fl = Flow::Normal;
    try {
      fl = try_handlers(s, sc, ret);
    } catch (const Raised&) {
      // finally runs on the way out; the exception goes on unless finally returns or breaks
      if (Flow f = exec(s.finalbody, sc, ret); f != Flow::Normal) return f;
      throw;
    }
    if (Flow f = exec(s.finalbody, sc, ret); f != Flow::Normal) return f;
    return fl;
  }

  Flow try_handlers(const Stmt& s, Scope& sc, Static& ret) {
    std::optional<Raised> caught;
    int depth = depth_;
    try {
      Flow fl = exec(s.body, sc, ret);
      if (fl != Flow::Normal) return fl;
    } catch (const Raised& r) {
      caught = r;
      depth_ = depth;  // the calls the exception left
    }
    if (!caught) return exec(s.orelse, sc, ret);
    for (const ExceptHandler& h : s.handlers) {
      if (h.type && !catches(*h.type, caught->type)) continue;
      if (!h.name.empty()) sc.vars[h.name] = exception_value(*caught);
      handling_.push_back(*caught);
      Flow fl;
      try {
        fl = exec(h.body, sc, ret);
      } catch (...) {
        handling_.pop_back();
        throw;
      }
      handling_.pop_back();
      if (!h.name.empty()) sc.vars.erase(h.name);  // as Python deletes it at the end of the handler
      return fl;
    }
    throw *caught;
  }

  // What `except E as e` binds: the class and one argument, the message (a KeyError's message is its key's repr,
  // and its argument the key: kiln's KeyErrors are of string keys)
  static Static exception_value(const Raised& r) {
    Static e = Static::named(Kind::Exception, r.type);
    std::string arg = r.message;
    if (r.type == "KeyError" && arg.size() >= 2 && arg.front() == '\'' && arg.back() == '\'') arg = arg.substr(1, arg.size() - 2);
    if (!r.message.empty()) e.elems.push_back(Static::str(arg));
    return e;
  }

  // `except KeyError`, `except (KeyError, IndexError)`, `except builtins.KeyError`
  bool catches(const Expr& type, const std::string& raised) const {
    if (type.kind == ExprKind::Tuple) {
      return std::any_of(type.args.begin(), type.args.end(), [&](const ExprPtr& t) { return catches(*t, raised); });
    }
    if (type.kind != ExprKind::Name && type.kind != ExprKind::Attribute)
      fail(type.loc, "except in __init__ takes a builtin exception class or a tuple of them");
    std::optional<bool> c = exception_caught_by(raised, type.name);
    if (!c) fail(type.loc, fmt::format("'{}' is not a builtin exception class (except in __init__ catches those)", type.name));
    return *c;
  }

  // "denseblock%d" % (i + 1), "%.2fM" % (n / 1e6,): printf-style formatting with Python's flags (- + space 0),
  // width and precision, the conversions d i s r f e g x, and %%.
  Static percent_format(const std::string& f, const Static& b, SourceLoc loc) {
    std::vector<Static> vals = b.kind == Kind::Tuple ? b.elems : std::vector<Static>{b};
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] != '%') {
        out += f[i];
        continue;
      }
      if (++i == f.size()) py_raise(loc, "ValueError", "incomplete format");
      if (f[i] == '%') {
        out += '%';
        continue;
      }
      std::string align = ">", sign, zero, width, prec;
      for (; i < f.size() && std::string_view("-+ 0#").find(f[i]) != std::string_view::npos; ++i) {
        if (f[i] == '-') align = "<";
        else if (f[i] == '+') sign = "+";
        else if (f[i] == ' ' && sign.empty()) sign = " ";
        else if (f[i] == '0') zero = "0";
      }
      for (; i < f.size() && std::isdigit(static_cast<unsigned char>(f[i])); ++i) width += f[i];
      if (i < f.size() && f[i] == '.')
        for (prec = "."; ++i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]));) prec += f[i];
      if (i == f.size()) py_raise(loc, "ValueError", "incomplete format");
      if (prec == ".") prec = ".0";
      char c = f[i];
      if (next >= vals.size()) py_raise(loc, "TypeError", "not enough arguments for format string");
      const Static& v = vals[next++];
      if (align == "<") zero.clear();  // Python ignores 0 when - is given
      std::string num_spec = "{:" + (zero.empty() ? align : "") + sign + zero + width;
      if (c == 'd' || c == 'i') {
        out += fmt::format(fmt::runtime(num_spec + "}"), int64_t(need_number(v, loc, "%d format")));
      } else if (c == 'x' || c == 'X') {
        out += fmt::format(fmt::runtime(num_spec + c + "}"), need_int(v, loc, "%x format"));
      } else if (c == 'f' || c == 'F' || c == 'e' || c == 'E' || c == 'g' || c == 'G') {
        std::string p = prec.empty() ? ".6" : prec;
        out += fmt::format(fmt::runtime(num_spec + p + c + "}"), need_number(v, loc, "%f format"));
      } else if (c == 's' || c == 'r') {
        std::string text = c == 's' ? py_str(v) : py_repr(v);
        if (!prec.empty()) text = text.substr(0, size_t(std::stoll(prec.substr(1))));
        out += fmt::format(fmt::runtime("{:" + align + width + "}"), text);
      } else {
        fail(loc, fmt::format("the format '%{}' is not supported in __init__ (%d %i %s %r %f %e %g %x are)", c));
      }
    }
    if (next != vals.size()) py_raise(loc, "TypeError", "not all arguments converted during string formatting");
    return Static::str(out);
  }

  // One {value!conv:spec} of an f-string, as Python's format() writes it for the kinds __init__ has.
  std::string formatted(const Expr& fv, Scope& sc) {
    Static v = eval(*fv.args[0], sc);
    std::string spec;
    if (fv.args.size() > 1 && fv.args[1]) spec = eval(*fv.args[1], sc).s;
    if (fv.conversion == "r" || fv.conversion == "a") return py_repr(v);
    if (spec.empty()) return py_str(v);
    try {
      switch (v.kind) {
        case Kind::Int:
          // Python formats an int with a float presentation (`{n:.2f}`) as the float
          if (spec.find_first_of("eEfFgG%") != std::string::npos) return fmt::format(fmt::runtime("{:" + spec + "}"), double(v.i));
          return fmt::format(fmt::runtime("{:" + spec + "}"), v.i);
        case Kind::Float: return fmt::format(fmt::runtime("{:" + spec + "}"), v.f);
        case Kind::Bool:
        case Kind::Str:
        case Kind::None:
        case Kind::Tuple:
        case Kind::List:
        case Kind::Dict:
        case Kind::Module:
        case Kind::Tensor:
        case Kind::Class:
        case Kind::Function:
        case Kind::Partial:
        case Kind::Namespace:
        case Kind::Exception: return fmt::format(fmt::runtime("{:" + spec + "}"), py_str(v));
      }
    } catch (const fmt::format_error&) {
    }
    fail(fv.loc, fmt::format("format spec '{}' for {} is not supported in __init__", spec, v.type_name()));
  }

  // Python's str() and repr() of the values __init__ has.
  static std::string py_str(const Static& v) {
    switch (v.kind) {
      case Kind::None: return "None";
      case Kind::Int: return std::to_string(v.i);
      case Kind::Float: {
        if (std::isfinite(v.f) && v.f == std::trunc(v.f) && std::fabs(v.f) < 1e16) return fmt::format("{:.1f}", v.f);
        if (std::isnan(v.f)) return "nan";
        if (std::isinf(v.f)) return v.f > 0 ? "inf" : "-inf";
        return fmt::format("{}", v.f);
      }
      case Kind::Bool: return v.i ? "True" : "False";
      case Kind::Str: return v.s;
      case Kind::Tuple:
      case Kind::List: {
        std::string out;
        for (const Static& e : v.elems) out += (out.empty() ? "" : ", ") + py_repr(e);
        if (v.kind == Kind::List) return "[" + out + "]";
        return "(" + out + (v.elems.size() == 1 ? ",)" : ")");
      }
      case Kind::Dict: {
        std::string out;
        for (const Static& kv : v.elems) out += (out.empty() ? "" : ", ") + py_repr(kv.elems[0]) + ": " + py_repr(kv.elems[1]);
        return "{" + out + "}";
      }
      case Kind::Module: return v.obj->cls + "()";
      case Kind::Tensor: return "tensor(" + shape_str(v.tensor.sizes()) + ")";
      case Kind::Class: return "<class '" + (v.cls ? v.cls->name : "torch.nn." + v.s) + "'>";
      case Kind::Function: return v.fn ? "<function " + v.fn->name + ">" : "<built-in function " + v.s + ">";
      case Kind::Partial: return "functools.partial(" + py_str(v.elems[0]) + ", ...)";
      case Kind::Namespace: return "<module '" + v.s + "'>";
      case Kind::Exception: {
        // Python's str(e): empty, the one argument's str (a KeyError's repr), or the repr of all of them
        if (v.elems.size() == 1) return v.s == "KeyError" ? py_repr(v.elems[0]) : py_str(v.elems[0]);
        return v.elems.empty() ? "" : py_str(Static::seq(Kind::Tuple, v.elems));
      }
    }
    return "";
  }
  static std::string py_repr(const Static& v) {
    if (v.kind == Kind::Exception) {
      std::string args;
      for (const Static& a : v.elems) args += (args.empty() ? "" : ", ") + py_repr(a);
      return v.s + "(" + args + ")";
    }
    return v.kind == Kind::Str ? "'" + v.s + "'" : py_str(v);
  }

  static bool equal(const Static& a, const Static& b) {
    if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case Kind::None: return true;
      case Kind::Str: return a.s == b.s;
      case Kind::Tuple:
      case Kind::List:
      case Kind::Dict:
        if (a.elems.size() != b.elems.size()) return false;
        for (size_t i = 0; i < a.elems.size(); ++i)
          if (!equal(a.elems[i], b.elems[i])) return false;
        return true;
      case Kind::Module: return a.obj == b.obj;
      case Kind::Tensor: return a.tensor.impl() == b.tensor.impl();
      case Kind::Class: return a.cls || b.cls ? a.cls == b.cls : a.s == b.s;
      case Kind::Function:
      case Kind::Namespace: return a.fn == b.fn && a.s == b.s;
      default: return false;
    }
  }

  bool compare(PyOp op, const Static& a, const Static& b, SourceLoc loc) {
    if (op == PyOp::Is || op == PyOp::IsNot) {
      bool same = (a.kind == Kind::None && b.kind == Kind::None) || (a.kind == b.kind && equal(a, b));
      return (op == PyOp::Is) == same;
    }
    if (op == PyOp::Eq || op == PyOp::Ne) return (op == PyOp::Eq) == equal(a, b);
    if (op == PyOp::In || op == PyOp::NotIn) {
      bool found = false;
      if (b.kind == Kind::Str && a.kind == Kind::Str) found = b.s.find(a.s) != std::string::npos;
      else
        for (const Static& x : iterate(b, loc)) found = found || equal(a, x);
      return (op == PyOp::In) == found;
    }
    if (a.is_number() && b.is_number()) {
      double x = a.as_double(), y = b.as_double();
      switch (op) {
        case PyOp::Lt: return x < y;
        case PyOp::Le: return x <= y;
        case PyOp::Gt: return x > y;
        case PyOp::Ge: return x >= y;
        case PyOp::Add: case PyOp::Sub: case PyOp::Mul: case PyOp::Div: case PyOp::FloorDiv: case PyOp::Mod:
        case PyOp::Pow: case PyOp::MatMul: case PyOp::LShift: case PyOp::RShift: case PyOp::BitAnd:
        case PyOp::BitOr: case PyOp::BitXor: case PyOp::Pos: case PyOp::Neg: case PyOp::Not: case PyOp::Invert:
        case PyOp::And: case PyOp::Or: case PyOp::Is: case PyOp::IsNot: case PyOp::In: case PyOp::NotIn:
        case PyOp::Eq: case PyOp::Ne: break;  // decided above, or not a comparison
      }
    }
    if (a.kind == Kind::Str && b.kind == Kind::Str)
      return op == PyOp::Lt ? a.s < b.s : op == PyOp::Le ? a.s <= b.s : op == PyOp::Gt ? a.s > b.s : a.s >= b.s;
    fail(loc, fmt::format("cannot compare {} and {} with '{}'", a.type_name(), b.type_name(), spelling(op)));
  }

  // Python's int arithmetic (bools count as ints); nullopt where the result is no int (true division, a
  // negative power) or the operator takes no ints.
  std::optional<Static> int_binary(PyOp op, int64_t x, int64_t y, SourceLoc loc) const {
    switch (op) {
      case PyOp::Add: return Static::integer(x + y);
      case PyOp::Sub: return Static::integer(x - y);
      case PyOp::Mul: return Static::integer(x * y);
      case PyOp::FloorDiv:
      case PyOp::Mod: {
        if (y == 0) py_raise(loc, "ZeroDivisionError", "integer division or modulo by zero");
        int64_t q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;
        return Static::integer(op == PyOp::FloorDiv ? q : r);
      }
      case PyOp::Pow: {
        if (y < 0) return std::nullopt;
        uint64_t r = 1;  // wraps as the int64 product would, without signed overflow
        for (uint64_t base = uint64_t(x), e = uint64_t(y); e > 0; e >>= 1, base *= base)
          if (e & 1) r *= base;
        return Static::integer(int64_t(r));
      }
      case PyOp::LShift:
      case PyOp::RShift:
        if (y < 0) py_raise(loc, "ValueError", "negative shift count");
        if (op == PyOp::LShift) return Static::integer(y >= 63 ? 0 : x << y);
        return Static::integer(y >= 63 ? (x < 0 ? -1 : 0) : x >> y);
      case PyOp::BitAnd: return Static::integer(x & y);
      case PyOp::BitOr: return Static::integer(x | y);
      case PyOp::BitXor: return Static::integer(x ^ y);
      case PyOp::Div: case PyOp::MatMul: case PyOp::Pos: case PyOp::Neg: case PyOp::Not: case PyOp::Invert:
      case PyOp::And: case PyOp::Or: case PyOp::Lt: case PyOp::Le: case PyOp::Gt: case PyOp::Ge: case PyOp::Eq:
      case PyOp::Ne: case PyOp::Is: case PyOp::IsNot: case PyOp::In: case PyOp::NotIn: break;
    }
    return std::nullopt;
  }

  // Python's float arithmetic; nullopt for an operator that takes no floats.
  std::optional<Static> float_binary(PyOp op, double x, double y, SourceLoc loc) const {
    switch (op) {
      case PyOp::Add: return Static::number(x + y);
      case PyOp::Sub: return Static::number(x - y);
      case PyOp::Mul: return Static::number(x * y);
      case PyOp::Div:
      case PyOp::FloorDiv:
      case PyOp::Mod:
        if (y == 0) py_raise(loc, "ZeroDivisionError", "float division by zero");
        if (op == PyOp::Div) return Static::number(x / y);
        if (op == PyOp::FloorDiv) return Static::number(std::floor(x / y));
        return Static::number(x - std::floor(x / y) * y);
      case PyOp::Pow: return Static::number(std::pow(x, y));
      case PyOp::MatMul: case PyOp::LShift: case PyOp::RShift: case PyOp::BitAnd: case PyOp::BitOr: case PyOp::BitXor:
      case PyOp::Pos: case PyOp::Neg: case PyOp::Not: case PyOp::Invert: case PyOp::And: case PyOp::Or: case PyOp::Lt:
      case PyOp::Le: case PyOp::Gt: case PyOp::Ge: case PyOp::Eq: case PyOp::Ne: case PyOp::Is: case PyOp::IsNot:
      case PyOp::In: case PyOp::NotIn: break;
    }
    return std::nullopt;
  }

  // + and * on sequences and strings, % formatting; nullopt for the rest.
  std::optional<Static> sequence_binary(PyOp op, const Static& a, const Static& b, SourceLoc loc) {
    const bool seq = a.kind == Kind::List || a.kind == Kind::Tuple;
    switch (op) {
      case PyOp::Add:
        if (seq && a.kind == b.kind) {
          std::vector<Static> es = a.elems;
          es.insert(es.end(), b.elems.begin(), b.elems.end());
          return Static::seq(a.kind, std::move(es));
        }
        if (a.kind == Kind::Str && b.kind == Kind::Str) return Static::str(a.s + b.s);
        break;
      case PyOp::Mod:
        if (a.kind == Kind::Str) return percent_format(a.s, b, loc);
        break;
      case PyOp::Mul:
        if (seq && b.kind == Kind::Int) {
          std::vector<Static> es;
          for (int64_t k = 0; k < b.i; ++k) es.insert(es.end(), a.elems.begin(), a.elems.end());
          return Static::seq(a.kind, std::move(es));
        }
        break;
      case PyOp::Sub: case PyOp::Div: case PyOp::FloorDiv: case PyOp::Pow: case PyOp::MatMul: case PyOp::LShift:
      case PyOp::RShift: case PyOp::BitAnd: case PyOp::BitOr: case PyOp::BitXor: case PyOp::Pos: case PyOp::Neg:
      case PyOp::Not: case PyOp::Invert: case PyOp::And: case PyOp::Or: case PyOp::Lt: case PyOp::Le: case PyOp::Gt:
      case PyOp::Ge: case PyOp::Eq: case PyOp::Ne: case PyOp::Is: case PyOp::IsNot: case PyOp::In: case PyOp::NotIn:
        break;
    }
    return std::nullopt;
  }

  Static binary(PyOp op, const Static& a, const Static& b, SourceLoc loc) {
    if (auto t = tensor_math(loc, [&] { return init_tensor_binary(op, a, b); })) return *t;
    bool ints = (a.kind == Kind::Int || a.kind == Kind::Bool) && (b.kind == Kind::Int || b.kind == Kind::Bool);
    if (ints)
      if (std::optional<Static> r = int_binary(op, a.i, b.i, loc)) return *r;
    if (a.is_number() && b.is_number())
      if (std::optional<Static> r = float_binary(op, a.as_double(), b.as_double(), loc)) return *r;
    if (std::optional<Static> r = sequence_binary(op, a, b, loc)) return *r;
    fail(loc, fmt::format("unsupported operand types for {}: {} and {}", spelling(op), a.type_name(), b.type_name()));
  }

  Static attribute(const Expr& e, Scope& sc) {
    const Expr& base = *e.args[0];
    // torch.float64 and friends: dtypes travel as their names (torch.zeros(n, dtype=torch.float64)).
    if (is_name(base, "torch", sc) && m_->imported.count("torch") && e.name != "nn") return torch_attr(e.name);
    return attr_of(eval(base, sc), e.name, e.loc);
  }

  // torch.NAME: torch.cuda and torch.backends (what device selection at module level reads, `torch.device('cuda'
  // if torch.cuda.is_available() else 'cpu')`), torch.Tensor as a type (`type(t) is torch.Tensor`), and the rest
  // by name (dtypes: torch.zeros(n, dtype=torch.float64))
  static Static torch_attr(const std::string& name) {
    if (device_query_namespace("torch." + name)) return Static::named(Kind::Namespace, "torch." + name);
    if (name == "Tensor") return Static::named(Kind::Function, "torch.Tensor");
    return Static::str(name);
  }

  Static device_namespace_attr(const std::string& ns, const std::string& name, SourceLoc loc) {
    std::string q = ns + "." + name;
    if (device_query_namespace(q)) return Static::named(Kind::Namespace, q);
    if (device_query(q)) return Static::named(Kind::Function, q);
    fail(loc, fmt::format("module '{}' has no attribute '{}' in kiln script", ns, name));
  }

  Static attr_of(const Static& b, const std::string& name, SourceLoc loc) {
    if (name == "__class__") return type_of(b, loc);
    if (std::optional<Static> d = dunder_name(b, name)) return *d;
    switch (b.kind) {
      case Kind::Module: {
        const Object& o = *b.obj;
        if (name == "training") return Static::boolean(o.module->is_training());
        if (o.layer == Layer::Registered) {
          // A built-in layer's tensors before its constructor arguments: self.fc.weight, and m.bias is
          // None for a layer built with bias=False, as torch sets it.
          for (auto& [n, t] : o.module->named_parameters(false))
            if (n == name) return Static::of_tensor(t, true);
          for (auto& [n, t] : o.module->named_buffers(false))
            if (n == name) return Static::of_tensor(t, false);
          if (name == "weight" || name == "bias") return Static::none();
          // torch keeps a convolution's sizes as tuples whatever was passed (regnet reads m.kernel_size[1])
          const Static* v = o.attr(name);
          bool conv = o.cls == "Conv2d" || o.cls == "ConvTranspose2d" || o.cls == "Conv1d";
          if (v && v->kind == Kind::Int && conv &&
              (name == "kernel_size" || name == "stride" || name == "padding" || name == "dilation" || name == "output_padding"))
            return Static::seq(Kind::Tuple, std::vector<Static>(o.cls == "Conv1d" ? 1 : 2, *v));
        }
        if (const Static* v = o.attr(name)) return *v;
        // a Sequential built from an OrderedDict names its items (vision_transformer's self.heads.head)
        for (size_t i = 0; i < o.item_names.size() && i < o.items.size(); ++i)
          if (o.item_names[i] == name) return Static::module(o.items[i]);
        if (o.layer == Layer::ModuleDict)
          if (ObjectPtr m = o.item(name)) return Static::module(m);
        if (o.def)
          if (const FunctionDef* f = o.def->method(name)) {
            if (f->decorated("property")) return run_function(*f, &b, {}, {}, loc);  // a @property: its value
            return bound_method(f, b);  // `self.apply(self._init_weights)`: the method with self bound first
          }
        std::vector<std::string> names;
        for (auto& [k, v] : o.attrs) names.push_back(k);
        fail(loc, fmt::format("'{}' object has no attribute '{}'{}", o.cls, name, did_you_mean(name, names)));
      }
      case Kind::Class:
        if (b.cls) {
          resolve_bases(*b.cls, loc);  // a base from another file holds the attribute or says why it cannot
          // block.expansion: a class-level attribute, the subclass's over its base's
          if (std::optional<Static> v = class_attribute(*b.cls, name, loc)) return *v;
          if (const FunctionDef* f = b.cls->method(name)) {
            // Class.method: a @staticmethod is the function, a @classmethod the function with the class first
            if (f->decorated("classmethod")) return bound_method(f, b);
            Static fn = Static::named(Kind::Function, "");
            fn.fn = f;
            return fn;
          }
          // a method of the metaclass (torchvision's StrEnumMeta.from_str, a weight named by a string), the class as self
          for (const ClassDef* k = b.cls; k; k = k->parent) {
            resolve_bases(*k, loc);
            for (const auto& kw : k->keywords)
              if (kw.name == "metaclass") {
                InFile in(*this, file_of(k));
                Scope inner;
                Static meta = eval(*kw.value, inner);
                const FunctionDef* f = meta.kind == Kind::Class && meta.cls ? meta.cls->method(name) : nullptr;
                if (f) return bound_method(f, b);
              }
          }
          fail(loc, fmt::format("class '{}' has no class attribute '{}'", b.cls->name, name));
        }
        break;
      case Kind::Namespace: {
        if (is_file_module(b)) return file_module_attr(b, name, loc);
        const std::string& ns = b.s;
        if (ns == "torch" && name == "nn") return Static::named(Kind::Namespace, "torch.nn");
        if (ns == "torch.nn" && (name == "init" || name == "functional" || name == "parameter"))
          return Static::named(Kind::Namespace, "torch.nn." + name);
        if (ns == "torch.nn.parameter" && name == "Parameter") return Static::named(Kind::Class, name);  // maxvit's spelling
        if (ns == "torch.nn") {
          if (!torch_nn_class(name)) {
            std::vector<std::string> known;
            for (const nn::LayerSpec& spec : nn::layer_registry()) known.push_back(spec.name);
            fail(loc, fmt::format("module 'torch.nn' has no attribute '{}'{}", name, did_you_mean(name, known)));
          }
          return Static::named(Kind::Class, name);
        }
        if (ns == "math") {
          if (name == "pi") return Static::number(M_PI);
          if (name == "e") return Static::number(M_E);
          if (name == "inf") return Static::number(INFINITY);
        }
        if (ns == "torch") return torch_attr(name);
        if (device_query_namespace(ns)) return device_namespace_attr(ns, name, loc);
        // what lowered code can call: hasattr(F, 'scaled_dot_product_attention') picks the path kiln has
        if (ns == "torch.nn.functional" && !functional_exists(name))
          fail(loc, fmt::format("module 'torch.nn.functional' has no attribute '{}' in kiln script", name));
        return Static::named(Kind::Function, ns + "." + name);
      }
      case Kind::Dict:
      case Kind::List:
      case Kind::Tuple:
      case Kind::Str:
      case Kind::Tensor: {
        if (b.kind == Kind::Str && name == "type" && is_device_string(b.s)) return Static::str(b.s.substr(0, b.s.find(':')));  // a torch.device's
        // their methods, bound: the call takes them (d.items(), xs.index(v), t.dim())
        static const std::set<std::string> kMethods = {"items", "keys", "values", "get", "index", "count", "startswith", "replace",
                                                       "join", "find", "rfind", "endswith", "dim", "numel", "size", "view",
                                                       "reshape", "normal_", "uniform_", "zero_", "fill_"};
        static const std::set<std::string> kTensorMethods = {"int", "long", "float", "double", "bool", "tolist", "item",
                                                             "permute", "view", "reshape", "contiguous", "clone",
                                                             "unsqueeze", "flatten", "sum", "round", "log", "exp",
                                                             "sqrt", "abs", "sin", "cos", "tan", "asin", "acos", "atan",
                                                             "sinh", "cosh", "asinh", "acosh", "atanh", "tanh", "sigmoid",
                                                             "log2", "log10", "log1p", "expm1", "exp2", "erf", "erfc",
                                                             "rsqrt", "reciprocal", "ceil", "floor", "trunc", "sign",
                                                             "square", "neg", "negative", "pow", "transpose", "swapaxes",
                                                             "swapdims", "t", "tril", "triu", "to", "cpu"};
        if (!kMethods.count(name) && !(b.kind == Kind::Tensor && kTensorMethods.count(name))) break;
        Static m = Static::named(Kind::Function, "." + name);
        m.elems = {b};
        return m;
      }
      case Kind::None:
      case Kind::Int:
      case Kind::Float:
      case Kind::Bool:
      case Kind::Exception:
        if (name == "args") return Static::seq(Kind::Tuple, b.elems);
        break;
      case Kind::Function:
      case Kind::Partial: break;
    }
    fail(loc, fmt::format("'{}' object has no attribute '{}' in __init__", b.type_name(), name));
  }

  // type(v), as Python: the class of a module (a layer's torch.nn class, an enum member's enum), the builtin type
  // of a number, string or container, NoneType of None and type of a class.
  Static type_of(const Static& v, SourceLoc loc) {
    static const std::map<Kind, const char*> kBuiltin = {{Kind::Int, "int"}, {Kind::Float, "float"}, {Kind::Bool, "bool"},
                                                         {Kind::Str, "str"}, {Kind::List, "list"}, {Kind::Tuple, "tuple"},
                                                         {Kind::Dict, "dict"}, {Kind::None, "NoneType"}, {Kind::Class, "type"}};
    if (auto it = kBuiltin.find(v.kind); it != kBuiltin.end()) return Static::named(Kind::Function, it->second);
    if (v.kind == Kind::Tensor) return v.parameter ? Static::named(Kind::Class, "Parameter") : Static::named(Kind::Function, "torch.Tensor");
    if (v.kind == Kind::Module) {
      const ClassDef* def = v.obj->def;
      if (auto m = enum_members_.find(v.obj.get()); m != enum_members_.end()) def = m->second;
      Static c = Static::named(Kind::Class, def ? def->name : v.obj->cls);
      c.cls = def;
      return c;
    }
    fail(loc, fmt::format("type() of {} is not supported in __init__", v.type_name()));
  }

  // __name__, __qualname__ and __module__ of a class or function (torch's modules for torch.nn's classes, the
  // file's dotted module name for its own), and __module__ of a module through its class; nullopt for other names.
  std::optional<Static> dunder_name(const Static& v, const std::string& name) {
    bool qual = name == "__qualname__";
    if (name != "__name__" && !qual && name != "__module__") return std::nullopt;
    if (v.kind == Kind::Module && name == "__module__") return dunder_name(type_of(v, SourceLoc{}), name);
    if (v.kind == Kind::Class) {
      if (name != "__module__") return Static::str(v.cls ? v.cls->name : v.s);
      if (v.cls) return Static::str(python_module_of(v.cls));
      const std::string* m = torch_nn_module_of(v.s);
      return Static::str(m ? *m : "torch.nn");
    }
    if (v.kind != Kind::Function || (!v.fn && (v.s.empty() || v.s[0] == '.'))) return std::nullopt;
    if (v.fn) {
      if (name == "__module__") return Static::str(python_module_of(v.fn));
      if (const File* f = file_of(v.fn); f && qual)  // a method read through its class: Class.method
        for (const auto& c : f->ast.classes)
          if (c->method(v.fn->name) == v.fn) return Static::str(c->name + "." + v.fn->name);
      return Static::str(v.fn->name);
    }
    // builtins: int, len, ... and the typing / collections names isinstance takes
    size_t dot = v.s.rfind('.');
    if (name == "__module__") return Static::str(dot == std::string::npos ? "builtins" : v.s.substr(0, dot));
    return Static::str(dot == std::string::npos ? v.s : v.s.substr(dot + 1));
  }

  // The module a class or function of a file belongs to, as Python names it when the file is imported.
  std::string python_module_of(const void* def) const {
    const File* f = file_of(def);
    return f ? module_dotted_name(f->src.name) : std::string();
  }

  // torch.nn's classes as torch 1.13 has them: nn.X is a class value for these (building one kiln lacks
  // fails when it is called, naming it), and hasattr(nn, name) is false for other names.
  static bool torch_nn_class(const std::string& name) { return torch_nn_module_of(name) != nullptr; }

  // isinstance(v, t): t a class of the file (its subclasses match), a torch.nn class by name, a Python
  // type, or a tuple of them.
  bool instance_of(const Static& v, const Static& t, SourceLoc loc) {
    if (t.kind == Kind::Tuple) {
      for (const Static& x : t.elems)
        if (instance_of(v, x, loc)) return true;
      return false;
    }
    if (t.kind == Kind::Class) {
      if (v.kind != Kind::Module) return false;
      if (auto m = enum_members_.find(v.obj.get()); t.cls && m != enum_members_.end())
        for (const ClassDef* k = m->second; k; k = k->parent)
          if (k == t.cls) return true;
      if (t.cls) {
        for (const ClassDef* k = v.obj->def; k; k = k->parent)
          if (k == t.cls) return true;
        return false;
      }
      if (t.s == "Module") return true;
      if (v.obj->def) return v.obj->def->root()->torch_base == t.s && t.s != "Module";
      return v.obj->cls == t.s;
    }
    if (t.kind == Kind::Function && !t.fn) {
      const std::string& n = t.s;
      if (n == "int") return v.kind == Kind::Int || v.kind == Kind::Bool;
      if (n == "float") return v.kind == Kind::Float;
      if (n == "bool") return v.kind == Kind::Bool;
      if (n == "str") return v.kind == Kind::Str;
      if (n == "list") return v.kind == Kind::List;
      if (n == "tuple") return v.kind == Kind::Tuple;
      if (n == "dict" || n == "collections.OrderedDict" || n == "typing.OrderedDict") return v.kind == Kind::Dict;
      if (n == "typing.Sequence") return v.kind == Kind::List || v.kind == Kind::Tuple || v.kind == Kind::Str;
      if (n == "object") return true;
      if (n == "torch.Tensor") return v.kind == Kind::Tensor;
    }
    fail(loc, fmt::format("isinstance() arg 2 must be a type or tuple of types, got {}", t.type_name()));
  }

  // The dotted name of a callee rooted at an import: "nn.Linear" → ("nn", "Linear").
  bool is_nn(const Expr& e, const Scope& sc) const {
    if (e.kind == ExprKind::Name) return m_->nn_names.count(e.name) && !sc.vars.count(e.name);
    return e.kind == ExprKind::Attribute && e.name == "nn" && e.args[0]->kind == ExprKind::Name &&
           e.args[0]->name == "torch" && m_->imported.count("torch") && !sc.vars.count("torch");
  }
  bool is_name(const Expr& e, const char* n, const Scope& sc) const {
    return e.kind == ExprKind::Name && e.name == n && !sc.vars.count(n);
  }

  Static call(const Expr& e, Scope& sc) {
    const Expr& fn = *e.args[0];
    std::vector<Static> args;
    Bound kwargs;
    auto eval_args = [&] {
      for (size_t i = 1; i < e.args.size(); ++i) {
        const Expr& a = *e.args[i];
        if (a.kind == ExprKind::Starred) {
          for (const Static& x : iterate(eval(*a.args[0], sc), a.loc)) args.push_back(x);
        } else {
          args.push_back(eval(a, sc));
        }
      }
      for (const Keyword& k : e.keywords) {
        if (!k.name.empty()) {
          kwargs[k.name] = eval(*k.value, sc);
          continue;
        }
        Static d = eval(*k.value, sc);  // f(**kwargs)
        if (d.kind != Kind::Dict) fail(k.loc, fmt::format("argument after ** must be a mapping, not {}", d.type_name()));
        for (const Static& kv : d.elems) {
          if (kv.elems[0].kind != Kind::Str) fail(k.loc, "keywords must be strings");
          kwargs[kv.elems[0].s] = kv.elems[1];
        }
      }
    };
    if ((fn.kind == ExprKind::Name && m_->no_op_calls.count(fn.name) && !sc.vars.count(fn.name)) ||
        (fn.kind == ExprKind::Attribute && fn.name == "_log_api_usage_once")) {  // torch._C._log_api_usage_once
      eval_args();
      return Static::none();
    }
    if (is_jit_annotate(e) && !sc.vars.count("torch") && !sc.vars.count("jit")) {
      // the value: a type matters to lowered code only, where an attribute's value is typed by what it holds
      if (e.args.size() != 3 || !e.keywords.empty()) fail(e.loc, "torch.jit.annotate() takes a type and a value");
      Static v = eval(*e.args[2], sc);
      if (v.kind == Kind::List) v.annotation = e.args[1].get();
      return v;
    }
    if (fn.kind == ExprKind::Attribute) {
      const Expr& base = *fn.args[0];
      // super().__init__(...) and super(Net, self).__init__(...): the base class's __init__ (a class of
      // the file), nn.Sequential's (its modules), or nn.Module's (nothing to do).
      if (fn.name == "__init__" && base.kind == ExprKind::Call && is_name(*base.args[0], "super", sc)) {
        eval_args();
        if (!sc.self || !sc.cls) fail(e.loc, "super() is only supported in a method's __init__");
        if (const ClassDef* parent = sc.cls->parent) init_object(*sc.self, *parent, args, kwargs, e.loc);
        else if (sc.cls->torch_base == "Sequential") add_items(*sc.self->obj, args, e.loc);
        else if (const nn::LayerSpec* spec = nn::find_layer(sc.cls->torch_base)) init_layer_base(*sc.self, *spec, args, kwargs, e.loc);
        return Static::none();
      }
      if (is_nn(base, sc)) {
        eval_args();
        return layer(fn.name, args, kwargs, e.loc);
      }
      if (base.kind == ExprKind::Attribute && base.name == "init" && is_nn(*base.args[0], sc)) {
        eval_args();
        return init_fn(fn.name, args, kwargs, e.loc);
      }
      if (is_name(base, "torch", sc) && m_->imported.count("torch")) {
        eval_args();
        return torch_fn(fn.name, args, kwargs, e.loc);
      }
      eval_args();
      if ((fn.name == "append" || fn.name == "extend") && base.kind == ExprKind::Name && sc.vars.count(base.name) &&
          sc.vars[base.name].kind == Kind::List) {
        // A local list grows in place (lists are values here, so the name is updated).
        if (args.size() != 1 || !kwargs.empty()) fail(fn.loc, fmt::format("list.{}() takes one argument", fn.name));
        Static& list = sc.vars[base.name];
        for (const Static& x : fn.name == "append" ? std::vector<Static>{args[0]} : iterate(args[0], fn.loc))
          list.elems.push_back(list.s == "ParameterList" ? as_parameter(x, list.s, fn.loc) : x);
        return Static::none();
      }
      if ((fn.name == "append" || fn.name == "extend") && kwargs.empty() && grow_parameter_list(base, fn.name, args, sc, fn.loc))
        return Static::none();
      if ((fn.name == "pop" || fn.name == "update" || fn.name == "setdefault") && base.kind == ExprKind::Name &&
          sc.vars.count(base.name) && sc.vars[base.name].kind == Kind::Dict)
        return dict_update(sc.vars[base.name], fn.name, args, kwargs, fn.loc);
      // obj.__dict__.update(kwargs) on a config object (minGPT's CfgNode): each key becomes a field
      if (fn.name == "update" && base.kind == ExprKind::Attribute && base.name == "__dict__") {
        Static obj = eval(*base.args[0], sc);
        if (obj.kind != Kind::Module || !obj.obj->plain)
          fail(base.loc, fmt::format("__dict__.update() of {} is not supported in __init__ (a config object's is)", obj.type_name()));
        if (args.size() > 1) fail(fn.loc, fmt::format("update expected at most 1 argument, got {}", args.size()));
        std::vector<std::pair<Static, Static>> items;
        if (!args.empty()) {
          if (args[0].kind != Kind::Dict) fail(fn.loc, fmt::format("__dict__.update() takes a dict, got {}", args[0].type_name()));
          for (const Static& kv : args[0].elems) items.emplace_back(kv.elems[0], kv.elems[1]);
        }
        for (const auto& [k, v] : kwargs) items.emplace_back(Static::str(k), v);
        for (const auto& [k, v] : items) {
          if (k.kind != Kind::Str) fail(fn.loc, fmt::format("attribute name must be string, not '{}'", k.type_name()));
          obj.obj->attrs[k.s] = v;
        }
        return Static::none();
      }
      Static self = eval(base, sc);
      return method_call(self, fn.name, args, kwargs, fn.loc);
    }
    if (fn.kind != ExprKind::Name) {
      // getattr(nn, name)(...), self.make(...)(...): any expression whose value is callable
      Static callee = eval(fn, sc);
      eval_args();
      return call_value(callee, args, kwargs, e.loc);
    }
    eval_args();
    if (auto it = sc.vars.find(fn.name); it != sc.vars.end()) return call_value(it->second, args, kwargs, e.loc);
    if (Static* g = global_value(fn.name, fn.loc)) return call_value(*g, args, kwargs, e.loc);
    if (Static* c = module_constant(fn.name, fn.loc)) return call_value(*c, args, kwargs, e.loc);
    if (const std::string* why = m_->why_unavailable(fn.name)) fail(fn.loc, *why);
    return python_builtin(fn.name, args, kwargs, e.loc);
  }

  // Calls a value: a class (built), a function of the file (run), a torch.nn class, nn.init function,
  // builtin, or a partial of any of them.
  Static call_value(const Static& callee, std::vector<Static> args, Bound kwargs, SourceLoc loc) {
    switch (callee.kind) {
      case Kind::Class: {
        if (!callee.cls) return layer(callee.s, args, kwargs, loc);
        std::shared_ptr<ScriptedModule> m = build(*callee.cls, args, kwargs, loc);
        owned_[m->object_ptr().get()] = m;
        return Static::module(m->object_ptr());
      }
      case Kind::Function:
        // a lambda, or a def nested in __init__: with the locals it closed over
        if (callee.fn && (callee.fn->name == "<lambda>" || !callee.keys.empty()))
          return run_function(*callee.fn, nullptr, args, kwargs, loc, nullptr, &callee);
        if (callee.fn) return run_function(*callee.fn, nullptr, args, kwargs, loc);
        return builtin_call(callee, args, kwargs, loc);
      case Kind::Partial: {
        // partial(f, *a, **k)(*b, **j) is f(*a, *b, **k, **j), later keywords replacing earlier ones
        size_t nk = callee.keys.size(), na = callee.elems.size() - 1 - nk;
        std::vector<Static> all(callee.elems.begin() + 1, callee.elems.begin() + 1 + long(na));
        all.insert(all.end(), args.begin(), args.end());
        Bound kw;
        for (size_t k = 0; k < nk; ++k) kw[callee.keys[k]] = callee.elems[1 + na + k];
        for (auto& [k, v] : kwargs) kw[k] = v;
        return call_value(callee.elems[0], std::move(all), std::move(kw), loc);
      }
      case Kind::Module: fail(loc, fmt::format("calling a module ({}) in __init__ is not supported", callee.obj->cls));
      case Kind::None:
      case Kind::Int:
      case Kind::Float:
      case Kind::Bool:
      case Kind::Str:
      case Kind::Tuple:
      case Kind::List:
      case Kind::Dict:
      case Kind::Tensor:
      case Kind::Namespace:
      case Kind::Exception: break;
    }
    fail(loc, fmt::format("'{}' object is not callable", callee.type_name()));
  }

  // The module objects under `o` as named_modules() lists them: `o` first, then depth-first in the
  // order the children were registered.
  void modules_of(const ObjectPtr& o, const std::string& prefix, std::vector<std::pair<std::string, ObjectPtr>>& out) {
    out.emplace_back(prefix, o);
    for (const auto& [name, child] : o->module->named_children()) {
      auto it = objs_.find(child.get());
      if (it != objs_.end()) modules_of(it->second, prefix.empty() ? name : prefix + "." + name, out);
    }
  }

  // A builtin called by value: Python's, functools.partial, OrderedDict, typing.cast, nn.init.*, math.*,
  // warnings.*, and the methods of lists, dicts, strings and tensors (".name", the object first).
  Static builtin_call(const Static& callee, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    const std::string& n = callee.s;
    if (std::optional<DeviceQuery> q = device_query(n)) {
      if (!a.empty() || !kw.empty()) fail(loc, fmt::format("{}() takes no arguments", n));
      return q->is_int ? Static::integer(q->value) : Static::boolean(q->value != 0);
    }
    if (n == "functools.partial") {
      if (a.empty()) fail(loc, "partial() takes a callable first");
      Static p;
      p.kind = Kind::Partial;
      p.elems = a;
      for (const auto& [k, v] : kw) {
        p.keys.push_back(k);
        p.elems.push_back(v);
      }
      return p;
    }
    if (n == "collections.OrderedDict" || n == "typing.OrderedDict" || n == "dict") {
      Static d = Static::seq(Kind::Dict, {});
      if (a.size() > 1) fail(loc, fmt::format("{}() takes at most one positional argument", n));
      if (!a.empty()) {
        if (a[0].kind == Kind::Dict) d.elems = a[0].elems;
        else
          for (const Static& kv : iterate(a[0], loc)) {
            std::vector<Static> pair = iterate(kv, loc);
            if (pair.size() != 2) fail(loc, fmt::format("{}() takes (key, value) pairs", n));
            dict_set(d, pair[0], pair[1]);
          }
      }
      for (const auto& [k, v] : kw) dict_set(d, Static::str(k), v);
      return d;
    }
    if (n == "copy.copy") {
      // a config object's shallow copy (efficientnet's copy.copy(cnf)); lists are values here already
      if (a.size() != 1) fail(loc, "copy.copy() takes one argument");
      if (a[0].kind != Kind::Module) return a[0];
      if (!a[0].obj->plain) fail(loc, fmt::format("copy.copy() of a module ({}) is not supported in __init__", a[0].obj->cls));
      auto obj = std::make_shared<Object>(*a[0].obj);
      auto mod = std::make_shared<ScriptedModule>(obj->file, obj);
      obj->module = mod.get();
      plain_copies_.push_back(mod);
      return Static::module(obj);
    }
    if (n == "typing.cast") {
      if (a.size() != 2) fail(loc, "cast() takes a type and a value");
      return a[1];
    }
    if (n.rfind("warnings.", 0) == 0) return Static::none();
    if (n == "numpy.linspace") {
      // maxvit's per-block stochastic depth, np.linspace(0, p, n).tolist(): float64, as numpy's
      if (a.size() != 3 || !kw.empty()) fail(loc, "np.linspace() takes start, stop and num in __init__");
      double start = need_number(a[0], loc, "start"), stop = need_number(a[1], loc, "stop");
      if (a[2].kind != Kind::Int || a[2].i < 0) fail(loc, "np.linspace(): num must be a non-negative int");
      return Static::of_tensor(linspace(start, stop, a[2].i, TensorOptions(DType::Float64)), false);
    }
    if (n == "numpy.prod") {
      // int(np.prod(img_shape)) of a tuple of sizes (PyTorch-GAN's generators): math.prod's number
      if (a.size() != 1 || !kw.empty()) fail(loc, "np.prod() takes one sequence of numbers in __init__");
      return math_fn("prod", a, kw, loc);
    }
    if (n.rfind("numpy.", 0) == 0)
      fail(loc, fmt::format("np.{}() is not supported in kiln script (np.linspace and np.prod are, in __init__)", n.substr(6)));
    if (n.rfind("torch.nn.init.", 0) == 0) return init_fn(n.substr(14), a, kw, loc);
    if (n.rfind("math.", 0) == 0) return math_fn(n.substr(5), a, kw, loc);
    if (n.rfind("torch.nn.functional.", 0) == 0)
      fail(loc, fmt::format("F.{}() runs in forward, not in __init__ (kiln evaluates __init__ without tensors' ops)", n.substr(20)));
    if (n.rfind("torch.", 0) == 0) return torch_fn(n.substr(6), a, kw, loc);
    if (!n.empty() && n[0] == '.') return value_method(callee.elems[0], n.substr(1), a, kw, loc);
    if (n == "type") {
      // type(obj) is str (torchvision's WeightsEnum.verify): the builtin a value's kind names, or its class
      if (a.size() != 1 || !kw.empty()) fail(loc, "type() takes 1 argument in __init__");
      return type_of(a[0], loc);
    }
    if (n == "isinstance") {
      if (a.size() != 2 || !kw.empty()) fail(loc, "isinstance() takes 2 arguments");
      return Static::boolean(instance_of(a[0], a[1], loc));
    }
    if (n == "getattr" || n == "hasattr") {
      if (a.size() < 2 || a.size() > (n == "getattr" ? 3u : 2u) || a[1].kind != Kind::Str)
        fail(loc, fmt::format("{}() takes an object and an attribute name{}", n, n == "getattr" ? " (and a default)" : ""));
      try {
        Static v = attr_of(a[0], a[1].s, loc);
        return n == "hasattr" ? Static::boolean(true) : v;
      } catch (const Error&) {
        if (n == "hasattr") return Static::boolean(false);
        if (a.size() == 3) return a[2];
        throw;
      }
    }
    if (n == "setattr") {
      if (a.size() != 3 || a[1].kind != Kind::Str || a[0].kind != Kind::Module || a[0].obj->layer != Layer::User)
        fail(loc, "setattr() takes a module of the file, an attribute name and a value in __init__");
      set_attr(*a[0].obj, a[1].s, a[2], loc);
      return Static::none();
    }
    if (n == "callable") {
      if (a.size() != 1) fail(loc, "callable() takes one argument");
      Kind k = a[0].kind;
      return Static::boolean(k == Kind::Class || k == Kind::Function || k == Kind::Partial || k == Kind::Module);
    }
    return python_builtin(n, a, kw, loc);
  }

  Static math_fn(const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (!kw.empty()) fail(loc, fmt::format("math.{}() takes no keyword arguments in __init__", name));
    if ((name == "prod" || name == "fsum") && a.size() == 1 && (a[0].kind == Kind::List || a[0].kind == Kind::Tuple)) {
      bool ints = name == "prod";
      double f = name == "prod" ? 1 : 0;
      int64_t i = 1;
      for (const Static& x : a[0].elems) {
        double v = need_number(x, loc, "an element");
        ints = ints && x.kind != Kind::Float;
        if (name == "prod") f *= v, i *= x.kind == Kind::Float ? 1 : x.i;
        else f += v;
      }
      return ints ? Static::integer(i) : Static::number(f);
    }
    std::vector<MathNumber> args;
    for (const Static& x : a) {
      double v = need_number(x, loc, "the argument");
      args.push_back(x.kind == Kind::Float ? MathNumber::of_float(v) : x.kind == Kind::Bool ? MathNumber::of_bool(x.i != 0) : MathNumber::of_int(x.i));
    }
    std::optional<MathNumber> r = python_math(name, args, [&](const std::string& m) { fail(loc, m); });
    if (!r) fail(loc, fmt::format("math.{} is not supported in kiln script", name));
    return r->kind == MathNumber::Kind::Int ? Static::integer(r->i) : r->kind == MathNumber::Kind::Bool ? Static::boolean(r->i != 0) : Static::number(r->f);
  }

  // Methods of the values __init__ has that are not modules: d.items(), xs.index(v), t.dim(), ...
  Static value_method(const Static& v, const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (v.kind == Kind::Tensor)
      if (auto t = tensor_math(loc, [&] { return init_tensor_method(v.tensor, name, a, kw); })) return *t;
    if (v.kind == Kind::Dict && kw.empty()) {
      std::vector<Static> out;
      if (name == "items" || name == "keys" || name == "values") {
        for (const Static& kv : v.elems) out.push_back(name == "items" ? kv : kv.elems[name == "keys" ? 0 : 1]);
        return Static::seq(Kind::List, std::move(out));
      }
      if (name == "get" && (a.size() == 1 || a.size() == 2)) {
        const Static* x = dict_get(v, a[0]);
        return x ? *x : a.size() == 2 ? a[1] : Static::none();
      }
    }
    if ((v.kind == Kind::List || v.kind == Kind::Tuple) && (name == "index" || name == "count") && a.size() == 1 && kw.empty()) {
      int64_t k = 0, found = -1;
      for (const Static& x : v.elems) {
        if (equal(x, a[0])) {
          if (found < 0) found = k;
          if (name == "count") ++found;
        }
        ++k;
      }
      if (name == "index" && found < 0) py_raise(loc, "ValueError", fmt::format("{} is not in list", py_repr(a[0])));
      return Static::integer(name == "count" ? found + 1 : found);
    }
    if (v.kind == Kind::Tensor && (name == "normal_" || name == "uniform_" || name == "zero_" || name == "fill_")) {
      // t.normal_(std=0.02) in place, as nn.init's functions
      std::vector<Static> all = {v};
      all.insert(all.end(), a.begin(), a.end());
      std::string init = name == "zero_" ? "zeros_" : name == "fill_" ? "constant_" : name;
      Bound k;
      for (const auto& [key, x] : kw) k[key == "from" ? "a" : key == "to" ? "b" : key == "value" ? "val" : key] = x;
      return init_fn(init, all, k, loc);
    }
    if (!kw.empty()) fail(loc, fmt::format("{}.{}() takes no keyword arguments in __init__", v.type_name(), name));
    if (v.kind == Kind::Tensor && a.empty() && (name == "dim" || name == "numel"))
      return Static::integer(name == "dim" ? v.tensor.dim() : v.tensor.numel());
    if (v.kind == Kind::Tensor && (name == "view" || name == "reshape")) {
      // a buffer shaped once (nanoGPT's causal mask: torch.tril(...).view(1, 1, n, n)), computed now
      Shape shape = a.size() == 1 && a[0].kind != Kind::Int ? need_ints(a[0], loc, "shape") : Shape{};
      if (shape.empty() || a.size() != 1)
        for (const Static& d : a) shape.push_back(need_int(d, loc, "shape"));
      try {
        return Static::of_tensor(v.tensor.contiguous().reshape(shape), false);
      } catch (const Error& e) {
        fail(loc, e.what());
      }
    }
    if (v.kind == Kind::Tensor && name == "size") {
      if (a.size() == 1) return Static::integer(v.tensor.size(need_int(a[0], loc, "dim")));
      std::vector<Static> dims;
      for (int64_t d : v.tensor.sizes()) dims.push_back(Static::integer(d));
      return Static::seq(Kind::Tuple, std::move(dims));
    }
    if (v.kind == Kind::Str && name == "replace" && a.size() == 2 && a[0].kind == Kind::Str && a[1].kind == Kind::Str) {
      std::string out = v.s;
      if (!a[0].s.empty())
        for (size_t at = out.find(a[0].s); at != std::string::npos; at = out.find(a[0].s, at + a[1].s.size()))
          out.replace(at, a[0].s.size(), a[1].s);
      return Static::str(out);
    }
    if (v.kind == Kind::Str && (name == "find" || name == "rfind") && a.size() == 1 && a[0].kind == Kind::Str) {
      // DCGAN's weights_init: classname.find('Conv') != -1
      size_t at = name == "find" ? v.s.find(a[0].s) : v.s.rfind(a[0].s);
      return Static::integer(at == std::string::npos ? -1 : int64_t(at));
    }
    if (v.kind == Kind::Str && name == "join" && a.size() == 1) {
      // " ".join(type(m).__name__ for m in self.modules()): reprs and names built from parts
      std::string out;
      std::vector<Static> parts = iterate(a[0], loc);
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].kind != Kind::Str)
          py_raise(loc, "TypeError", fmt::format("sequence item {}: expected str instance, {} found", i, parts[i].type_name()));
        out += (i ? v.s : "") + parts[i].s;
      }
      return Static::str(out);
    }
    if (v.kind == Kind::Str && (name == "startswith" || name == "endswith") && a.size() == 1 && a[0].kind == Kind::Str) {
      const std::string &x = v.s, &y = a[0].s;
      bool r = y.size() <= x.size() && (name == "startswith" ? x.compare(0, y.size(), y) == 0 : x.compare(x.size() - y.size(), y.size(), y) == 0);
      return Static::boolean(r);
    }
    fail(loc, fmt::format("{}.{}() is not supported in __init__", v.type_name(), name));
  }

  Static python_builtin(const std::string& n, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (n == "sorted") return sorted(a, kw, loc);
    if (!kw.empty()) fail(loc, fmt::format("{}() takes no keyword arguments in __init__", n));
    auto nargs = [&](size_t lo, size_t hi) {
      if (a.size() < lo || a.size() > hi)
        fail(loc, fmt::format("{}() takes {} argument{}, got {}", n, lo == hi ? std::to_string(lo) : fmt::format("{} to {}", lo, hi),
                              hi == 1 ? "" : "s", a.size()));
    };
    if (n == "range") {
      nargs(1, 3);
      int64_t b = a.size() > 1 ? need_int(a[0], loc, "range() start") : 0;
      int64_t e = need_int(a[a.size() > 1 ? 1 : 0], loc, "range() stop");
      int64_t s = a.size() > 2 ? need_int(a[2], loc, "range() step") : 1;
      if (s == 0) fail(loc, "range() step must not be zero");
      std::vector<Static> es;
      for (int64_t i = b; s > 0 ? i < e : i > e; i += s) es.push_back(Static::integer(i));
      return Static::seq(Kind::List, std::move(es));
    }
    if (n == "len") {
      nargs(1, 1);
      if (a[0].kind == Kind::Str) return Static::integer(int64_t(a[0].s.size()));
      return Static::integer(int64_t(iterate(a[0], loc).size()));
    }
    if (n == "int" || n == "float" || n == "bool") {
      nargs(1, 1);
      if (a[0].kind == Kind::Str && n == "bool") return Static::boolean(!a[0].s.empty());
      if (a[0].kind == Kind::Str) return number_of_text(n, a[0].s, loc);  // float('-inf'), int('3')
      double x = need_number(a[0], loc, "the argument");
      if (n == "int") return Static::integer(int64_t(std::trunc(x)));
      if (n == "float") return Static::number(x);
      return Static::boolean(x != 0);
    }
    if (n == "min" || n == "max") {
      std::vector<Static> xs = a.size() == 1 ? iterate(a[0], loc) : a;
      if (xs.empty()) fail(loc, fmt::format("{}() of an empty sequence", n));
      Static best = xs[0];
      for (const Static& x : xs)
        if (compare(n == "min" ? PyOp::Lt : PyOp::Gt, x, best, loc)) best = x;
      return best;
    }
    if (n == "round") {
      // Python's: halves to even; with ndigits a float, without it an int
      nargs(1, 2);
      double x = need_number(a[0], loc, "the argument");
      if (a.size() == 1 || a[1].kind == Kind::None) {
        if (!(std::fabs(x) < 9.2e18)) fail(loc, fmt::format("round() of {} does not fit in int64", py_str(a[0])));
        return Static::integer(int64_t(std::nearbyint(x)));
      }
      double scale = std::pow(10.0, double(need_int(a[1], loc, "ndigits")));
      return Static::number(std::nearbyint(x * scale) / scale);
    }
    if (n == "abs") {
      nargs(1, 1);
      if (a[0].kind == Kind::Float) return Static::number(std::fabs(a[0].f));
      return Static::integer(std::abs(need_int(a[0], loc, "the argument")));
    }
    if (n == "set") {
      nargs(0, 1);
      return distinct(a.empty() ? std::vector<Static>{} : iterate(a[0], loc));
    }
    if (n == "list" || n == "tuple") {
      nargs(0, 1);
      return Static::seq(n == "list" ? Kind::List : Kind::Tuple, a.empty() ? std::vector<Static>{} : iterate(a[0], loc));
    }
    if (n == "enumerate") {
      nargs(1, 1);
      std::vector<Static> es;
      for (const Static& x : iterate(a[0], loc)) es.push_back(Static::seq(Kind::Tuple, {Static::integer(int64_t(es.size())), x}));
      return Static::seq(Kind::List, std::move(es));
    }
    if (n == "zip") {
      std::vector<std::vector<Static>> seqs;
      size_t len = SIZE_MAX;
      for (const Static& x : a) {
        seqs.push_back(iterate(x, loc));
        len = std::min(len, seqs.back().size());
      }
      std::vector<Static> es;
      for (size_t i = 0; !seqs.empty() && i < len; ++i) {
        std::vector<Static> t;
        for (const auto& s : seqs) t.push_back(s[i]);
        es.push_back(Static::seq(Kind::Tuple, std::move(t)));
      }
      return Static::seq(Kind::List, std::move(es));
    }
    if (n == "print") return Static::none();
    if (n == "any" || n == "all") {
      nargs(1, 1);
      bool any = n == "any";
      for (const Static& x : iterate(a[0], loc))
        if (truthy(x, loc) == any) return Static::boolean(any);
      return Static::boolean(!any);
    }
    if (n == "sum") {
      nargs(1, 2);
      Static total = a.size() > 1 ? a[1] : Static::integer(0);
      for (const Static& x : iterate(a[0], loc)) total = binary(PyOp::Add, total, x, loc);
      return total;
    }
    if (n == "str" || n == "repr") {
      nargs(1, 1);
      return Static::str(n == "str" ? py_str(a[0]) : py_repr(a[0]));
    }
    fail(loc, fmt::format("unknown function '{}' in __init__{}", n,
                          did_you_mean(n, {"range", "len", "int", "float", "bool", "min", "max", "abs", "list", "tuple", "enumerate", "zip"})));
  }

  Static method_call(Static& self, const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (self.kind != Kind::Module) return call_value(attr_of(self, name, loc), a, kw, loc);
    Object& o = *self.obj;
    bool container = o.layer == Layer::ModuleList || o.layer == Layer::Sequential;
    // A class deriving from nn.ModuleDict (densenet's _DenseBlock) keeps its modules in order, as items.
    if (o.def && o.def->root()->torch_base == "ModuleDict" && name == "add_module") container = true;
    if (container && (name == "append" || name == "extend")) {
      if (a.size() != 1 || !kw.empty()) fail(loc, fmt::format("{}.{}() takes one argument", o.cls, name));
      std::vector<Static> ms = name == "append" ? std::vector<Static>{a[0]} : iterate(a[0], loc);
      for (const Static& m : ms) add_item(o, m, loc);
      return Static::none();
    }
    if (container && name == "add_module") {
      if (a.size() != 2 || a[0].kind != Kind::Str || !kw.empty()) fail(loc, "add_module() takes a name and a module");
      add_item(o, a[1], loc, a[0].s);
      return Static::none();
    }
    if (name == "modules" || name == "named_modules" || name == "children" || name == "named_children") {
      if (!a.empty() || !kw.empty()) fail(loc, fmt::format("{}() takes no arguments in __init__", name));
      std::vector<std::pair<std::string, ObjectPtr>> all;
      if (name == "modules" || name == "named_modules") {
        modules_of(self.obj, "", all);
      } else {
        for (const auto& [n, child] : o.module->named_children())
          if (auto it = objs_.find(child.get()); it != objs_.end()) all.emplace_back(n, it->second);
      }
      std::vector<Static> out;
      for (auto& [n, obj] : all) {
        Static m = Static::module(obj);
        out.push_back(name.rfind("named_", 0) == 0 ? Static::seq(Kind::Tuple, {Static::str(n), m}) : m);
      }
      return Static::seq(Kind::List, std::move(out));
    }
    if (name == "parameters" || name == "named_parameters" || name == "buffers" || name == "named_buffers") {
      Static recurse_v = kw.count("recurse") ? kw.at("recurse") : a.empty() ? Static::boolean(true) : a[0];
      bool recurse = need_bool(recurse_v, loc, "recurse");
      bool params = name.find("parameters") != std::string::npos;
      std::vector<Static> out;
      for (auto& [n, t] : params ? o.module->named_parameters(recurse) : o.module->named_buffers(recurse)) {
        Static v = Static::of_tensor(t, params);
        out.push_back(name.rfind("named_", 0) == 0 ? Static::seq(Kind::Tuple, {Static::str(n), v}) : v);
      }
      return Static::seq(Kind::List, std::move(out));
    }
    if (name == "apply") {
      // fn on every submodule, children before their parent, as torch's Module.apply
      if (a.size() != 1 || !kw.empty()) fail(loc, "apply() takes one function");
      std::vector<std::pair<std::string, ObjectPtr>> all;
      modules_of(self.obj, "", all);
      for (auto it = all.rbegin(); it != all.rend(); ++it) call_value(a[0], {Static::module(it->second)}, {}, loc);
      return self;
    }
    if (const Static* v = o.attr(name); v && v->kind != Kind::Module) return call_value(*v, a, kw, loc);  // cnf.block(...)
    if (o.layer == Layer::Registered || !o.def)
      fail(loc, fmt::format("{}.{}() is not supported in __init__", o.cls, name));
    if (name == "register_buffer") {
      Signature sig{{"name", "tensor", "persistent"}, 2, {Static::boolean(true)}};
      Bound b = bind("register_buffer", sig, a, kw, loc);
      if (b["name"].kind != Kind::Str) fail(loc, "register_buffer() takes the buffer's name as a string");
      if (b["tensor"].kind != Kind::Tensor) fail(loc, fmt::format("register_buffer() takes a Tensor, got {}", b["tensor"].type_name()));
      const std::string& n = b["name"].s;
      if (o.attr(n)) fail(loc, fmt::format("attribute '{}' already exists", n));
      Tensor t = b["tensor"].tensor;
      // A buffer that is not persistent stays out of state_dict, as in PyTorch: a plain tensor attribute.
      if (need_bool(b["persistent"], loc, "persistent")) {
        module_of(o).add_buffer(n, t);
        buffers_.insert(t.impl());
      }
      o.attrs[n] = Static::of_tensor(t, false);
      return Static::none();
    }
    if (name == "register_parameter" || name == "add_module") {
      if (a.size() != 2 || a[0].kind != Kind::Str) fail(loc, fmt::format("{}() takes a name and a value", name));
      set_attr(o, a[0].s, a[1], loc);
      return Static::none();
    }
    if (const FunctionDef* f = o.def->method(name)) {
      return run_function(*f, f->decorated("staticmethod") ? nullptr : &self, a, kw, loc, o.def->owner_of(name));
    }
    if (name == "get_state_dict")
      fail(loc, fmt::format("{}.get_state_dict() downloads pretrained weights (torchvision's WeightsEnum), which kiln script "
                            "does not do: build with weights=None and load the state_dict, saved as safetensors, with "
                            "load_state_dict()", o.cls));
    std::vector<std::string> names;
    for (const auto& f : o.def->methods) names.push_back(f->name);
    fail(loc, fmt::format("'{}' object has no method '{}'{}", o.cls, name, did_you_mean(name, names)));
  }

  Static init_fn(const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (name == "calculate_gain") {
      Bound b = bind("nn.init.calculate_gain", Signature{{"nonlinearity", "param"}, 1, {Static::none()}}, a, kw, loc);
      if (b["nonlinearity"].kind != Kind::Str) fail(loc, "nn.init.calculate_gain() takes the nonlinearity's name first");
      double param = b["param"].kind == Kind::None ? 0.01 : need_number(b["param"], loc, "param");
      try {
        return Static::number(nn::init::calculate_gain(b["nonlinearity"].s, param));
      } catch (const Error& e) {
        fail(loc, e.what());
      }
    }
    Static first = !a.empty() ? a[0] : kw.count("tensor") ? kw.at("tensor") : Static::none();
    if (first.kind != Kind::Tensor)
      fail(loc, fmt::format("nn.init.{}() takes the Tensor to fill first, got {}", name, a.empty() ? "no argument" : first.type_name()));
    Tensor t = first.tensor;
    auto num = [&](size_t i, const char* key, double def) {
      if (kw.count(key)) return need_number(kw.at(key), loc, key);
      return a.size() > i ? need_number(a[i], loc, key) : def;
    };
    if (name == "zeros_") nn::init::zeros_(t);
    else if (name == "ones_") nn::init::ones_(t);
    else if (name == "constant_") {
      NoGradGuard ng;
      t.copy_(full_like(t, num(1, "val", 0)));
    } else if (name == "normal_") nn::init::normal_(t, num(1, "mean", 0), num(2, "std", 1));
    else if (name == "uniform_") nn::init::uniform_(t, num(1, "a", 0), num(2, "b", 1));
    else if (name == "xavier_uniform_") nn::init::xavier_uniform_(t, num(1, "gain", 1));
    else if (name == "xavier_normal_") nn::init::xavier_normal_(t, num(1, "gain", 1));
    else if (name == "kaiming_uniform_" || name == "kaiming_normal_") {
      std::string mode = kw.count("mode") && kw.at("mode").kind == Kind::Str ? kw.at("mode").s : "fan_in";
      std::string nl = kw.count("nonlinearity") && kw.at("nonlinearity").kind == Kind::Str ? kw.at("nonlinearity").s : "leaky_relu";
      if (name == "kaiming_uniform_") nn::init::kaiming_uniform_(t, num(1, "a", 0), mode, nl);
      else nn::init::kaiming_normal_(t, num(1, "a", 0), mode, nl);
    } else if (name == "trunc_normal_") {
      trunc_normal(t, num(1, "mean", 0), num(2, "std", 1), num(3, "a", -2), num(4, "b", 2));
    } else if (name == "orthogonal_" || name == "eye_" || name == "dirac_" || name == "sparse_") {
      structured_fill(name, t, a, kw, loc);
    } else {
      fail(loc, fmt::format("nn.init.{} is not supported in kiln script (zeros_, ones_, constant_, normal_, uniform_, "
                            "trunc_normal_, xavier_uniform_, xavier_normal_, kaiming_uniform_, kaiming_normal_, "
                            "orthogonal_, eye_, dirac_, sparse_ and calculate_gain are)",
                            name));
    }
    return first;
  }

  // nn.init.orthogonal_(tensor, gain=1), eye_(tensor), dirac_(tensor, groups=1), sparse_(tensor, sparsity, std=0.01)
  // (init_fills.h); a bad shape is torch's ValueError.
  void structured_fill(const std::string& name, Tensor& t, const std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    std::vector<Static> rest(a.begin() + (a.empty() ? 0 : 1), a.end());
    Bound named = kw;
    named.erase("tensor");
    Signature sig = name == "orthogonal_" ? Signature{{"gain"}, 0, {Static::integer(1)}}
                    : name == "dirac_"    ? Signature{{"groups"}, 0, {Static::integer(1)}}
                    : name == "sparse_"   ? Signature{{"sparsity", "std"}, 1, {Static::number(0.01)}}
                                          : Signature{{}, 0, {}};
    Bound b = bind("nn.init." + name, sig, rest, named, loc);
    double gain = name == "orthogonal_" ? need_number(b["gain"], loc, "gain") : 1;
    int64_t groups = name == "dirac_" ? need_int(b["groups"], loc, "groups") : 1;
    double sparsity = name == "sparse_" ? need_number(b["sparsity"], loc, "sparsity") : 0;
    double sd = name == "sparse_" ? need_number(b["std"], loc, "std") : 0;
    try {
      if (name == "orthogonal_") init_orthogonal(t, gain);
      else if (name == "eye_") init_eye(t);
      else if (name == "dirac_") init_dirac(t, groups);
      else init_sparse(t, sparsity, sd);
    } catch (const Error& e) {
      py_raise(loc, "ValueError", e.what());
    }
  }

  // N(mean, std) restricted to [lo, hi]: samples outside are drawn again, as the distribution torch's
  // trunc_normal_ samples (by its inverse CDF) is.
  static void trunc_normal(Tensor& t, double mean, double std, double lo, double hi) {
    int64_t n = t.numel();
    std::vector<double> v(static_cast<size_t>(n));
    size_t filled = 0;
    for (int round = 0; filled < v.size() && round < 1000; ++round) {
      Tensor r = randn({std::max<int64_t>(n, 16)}, DType::Float64).contiguous();
      const double* p = r.data_ptr<double>();
      for (int64_t k = 0; k < r.numel() && filled < v.size(); ++k) {
        double x = mean + std * p[k];
        if (x >= lo && x <= hi) v[filled++] = x;
      }
    }
    for (; filled < v.size(); ++filled) v[filled] = std::clamp(mean, lo, hi);  // a range N(mean, std) almost never hits
    NoGradGuard ng;
    t.copy_(tensor(v, t.sizes(), DType::Float64).to(t.dtype()));
  }

  // torch.device('cuda', 0), torch.device(type='cpu'), torch.device(other): torch's string for it
  Static device(const std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    for (const auto& [k, v] : kw)
      if (k != "type" && k != "index") fail(loc, fmt::format("torch.device() got an unexpected keyword argument '{}'", k));
    auto arg = [&](size_t i, const char* k) { return i < a.size() ? a[i] : kw.count(k) ? kw.at(k) : Static::none(); };
    Static type = arg(0, "type"), index = arg(1, "index");
    if (a.size() > 2 || type.kind != Kind::Str || (index.kind != Kind::Int && index.kind != Kind::None))
      fail(loc, "torch.device() takes a device string and an optional int index");
    DeviceSpec d = torch_device(type.s, index.kind == Kind::Int ? std::optional<long long>(index.i) : std::nullopt);
    if (!d.error.empty()) py_raise(loc, "RuntimeError", d.error);
    return Static::str(d.text);
  }

  // torch.<factory>(...) in __init__ runs eagerly: the tensor becomes a parameter, buffer or constant.
  Static torch_fn(const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc) {
    if (auto t = tensor_math(loc, [&] { return init_torch_function(name, a, kw); })) return *t;
    if (name == "_assert") {
      if (a.size() != 2 || !kw.empty()) fail(loc, "torch._assert() takes a condition and a message");
      if (!truthy(a[0], loc)) py_raise(loc, "AssertionError", py_str(a[1]));
      return Static::none();
    }
    if (name == "device") return device(a, kw, loc);
    DType dt = DType::Float32;
    bool int_dtype = false;
    for (const auto& [k, v] : kw) {
      if (k == "dtype") {
        if (v.kind != Kind::Str) fail(loc, "dtype must be a torch dtype such as torch.float32");
        dt = dtype_named(v.s, loc);
        int_dtype = true;
      } else if (k != "requires_grad" && !(name == "full" && k == "fill_value")) {
        fail(loc, fmt::format("torch.{}() keyword '{}' is not supported in __init__", name, k));
      }
    }
    auto shape = [&](size_t from) {
      Shape s;
      if (a.size() == from + 1 && (a[from].kind == Kind::Tuple || a[from].kind == Kind::List))
        return need_ints(a[from], loc, "size");
      for (size_t i = from; i < a.size(); ++i) s.push_back(need_int(a[i], loc, "size"));
      return s;
    };
    if (name == "zeros" || name == "ones" || name == "empty") return Static::of_tensor(name == "ones" ? ones(shape(0), dt) : zeros(shape(0), dt), false);
    if (name == "randn" || name == "rand") return Static::of_tensor(name == "randn" ? randn(shape(0), dt) : rand(shape(0), dt), false);
    if (name == "full") {
      Static v = kw.count("fill_value") ? kw.at("fill_value") : (a.size() >= 2 ? a.back() : Static::none());
      if (!kw.count("fill_value")) a.pop_back();
      double x = need_number(v, loc, "fill_value");
      return Static::of_tensor(full(shape(0), x, dt), false);
    }
    if (name == "arange") {
      std::vector<double> xs;
      for (const Static& v : a) xs.push_back(need_number(v, loc, "an arange bound"));
      bool all_int = std::all_of(a.begin(), a.end(), [](const Static& v) { return v.kind == Kind::Int; });
      if (xs.empty() || xs.size() > 3) fail(loc, "torch.arange() takes 1 to 3 numbers");
      Tensor t = xs.size() == 1 ? arange(Scalar(xs[0])) : arange(Scalar(xs[0]), Scalar(xs[1]), Scalar(xs.size() > 2 ? xs[2] : 1.0));
      if (int_dtype) t = t.to(dt);
      else if (all_int) t = t.to(DType::Int64);
      return Static::of_tensor(t, false);
    }
    if (name == "eye") {
      if (a.empty() || a.size() > 2) fail(loc, "torch.eye() takes one or two sizes");
      return Static::of_tensor(eye(need_int(a[0], loc, "n"), a.size() > 1 ? std::optional<int64_t>(need_int(a[1], loc, "m")) : std::nullopt, dt), false);
    }
    if (name == "float32" || name == "float" || name == "float64" || name == "double" || name == "int64" || name == "long" ||
        name == "int32" || name == "int" || name == "bool")
      fail(loc, fmt::format("torch.{} is a dtype, not a function", name));
    fail(loc, fmt::format("torch.{}() is not supported in __init__ (the factories zeros, ones, empty, full, rand, randn, "
                          "arange and eye, and the tensor functions of docs/script.md are)",
                          name));
  }

  DType dtype_named(const std::string& s, SourceLoc loc) {
    if (std::optional<DType> d = torch_dtype_name(s)) return *d;
    fail(loc, fmt::format("unknown dtype torch.{}", s));
  }

  std::shared_ptr<const File> file_;  // the model file
  const File* cur_;    // the file whose code runs now: the model file or one it imports
  const Source* src_;  // where errors point: cur_'s, or an argument's expression while it is read
  const FileAst* m_;    // cur_'s names
  std::map<std::string, std::shared_ptr<const File>> loaded_;  // the files read, by path
  std::map<const void*, const File*> def_file_;                // the file of each class, method and function
  int depth_ = 0;
  std::vector<Raised> handling_;  // the exceptions the running except blocks caught (a bare raise re-raises)
  std::vector<std::shared_ptr<ScriptedModule>> plain_copies_;  // what copy.copy made (config objects)
  using Global = std::pair<const FileAst*, std::string>;
  std::map<Global, Static> globals_;    // each file's names as values, made on first read
  std::map<Global, Static> constants_;  // module-level values computed so far
  std::set<Global> computing_;          // module-level values being computed (a cycle guard)
  std::set<const TensorImpl*> buffers_;
};

}  // namespace

std::shared_ptr<ScriptedModule> construct(const std::shared_ptr<const File>& file, const ClassDef& cls,
                                          const std::vector<Static>& args, const std::map<std::string, Static>& kwargs) {
  Init init(file);
  return init.build(cls, args, kwargs, cls.loc);
}

namespace {
// Runs make(init, args, kwargs) on an evaluator of the file, the arguments evaluated by it first; the module
// keeps the files its __init__ read.
template <class Make>
std::shared_ptr<ScriptedModule> construct_with(const std::shared_ptr<const File>& file, const std::vector<CtorArg>& args,
                                               const std::map<std::string, CtorArg>& kwargs, Make make) {
  Init init(file);
  std::vector<Static> a;
  for (const CtorArg& x : args) a.push_back(init.argument(x));
  std::map<std::string, Static> kw;
  for (const auto& [k, x] : kwargs) kw[k] = init.argument(x);
  std::shared_ptr<ScriptedModule> m = make(init, a, kw);
  m->object_ptr()->imports = init.files();
  return m;
}
}  // namespace

std::shared_ptr<ScriptedModule> construct(const std::shared_ptr<const File>& file, const ClassDef& cls,
                                          const std::vector<CtorArg>& args, const std::map<std::string, CtorArg>& kwargs) {
  return construct_with(file, args, kwargs, [&](Init& init, auto& a, auto& kw) { return init.build(cls, a, kw, cls.loc); });
}

std::optional<ModuleGlobal> module_global(const std::shared_ptr<const File>& file, const std::string& name, SourceLoc loc,
                                          const std::vector<std::shared_ptr<const File>>& known, bool attribute) {
  Init init(file);
  return init.lowered_global(name, loc, known, attribute);
}

std::shared_ptr<ScriptedModule> construct_by(const std::shared_ptr<const File>& file, const FunctionDef& builder,
                                             const std::vector<CtorArg>& args, const std::map<std::string, CtorArg>& kwargs) {
  return construct_with(file, args, kwargs, [&](Init& init, auto& a, auto& kw) { return init.call_builder(builder, a, kw); });
}

}  // namespace kiln::script
