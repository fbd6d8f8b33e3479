// Algebraic simplification. Each rewrite keeps the result's dtype and shape (the node's output type
// must equal the operand's, so x + 0.0 on an int tensor, or a broadcasting add, stays), and never
// changes what NaN or Inf inputs give: x - x and x * 0 fold to zeros only for integer tensors.
//   x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1, x ** 1   → x
//   neg(neg(x))                                          → x
//   x - x, x * 0, 0 * x  (integer dtypes, static shape) → zeros
//   reshape(reshape(x)), reshape to x's own static shape → one reshape, or x
//   permute(permute(x)) → one permute; an identity permute → x
//   permute[1,0](matmul(a, b)), 2-D, the product used only there → matmul(b^T, a^T)
//   op(a, expand(x)), a binary op or where, another operand of the result's shape → op(a, x)
#include "eager/ops.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

bool same_type(const ir::Value* a, const ir::Value* b) {
  const ir::Type &ta = a->type(), &tb = b->type();
  return ta.is_tensor() && ta.dtype && ta.dims && ta == tb;
}

bool is_value(const ir::Value* v, double x) {
  auto c = scalar_constant(v);
  return c && *c == x;
}

bool is_int_tensor(const ir::Value* v) {
  const auto& dt = v->type().dtype;
  return v->type().is_tensor() && dt && !is_floating(*dt) && *dt != DType::Bool;
}

// The value n can be replaced by, or null. Units come from core/op_facts.def; the rest are patterns.
ir::Value* identity_operand(ir::Node* n) {
  if (!n->is_op()) return nullptr;
  ir::Value* out = n->output();
  auto pick = [&](ir::Value* x) { return same_type(x, out) ? x : nullptr; };
  const OpUnit& u = op_facts(n->op()).unit;
  if (u.exists) {
    if (is_value(n->input(1), u.value)) return pick(n->input(0));
    if (u.left && is_value(n->input(0), u.value)) return pick(n->input(1));
    return nullptr;
  }
  if (n->is_op(OpId::Neg)) {
    ir::Node* inner = n->input(0)->node();
    return inner->is_op(OpId::Neg) ? pick(inner->input(0)) : nullptr;
  }
  if (n->is_op(OpId::Reshape)) return pick(n->input(0));  // reshape to its own shape
  if (n->is_op(OpId::Permute)) {
    const Shape& d = n->attrs().ints("dims");
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i] != int64_t(i)) return nullptr;
    return pick(n->input(0));
  }
  return nullptr;
}

// x - x, x * 0 on integer tensors of static shape: a zero constant.
bool fold_to_zero(ir::Graph& g, ir::Node* n) {
  if (!(n->is_op(OpId::Sub) || n->is_op(OpId::Mul))) return false;
  ir::Value* out = n->output();
  if (!is_int_tensor(out) || !out->type().has_static_shape()) return false;
  bool zero = n->is_op(OpId::Sub) ? n->input(0) == n->input(1) : (is_value(n->input(0), 0) || is_value(n->input(1), 0));
  if (!zero) return false;
  {
    ir::InsertPointGuard guard(g);
    g.set_insert_point(n);
    out->replace_all_uses_with(g.insert_constant(zeros(out->type().static_shape(), *out->type().dtype)));
  }
  n->destroy();
  return true;
}

// reshape(reshape(x)) → reshape(x); permute(permute(x)) → permute(x) with composed dims.
bool collapse_chain(ir::Node* n) {
  ir::Node* inner = n->input(0)->node();
  if (n->is_op(OpId::Reshape) && inner->is_op(OpId::Reshape)) {
    n->replace_input(0, inner->input(0));
    return true;
  }
  if (n->is_op(OpId::Permute) && inner->is_op(OpId::Permute)) {
    const Shape& outer = n->attrs().ints("dims");
    const Shape& in = inner->attrs().ints("dims");
    if (outer.size() != in.size()) return false;
    Shape composed(outer.size());
    for (size_t i = 0; i < outer.size(); ++i) {
      int64_t o = outer[i] < 0 ? outer[i] + int64_t(outer.size()) : outer[i];
      if (o < 0 || o >= int64_t(in.size())) return false;
      composed[i] = in[size_t(o)];
    }
    n->attrs().set("dims", composed);
    n->replace_input(0, inner->input(0));
    return true;
  }
  return false;
}

