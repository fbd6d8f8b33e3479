// `self` while a method is lowered: module objects are known at lowering time, so `self.fc(x)`
// inlines fc's forward, `self.hidden` is a constant, `self.weight` a bound graph input, and a
// condition on the module's configuration picks its branch now.
#include <fmt/format.h>

#include <algorithm>

#include "script_frontend/lowerer.h"

namespace kiln::script {

using ir::Node;
using Kind = Static::Kind;

const Object* Lowerer::static_object(const Expr& e) {
  if (frames_.empty()) return nullptr;
  switch (e.kind) {
    case ExprKind::Name: {
      if (frame().env.count(e.name)) return nullptr;
      if (e.name == "self") return frame().self;
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

// Conditions on module attributes that are modules, None, bools or `self.training`.
bool is_scripting_call(const Expr& e) {
  if (e.kind != ExprKind::Call || e.args.size() != 1 || !e.keywords.empty()) return false;
  const Expr& fn = *e.args[0];
  if (fn.kind != ExprKind::Attribute || fn.name != "is_scripting") return false;
  const Expr& jit = *fn.args[0];
  return jit.kind == ExprKind::Attribute && jit.name == "jit" && jit.args[0]->kind == ExprKind::Name && jit.args[0]->name == "torch";
}

namespace {
// An expression that only reads names and attributes (no call), so skipping its evaluation changes nothing.
bool reads_only(const Expr& e) {
  if (e.kind == ExprKind::Name) return true;
  if (e.kind == ExprKind::Attribute) return reads_only(*e.args[0]);
  return false;
}
}  // namespace

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

std::optional<bool> Lowerer::static_condition(const Expr& test) {
  // torch.jit.is_scripting() is True in lowered code, as under torch.jit.script: the eager branch it
  // guards (often a call of a @torch.jit.unused method) is never lowered.
  if (!frames_.empty() && is_scripting_call(test) && !frame().env.count("torch")) return true;
  if (auto known = isinstance_known(test)) return known;
  if (test.kind == ExprKind::Unary && test.op == "not") {
    auto v = static_condition(*test.args[0]);
    if (!v) return std::nullopt;
    return !*v;
  }
  if (test.kind == ExprKind::BoolOp) {
    // Decided when every operand is, or when one operand decides it (False for `and`, True for `or`) and the
    // others only read names and attributes: DCGAN's `input.is_cuda and self.ngpu > 1` with one GPU is
    // False whatever the tensor, and its data_parallel branch is not lowered; densenet's
    // `self.memory_efficient and self.any_requires_grad(xs)` is False for memory_efficient=False, as Python's
    // short circuit gives, when the deciding operand comes first.
    bool is_and = test.op == "and";
    bool pure = true;  // every operand before this one only reads names and attributes
    bool all_known = true;
    for (const auto& a : test.args) {
      auto v = static_condition(*a);
      if (!v) {
        pure = pure && reads_only(*a);
        all_known = false;
        continue;
      }
      if (*v != is_and) {
        if (pure) return *v;
        return std::nullopt;
      }
    }
    if (all_known) return is_and;
    return std::nullopt;
  }
  if (frames_.empty() || !frame().self) return std::nullopt;
  auto attr_of = [&](const Expr& e) -> const Static* {
    if (e.kind != ExprKind::Attribute) return nullptr;
    const Object* o = static_object(*e.args[0]);
    return o ? o->attr(e.name) : nullptr;
  };
  switch (test.kind) {
    case ExprKind::Compare: {
      if (test.ops.size() == 1 && test.ops[0] != "is" && test.ops[0] != "is not" && test.ops[0] != "in" && test.ops[0] != "not in") {
        // `self.ngpu > 1`: numbers of the module's configuration, compared now
        auto a = const_float(Arg{test.args[0].get(), nullptr, test.args[0]->loc});
        auto b = a ? const_float(Arg{test.args[1].get(), nullptr, test.args[1]->loc}) : std::nullopt;
        const std::string& op = test.ops[0];
        if ((!a || !b) && (op == "==" || op == "!=")) {
          // `self.rnn_type == 'LSTM'`: strings of the module's configuration, compared now
          auto x = const_str(Arg{test.args[0].get(), nullptr, test.args[0]->loc});
          auto y = x ? const_str(Arg{test.args[1].get(), nullptr, test.args[1]->loc}) : std::nullopt;
          if (x && y) return (*x == *y) == (op == "==");
        }
        if (!a || !b) return std::nullopt;
        return op == "<" ? *a < *b : op == "<=" ? *a <= *b : op == ">" ? *a > *b : op == ">=" ? *a >= *b : op == "==" ? *a == *b : *a != *b;
      }
      if (test.ops.size() != 1 || (test.ops[0] != "is" && test.ops[0] != "is not")) return std::nullopt;
      const Expr* side = test.args[1]->kind == ExprKind::None ? test.args[0].get()
                         : test.args[0]->kind == ExprKind::None ? test.args[1].get() : nullptr;
      if (!side) return std::nullopt;
      bool is_none;
      if (static_object(*side)) is_none = false;
      else if (const Static* a = attr_of(*side)) is_none = a->kind == Kind::None;
      else return std::nullopt;
      return (test.ops[0] == "is") == is_none;
    }
    case ExprKind::Attribute: {
      if (test.name == "training")
        if (const Object* o = static_object(*test.args[0])) return o->module->is_training();
      if (const Static* a = attr_of(test)) {
        if (a->kind == Kind::Bool || a->kind == Kind::None) return a->kind == Kind::Bool && a->i != 0;
        if (a->kind == Kind::Module) return true;
      }
      return std::nullopt;
    }
    default: return std::nullopt;
  }
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
      if (es.empty()) fail(loc, fmt::format("'{}' is an empty list, whose element type kiln script cannot know", name));
      for (Value* e : es)
        if (!same_type(e->type(), es[0]->type()) || (!is_number(e->type()) && !e->type().is_tensor()))
          fail(loc, fmt::format("'{}' is a list kiln script cannot type ({})", name, v.type_name()));
      return prim(ir::Prim::ListConstruct, es, Type::list(es[0]->type().is_tensor() ? Type::tensor() : es[0]->type()));
    }
    case Kind::Module: fail(loc, fmt::format("'{}' is a module, not a value", name));
    case Kind::Dict:
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
