// `self` while a method is lowered: module objects are known at lowering time, so `self.fc(x)`
// inlines fc's forward, `self.hidden` is a constant, `self.weight` a bound graph input, and a
// condition on the module's configuration picks its branch now.
#include <fmt/format.h>

#include <algorithm>

#include "script_frontend/lowerer.h"
#include "script_frontend/parser.h"

namespace kiln::script {

using ir::Node;
using Kind = Static::Kind;

const Object* Lowerer::static_object(const Expr& e) {
  if (frames_.empty()) return nullptr;
  switch (e.kind) {
    case ExprKind::Name: {
      if (frame().env.count(e.name)) return nullptr;
      if (e.name == "self" && frame().self) return frame().self;  // else a lambda's captured self, in modules
      auto it = frame().modules.find(e.name);
      return it == frame().modules.end() ? nullptr : it->second;
    }
    case ExprKind::Attribute: {
      const Object* o = static_object(*e.args[0]);
      if (!o) return nullptr;
      const Static* a = o->attr(e.name);
      if (!a && o->layer == Layer::ModuleDict) return o->item(e.name).get();
      return a && a->kind == Kind::Module ? a->obj.get() : nullptr;
    }
    case ExprKind::Subscript: {
      const Object* o = static_object(*e.args[0]);
      if (!o || e.args.size() != 2) return nullptr;
      if (o->layer != Layer::ModuleList && o->layer != Layer::Sequential)
        fail(e.loc, fmt::format("{} cannot be indexed", o->cls));
      auto i = const_int(Arg{e.args[1].get(), nullptr, e.args[1]->loc});
      if (!i) fail(e.args[1]->loc, fmt::format("a {} index must be an int constant (its modules differ)", o->cls));
      int64_t n = int64_t(o->items.size()), k = *i < 0 ? *i + n : *i;
      if (k < 0 || k >= n) fail(e.args[1]->loc, fmt::format("index {} is out of range for a {} of {} modules", *i, o->cls, n));
      return o->items[size_t(k)].get();
    }
    default: return nullptr;
  }
}

namespace {
// A condition that reads only self's attributes and literals (`self.rnn_type == 'LSTM'`): decided the same
// before the body is lowered as when lowering reaches it, since no local name can change it.
bool reads_self_only(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name: return e.name == "self";
    case ExprKind::Int:
    case ExprKind::Float:
    case ExprKind::Bool:
    case ExprKind::None:
    case ExprKind::String: return true;
    case ExprKind::Attribute:
    case ExprKind::Compare:
    case ExprKind::BoolOp:
    case ExprKind::Unary:
    case ExprKind::Tuple:
    case ExprKind::List:
      return std::all_of(e.args.begin(), e.args.end(), [](const ExprPtr& a) { return a && reads_self_only(*a); });
    default: return false;
  }
}
}  // namespace

// word_lm's init_hidden returns `(h, c)` under `if self.rnn_type == 'LSTM':` and `h` otherwise: for one module
// only one of them is lowered, so it returns from one place and its type can be inferred.
bool Lowerer::returns_at_end(const std::vector<StmtPtr>& body) {
  for (size_t i = 0; i < body.size(); ++i) {
    const Stmt& s = *body[i];
    bool last = i + 1 == body.size();
    if (last && s.kind == StmtKind::Return) return true;
    if (s.kind == StmtKind::If && reads_self_only(*s.test))
      if (std::optional<bool> known = static_condition(*s.test)) {
        const std::vector<StmtPtr>& taken = *known ? s.body : s.orelse;
        if (last) return returns_at_end(taken);
        if (exits(taken) & kRet) return false;
        continue;
      }
    if (exits(s) & kRet) return false;
  }
  return true;
}

Value* Lowerer::object_attribute(const Object& o, const std::string& attr, SourceLoc loc) {
  if (attr == "training") return constant(o.module->is_training());
  std::string full = o.path.empty() ? attr : o.path + "." + attr;
  if (const Static* a = o.attr(attr)) {
    if (a->kind == Kind::Module)
      fail(loc, fmt::format("'{}' is a module ({}), not a value; call it", attr, a->obj->cls));
    // a built-in layer's constructor argument `bias=True` is not its bias: its tensors come first below
    bool layer_tensor = o.layer != Layer::User && (attr == "weight" || attr == "bias");
    if (!layer_tensor && (o.layer == Layer::User || a->kind != Kind::Tensor)) return static_value(*a, full, loc);
  }
  // A built-in layer's tensors: self.fc.weight
  for (auto& [n, t] : o.module->named_parameters(false))
    if (n == attr) return tensor_of(Static::of_tensor(t, true), full);
  for (auto& [n, t] : o.module->named_buffers(false))
    if (n == attr) return tensor_of(Static::of_tensor(t, false), full);
  if (o.layer != Layer::User && (attr == "weight" || attr == "bias")) return g_->insert_none();  // built with bias=False
  if (const Static* a = o.attr(attr)) return static_value(*a, full, loc);
  // a @property of the class (TorchScript compiles them too): its method, called with self alone
  if (o.layer == Layer::User)
    if (const FunctionDef* f = o.def->method(attr); f && f->decorated("property")) return inline_values(*f, CallArgs{}, loc, &o);
  if (attr == "__class__" || attr == "__module__" || attr == "__dict__")
    fail(loc, fmt::format("{} is not supported in lowered code (TorchScript refuses it too); __init__ may use it and keep "
                          "the result on self (self.name = type(self).__name__)", attr));
  std::vector<std::string> names;
  for (auto& [k, v] : o.attrs) names.push_back(k);
  fail(loc, fmt::format("'{}' object has no attribute '{}'{}", o.cls, attr, did_you_mean(attr, names)));
}