// (a @ b)^T → b^T @ a^T: BLAS reads transposed operands for free and the product comes out
// contiguous (a weight's gradient is one: the optimizer's fused loop then takes it as is).
bool transpose_matmul(ir::Graph& g, ir::Node* n) {
  if (!n->is_op(OpId::Permute) || n->attrs().ints("dims") != Shape{1, 0}) return false;
  ir::Node* mm = n->input(0)->node();
  if (!mm->is_op(OpId::Matmul) || mm->output()->uses().size() != 1) return false;
  auto matrix = [](const ir::Value* v) { return v->type().is_tensor() && v->type().dims && v->type().dims->size() == 2; };
  if (!matrix(mm->input(0)) || !matrix(mm->input(1)) || !matrix(n->output())) return false;
  {
    ir::InsertPointGuard guard(g);
    g.set_insert_point(n);
    auto transpose = [&](ir::Value* v) {
      ir::Node* t = g.insert(g.create_op(OpId::Permute, {v}, Attrs().set("dims", Shape{1, 0})));
      const auto& d = *v->type().dims;
      t->output()->set_type(ir::Type::tensor(v->type().dtype, std::vector<ir::Dim>{d[1], d[0]}));
      return t->output();
    };
    ir::Value* bt = transpose(mm->input(1));
    ir::Value* at = transpose(mm->input(0));
    ir::Node* r = g.insert(g.create_op(OpId::Matmul, {bt, at}));
    r->output()->set_type(n->output()->type());
    n->output()->replace_all_uses_with(r->output());
  }
  n->destroy();
  mm->destroy();
  return true;
}

// op(a, expand(x)) → op(a, x) for a broadcasting elementwise op whose other operand already has the
// result's shape: the expand only materialises what broadcasting does anyway, and as a view between two
// elementwise ops it cuts a fusion group in two (a sum's gradient, expanded back over the summed dim, in
// layer_norm's backward: the row kernel then holds the whole backward).
bool drop_expand(ir::Node* n) {
  const OpKind k = op_info(n->op()).kind;
  if (k != OpKind::Binary && !n->is_op(OpId::Where)) return false;
  const ir::Type& out = n->output()->type();
  if (!out.dims || !out.has_static_shape()) return false;
  bool changed = false;
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    ir::Node* e = n->input(i)->node();
    if (!e->is_op(OpId::Expand)) continue;
    const ir::Type& xt = e->input(0)->type();
    if (!xt.dims || !xt.has_static_shape() || xt.dtype != n->input(i)->type().dtype) continue;
    bool full = false;  // another operand has the result's shape
    for (size_t j = 0; j < n->inputs().size(); ++j)
      full |= j != i && n->input(j)->type().is_tensor() && n->input(j)->type().dims == out.dims;
    if (!full) continue;
    const Shape xs = xt.static_shape(), os = out.static_shape();
    bool fits = xs.size() <= os.size();
    for (size_t d = 0; fits && d < xs.size(); ++d) {
      int64_t a = xs[xs.size() - 1 - d], o = os[os.size() - 1 - d];
      fits = a == o || a == 1;
    }
    if (!fits) continue;
    n->replace_input(i, e->input(0));
    changed = true;
  }
  return changed;
}

int64_t run_block(ir::Graph& g, ir::Block& b) {
  int64_t changed = 0;
  for (ir::Node* n : b.nodes()) {
    if (!n->is_op()) continue;
    if (fold_to_zero(g, n) || transpose_matmul(g, n)) {
      ++changed;
      continue;
    }
    if (n->inputs().size() == 1 && collapse_chain(n)) ++changed;
    if (drop_expand(n)) ++changed;
    if (ir::Value* x = identity_operand(n)) {
      n->output()->replace_all_uses_with(x);
      n->destroy();
      ++changed;
    }
  }
  return changed;
}

}  // namespace

PassResult simplify_algebra(ir::Graph& g) {
  int64_t total = 0;
  for (int64_t k; (k = sum_over_blocks(*g.block(), [&](ir::Block& b) { return run_block(g, b); })) > 0;) total += k;
  return {total, {}};
}

}  // namespace kiln::jit
