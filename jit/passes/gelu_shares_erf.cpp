// A training forward computes gelu(x) for the next layer and saves gelu's derivative for the backward,
// 0.5 * (1 + erf(x / sqrt 2)) + x * exp(-x^2 / 2) / sqrt(2 pi) (its table formula). Once fuse_horizontal has
// put the two in one group (they read the same x), gelu(x) = x * [0.5 * (1 + erf(x / sqrt 2))] reuses the
// bracket the derivative computes: one erf per element instead of two (erf is most of both kernels' work).
#include <cmath>

#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

bool is_number(const ir::Value* v, double want) {
  std::optional<double> c = scalar_constant(v);
  return c && std::abs(*c - want) <= 1e-15 * std::abs(want);
}

// The node computing op(x, c) (either order) among x's users in `body`, c the number `want`.
ir::Node* binary_with(ir::Value* x, OpId op, double want) {
  for (const ir::Use& u : x->uses()) {
    ir::Node* n = u.user;
    if (!n->is_op(op) || n->inputs().size() != 2) continue;
    ir::Value* other = n->input(0) == x ? n->input(1) : n->input(0);
    if (is_number(other, want)) return n;
  }
  return nullptr;
}

ir::Node* unary_of(ir::Value* x, OpId op) {
  for (const ir::Use& u : x->uses())
    if (u.user->is_op(op) && u.user->inputs().size() == 1) return u.user;
  return nullptr;
}

// gelu node g in a group body: the chain [1/sqrt2 * x, erf, + 1, * 0.5] of the same x, in the same body
std::vector<ir::Node*> bracket_of(ir::Node* g) {
  ir::Value* x = g->input(0);
  ir::Node* scaled = binary_with(x, OpId::Mul, M_SQRT1_2);
  ir::Node* e = scaled ? unary_of(scaled->output(), OpId::Erf) : nullptr;
  ir::Node* plus = e ? binary_with(e->output(), OpId::Add, 1.0) : nullptr;
  ir::Node* half = plus ? binary_with(plus->output(), OpId::Mul, 0.5) : nullptr;
  if (!half) return {};
  std::vector<ir::Node*> chain{scaled, e, plus, half};
  for (ir::Node* n : chain)
    if (n->owning_block() != g->owning_block() || !(n->output()->type() == g->output()->type())) return {};
  return chain;
}

int64_t rewrite_body(ir::Graph& graph, ir::Block& body) {
  int64_t changed = 0;
  std::vector<ir::Node*> gelus;
  for (ir::Node* n : body.nodes())
    if (n->is_op(OpId::Gelu)) gelus.push_back(n);
  for (ir::Node* g : gelus) {
    std::vector<ir::Node*> chain = bracket_of(g);
    if (chain.empty()) continue;
    // the bracket and the constants it reads move up to the gelu (their other inputs are x and constants)
    for (ir::Node* n : chain) {
      for (ir::Value* v : n->inputs())
        if (v->node()->owning_block() == &body && v->node()->prim() == ir::Prim::Constant && g->is_before(v->node()))
          v->node()->move_before(g);
      if (g->is_before(n)) n->move_before(g);
    }
    ir::Node* y = graph.create_op(OpId::Mul, {g->input(0), chain.back()->output()});
    y->output()->set_type(g->output()->type());
    y->insert_before(g);
    g->output()->replace_all_uses_with(y->output());
    g->destroy();
    ++changed;
  }
  return changed;
}

}  // namespace

PassResult gelu_shares_erf(ir::Graph& g) {
  std::vector<ir::Node*> groups;
  for_each_node(*g.block(), [&](ir::Node* n) {
    if (n->prim() == ir::Prim::FusionGroup) groups.push_back(n);
  });
  int64_t changed = 0;
  for (ir::Node* n : groups) changed += rewrite_body(g, *n->blocks()[0]);
  return {changed, {}};
}

}  // namespace kiln::jit
