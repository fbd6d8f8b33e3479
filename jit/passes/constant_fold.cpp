// Constant folding: a table op whose inputs are all tensor constants runs once now, on the eager
// kernels, and becomes a constant; number prims on number constants fold the same way; an If on a
// constant condition is replaced by the taken block.
#include "backends/interp/number_ops.h"
#include "eager/autograd/graph.h"
#include "eager/dispatch.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

// Results bigger than this stay computed at run time: a constant is memory held for the graph's life.
constexpr int64_t kMaxFoldedElements = 1 << 16;

using ir::Prim;

bool number_prim(Prim p) {
  switch (p) {
    case Prim::NumAdd: case Prim::NumSub: case Prim::NumMul: case Prim::NumDiv: case Prim::NumFloorDiv:
    case Prim::NumMod: case Prim::NumPow: case Prim::NumLt: case Prim::NumLe: case Prim::NumGt: case Prim::NumGe:
    case Prim::NumEq: case Prim::NumNe: case Prim::Min: case Prim::Max: return true;
    default: return false;
  }
}

IValue number_value(const ir::Value* v) {
  const ir::Node* n = v->node();
  for (const auto& [k, val] : n->attrs().items()) {
    if (k != "value") continue;
    if (auto* i = std::get_if<int64_t>(&val)) return *i;
    if (auto* d = std::get_if<double>(&val)) return *d;
    if (auto* b = std::get_if<bool>(&val)) return *b;
  }
  return IValue();
}

bool fold_op(ir::Graph& g, ir::Node* n) {
  Tensors ins;
  for (ir::Value* v : n->inputs()) {
    const Tensor* t = tensor_constant(v);
    if (!t) return false;
    ins.push_back(*t);
  }
  if (ins.empty()) return false;
  Tensors outs;
  try {
    NoGradGuard no_grad;
    outs = dispatch(n->op(), ins, n->attrs());
  } catch (const Error&) {
    return false;  // a bad node raises when it runs, with its line; folding must not change that
  }
  for (const Tensor& t : outs)
    if (t.numel() > kMaxFoldedElements) return false;
  {
    ir::InsertPointGuard guard(g);
    g.set_insert_point(n);
    for (size_t i = 0; i < outs.size(); ++i) {
      // Views share the constant's storage; the new constant owns its own copy.
      Tensor own = outs[i].clone();
      ir::Value* c = g.insert_constant(own);
      c->set_name(n->output(i)->name());
      n->output(i)->replace_all_uses_with(c);
    }
  }
  n->destroy();
  return true;
}

bool fold_number(ir::Graph& g, ir::Node* n) {
  if (!number_prim(n->prim())) return false;
  IValue a = number_value(n->input(0)), b = number_value(n->input(1));
  if (a.is_none() || b.is_none()) return false;
  IValue r;
  try {
    r = interp::number_binary(n->prim(), a, b);
  } catch (const Error&) {
    return false;
  }
  {
    ir::InsertPointGuard guard(g);
    g.set_insert_point(n);
    ir::Value* c = r.is_bool() ? g.insert_constant(r.to_bool()) : r.is_int() ? g.insert_constant(r.to_int())
                                                                              : g.insert_constant(r.to_double());
    n->output()->replace_all_uses_with(c);
  }
  n->destroy();
  return true;
}

bool fold_if(ir::Node* n) {
  if (n->prim() != Prim::If) return false;
  IValue c = number_value(n->input(0));
  if (!c.is_bool()) return false;
  ir::Block* taken = n->blocks()[c.to_bool() ? 0 : 1];
  std::vector<ir::Node*> inner;
  for (ir::Node* x : taken->nodes()) inner.push_back(x);
  for (ir::Node* x : inner) x->move_before(n);
  for (size_t i = 0; i < n->outputs().size(); ++i) n->output(i)->replace_all_uses_with(taken->outputs()[i]);
  n->destroy();
  return true;
}

int64_t run_block(ir::Graph& g, ir::Block& b) {
  int64_t folded = 0;
  for (ir::Node* n : b.nodes()) {
    if (n->is_op()) {
      folded += fold_op(g, n);
      continue;
    }
    if (fold_number(g, n) || fold_if(n)) {
      ++folded;
      continue;
    }
    for (ir::Block* sub : n->blocks()) folded += run_block(g, *sub);
  }
  return folded;
}

}  // namespace

PassResult fold_constants(ir::Graph& g) {
  int64_t total = 0;
  // An If folded away exposes its block's nodes to the enclosing block: repeat until stable.
  for (int64_t k; (k = run_block(g, *g.block())) > 0;) total += k;
  return {total, {}};
}

}  // namespace kiln::jit
