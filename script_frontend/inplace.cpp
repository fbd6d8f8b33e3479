// Writes through views: `x[i] = v`, `x[:, a:b] += v`, `x += y`, `x.add_(y)`. The IR has no mutation, so
// a write makes new values: the written view's new value is scattered into its base
// (prim::select_scatter / prim::slice_scatter), up to the tensor that owns the memory (the root), and
// every name whose value is that root or an indexing view of it is rebound to the same view of the
// new root. That is what torch shows: `y = x[0]; y += 1` changes x, and x's change is seen through y.
//
// Aliasing that cannot be followed this way is refused with a file:line:col error rather than
// lowered to a silently different program: a write to a function parameter (the caller would see
// it), to a module's parameter or buffer, through a view made by view/reshape/transpose/... of a
// tensor another name still holds, to a tensor held in a tuple or list, or to a name whose aliasing
// was merged by an if or a loop.
#include <fmt/format.h>

#include <algorithm>

#include "core/ir/op_aliasing.h"
#include "core/ir/op_schema.h"
#include "core/op.h"
#include "eager/composites_math_ops.h"
#include "eager/composites_tensor_ops.h"
#include "script_frontend/index_masks.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/lowering_builder.h"

namespace kiln::script {

namespace {
// An index that is a bool mask by its form: a comparison, or masks combined by ~ & |. Its dtype is not
// known while lowering, so the form decides that `x[m] = v` writes through a mask (torch's index_put_).
bool is_mask_expr(const Expr& e) {
  if (e.kind == ExprKind::Compare)
    return std::none_of(e.ops.begin(), e.ops.end(), [](PyOp op) {
      return op == PyOp::Is || op == PyOp::IsNot || op == PyOp::In || op == PyOp::NotIn;
    });
  if (e.kind == ExprKind::Unary && e.op == PyOp::Invert) return is_mask_expr(*e.args[0]);
  if (e.kind == ExprKind::Binary && (e.op == PyOp::BitAnd || e.op == PyOp::BitOr || e.op == PyOp::BitXor))
    return is_mask_expr(*e.args[0]) && is_mask_expr(*e.args[1]);
  return false;
}
}  // namespace

using ir::Node;
using ir::Prim;

namespace {
const Type kIntT = Type::scalar(TypeKind::Int);

// An op or prim whose output may share its input's memory (torch's views, contiguous of a
// contiguous tensor, .float() / .to() of a tensor already of that dtype, an element of a list or tuple).
bool aliases_input(const Node& n) {
  if (n.is_op()) return ir::op_may_return_input(n.op());
  switch (n.prim()) {
    case Prim::Reshape:
    case Prim::Transpose:
    case Prim::Slice:
    case Prim::ListIndex:
    case Prim::ListUnpack:
    case Prim::TupleIndex:
    case Prim::TupleUnpack:
    case Prim::Unwrap: return true;
    default: return false;
  }
}

std::string made_by(const Node& n) {
  if (n.is_op()) return std::string(op_info(n.op()).name) + "()";
  switch (n.prim()) {
    case Prim::ListIndex:
    case Prim::ListUnpack: return "taking an element of a list";
    case Prim::TupleIndex:
    case Prim::TupleUnpack: return "taking an element of a tuple";
    default: return std::string(n.kind_name());
  }
}
}  // namespace

void Lowerer::record_view(Value* view, Value* base, const ViewStep& step) {
  if (view != base) views_[view] = {base, step};
}

Value* Lowerer::alias_root(Value* v) const {
  for (;;) {
    auto it = views_.find(v);
    if (it != views_.end()) {
      v = it->second.first;
      continue;
    }
    const Node* n = v->node();
    if (n->inputs().empty() || !aliases_input(*n)) return v;
    // A write through x[None] leaves the new base as a squeeze of the new view, and the view recorded
    // as a view of that base: the two are views of each other, and the base is the root.
    auto back = views_.find(n->input(0));
    if (back != views_.end() && back->second.first == v) return v;
    v = n->input(0);
  }
}

void Lowerer::write_inplace(const Expr& target, std::optional<PyOp> op, const Expr& rhs, SourceLoc loc) {
  if (target.kind == ExprKind::Subscript && target.args[0]->kind == ExprKind::Name) {
    auto it = frame().env.find(target.args[0]->name);
    if (it != frame().env.end() && dict_keys(it->second)) return dict_store(target, op, rhs, loc);
    if (it != frame().env.end() && it->second->type().kind == TypeKind::List) return list_store(target, op, rhs, loc);
  }
  // x[mask] = v (nanoGPT's generate: `logits[logits < v[:, [-1]]] = -float('Inf')`, `x[keep] = rows`), x[:, mask] = v,
  // x[idx] = v and x[:, idx] = v: torch's index_put_, eager's composite::masked_put / masked_put_dim / index_put /
  // index_put_dim. A tensor index is known by its form (a comparison) or as a tensor held by a name; a mask from an int
  // tensor by its dtype, when lowering where known, else when the graph runs. Beside other indices (x[0, idx] = v,
  // x[1:3, mask] = v) torch applies those first, as a view, and puts into the view: so here, the put written through
  // the view as any write to a view is. A list index is a second tensor index to torch, which kiln script does not put.
  auto tensor_name = [&](const Expr& i) {
    if (i.kind != ExprKind::Name) return false;
    auto it = frame().env.find(i.name);
    return it != frame().env.end() && it->second->type().is_tensor();
  };
  const Expr* index = nullptr;
  int64_t dim = 0;
  bool plain = true;  // every other index is ':' or '...'
  if (target.kind == ExprKind::Subscript && !op) {
    const size_t n = target.args.size() - 1;
    size_t at = n, ellipsis = n;
    for (size_t k = 0; k < n; ++k) {
      const Expr& ix = *target.args[k + 1];
      if (is_mask_expr(ix) || tensor_name(ix)) {
        if (at != n) fail(ix.loc, "a write through two tensor indices is not supported in kiln script");
        at = k;
      } else if (ix.kind == ExprKind::Ellipsis) {
        ellipsis = k;
      } else if (ix.kind != ExprKind::Slice || ix.args[0] || ix.args[1] || ix.args[2]) {
        plain = false;
      }
    }
    for (size_t k = 0; k < n && at != n; ++k)
      if (target.args[k + 1]->kind == ExprKind::List)
        fail(target.args[k + 1]->loc, "a write through two tensor indices is not supported in kiln script (a list index is one)");
    if (at != n) {
      index = target.args[at + 1].get();
      dim = ellipsis < at ? -int64_t(n - at) : int64_t(at);
    }
  }
  if (index) {
    Value* v = expr(rhs);
    Value* base = expr(*target.args[0]);
    if (!base->type().is_tensor()) fail(target.loc, fmt::format("cannot index {} with a tensor", base->type().str()));
    if (!plain) {
      // the others must make a view (an index tensor among them, not held by a name, makes a copy: a second one)
      Value* whole = base;
      base = tensor_index(base, target, index, &dim);
      for (Value* v = base; v != whole; v = views_.at(v).first)
        if (!views_.count(v)) fail(target.loc, "a write through two tensor indices is not supported in kiln script");
    }
    Value* mask = expr(*index);
    loc_ = loc;
    if (!mask->type().is_tensor()) fail(index->loc, fmt::format("tensor indices must be tensors here, got {}", mask->type().str()));
    if (!v->type().is_tensor() && !is_number(v->type()))
      fail(rhs.loc, fmt::format("cannot write {} into a tensor", v->type().str()));
    Value* value = v->type().is_tensor() ? v : number_to_tensor(v);
    // torch casts a 0-d v to x's dtype and refuses another dtype for more dims; the composites decide where both
    // are known now, so the rest is decided when the graph runs (a builder has no cast to another value's dtype)
    if (!(value->type().dtype && base->type().dtype && value->type().dims)) {
      Value* want = prim(Prim::DTypeOf, {base}, kIntT);
      Value* scalar = prim(Prim::NumEq, {prim(Prim::Len, {prim(Prim::Shape, {value}, Type::list(kIntT))}, kIntT), constant(int64_t(0))},
                           Type::scalar(TypeKind::Bool));
      value = if_value(
          scalar, [&] { return prim(Prim::CastTo, {value, want}, Type::tensor()); },
          [&] {
            check(prim(Prim::NumEq, {prim(Prim::DTypeOf, {value}, kIntT), want}, Type::scalar(TypeKind::Bool)),
                  "index put requires the source and destination dtypes match");
            return value;
          },
          loc);
    }
    LoweringBuilder lb(*this);
    Value* put = lb.if_bool(
        mask,
        [&] {
          check_mask_shape(*this, mask, base, dim);
          return dim == 0 ? composite::masked_put(lb, base, mask, value) : composite::masked_put_dim(lb, base, dim, mask, value);
        },
        [&] { return composite::index_put_dim(lb, base, dim, mask, value); });
    write_through(base, prim(Prim::InplaceResult, {put, base}, Type::tensor()), loc, described(target), true);
    return;
  }
  Value* r = nullptr;
  if (!op) r = expr(rhs);  // Python evaluates the value of `x[i] = v` first
  Value* view = nullptr;
  bool whole = true;  // the write covers all of the target's value (no index applied)
  if (target.kind == ExprKind::Name) {
    view = name(target);
  } else {
    Value* base = expr(*target.args[0]);
    loc_ = target.loc;
    if (!base->type().is_tensor())
      fail(target.loc, fmt::format("assignment to an element of {} is not supported in kiln script (only tensor "
                                   "elements and slices can be assigned)",
                                   base->type().str()));
    view = tensor_index(base, target);
    whole = view == base;
  }
  if (op.has_value()) r = expr(rhs);
  loc_ = loc;
  if (!r->type().is_tensor() && !is_number(r->type()))
    fail(rhs.loc, fmt::format("cannot write {} into a tensor", r->type().str()));
  Value* updated = nullptr;
  if (!op) {
    // A plain store: the scatter broadcasts and casts the value; a store to the whole tensor
    // (x[...] = v) is a copy_.
    updated = r->type().is_tensor() ? r : number_to_tensor(r);
    if (whole) updated = copy_into(view, updated);
  } else {
    updated = prim(Prim::InplaceResult, {binary(*op, view, r, loc), view}, Type::tensor());
  }
  // A stored value keeps its own identity (x[0] = y copies y); a computed one is the view's new value.
  write_through(view, updated, loc, described(target), op.has_value() || whole);
}

Value* Lowerer::copy_into(Value* self, Value* src) {
  Value* v = prim(Prim::InplaceResult, {src, self}, Type::tensor());
  v->node()->attrs().set("copy", int64_t(1));
  return v;
}

// How errors name the tensor written: 'x' for x, x[i], x[i][j] and x.add_().
std::string Lowerer::described(const Expr& e) const {
  const Expr* b = &e;
  while (b->kind == ExprKind::Subscript) b = b->args[0].get();
  return b->kind == ExprKind::Name ? fmt::format("'{}'", b->name) : std::string("this tensor");
}

Value* Lowerer::inplace_method(const Expr& call, Value* self, const std::string& name) {
  std::string base = name.substr(0, name.size() - 1);
  Value* r = nullptr;
  std::string what = described(*call.args[0]->args[0]);
  if (base == "zero") {
    if (call.args.size() != 1 || !call.keywords.empty()) fail(call.loc, "Tensor.zero_() takes no arguments");
    return write_through(self, copy_into(self, number_to_tensor(constant(int64_t(0)))), call.loc, what, true);
  } else if (base == "fill" || base == "copy") {
    if (call.args.size() != 2 || !call.keywords.empty()) fail(call.loc, fmt::format("Tensor.{}() takes one argument", name));
    Value* v = expr(*call.args[1]);
    loc_ = call.loc;
    if (!v->type().is_tensor() && !is_number(v->type()))
      fail(call.args[1]->loc, fmt::format("Tensor.{}() takes a tensor or a number, got {}", name, v->type().str()));
    if (!v->type().is_tensor()) v = number_to_tensor(v);
    return write_through(self, copy_into(self, v), call.loc, what, true);
  } else if (base == "bernoulli" && call.args.size() == 1 && call.keywords.empty()) {
    // torch's x.bernoulli_() draws with p=0.5 (x.bernoulli() takes x as the probabilities)
    LoweringBuilder lb(*this);
    r = composite::bernoulli(lb, self, number_to_tensor(constant(0.5)));
  } else {
    auto names = builtin_names(true);
    if (std::find(names.begin(), names.end(), base) == names.end())
      fail(call.args[0]->loc, fmt::format("Tensor.{}() is not supported in kiln script", name));
    r = call_builtin(*this, base, call, self);
    loc_ = call.loc;
  }
  if (!r->type().is_tensor()) fail(call.loc, fmt::format("Tensor.{}() has no in-place form", base));
  return write_through(self, prim(Prim::InplaceResult, {r, self}, Type::tensor()), call.loc, what, true);
}

Value* Lowerer::write_through(Value* view, Value* updated, SourceLoc loc, const std::string& what, bool fresh) {
  Frame& F = frame();
  // The indexing chain up to the root, then what the root itself may alias.
  Value* root = view;
  while (views_.count(root)) root = views_.at(root).first;
  Value* owner = alias_root(root);
  for (Value* v : {root, owner}) {
    auto op_it = opaque_.find(v);
    if (op_it != opaque_.end()) fail(loc, fmt::format("cannot write in place to {}: {}", what, op_it->second));
    auto p = param_of_.find(v);
    if (p != param_of_.end())
      fail(loc, fmt::format("cannot write in place to {}: it is {}, and the caller would see the change, which kiln "
                            "script does not track; write to a copy (x = x.clone())",
                            what, p->second));
    for (auto& [impl, in] : bound_inputs_)
      if (in == v)
        fail(loc, fmt::format("cannot write in place to {}: it is a parameter or buffer of the module, which a "
                              "scripted method cannot change",
                              what));
    for (auto& [k, x] : F.env)
      if (k.rfind("$buf:", 0) == 0 && x == v)
        fail(loc, fmt::format("cannot write in place to {}: it is a buffer of the module", what));
  }
  // The root may itself be a view (x.view(...), a list element) of a tensor a name still holds: that
  // name would see the write in torch, and kiln cannot scatter back through such a view.
  std::function<bool(Value*)> holds = [&](Value* v) -> bool {
    if (alias_root(v) == owner) return true;
    Prim p = v->node()->prim();
    if (p == Prim::TupleConstruct || p == Prim::ListConstruct || p == Prim::ListAdd)
      for (Value* in : v->node()->inputs())
        if (holds(in)) return true;
    return false;
  };
  for (auto& [k, x] : F.env) {
    if (k[0] == '$') continue;
    Value* r = x;
    while (views_.count(r)) r = views_.at(r).first;
    if (r == root) continue;  // rebound below
    if (!x->type().is_tensor() && holds(x))
      fail(loc, fmt::format("cannot write in place to {}: '{}' holds it in a {}, and kiln script cannot update "
                            "tensors inside a tuple, list or dict",
                            what, k, dict_keys(x) ? "dict" : x->type().str()));
    if (x->type().is_tensor() && alias_root(x) == owner)
      fail(loc, fmt::format("cannot write in place to {}: it shares memory with '{}' through {}, which kiln script "
                            "cannot write back through (it follows x[i] and x[a:b] views); write to a copy (.clone())",
                            what, k, made_by(*(root != owner ? root : x)->node())));
  }
  // Scatter up the chain: the new value of each base.
  std::map<Value*, Value*> now;
  // A slice's absent bound, as the None its prims take.
  auto bound = [&](Value* b) {
    if (b) return b;
    Value* n = g_->insert_none();
    n->set_type(Type::optional(kIntT));
    return n;
  };
  Value* cur = view;
  Value* nv = updated;
  while (views_.count(cur)) {
    auto [base, st] = views_.at(cur);
    Value* nb = nullptr;
    switch (st.kind) {
      case ViewStep::Select: nb = prim(Prim::SelectScatter, {base, nv, constant(st.dim), st.index}, Type::tensor()); break;
      case ViewStep::Slice: {
        nb = prim(Prim::SliceScatter, {base, nv, constant(st.dim), bound(st.start), bound(st.end), constant(st.step)},
                  Type::tensor());
        break;
      }
      case ViewStep::Unsqueeze: nb = op(OpId::Squeeze, {nv}, Attrs().set("dims", Shape{st.dim})); break;
    }
    if (nv != updated || fresh) {
      now[cur] = nv;
      record_view(nv, nb, st);
    }
    cur = base;
    nv = nb;
  }
  now[root] = nv;
  // Rebind every name reaching the root through indexing views to the same view of the new root.
  std::function<Value*(Value*)> replay = [&](Value* v) -> Value* {
    auto it = now.find(v);
    if (it != now.end()) return it->second;
    auto [base, st] = views_.at(v);
    Value* b = replay(base);
    Value* out = nullptr;
    switch (st.kind) {
      case ViewStep::Select: {
        const AttrValue* c = nullptr;
        if (st.index->node()->prim() == Prim::Constant)
          for (const auto& [k, a] : st.index->node()->attrs().items())
            if (k == "value") c = &a;
        if (c && std::holds_alternative<int64_t>(*c))
          out = op(OpId::Select, {b}, Attrs().set("dim", st.dim).set("index", std::get<int64_t>(*c)));
        else
          out = select_dynamic(b, st.dim, st.index);
        break;
      }
      case ViewStep::Slice: {
        out = prim(Prim::Slice, {b, constant(st.dim), bound(st.start), bound(st.end), constant(st.step)}, Type::tensor());
        break;
      }
      case ViewStep::Unsqueeze: out = op(OpId::Unsqueeze, {b}, Attrs().set("dim", st.dim)); break;
    }
    record_view(out, b, st);
    now[v] = out;
    return out;
  };
  for (auto& [k, x] : F.env) {
    if (k[0] == '$' || !x->type().is_tensor()) continue;
    Value* r = x;
    while (views_.count(r)) r = views_.at(r).first;
    if (r == root) x = replay(x);
  }
  auto it = now.find(view);
  return it != now.end() ? it->second : replay(view);
}

void Lowerer::mark_merged_aliases(const std::map<std::string, Value*>& env, const std::map<std::string, Value*>& merged,
                                  SourceLoc loc, const char* where) {
  for (auto& [k, o] : merged) {
    if (k[0] == '$' || !o->type().is_tensor() || opaque_.count(o)) continue;
    auto self = env.find(k);
    if (self == env.end() || self->second == o) continue;
    Value* owner = alias_root(self->second);
    for (auto& [m, x] : env) {
      if (m == k || m[0] == '$' || !x->type().is_tensor() || alias_root(x) != owner) continue;
      opaque_[o] = fmt::format("it shared memory with '{}' in the {} at line {}, and kiln script does not track "
                               "aliasing across an if or a loop; write to a copy (.clone())",
                               m, where, loc.line);
      break;
    }
  }
}

}  // namespace kiln::script