Value* Lowerer::static_value(const Static& v, const std::string& name, SourceLoc loc) {
  switch (v.kind) {
    case Kind::None: return g_->insert_none();
    case Kind::Int: return constant(v.i);
    case Kind::Float: return constant(v.f);
    case Kind::Bool: return constant(v.i != 0);
    case Kind::Str: return g_->insert_constant(v.s);
    case Kind::Tensor: return tensor_of(v, name);
    case Kind::Tuple:
    case Kind::List: {
      std::vector<Value*> es;
      for (size_t i = 0; i < v.elems.size(); ++i) es.push_back(static_value(v.elems[i], name, loc));
      if (v.kind == Kind::Tuple) return tuple(es);
      if (es.empty() && v.annotation) {  // self.xs = torch.jit.annotate(List[int], [])
        Type t = type_from_annotation(*src_, annotation_type(*v.annotation), *m_);
        if (t.kind == TypeKind::List) return prim(ir::Prim::ListConstruct, {}, t);
      }
      if (es.empty()) fail(loc, fmt::format("'{}' is an empty list, whose element type kiln script cannot know (annotate it: "
                                            "torch.jit.annotate(List[int], []))",
                                            name));
      for (Value* e : es)
        if (!same_type(e->type(), es[0]->type()) || (!is_number(e->type()) && !e->type().is_tensor()))
          fail(loc, fmt::format("'{}' is a list kiln script cannot type ({})", name, v.type_name()));
      return prim(ir::Prim::ListConstruct, es, Type::list(es[0]->type().is_tensor() ? Type::tensor() : es[0]->type()));
    }
    case Kind::Module: fail(loc, fmt::format("'{}' is a module, not a value", name));
    case Kind::Dict: {
      // a dict with string keys (an nn.ParameterDict, a dict of sizes): a dict of lowered code, its keys known now,
      // so d['w'] and loops over d.items() resolve while lowering
      std::vector<std::string> keys;
      std::vector<Value*> values;
      for (const Static& kv : v.elems) {
        if (kv.elems[0].kind != Kind::Str)
          fail(loc, fmt::format("'{}' is a dict with {} keys, which methods cannot read in kiln script (string keys only)", name,
                                kv.elems[0].type_name()));
        keys.push_back(kv.elems[0].s);
        values.push_back(static_value(kv.elems[1], name + "." + kv.elems[0].s, loc));
      }
      return make_dict(keys, values);
    }
    case Kind::Class:
    case Kind::Function:
    case Kind::Partial:
    case Kind::Namespace:
    case Kind::Exception: break;
  }
  fail(loc, fmt::format("'{}' is a {} from __init__, which methods cannot use as a value (TorchScript keeps only "
                        "numbers, strings, tensors, tuples and lists of them as attributes too)",
                        name, v.type_name()));
}

Value* Lowerer::tensor_of(const Static& t0, const std::string& name) {
  auto tie = tied_.find(t0.tensor.impl());
  const Static& t = tie == tied_.end() ? t0 : Static::of_tensor(tie->second, true);
  const TensorImpl* impl = t.tensor.impl();
  auto var = buffer_vars_.find(impl);
  if (var != buffer_vars_.end() && frame().env.count(var->second)) return frame().env.at(var->second);
  auto it = bound_inputs_.find(impl);
  if (it != bound_inputs_.end()) return it->second;
  // A function of the file (no module at the bottom of the frames) has no bound inputs to carry a tensor:
  // a composite's constant (indices, a mask) goes into the graph as a constant
  if (!frames_.empty() && frames_.front().self == nullptr) {
    return g_->insert_constant(t.tensor);
  }
  std::string ir_name;
  for (char c : name) ir_name += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  Value* in = g_->add_input(Type::tensor(), ir_name);
  bound_.push_back(t.tensor);
  bound_inputs_[impl] = in;
  return in;
}

void Lowerer::update_buffer(const Tensor& t, Value* v) {
  auto [it, fresh] = buffer_vars_.emplace(t.impl(), fmt::format("$buf:{}", buffer_vars_.size()));
  (void)fresh;
  frame().env[it->second] = v;
}

Value* Lowerer::buffer_input(const std::string& var) {
  for (auto& [impl, name] : buffer_vars_)
    if (name == var) return bound_inputs_.at(impl);
  fail(loc_, "internal error: an unknown buffer variable");
}

Value* Lowerer::call_object(const Object& o, const Expr& call) {
  if (o.layer == Layer::User) return inline_call(*o.def->method("forward"), call, &o);
  CallArgs a;
  for (size_t i = 1; i < call.args.size(); ++i) {
    a.pos.push_back(expr(*call.args[i]));
    a.pos_locs.push_back(call.args[i]->loc);
  }
  for (const Keyword& k : call.keywords) a.kw.push_back({k.name, expr(*k.value), k.loc});
  loc_ = call.loc;
  return call_layer(*this, o, a, call.loc);
}

Value* Lowerer::call_object(const Object& o, const CallArgs& a, SourceLoc loc) {
  if (o.layer == Layer::User) return inline_values(*o.def->method("forward"), a, loc, &o);
  return call_layer(*this, o, a, loc);
}

void Lowerer::check(Value* cond, const std::string& message) {
  Node* n = emit(g_->create(ir::Prim::If, 0));
  n->add_input(cond);
  n->add_block();
  ir::Block* no = n->add_block();
  ir::InsertPointGuard guard(*g_);
  g_->set_insert_point(no);
  Node* r = g_->create(ir::Prim::Raise, 0);
  r->attrs().set("message", fmt::format("{}:{}: {}", src_->name, loc_.line, message));
  emit(r);
}

}  // namespace kiln::script
